"""Eligible leader replicas (KIP-966, kraftnode.controller.elr): the ISR, ELR, last-known ELR and
leader Kafka 4.4's controller gives a partition as its brokers fail and come back, the
ClearElrRecords it writes on min.insync.replicas changes, and what it refuses.

The expected values follow Kafka 4.4's PartitionChangeBuilder / ReplicationControlManager (the
same walk is compared with a genuine Kafka 4.4 quorum in tests/interop when one is at hand)."""

from __future__ import annotations

from typing import Any

import pytest

from kraftnode.controller.elr import (
    clear_elr_records,
    effective_min_isr,
    elr_enabled,
    java_int_set,
    populate_target_elr,
)
from kraftnode.controller.partition_change import Election, PartitionChangeBuilder
from kraftnode.controller.versions import MetadataVersion
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    ClearElrRecord,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
)
from tests.kraftnode.controller.support import CLUSTER, MV_4_4, ElrHarness, Harness, incarnation

TOPIC, BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1


def elr_harness(*brokers: int, **kw: Any) -> ElrHarness:
    h = ElrHarness(**kw)
    h.active_brokers(*(brokers or (1, 2, 3)))
    return h


def fence(h: Harness, broker: int) -> list[Any]:
    result = h.heartbeat(broker, want_fence=True)
    h.commit(result)
    return list(result.records)


def unfence(h: Harness, broker: int) -> list[Any]:
    result = h.heartbeat(broker)
    h.commit(result)
    return list(result.records)


def test_elr_is_enabled_by_the_feature_from_4_0_iv1_only() -> None:
    assert elr_enabled({"metadata.version": 23, "eligible.leader.replicas.version": 1})
    assert not elr_enabled({"metadata.version": 22, "eligible.leader.replicas.version": 1})
    assert not elr_enabled({"metadata.version": 29})
    assert effective_min_isr("2", 3) == 2 and effective_min_isr("5", 3) == 3 and effective_min_isr(None, 3) == 1


def test_java_hash_set_order() -> None:
    # java.util.HashSet<Integer>: by bucket (small ids ascending), not by insertion
    assert java_int_set([3, 1, 2, 1]) == [1, 2, 3]
    assert java_int_set([17, 1]) == [17, 1]  # 17 and 1 share bucket 1: insertion order


def test_populate_target_elr() -> None:
    # ISR at or above min ISR: no ELR
    assert populate_target_elr(2, [1, 2, 3], [1, 2], [], [], None) == ([], [])
    # below: the old ISR members leaving join the ELR
    assert populate_target_elr(2, [1, 2], [1], [], [], None) == ([2], [])
    assert populate_target_elr(2, [1], [], [2], [], None) == ([1, 2], [])
    # an unclean shutdown replica leaves the ELR for the last-known ELR
    assert populate_target_elr(2, [1], [], [2], [], [2]) == ([1], [2])


def part(replicas: list[int], isr: list[int], leader: int, elr: list[int] | None = None,
         lkelr: list[int] | None = None) -> PartitionRecord:
    return PartitionRecord(partition_id=0, replicas=replicas, isr=isr, removing_replicas=[], adding_replicas=[],
                           leader=leader, leader_recovery_state=0, leader_epoch=5, partition_epoch=9,
                           eligible_leader_replicas=elr or [], last_known_elr=lkelr or [])


def build(p: PartitionRecord, alive: set[int], isr: list[int] | None = None, min_isr: int = 2,
          election: Election = Election.ONLINE) -> PartitionChangeRecord | None:
    import uuid
    b = PartitionChangeBuilder(p, uuid.UUID(int=1), 0, lambda r: r in alive, MetadataVersion(MV_4_4), min_isr, True)
    b.set_election(election)
    if isr is not None:
        b.set_target_isr(isr)
    got = b.build()
    if got is None:
        return None
    rec, version = got
    assert version == 2
    # the record survives its own encoding (the ELR fields are tagged fields of v2)
    assert decode_metadata_record(encode_metadata_record(rec, 2)) == (rec, 2)
    return rec


def test_the_builder_moves_leaving_isr_members_to_the_elr_below_min_isr() -> None:
    rec = build(part([1, 2, 3], [1, 2], 1), {1, 3}, isr=[1])
    assert rec is not None
    assert (rec.isr, rec.eligible_leader_replicas, rec.last_known_elr, rec.leader) == ([1], [2], None, -2)


def test_an_empty_isr_elects_from_the_elr() -> None:
    rec = build(part([1, 2, 3], [], -1, elr=[1, 2], lkelr=[1]), {2})
    assert rec is not None
    assert (rec.leader, rec.isr, rec.eligible_leader_replicas, rec.last_known_elr) == (2, [2], [1], [])
    assert rec.leader_recovery_state == -1  # a clean election


def test_the_last_leader_leaving_records_the_last_known_leader() -> None:
    rec = build(part([1, 2, 3], [1], 1, elr=[2]), set(), isr=[])
    assert rec is not None
    assert (rec.leader, rec.isr, rec.eligible_leader_replicas, rec.last_known_elr) == (-1, [], [1, 2], [1])


def test_with_isr_and_elr_empty_the_last_known_leader_is_elected_uncleanly() -> None:
    rec = build(part([1, 2, 3], [], -1, elr=[], lkelr=[3]), {3})
    assert rec is not None
    assert (rec.leader, rec.isr, rec.leader_recovery_state, rec.last_known_elr) == (3, [3], 1, [])


def test_an_isr_back_at_min_isr_clears_the_elr() -> None:
    rec = build(part([1, 2, 3], [1], 1, elr=[2]), {1, 2, 3}, isr=[1, 2])
    assert rec is not None
    assert (rec.isr, rec.eligible_leader_replicas) == ([1, 2], [])


def test_broker_failures_and_returns_walk_the_elr_as_kafka_does() -> None:
    h = elr_harness()
    created = h.create_topic("t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    p0 = [(m, v) for m, v in created.records if isinstance(m, PartitionRecord)]
    assert p0[0][1] == 2 and p0[0][0].eligible_leader_replicas == [] and p0[0][0].last_known_elr == []
    h.commit(created)
    assert h.state("t") == ([1, 2, 3], [], [], 1)
    fence(h, 3)
    assert h.state("t") == ([1, 2], [], [], 1)
    fence(h, 2)
    assert h.state("t") == ([1], [2], [], 1)
    fence(h, 1)
    assert h.state("t") == ([], [1, 2], [1], -1)
    # broker 2 comes back: it is in the ELR, so it leads, alone in the ISR
    unfence(h, 2)
    assert h.state("t") == ([2], [1], [], 2)
    unfence(h, 3)   # not in the ISR: it must catch up (AlterPartition) to rejoin it
    assert h.state("t") == ([2], [1], [], 2)
    # broker 1 restarts after an unclean shutdown (new incarnation, no previous epoch): out of the ELR
    h.restart(1, 2, clean=False)
    assert h.state("t") == ([2], [], [], 2)


def test_a_clean_restart_keeps_the_elr() -> None:
    h = elr_harness()
    h.commit(h.create_topic("t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "3"}))
    fence(h, 3)
    assert h.state("t") == ([1, 2], [3], [], 1)
    h.restart(3, 2, clean=True)
    assert h.state("t")[1] == [3]
    h2 = elr_harness()
    h2.commit(h2.create_topic("t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "3"}))
    fence(h2, 3)
    h2.restart(3, 2, clean=False)
    assert h2.state("t")[1] == []


def test_without_the_feature_nothing_of_elr_is_written() -> None:
    h = elr_harness(elr_level=0)
    h.commit(h.create_topic("t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"}))
    fence(h, 2)
    fence(h, 3)
    assert h.state("t") == ([1], [], [], 1)
    records = fence(h, 1)
    # the last ISR member stays in the ISR (Kafka never empties it without ELR)
    assert h.state("t") == ([1], [], [], -1)
    assert all(getattr(m, "eligible_leader_replicas", None) in (None, []) for m, _v in records)


def test_min_insync_replicas_changes_write_clear_elr_records() -> None:
    h = elr_harness()
    h.commit(h.create_topic("t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "3"}))
    fence(h, 3)
    assert h.state("t")[1] == [3]
    result = h.ctl.incremental_alter_configs({(TOPIC, "t"): {"min.insync.replicas": (OP_SET, "2")}}, False, h.now)
    assert [m for m, _v in result.records] == [
        ConfigRecord(resource_type=TOPIC, resource_name="t", name="min.insync.replicas", value="2"),
        ClearElrRecord(topic_name="t")]
    h.commit(result)
    assert h.state("t")[1:3] == ([], [])
    # the cluster default: every topic's ELR
    result = h.ctl.incremental_alter_configs({(BROKER, ""): {"min.insync.replicas": (OP_SET, "2")}}, False, h.now)
    assert [m for m, _v in result.records][-1] == ClearElrRecord(topic_name="")
    assert clear_elr_records([(ConfigRecord(resource_type=TOPIC, resource_name="x", name="retention.ms",
                                            value="1"), 0)]) == []


def test_elr_refuses_per_broker_min_isr_and_removing_the_cluster_one() -> None:
    h = elr_harness()
    result = h.ctl.incremental_alter_configs({(BROKER, "1"): {"min.insync.replicas": (OP_SET, "2")}}, False, h.now)
    err = result.response[(BROKER, "1")]
    assert (err.code, err.message) == (Errors.INVALID_CONFIG,
                                       "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    h.commit(h.ctl.incremental_alter_configs({(BROKER, ""): {"min.insync.replicas": (OP_SET, "2")}}, False, h.now))
    result = h.ctl.incremental_alter_configs({(BROKER, ""): {"min.insync.replicas": (OP_DELETE, None)}}, False,
                                             h.now)
    err = result.response[(BROKER, "")]
    assert (err.code, err.message) == (Errors.INVALID_CONFIG,
                                       "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")


@pytest.mark.parametrize("clean", [True, False])
def test_a_new_incarnation_leaves_the_isr(clean: bool) -> None:
    # Kafka 4.4's handleBrokerShutdown: at any level, a re-registering broker leaves its ISRs
    h = elr_harness()
    h.commit(h.create_topic("t", assignments={0: [1, 2, 3]}))
    h.restart(2, 2, clean=clean)
    assert 2 not in h.state("t")[0]
    assert h.view.broker(2).incarnation_id == incarnation(2, 2)  # type: ignore[union-attr]
    assert CLUSTER
