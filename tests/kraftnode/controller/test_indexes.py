"""The controller's indexes, kept on replay (kraftnode/controller/indexes.py): they answer what a
walk over every partition would, through topic deletion and an aborted metadata transaction."""

from __future__ import annotations

import uuid

from kraftnode.controller.view import ControllerView
from kraftnode.metadata.state import MetadataState
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

A, B = uuid.UUID(int=0xA << 64 | 1), uuid.UUID(int=0xB << 64 | 1)


def _replay(view: ControllerView, *records: object) -> None:
    for m in records:
        view.replay(m, 0, view.next_offset)
    assert view.index_differences() == []


def _topic(view: ControllerView, tid: uuid.UUID, name: str, parts: dict[int, tuple[list[int], list[int], int]]) -> None:
    _replay(view, TopicRecord(name=name, topic_id=tid),
            *(PartitionRecord(partition_id=p, topic_id=tid, replicas=r, isr=i, leader=leader)
              for p, (r, i, leader) in parts.items()))


def test_the_indexes_answer_as_a_walk_would() -> None:
    v = ControllerView()
    _topic(v, A, "a.b", {0: ([1, 2], [1, 2], 1), 1: ([2, 3], [2, 3], 3)})
    _topic(v, B, "other", {0: ([3, 1], [3], 3)})
    ix = v.indexes
    assert ix.with_isr_member(2) == [(A, 0), (A, 1)]
    assert ix.with_isr_member(3) == [(A, 1), (B, 0)]
    assert ix.imbalanced == {(A, 1)} and not ix.leaderless
    assert ix.leads == {1: 1, 3: 2}
    assert ix.colliding_with("a_b") == "a.b" and ix.colliding_with("a_c") is None

    # broker 3 leaves B-0's ISR and leadership; A-1 gets broker 2 as its leader
    _replay(v, PartitionChangeRecord(topic_id=B, partition_id=0, isr=[], leader=-1),
            PartitionChangeRecord(topic_id=A, partition_id=1, leader=2))
    assert ix.with_isr_member(3) == [(A, 1)]
    assert ix.leaderless == {(B, 0)} and ix.imbalanced == {(B, 0)}  # A-1 is led by its first replica now
    assert ix.leads == {1: 1, 2: 1}

    _replay(v, RemoveTopicRecord(topic_id=A))
    assert ix.isr_members == {} and ix.leads == {} and ix.imbalanced == {(B, 0)}
    assert ix.colliding_with("a_b") is None and "a.b" not in v.topics_by_name


def test_an_aborted_transaction_takes_its_index_changes_with_it() -> None:
    v = ControllerView()
    _topic(v, A, "a", {0: ([1], [1], 1)})
    _replay(v, BeginTransactionRecord(name="t"))
    _topic(v, B, "b_c", {0: ([2], [2], 2)})
    assert v.indexes.with_isr_member(2) == [(B, 0)] and v.topic_id("b_c") == B
    _replay(v, AbortTransactionRecord(reason="test"))
    assert v.indexes.with_isr_member(2) == [] and v.topic_id("b_c") is None
    assert v.indexes.colliding_with("b.c") is None


def test_a_view_made_from_a_committed_state_has_its_indexes() -> None:
    committed = MetadataState()
    for i, m in enumerate([TopicRecord(name="a", topic_id=A),
                           PartitionRecord(partition_id=0, topic_id=A, replicas=[1, 2], isr=[2], leader=2)]):
        committed._apply(m, i)
    v = ControllerView.of(committed)
    assert v.index_differences() == []
    assert v.indexes.with_isr_member(2) == [(A, 0)] and v.indexes.imbalanced == {(A, 0)}


def test_a_wrong_index_is_reported() -> None:
    v = ControllerView()
    _topic(v, A, "a", {0: ([1], [1], 1)})
    v.indexes.leaderless.add((A, 0))
    assert v.index_differences() and v.index_differences()[0].startswith("leaderless: kept")
