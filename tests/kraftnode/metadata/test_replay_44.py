"""Kafka 4.4's metadata records replayed (ClearElrRecord, UnregisterControllerRecord, the cordoned
log dirs of RegisterBrokerRecord v4 / BrokerRegistrationChangeRecord v3, the ELR fields of
PartitionRecord / PartitionChangeRecord v2), and a metadata record this node cannot decode or
apply: a MetadataFault with Kafka's message, never application data."""

from __future__ import annotations

import uuid

import pytest

from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.metadata.state import MetadataFault, MetadataState, metadata_parse_error
from kraftnode.protocol.generated.metadata import (
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    TopicRecord,
    UnregisterControllerRecord,
)
from recordbatch import Record, build_batch, iter_batches
from recordbatch.wire import uvarint

T1, T2 = uuid.UUID(int=11), uuid.UUID(int=12)
D1, D2 = uuid.UUID(int=(5 << 64) | 1), uuid.UUID(int=(5 << 64) | 2)


def batch(values: list[bytes], base: int, **kw: object) -> bytes:
    return build_batch([Record(None, v) for v in values], base_offset=base, **kw)  # type: ignore[arg-type]


def replay(values: list[bytes], st: MetadataState | None = None) -> MetadataState:
    st = st or MetadataState()
    base = st.next_offset
    st.replay_batches(iter_batches(batch(values, base)), base + len(values))
    return st


def part(tid: uuid.UUID, pid: int, elr: list[int], lkelr: list[int]) -> bytes:
    return encode_metadata_record(PartitionRecord(
        partition_id=pid, topic_id=tid, replicas=[1, 2, 3], isr=[1], removing_replicas=[], adding_replicas=[],
        leader=1, leader_recovery_state=0, leader_epoch=0, partition_epoch=0,
        eligible_leader_replicas=elr, last_known_elr=lkelr), 2)


def image_partition(st: MetadataState, tid: uuid.UUID, pid: int) -> PartitionRecord:
    rec: PartitionRecord = st.image.partitions[tid][pid][0]
    return rec


def test_clear_elr_record_clears_one_topic_or_every_topic() -> None:
    st = replay([encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=33), 0),
                 encode_metadata_record(TopicRecord(name="a", topic_id=T1), 0),
                 encode_metadata_record(TopicRecord(name="b", topic_id=T2), 0),
                 part(T1, 0, [2], [3]), part(T1, 1, [], []), part(T2, 0, [2, 3], [])])
    replay([encode_metadata_record(ClearElrRecord(topic_name="a"), 0)], st)
    p = image_partition(st, T1, 0)
    assert (p.eligible_leader_replicas, p.last_known_elr, p.partition_epoch) == ([], [], 1)
    assert image_partition(st, T1, 1).partition_epoch == 0  # nothing to clear: untouched
    assert image_partition(st, T2, 0).eligible_leader_replicas == [2, 3]
    replay([encode_metadata_record(ClearElrRecord(topic_name=""), 0)], st)
    p = image_partition(st, T2, 0)
    assert (p.eligible_leader_replicas, p.partition_epoch) == ([], 1)
    # a PartitionChangeRecord v2 sets them again, and the snapshot carries them
    replay([encode_metadata_record(PartitionChangeRecord(partition_id=0, topic_id=T2, isr=[],
                                                         eligible_leader_replicas=[1, 2], last_known_elr=[1]), 2)], st)
    p = image_partition(st, T2, 0)
    assert (p.isr, p.eligible_leader_replicas, p.last_known_elr) == ([], [1, 2], [1])
    copy = MetadataState()
    copy.load_snapshot(st.snapshot()())
    assert image_partition(copy, T2, 0) == p


def test_clear_elr_of_an_unknown_topic_is_a_fault() -> None:
    st = replay([encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=33), 0)])
    with pytest.raises(MetadataFault, match=r"Unable to apply ClearElrRecord record at offset 1 on standby "
                                            r"controller, from the batch with baseOffset 1: Unable to clear elr "
                                            r"for topic with name nope: no such topic found\."):
        replay([encode_metadata_record(ClearElrRecord(topic_name="nope"), 0)], st)


def test_unregister_controller_and_cordoned_log_dirs() -> None:
    inc = uuid.uuid4()
    st = replay([encode_metadata_record(RegisterControllerRecord(controller_id=3, incarnation_id=inc, end_points=[],
                                                                 features=[]), 0),
                 encode_metadata_record(RegisterBrokerRecord(broker_id=1, incarnation_id=inc, broker_epoch=5,
                                                             end_points=[], features=[], rack=None, fenced=True,
                                                             in_controlled_shutdown=False, log_dirs=[D1, D2],
                                                             cordoned_log_dirs=[D1]), 4)])
    assert 3 in st.controllers and st.image.brokers[1][0].cordoned_log_dirs == [D1]
    replay([encode_metadata_record(UnregisterControllerRecord(controller_id=3), 0),
            encode_metadata_record(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5,
                                                                  cordoned_log_dirs=[D2]), 3)], st)
    assert 3 not in st.controllers and 3 not in st.image.controllers
    reg, version = st.image.brokers[1]
    assert reg.cordoned_log_dirs == [D2] and version == 4
    copy = MetadataState()
    copy.load_snapshot(st.snapshot()())
    assert copy.image.brokers[1][0].cordoned_log_dirs == [D2] and 3 not in copy.controllers


def framed(api_key: int, version: int, body: bytes = b"\x00") -> bytes:
    return uvarint(1) + uvarint(api_key) + uvarint(version) + body


def test_kafka_parse_messages() -> None:
    assert metadata_parse_error(framed(99, 0)) == \
        "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 99"
    assert metadata_parse_error(b"hello") == \
        "Could not deserialize metadata record due to unknown frame version 104(only frame version 1 is supported)"
    assert metadata_parse_error(framed(28, 7)) == "Failed to deserialize record with type 28"
    assert metadata_parse_error(encode_metadata_record(ClearElrRecord(topic_name=""), 0)) is None


def test_an_unknown_record_type_in_a_controller_batch_is_a_fault_not_application_data() -> None:
    st = replay([encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=33), 0)])
    with pytest.raises(MetadataFault, match="Unknown metadata id 99"):
        replay([framed(99, 0)], st)
    assert st.foreign_records == 0


def test_an_undecodable_record_after_a_good_one_is_a_fault() -> None:
    st = MetadataState()
    good = encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=33), 0)
    with pytest.raises(MetadataFault, match=r"handleCommit\[baseOffset=0\].*Failed to deserialize record with "
                                            r"type 3 \(the record at offset 1\)"):
        replay([good, framed(3, 9, b"\xff\xff")], st)
    assert st.foreign_records == 0


def test_application_data_stays_foreign() -> None:
    st = replay([b"hello", b"world"])
    assert st.foreign_records == 2 and st.metadata_records == 0


def test_a_snapshot_with_an_undecodable_metadata_record_is_a_fault() -> None:
    st = MetadataState()
    with pytest.raises(MetadataFault, match="Unknown metadata id 77"):
        st.load_snapshot([(None, framed(77, 0))])
