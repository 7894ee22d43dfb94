"""ControllerView: the active controller's replay of the log counts application data and keeps
none of it (the committed state keeps the keys and values, for snapshots and group offsets)."""

from __future__ import annotations

from kraftnode.controller.view import ControllerView
from kraftnode.metadata.state import MetadataState
from recordbatch import Record, build_batch, iter_batches

# offsets 0-1 keyed, 2-4 unkeyed, 5 keyed from an idempotent producer
LOG = (build_batch([Record(b"k1", b"a"), Record(b"k2", b"b")], base_offset=0)
       + build_batch([Record(None, b"x"), Record(None, b"y"), Record(None, b"z")], base_offset=2)
       + build_batch([Record(b"k1", b"c")], base_offset=5, producer_id=7, producer_epoch=0, base_sequence=0))


def _replay(st: MetadataState, *ends: int) -> list[int]:
    counts = []
    for end in ends:
        st.replay_batches(iter_batches(LOG), end)
        counts.append(st.foreign_records)
    return counts


def test_the_view_counts_application_records_as_the_committed_state_does_and_keeps_none() -> None:
    committed, view = MetadataState(), ControllerView()
    assert _replay(committed, 6) == _replay(view, 6) == [6]
    assert committed.app == {b"k1": b"c", b"k2": b"b"}
    assert view.app == {} and view.next_offset == committed.next_offset == 6


def test_a_replay_that_ends_inside_a_batch_counts_only_the_records_below_the_end() -> None:
    committed, view = MetadataState(), ControllerView()
    # 4 cuts the unkeyed batch (2-4) after two records; 6 takes the rest
    assert _replay(committed, 1, 4, 6) == _replay(view, 1, 4, 6) == [1, 4, 6]
    assert view.app == {} and committed.app == {b"k1": b"c", b"k2": b"b"}


def _topic_log(epoch: int = 3) -> tuple[bytes, list[tuple[object, int]], list[tuple[object, int]]]:
    """A log of two metadata batches (a topic with two partitions, then a change of one) and an
    application batch between them; the records of the two metadata batches."""
    import uuid

    from kraftnode.log.metadata_records import encode_metadata_record
    from kraftnode.protocol.generated.metadata import (
        FeatureLevelRecord,
        PartitionChangeRecord,
        PartitionRecord,
        TopicRecord,
    )
    tid = uuid.UUID(int=42)
    first: list[tuple[object, int]] = [
        (FeatureLevelRecord(name="metadata.version", feature_level=21), 0), (TopicRecord(name="t", topic_id=tid), 0),
        *((PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2, 3], removing_replicas=[],
                           adding_replicas=[], leader=1 + p, leader_epoch=0, partition_epoch=0,
                           directories=[uuid.UUID(int=1)] * 3), 1) for p in range(2))]
    second: list[tuple[object, int]] = [(PartitionChangeRecord(topic_id=tid, partition_id=1, isr=[2, 3], leader=2), 0)]

    def b(recs: list[tuple[object, int]], base: int) -> bytes:
        return build_batch([Record(None, encode_metadata_record(m, v)) for m, v in recs], base_offset=base,
                           partition_leader_epoch=epoch)
    log = b(first, 0) + build_batch([Record(None, b"x")], base_offset=4, partition_leader_epoch=epoch) + b(second, 5)
    return log, first, second


def test_a_standby_view_replays_the_records_the_committed_state_decoded_once() -> None:
    """The standby's view, fed by the committed state's hook, ends as a view replayed from the
    log would, holding the very objects the committed state decoded (no second decode)."""
    log, _first, _second = _topic_log()
    committed, fed, from_log = MetadataState(), ControllerView(), ControllerView()

    def hook(b: object, start: int, end: int, decoded: object) -> None:
        assert fed.next_offset == start
        fed.replay_decoded(b, end, decoded)  # type: ignore[arg-type]
    committed.on_replayed = hook
    for end in (3, 6):   # the first batch committed in two steps (3 cuts it)
        committed.replay_batches(iter_batches(log), end)
    from_log.replay_batches(iter_batches(log), 6)
    assert fed.next_offset == from_log.next_offset == committed.next_offset == 6
    assert fed.image == from_log.image == committed.image
    assert fed.metadata_records == from_log.metadata_records == 5 and fed.foreign_records == 1
    assert fed.features_epoch == committed.features_epoch == 2   # both saw the commit stop at 3
    assert fed.index_differences() == [] and fed.topics_by_name == from_log.topics_by_name
    tid = next(iter(committed.image.partitions))
    # partition 0 as decoded once; partition 1 is each image's own merge of the change
    assert fed.image.partitions[tid][0][0] is committed.image.partitions[tid][0][0]
    assert from_log.image.partitions[tid][0][0] is not committed.image.partitions[tid][0][0]
    assert fed.image.topics[tid][0] is committed.image.topics[tid][0]


def test_a_view_built_in_steps_is_the_view_built_at_once_and_shares_nothing_the_state_changes() -> None:
    """ViewBuilder (a standby's view, built without holding the event loop): the committed state
    is copied at once, then indexed a few partitions per step; the result is ControllerView.of's,
    its indexes agree with the image (an open transaction's too), and the state's later replays
    do not reach it."""
    import uuid

    from kraftnode.controller.view import ViewBuilder
    from kraftnode.protocol.generated.metadata import (
        BeginTransactionRecord,
        PartitionChangeRecord,
        PartitionRecord,
        RegisterBrokerRecord,
        TopicRecord,
    )

    st = ControllerView()
    st.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=7), 0, 0)
    tids = [uuid.UUID(int=(t + 1) << 64) for t in range(5)]
    for t, tid in enumerate(tids):
        st.replay(TopicRecord(name=f"t.{t}", topic_id=tid), 0, st.next_offset)
        for p in range(7):
            st.replay(PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2, 3][: 1 + p % 3],
                                      leader=[-1, 1, 2][p % 3]), 0, st.next_offset)
    st.replay(BeginTransactionRecord(name="x"), 0, st.next_offset)
    st.replay(PartitionChangeRecord(topic_id=tids[0], partition_id=0, leader=3, isr=[3]), 0, st.next_offset)
    committed = MetadataState()
    st.copy_metadata_to(committed)
    at_once = ControllerView.of(committed)
    b = ViewBuilder(committed)
    steps = 1
    while not b.step(4):   # whole topics: 7 partitions a step
        steps += 1
    assert steps == 5
    v = b.view
    assert v.image == at_once.image and v.next_offset == committed.next_offset
    assert v.index_differences() == []
    for what in ("isr_members", "leaderless", "imbalanced", "leads", "partition_count", "dotted", "topic_order"):
        assert getattr(v.indexes, what) == getattr(at_once.indexes, what), what
    assert v.indexes.partition_count == 35 and v.indexes.leaderless and v.indexes.imbalanced
    assert v.register_offsets == {1: 7} and v.topics_by_name == at_once.topics_by_name
    assert v._indexes_before is not None and at_once._indexes_before is not None
    assert v._indexes_before[0].leaderless == at_once._indexes_before[0].leaderless
    committed.image.partitions[tids[1]].clear()   # the state's containers are its own
    assert len(v.image.partitions[tids[1]]) == 7
