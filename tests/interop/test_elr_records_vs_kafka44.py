"""Must-show 4 (its record half) and the ELR replay, checked with Kafka 4.4's own code: the records
kraftnode's controller writes at Kafka 4.4's levels (metadata.version 4.4, ELR enabled) through a
walk of broker failures, returns, an unclean restart and min.insync.replicas changes --
PartitionRecord / PartitionChangeRecord v2 with ELR fields, ClearElrRecord, registrations --
decode with Kafka 4.4's ``MetadataRecordSerde`` and re-encode to the same bytes
(tests/interop/java/metadata-serde44/MetadataDecode.java), and Kafka 4.4's ``MetadataDelta``
replaying them (MetadataReplay.java) ends with the same ISR, ELR, last-known ELR, leader and
epochs for every partition as kraftnode's image.

No cluster runs here: the controller is kraftnode's pure controller (tests/kraftnode/controller),
the reader is Kafka 4.4's jars in a JVM.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from kraftnode.log.metadata_records import encode_metadata_record
from recordbatch import Record, build_batch
from tests.kraftnode.controller.support import ElrHarness
from tests.support.kafka import KafkaHome

TOPIC, BROKER = 2, 4
OP_SET = 0


class Recording(ElrHarness):
    """Every record the controller writes, in log order."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[Any, int]]] = []
        super().__init__()

    def apply(self, records: list[tuple[Any, int]]) -> None:
        if records:
            self.batches.append(list(records))
        super().apply(records)


def walk() -> Recording:
    h = Recording()
    h.active_brokers(1, 2, 3)
    h.commit(h.create_topic("t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"}))
    h.commit(h.create_topic("u", assignments={0: [2, 3, 1], 1: [3, 1, 2]}, configs={"min.insync.replicas": "3"}))
    h.commit(h.create_topic("v", assignments={0: [1, 2, 3]}))
    steps = [("fence", 3), ("fence", 2), ("fence", 1), ("unfence", 2), ("unfence", 3)]
    for what, broker in steps:
        h.commit(h.heartbeat(broker, want_fence=what == "fence"))
    h.restart(1, 2, clean=False)   # an unclean shutdown: out of every ISR and ELR
    h.commit(h.heartbeat(1))
    h.commit(h.ctl.incremental_alter_configs({(TOPIC, "u"): {"min.insync.replicas": (OP_SET, "2")}}, False, h.now))
    h.commit(h.heartbeat(3, want_fence=True))
    h.commit(h.ctl.incremental_alter_configs({(BROKER, ""): {"min.insync.replicas": (OP_SET, "1")}}, False, h.now))
    return h


def write_segment(h: Recording, path: Path) -> int:
    data = b""
    offset = 0
    for records in h.batches:
        values = [encode_metadata_record(m, v) for m, v in records]
        data += build_batch([Record(None, v) for v in values], base_offset=offset)
        offset += len(values)
    path.write_bytes(data)
    return offset


def run(kafka: KafkaHome, main: str, *args: str) -> subprocess.CompletedProcess[str]:
    classes = kafka.compile("metadata-serde44")
    return subprocess.run(kafka.java(classes, main, *args), capture_output=True, text=True, timeout=180)


def kraftnode_lines(h: Recording) -> dict[str, str]:
    out: dict[str, str] = {}
    image = h.view.image
    for tid, (t, _v) in image.topics.items():
        for pid, (p, _pv) in image.partitions.get(tid, {}).items():
            out[f"partition {t.name}-{pid}"] = (
                f"leader={p.leader} isr={_java(p.isr)} elr={_java(p.eligible_leader_replicas)} "
                f"lastKnownElr={_java(p.last_known_elr)} leaderEpoch={p.leader_epoch} "
                f"partitionEpoch={p.partition_epoch}")
    for b, (reg, _v) in image.brokers.items():
        out[f"broker {b}"] = f"fenced={'true' if reg.fenced else 'false'}"
    out["controllers"] = _java(sorted(image.controllers))
    return out


def _java(xs: Any) -> str:
    return "[" + ", ".join(str(x) for x in (xs or [])) + "]"


def test_kafka_44_decodes_and_replays_what_the_elr_controller_writes(kafka44: KafkaHome, tmp_path: Path) -> None:
    h = walk()
    types = {type(m).__name__ for batch in h.batches for m, _v in batch}
    assert {"ClearElrRecord", "PartitionChangeRecord", "PartitionRecord", "RegisterBrokerRecord",
            "BrokerRegistrationChangeRecord", "ConfigRecord"} <= types
    # the walk went through the ELR states it exists for
    changes = [m for batch in h.batches for m, _v in batch if type(m).__name__ == "PartitionChangeRecord"]
    assert any(m.eligible_leader_replicas for m in changes) and any(m.last_known_elr for m in changes)
    segment = tmp_path / "00000000000000000000.log"
    n = write_segment(h, segment)

    r = run(kafka44, "MetadataDecode", str(segment))
    assert r.returncode == 0, r.stderr
    decoded = json.loads(r.stdout)
    assert decoded["errors"] == [] and decoded["records"] == n
    assert decoded["types"]["ClearElrRecord"] >= 2

    r = run(kafka44, "MetadataReplay", str(segment))
    assert r.returncode == 0, r.stdout + r.stderr
    kafka = dict(re.match(r"(partition \S+|broker \d+|controllers) (.*)", line).groups()  # type: ignore[union-attr]
                 for line in r.stdout.splitlines())
    ours = kraftnode_lines(h)
    assert kafka == ours
    # and the walk ended where Kafka 4.4's rules put it (ELR cleared by the ClearElrRecords)
    assert all("elr=[]" in v and "lastKnownElr=[]" in v for k, v in ours.items() if k.startswith("partition"))
