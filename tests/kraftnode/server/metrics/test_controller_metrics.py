"""Kafka's ControllerStats counters (UncleanLeaderElectionsPerSec,
ElectionFromEligibleLeaderReplicasPerSec) as the active controller counts the records it is about
to write, against the view before the write; the names and every other controller metric are
compared with a genuine Kafka 4.4 controller in tests/interop/test_controller_metrics_vs_kafka.py."""

from __future__ import annotations

import uuid

from kraftnode.controller import ControllerView
from kraftnode.protocol.generated.metadata import (
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from kraftnode.server.metrics.controller import ControllerMetrics, count_elections

TID = uuid.UUID(int=0xABC)


def view_with(isr: list[int], leader: int, elr: list[int] | None = None) -> ControllerView:
    v = ControllerView()
    v.replay(TopicRecord(name="t", topic_id=TID), 0, 0)
    v.replay(PartitionRecord(partition_id=0, topic_id=TID, replicas=[1, 2, 3], isr=isr, leader=leader,
                             eligible_leader_replicas=elr), 1, 1)
    return v


def change(leader: int, isr: list[int] | None = None) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=0, topic_id=TID, leader=leader, isr=isr)


def counted(view: ControllerView, *records: PartitionChangeRecord) -> tuple[int, int]:
    m = ControllerMetrics()
    count_elections(view, [[(r, 0) for r in records]], m)
    return m.unclean_elections, m.elr_elections


def test_a_leader_from_the_isr_is_no_unclean_election() -> None:
    assert counted(view_with([1, 2], 1), change(2)) == (0, 0)


def test_a_leader_outside_the_isr_is_an_unclean_election() -> None:
    assert counted(view_with([1], -1), change(3, [3])) == (1, 0)


def test_a_leader_from_the_elr_is_counted_apart() -> None:
    assert counted(view_with([], -1, elr=[2]), change(2, [2])) == (0, 1)


def test_unchanged_or_no_leader_counts_nothing() -> None:
    v = view_with([1], 1)
    assert counted(v, change(1), change(-1), change(-2)) == (0, 0)
