"""The embedding API: a node in-process with an application's state machine, appends that
return once committed, snapshots of that state machine, and the kvstore example."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kraftnode.embed import EmbeddedNode
from kraftnode.log.snapshot import list_snapshots
from kraftnode.server.state_machine import KeyValueStateMachine
from tests.support.cluster import CLUSTER_ID, free_ports

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def one_node(tmp: Path, extra: str = "") -> tuple[Path, int]:
    port = free_ports(1)[0]
    conf = tmp / "server.properties"
    conf.write_text(f"node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                    f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
                    f"log.dirs={tmp / 'metadata'}\n{extra}")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config", str(conf), "--cluster-id",
                    CLUSTER_ID], check=True, capture_output=True)
    return conf, port


def consume_all(port: int, n: int) -> list[tuple[bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g", "enable.auto.commit": False})
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        c.assign([TopicPartition("__cluster_metadata", 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error() and m.key() is not None:
                out.append((m.key(), m.value()))
    finally:
        c.close()
    return out


def test_embedded_node_appends_applies_snapshots_and_restarts(tmp_path: Path) -> None:
    conf, port = one_node(tmp_path, "metadata.log.max.record.bytes.between.snapshots=2000\n")

    async def first() -> tuple[list[int], dict[bytes, bytes]]:
        async with EmbeddedNode(conf, KeyValueStateMachine()) as node:
            await node.wait_for_leader()
            offsets = []
            for i in range(60):
                r = await node.append([(f"k{i % 7}".encode(), f"v{i}".encode()), (b"gone", None)])
                assert r.last_offset == r.first_offset + 1
                offsets.append(r.first_offset)
                # read-your-writes: applied before append returns
                assert node.state.data[f"k{i % 7}".encode()] == f"v{i}".encode()
                assert node.applied_offset > r.last_offset
            got = await anyio.to_thread.run_sync(consume_all, port, 120)
            assert got[:2] == [(b"k0", b"v0"), (b"gone", None)]  # any Kafka consumer reads the writes
            with anyio.fail_after(20):
                while not [s for s in list_snapshots(tmp_path / "metadata" / "__cluster_metadata-0")
                           if s.offset > 0]:
                    await anyio.sleep(0.05)
            return offsets, dict(node.state.data)

    offsets, state = anyio.run(first)
    assert offsets == sorted(offsets) and len(set(offsets)) == 60
    assert state == {f"k{i % 7}".encode(): f"v{i}".encode() for i in range(60)}  # the last write per key

    async def second() -> dict[bytes, bytes]:
        sm = KeyValueStateMachine()
        async with EmbeddedNode(conf, sm) as node:
            await node.wait_for_leader()
            await node.wait_applied(offsets[-1] + 2)
            return dict(sm.data)
    assert anyio.run(second) == state


def test_kvstore_example(tmp_path: Path) -> None:
    conf, port = one_node(tmp_path)
    p = subprocess.Popen([sys.executable, str(ROOT / "tools" / "examples" / "kvstore.py"), str(conf)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        lines = [p.stdout.readline() for _ in range(2)]  # "node 1 listening on ..." then ready
        assert lines[-1].startswith("kvstore node 1 ready"), lines

        def ask(cmd: str) -> str:
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(cmd + "\n")
            p.stdin.flush()
            return p.stdout.readline().strip()
        deadline = time.monotonic() + 30
        answer = ask("put colour blue")
        while not answer.startswith("ok") and time.monotonic() < deadline:
            time.sleep(0.2)  # no leader elected yet
            answer = ask("put colour blue")
        assert answer.startswith("ok ")
        assert ask("put size 9").startswith("ok ")
        assert ask("del size").startswith("ok ")
        assert ask("get colour") == "blue" and ask("get size") == "(none)" and ask("keys") == "colour"
        assert ask("bogus") .startswith("usage:")
        assert consume_all(port, 3) == [(b"colour", b"blue"), (b"size", b"9"), (b"size", None)]
    finally:
        p.terminate()
        p.wait(10)


def test_kvstore_bad_config_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "x.properties"
    bad.write_text("node.id=1\n")
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "examples" / "kvstore.py"), str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.startswith("kvstore: ")


def test_an_unformatted_log_dir_is_a_startup_error(tmp_path: Path) -> None:
    from kraftnode.server.node import StartupError

    port = free_ports(1)[0]
    conf = tmp_path / "server.properties"
    conf.write_text(f"node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                    f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
                    f"log.dirs={tmp_path / 'metadata'}\n")

    async def go() -> None:
        async with EmbeddedNode(conf, KeyValueStateMachine()):
            pass
    with pytest.raises(StartupError, match="is not formatted"):
        anyio.run(go)
