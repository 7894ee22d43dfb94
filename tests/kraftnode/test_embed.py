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
from kraftnode.metadata.state_machine import KeyValueStateMachine
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, free_ports

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def one_node(tmp: Path, extra: str = "") -> tuple[Path, int]:
    port = free_ports(1)[0]
    conf = tmp / "server.properties"
    conf.write_text(f"node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                    f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
                    f"log.dirs={tmp / 'metadata'}\n{extra}")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(conf), "--cluster-id",
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


def test_append_without_waiting_for_the_state_machine(tmp_path: Path) -> None:
    """applied=False returns once the batch is committed (durable), not once applied; the
    state machine catches up on its own; appends may overlap (a writer keeping several in
    flight, as tools/bench/raft_workload.py does)."""
    conf, _port = one_node(tmp_path)

    async def run() -> None:
        async with EmbeddedNode(conf, KeyValueStateMachine()) as node:
            await node.wait_for_leader()
            results = []

            async def one(i: int) -> None:
                results.append(await node.append([(f"k{i}".encode(), b"v")], applied=False))

            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(one, i)
            firsts = sorted(r.first_offset for r in results)
            assert firsts == list(range(firsts[0], firsts[0] + 20))   # 20 batches, one record each
            assert node.high_watermark > firsts[-1]                    # committed when it returned
            await node.wait_applied(firsts[-1] + 1)
            assert {f"k{i}".encode() for i in range(20)} <= set(node.state.data)

    anyio.run(run)


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


def test_read_barrier_reflects_every_write_committed_before_it(tmp_path: Path) -> None:
    """Three embedded voters in one process. Writes arrive as acks=all Produce requests
    from a Kafka client (committed when acknowledged, applied to the state machine
    later). The read barrier, on the leader, returns once its state holds every write
    acknowledged before the call, and its returned offset covers them; on a follower it
    refuses (NotLeaderError) rather than answer from possibly stale state."""
    from kraftnode.embed import NotLeaderError
    from kraftnode.protocol import generated as w
    from kraftnode.protocol.registry import PRODUCE
    from kraftnode.quorum_client import call
    from recordbatch import Record, build_batch

    class Recording(KeyValueStateMachine):
        """Also remembers the last unkeyed record (the only kind a Kafka producer may send
        to a quorum without controller duties: no key, a non-empty value)."""

        last: bytes | None = None

        def apply_record(self, key: bytes | memoryview | None, value: bytes | memoryview | None) -> None:
            super().apply_record(key, value)
            if key is None and value is not None:
                self.last = bytes(value)

    def produce(port: int, key: bytes | None, value: bytes) -> int:
        req = w.ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
            w.ProduceRequest.TopicProduceData(name="__cluster_metadata", partition_data=[
                w.ProduceRequest.PartitionProduceData(index=0, records=build_batch([Record(key, value)]))])])
        _, resp = call("127.0.0.1", port, PRODUCE, 11, req, timeout=15)
        pr = resp.responses[0].partition_responses[0]  # type: ignore[attr-defined]
        assert pr.error_code == 0, pr
        return int(pr.base_offset)

    ports = free_ports(3)
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    confs = []
    for i, port in enumerate(ports):
        d = tmp_path / f"n{i + 1}"
        d.mkdir()
        conf = d / "server.properties"
        conf.write_text(f"node.id={i + 1}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                        f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters={voters}\n"
                        f"log.dirs={d / 'metadata'}\n")
        subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(conf), "--cluster-id",
                        CLUSTER_ID], check=True, capture_output=True)
        confs.append(conf)

    async def main() -> None:
        async with EmbeddedNode(confs[0], Recording()) as a, EmbeddedNode(confs[1], Recording()) as b, \
                EmbeddedNode(confs[2], Recording()) as c:
            nodes = {1: a, 2: b, 3: c}
            leader = nodes[await a.wait_for_leader()]
            followers = [n for n in nodes.values() if n is not leader]
            port = ports[leader.node_id - 1]
            for round_ in range(30):
                value = f"v{round_}".encode()
                offset = await anyio.to_thread.run_sync(produce, port, None, value)
                # acknowledged = committed; the barrier returns only once the state holds it
                hw = await leader.read_barrier()
                assert hw > offset
                assert leader.applied_offset >= hw
                assert leader.state.last == value
                for f in followers:
                    with pytest.raises(NotLeaderError) as err:
                        await f.read_barrier()
                    assert err.value.leader_id == leader.node_id

    anyio.run(main)
