"""Loading a snapshot (MetadataState.load_snapshot): its PartitionRecords go straight into their
topics' partitions (the fast decoder, under the image's own topic id object), and the result is
exactly what replaying the same records one by one gives -- through the records that end the
shortcut (a removed topic, an aborted transaction), partitions of unknown topics, records the
fast decoder leaves to the generated codec, and values given as memoryviews. The cyclic collector
is paused during the load and restored after it, also when the load fails."""

from __future__ import annotations

import gc
import random
import uuid

import pytest

from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata.state import MetadataFault, MetadataState
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from tests.kraftnode.metadata.test_compact import random_partition


def replayed_one_by_one(values: list[bytes]) -> MetadataState:
    """The reference: every record decoded by the generated codec and replayed as the log does."""
    st = MetadataState()
    for v in values:
        m, version = decode_metadata_record(v)
        st.metadata_records += 1
        st._apply(m, -1, version)
    return st


def snapshot_values(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    topics = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(6)]
    out = [encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]
    orphan = random_partition(rng, 1)
    orphan.topic_id = uuid.UUID(int=12345)   # a topic the snapshot never names: dropped
    out.append(encode_metadata_record(orphan, 1))
    for i, tid in enumerate(topics):
        out.append(encode_metadata_record(TopicRecord(name=f"t{i}", topic_id=tid), 0))
        for pid in range(40):
            version = rng.randrange(3)
            p = random_partition(rng, version)   # some with tagged fields or long lists: the codec's
            p.topic_id, p.partition_id = tid, pid
            out.append(encode_metadata_record(p, version))
        out.append(encode_metadata_record(ConfigRecord(resource_type=2, resource_name=f"t{i}", name="x",
                                                       value="1"), 0))
        if i == 2:   # a removed topic, then one of its partitions again: dropped, as replay drops it
            out.append(encode_metadata_record(RemoveTopicRecord(topic_id=tid), 0))
            out.append(encode_metadata_record(PartitionRecord(partition_id=99, topic_id=tid, replicas=[1],
                                                              isr=[1], leader=1), 0))
        if i == 3:   # an aborted transaction that added partitions to an earlier topic
            out.append(encode_metadata_record(BeginTransactionRecord(name="x"), 0))
            out.append(encode_metadata_record(PartitionRecord(partition_id=500, topic_id=topics[0],
                                                              replicas=[1], isr=[1], leader=1), 0))
            out.append(encode_metadata_record(AbortTransactionRecord(reason="r"), 0))
            out.append(encode_metadata_record(PartitionRecord(partition_id=501, topic_id=topics[0],
                                                              replicas=[2], isr=[2], leader=2), 0))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("as_view", [False, True])
def test_a_loaded_snapshot_is_the_image_its_records_replay_to(seed: int, as_view: bool) -> None:
    values = snapshot_values(seed)
    want = replayed_one_by_one(values)
    st = MetadataState()
    st.load_snapshot((None, memoryview(v) if as_view else v) for v in values)
    assert st.image == want.image
    assert (st.metadata_records, st.foreign_records, st.metadata_version) == \
        (want.metadata_records, want.foreign_records, 21)
    assert [encode_metadata_record(m, v) for m, v in st.image.records()] == \
        [encode_metadata_record(m, v) for m, v in want.image.records()]
    assert uuid.UUID(int=12345) not in st.image.partitions
    for tid, parts in st.image.partitions.items():
        topic = st.image.topics[tid][0]
        assert parts, tid
        for p, _version in parts.values():
            assert p.topic_id is topic.topic_id   # the image's own topic id object, not a copy each
    t0 = next(iter(st.image.partitions))
    assert 500 not in st.image.partitions[t0] and 501 in st.image.partitions[t0]


def test_the_collector_is_paused_during_the_load_and_restored_after_it() -> None:
    seen: list[bool] = []
    values = snapshot_values(4)

    def records():  # type: ignore[no-untyped-def]
        for v in values:
            seen.append(gc.isenabled())
            yield None, v
    assert gc.isenabled()
    MetadataState().load_snapshot(records())
    assert seen and not any(seen) and gc.isenabled()
    # a load that fails restores it too
    with pytest.raises(MetadataFault, match="Unknown metadata id 77"):
        MetadataState().load_snapshot([(None, values[0]), (None, b"\x01\x4d\x00")])
    assert gc.isenabled()
    # and a collector the application turned off stays off
    gc.disable()
    try:
        MetadataState().load_snapshot((None, v) for v in values)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_loaded_state_goes_to_the_oldest_generation_or_is_frozen_with_the_rest() -> None:
    """After the load the collector does not walk the new state as young objects (at a million
    partitions two walks, 0.9 s): it is in the oldest generation -- or frozen, in a process that
    froze its long-lived objects already (``kraftnode start`` does once it runs)."""
    values = snapshot_values(5)
    assert gc.get_freeze_count() == 0
    st = MetadataState()
    st.load_snapshot((None, v) for v in values)
    parts = next(iter(st.image.partitions.values()))
    record = next(iter(parts.values()))   # a (PartitionRecord, version) tuple the load made
    assert gc.get_freeze_count() == 0
    assert any(o is record for o in gc.get_objects(generation=2))
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        st2 = MetadataState()
        st2.load_snapshot((None, v) for v in values)
        record2 = next(iter(next(iter(st2.image.partitions.values())).values()))
        assert gc.get_freeze_count() > frozen
        assert not any(o is record2 for g in (0, 1, 2) for o in gc.get_objects(generation=g))
    finally:
        gc.unfreeze()
