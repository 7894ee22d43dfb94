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


# ---------------------------------------------------------------------------- the rules themselves
def _case(rng: Any) -> str:
    n = rng.randint(1, 4)
    replicas = rng.sample(range(1, 6), n)
    isr = [r for r in replicas if rng.random() < 0.6]
    rest = [r for r in replicas if r not in isr]
    elr = [r for r in rest if rng.random() < 0.5]
    left = [r for r in rest if r not in elr]
    lkelr = [r for r in left if rng.random() < 0.5] if rng.random() < 0.7 else left[:1]
    leader = rng.choice(isr) if isr and rng.random() < 0.85 else -1
    lrs = 1 if leader != -1 and len(isr) == 1 and rng.random() < 0.2 else 0
    alive = [b for b in range(1, 6) if rng.random() < 0.6]
    choice = rng.random()
    if choice < 0.2:
        target = "-"
    elif choice < 0.7:
        target = ",".join(str(r) for r in isr if rng.random() < 0.6)
    else:
        target = ",".join(str(r) for r in replicas if r in isr or rng.random() < 0.4)
    mv = rng.choice([33, 33, 33, 23, 21])
    elr_on = mv >= 23 and rng.random() < 0.8
    unclean = str(rng.choice(replicas)) if rng.random() < 0.2 else "-"
    election = rng.choice(["ONLINE", "ONLINE", "PREFERRED", "UNCLEAN"])
    j = lambda xs: ",".join(map(str, xs))  # noqa: E731
    return "|".join([j(replicas), j(isr), j(elr), j(lkelr), str(leader), str(lrs), j(alive), target,
                     str(rng.randint(1, 3)), election, unclean, str(mv), "true" if elr_on else "false"])


def _kraftnode(case: str) -> str:
    import uuid as _uuid

    from kraftnode.controller.partition_change import Election, PartitionChangeBuilder
    from kraftnode.controller.versions import MetadataVersion
    from kraftnode.protocol.generated.metadata import PartitionRecord

    f = case.split("|")
    ints = lambda s: [int(x) for x in s.split(",")] if s else []  # noqa: E731
    replicas = ints(f[0])
    unassigned = _uuid.UUID(int=1)
    p = PartitionRecord(partition_id=0, topic_id=_uuid.UUID(int=7), replicas=replicas, isr=ints(f[1]),
                        removing_replicas=[], adding_replicas=[], leader=int(f[4]),
                        leader_recovery_state=int(f[5]), leader_epoch=5, partition_epoch=9,
                        directories=[unassigned] * len(replicas), eligible_leader_replicas=ints(f[2]),
                        last_known_elr=ints(f[3]))
    alive = set(ints(f[6]))
    b = PartitionChangeBuilder(p, _uuid.UUID(int=7), 0, lambda r: r in alive, MetadataVersion(int(f[11])),
                               int(f[8]), f[12] == "true")
    b.set_default_dir_provider(lambda _b: unassigned)
    b.set_election(Election[f[9]])
    if f[7] != "-":
        b.set_target_isr(ints(f[7]))
    if f[10] != "-":
        b.set_unclean_shutdown_replicas(ints(f[10]))
    got = b.build()
    if got is None:
        return "none"
    c, v = got

    def show(xs: Any) -> str:
        return "null" if xs is None else "[" + ", ".join(map(str, xs)) + "]"
    return (f"v{v} leader={c.leader} isr={show(c.isr)} elr={show(c.eligible_leader_replicas)} "
            f"lastKnownElr={show(c.last_known_elr)} lrs={c.leader_recovery_state}")


def test_partition_changes_match_kafka_44s_partition_change_builder(kafka44: KafkaHome) -> None:
    """Kafka 4.4's PartitionChangeBuilder and kraftnode's on the same 3,000 random partition
    states, targets, live brokers, min ISRs, election types and unclean shutdowns (at 4.4's
    metadata.version with and without ELR, at 4.0-IV1 and at 3.9-IV0): the same record or none."""
    import random

    rng = random.Random(966)
    cases = [_case(rng) for _ in range(3000)]
    classes = kafka44.compile("metadata-serde44")
    r = subprocess.run(kafka44.java(classes, "PartitionChanges"), input="\n".join(cases) + "\n",
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    kafka = r.stdout.splitlines()
    assert len(kafka) == len(cases)
    differ = [(c, k, _kraftnode(c)) for c, k in zip(cases, kafka, strict=True) if _kraftnode(c) != k]
    assert differ == [], "\n".join(f"{c}\n  kafka:     {k}\n  kraftnode: {o}" for c, k, o in differ[:10])
    # the cases reach the ELR paths
    assert sum("elr=[" in k and "elr=[]" not in k for k in kafka) > 100
    assert sum("lrs=1" in k for k in kafka) > 20
