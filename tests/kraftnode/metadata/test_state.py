"""MetadataState: what a replay of committed batches learns, and what it skips."""

from __future__ import annotations

import uuid

import pytest

from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.metadata.state import MetadataState, is_metadata_record
from kraftnode.protocol.generated.metadata import (
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    RegisterControllerRecord,
)
from recordbatch import Record, build_batch, iter_batches


def batch(values: list[bytes], base: int, **kw: object) -> bytes:
    return build_batch([Record(None, v) for v in values], base_offset=base, **kw)  # type: ignore[arg-type]


def meta(m: object) -> bytes:
    return encode_metadata_record(m, 0)


def replay(data: bytes, end: int, st: MetadataState | None = None) -> MetadataState:
    st = st or MetadataState()
    st.replay_batches(iter_batches(data), end)
    return st


def test_application_batches_are_foreign_and_leave_the_log_empty() -> None:
    data = batch([b"hello", b"world"], 0) + batch([b"x"], 2, producer_id=7, producer_epoch=0, base_sequence=0)
    st = replay(data, 3)
    assert st.empty and st.foreign_records == 3 and st.next_offset == 3


@pytest.mark.parametrize("compression", ["none", "zstd", "lz4"])
def test_bootstrap_transaction_and_registration(compression: str) -> None:
    inc = uuid.uuid4()
    recs = [meta(BeginTransactionRecord(name="Bootstrap records")),
            meta(FeatureLevelRecord(name="metadata.version", feature_level=21)),
            meta(EndTransactionRecord()),
            meta(RegisterControllerRecord(controller_id=2, incarnation_id=inc, end_points=[], features=[]))]
    st = replay(batch(recs[:2], 0, compression=compression), 2)
    assert st.metadata_version == 21 and st.transaction_start == 0 and not st.empty
    assert st.features_epoch == -1  # published (FeaturesPublisher) once the transaction ends
    replay(batch(recs[2:], 2, compression=compression), 4, st)
    assert st.transaction_start == -1 and st.controllers[2].incarnation_id == inc
    assert st.features_epoch == 3  # the image's last offset then: the end of that batch
    assert st.finalized == {"metadata.version": 21} and st.metadata_records == 4


def test_replay_stops_at_the_end_offset_and_resumes_inside_a_batch() -> None:
    data = batch([meta(NoOpRecord()), meta(FeatureLevelRecord(name="metadata.version", feature_level=15))], 0)
    st = replay(data, 1)  # only offset 0 is committed
    assert st.metadata_version is None and st.next_offset == 1
    replay(data, 2, st)
    assert st.metadata_version == 15 and st.metadata_records == 2


def test_is_metadata_record() -> None:
    assert is_metadata_record(meta(NoOpRecord()))
    assert not is_metadata_record(b"hello") and not is_metadata_record(None) and not is_metadata_record(b"")


def test_a_partition_of_an_unknown_topic_is_dropped_so_replay_and_snapshot_agree() -> None:
    """Found by the simulation's state layer: a PartitionRecord before its TopicRecord was
    kept by replay, but a snapshot (topics with their partitions) could not carry it, so a
    replica loaded from the snapshot disagreed with one that replayed the log once the topic
    was created. Kafka's TopicsDelta cannot apply such a record either."""
    from kraftnode.protocol.generated.metadata import PartitionRecord, TopicRecord

    tid = uuid.UUID(int=5)
    orphan = meta(PartitionRecord(partition_id=1, topic_id=tid, replicas=[1], isr=[1], leader=1))
    replayed = replay(batch([orphan], 0), 1)
    from_snapshot = MetadataState()
    from_snapshot.load_snapshot(replayed.snapshot()())
    topic = batch([meta(TopicRecord(name="t", topic_id=tid))], 1)
    for st in (replayed, from_snapshot):
        replay(topic, 2, st)
    assert sorted(replayed.snapshot()(), key=repr) == sorted(from_snapshot.snapshot()(), key=repr)
    assert replayed.image.partitions[tid] == {}


def test_a_batch_whose_records_its_writer_holds_is_replayed_from_them_not_decoded() -> None:
    """The active controller hands its committed state the records of each batch it appends,
    by (base offset, epoch): that batch is replayed from those objects once committed; a batch
    of another epoch at the same offset (the log truncated and written again by a new leader)
    is decoded from the log."""
    from tests.kraftnode.controller.test_view import _topic_log
    log, first, second = _topic_log(epoch=3)
    st = MetadataState()
    st.replay_known(0, 3, first)
    st.replay_known(5, 2, second)     # another epoch: not the batch the log holds at 5
    st.replay_batches(iter_batches(log), 6)
    decoded = replay(log, 6)
    assert st.image == decoded.image and st.next_offset == 6 and st.metadata_records == decoded.metadata_records
    tid = next(iter(st.image.partitions))
    assert st.image.partitions[tid][0][0] is first[2][0]
    assert st.image.topics[tid][0] is first[1][0]
    # the changed partition is a merge of a decoded PartitionChangeRecord, not of ``second``'s
    assert st.image.partitions[tid][1][0].isr == [2, 3] and st.known_batches == {(5, 2): second}
