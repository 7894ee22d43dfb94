"""PartitionChangeBuilder's elections and record contents (kraftnode.controller.partition_change)."""

from __future__ import annotations

import uuid

from kraftnode.controller.partition_change import Election, PartitionChangeBuilder
from kraftnode.controller.versions import MetadataVersion
from kraftnode.protocol.generated.metadata import PartitionChangeRecord, PartitionRecord

TID = uuid.UUID(int=5 << 64)
D = [uuid.UUID(int=(b << 64) | 7) for b in range(5)]


def part(replicas: list[int], isr: list[int], leader: int, **kw: object) -> PartitionRecord:
    return PartitionRecord(partition_id=0, topic_id=TID, replicas=replicas, isr=isr, removing_replicas=[],
                           adding_replicas=[], leader=leader, leader_recovery_state=0, leader_epoch=3,
                           partition_epoch=7, directories=[D[b] for b in replicas], **kw)


def builder(p: PartitionRecord, alive: set[int], mv: int = 21) -> PartitionChangeBuilder:
    return PartitionChangeBuilder(p, TID, 0, lambda b: b in alive, MetadataVersion(mv))


def test_nothing_to_change_is_no_record() -> None:
    assert builder(part([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}).build() is None


def test_an_online_election_keeps_a_valid_leader_and_otherwise_takes_the_first_isr_member() -> None:
    b = builder(part([1, 2, 3], [1, 2, 3], 1), {2, 3}).set_target_isr([2, 3])
    assert b.build() == (PartitionChangeRecord(topic_id=TID, partition_id=0, leader=2, isr=[2, 3]), 1)
    b = builder(part([1, 2, 3], [1, 2, 3], 2), {1, 2, 3}).set_target_isr([1, 2])
    assert b.build() == (PartitionChangeRecord(topic_id=TID, partition_id=0, isr=[1, 2]), 1)


def test_before_3_6_an_isr_shrink_bumps_the_leader_epoch() -> None:
    b = builder(part([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}, mv=11).set_target_isr([1, 2])
    assert b.build() == (PartitionChangeRecord(topic_id=TID, partition_id=0, leader=1, isr=[1, 2]), 0)


def test_no_eligible_leader_leaves_the_partition_leaderless_with_its_isr() -> None:
    b = builder(part([1, 2], [1], 1), {2}).set_target_isr([])
    assert b.build() == (PartitionChangeRecord(topic_id=TID, partition_id=0, leader=-1), 1)


def test_an_unclean_election_resets_the_isr_and_marks_recovery() -> None:
    b = builder(part([1, 2], [1], 1), {2}).set_target_isr([]).set_election(Election.UNCLEAN)
    assert b.build() == (PartitionChangeRecord(topic_id=TID, partition_id=0, leader=2, isr=[2],
                                               leader_recovery_state=1), 1)


def test_a_preferred_election_picks_the_first_replica_when_it_is_in_sync() -> None:
    b = builder(part([1, 2, 3], [2, 3, 1], 2), {1, 2, 3}).set_election(Election.PREFERRED)
    assert b.build() == (PartitionChangeRecord(topic_id=TID, partition_id=0, leader=1), 1)
    b = builder(part([1, 2, 3], [2, 3], 2), {1, 2, 3}).set_election(Election.PREFERRED)
    assert b.build() is None


def test_a_directory_assignment() -> None:
    new_dir = uuid.UUID(int=99 << 64)
    b = builder(part([1, 2], [1, 2], 1), {1, 2}).set_directory(2, new_dir)
    assert b.build() == (PartitionChangeRecord(topic_id=TID, partition_id=0, directories=[D[1], new_dir]), 1)
