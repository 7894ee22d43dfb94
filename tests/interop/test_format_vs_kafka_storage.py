"""``kraftnode format --release-version/--feature`` against Kafka 4.4's ``kafka-storage.sh format``:
the same arguments on the same configuration are accepted or refused by both, a refusal with
Kafka's message, an acceptance with Kafka's ``Bootstrap metadata:`` line, the same "Formatting"
line and the same bootstrap records, byte for byte (Kafka 4.4 puts them in the 0-0 bootstrap
snapshot, kraftnode in ``bootstrap.checkpoint``: docs/storage.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from recordbatch import iter_batches
from tests.support.kafka import KafkaHome

pytestmark = [pytest.mark.interop]

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
STATIC = "controller.quorum.voters=1@127.0.0.1:19093\n"
DYNAMIC = "controller.quorum.bootstrap.servers=127.0.0.1:19093\n"

CASES: list[tuple[str, list[str]]] = [
    (STATIC, []),                                                        # 4.4's defaults
    (STATIC, ["-r", "3.9-IV0"]),
    (STATIC, ["-r", "4.0"]),
    (STATIC, ["-r", "3.7.1"]),
    (STATIC, ["-r", "3.3-IV0"]),                                         # before MINIMUM_VERSION
    (STATIC, ["-r", "4.5"]),                                             # not production
    (STATIC, ["--feature", "metadata.version=20"]),
    (STATIC, ["-r", "4.4", "--feature", "metadata.version=20"]),
    (STATIC, ["-r", "3.9", "--feature", "group.version=1", "--feature", "transaction.version=2"]),
    (STATIC, ["-r", "4.4", "--feature", "group.version=2"]),
    (STATIC, ["--feature", "foo.version=1"]),
    (STATIC, ["--feature", "group.version=x"]),
    (STATIC, ["--feature", "group.version"]),
    (STATIC, ["-r", "3.9", "--feature", "eligible.leader.replicas.version=1"]),
    (STATIC, ["-r", "4.4", "--feature", "kraft.version=1"]),
    (STATIC, ["-r", "4.4", "--feature", "transaction.version=0", "--feature", "share.version=1"]),
    (DYNAMIC, ["-s", "-r", "3.8"]),
    (DYNAMIC, ["-s", "--feature", "kraft.version=0"]),
    (DYNAMIC, ["-s"]),
]


def _config(root: Path, quorum: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    p = root / "server.properties"
    p.write_text(f"process.roles=controller\nnode.id=1\n{quorum}listeners=CONTROLLER://127.0.0.1:19093\n"
                 f"controller.listener.names=CONTROLLER\nlog.dirs={root / 'data'}\n")
    return p


def _lines(text: str, root: Path) -> list[str]:
    """The lines a user reads: Kafka's exception prefix and stack trace and kraftnode's
    ``kraftnode format: error:`` prefix dropped, the directory named alike."""
    out = []
    for ln in text.splitlines():
        if ln.lstrip().startswith("at ") or "SLF4J" in ln or not ln.strip():
            continue
        ln = re.sub(r'^Exception in thread "main" [\w.$]+: ', "", ln)
        ln = ln.removeprefix("kraftnode format: error: ")
        out.append(ln.replace(str(root), "DIR"))
    return out


def _records(root: Path, kafka: bool) -> list[bytes]:
    path = (root / "data" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
            if kafka else root / "data" / "bootstrap.checkpoint")
    return [bytes(r.value) for b in iter_batches(path.read_bytes()) if not b.is_control
            for r in b.records() if r.value is not None]


@pytest.mark.parametrize("quorum, args", CASES, ids=[" ".join(a) or "defaults" for _, a in CASES])
def test_format_accepts_and_refuses_as_kafka_storage(kafka44: KafkaHome, tmp_path: Path, quorum: str,
                                                     args: list[str]) -> None:
    kroot, oroot = tmp_path / "kafka", tmp_path / "ours"
    k = kafka44.tool("kafka-storage", "format", "-c", str(_config(kroot, quorum)), "-t", CLUSTER, *args,
                     env={"LOG_DIR": str(tmp_path / "logs"), "KAFKA_HEAP_OPTS": "-Xmx128m"})
    o = subprocess.run([sys.executable, "-m", "kraftnode", "format", "-c", str(_config(oroot, quorum)),
                        "-t", CLUSTER, *args], capture_output=True, text=True, timeout=60)
    assert (o.returncode == 0) == (k.returncode == 0), (k.stdout + k.stderr, o.stdout + o.stderr)
    if k.returncode:
        assert o.returncode == 2 and "Traceback" not in o.stderr
        assert _lines(o.stderr, oroot) == _lines(k.stdout + k.stderr, kroot)
        return
    assert _lines(o.stdout, oroot) == _lines(k.stdout, kroot)
    assert _records(oroot, False) == _records(kroot, True)
