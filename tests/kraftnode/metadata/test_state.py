"""MetadataState: what a replay of committed batches learns, and what it skips."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraftnode.log.bootstrap import write_bootstrap_checkpoint
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata.state import MetadataState, is_metadata_record
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import (
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    RegisterControllerRecord,
)
from kraftnode.server.metadata.controller_duties import (
    activation_records,
    check_bootstrap_records,
    controller_registration_record,
    read_bootstrap_records,
)
from kraftnode.server.net.api_versions import FeatureView
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


def test_activation_records_follow_kafka() -> None:
    boot = [meta(FeatureLevelRecord(name="metadata.version", feature_level=21))]
    values, _ = activation_records(MetadataState(), boot)
    names = [type(decode_metadata_record(v)[0]).NAME for v in values]
    assert names == ["BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord",
                     "EndTransactionRecord"]
    # metadata.version before 3.6-IV1 has no metadata transactions: the bare records
    old = [meta(FeatureLevelRecord(name="metadata.version", feature_level=8))]
    assert activation_records(MetadataState(), old)[0] == old
    # a non-empty log with an open transaction gets it aborted, nothing else
    st = MetadataState(metadata_records=3, transaction_start=5, metadata_version=21)
    values, what = activation_records(st, boot)
    assert len(values) == 1 and "aborting" in what
    assert activation_records(MetadataState(metadata_records=3, metadata_version=21), boot)[0] == []


def test_is_metadata_record() -> None:
    assert is_metadata_record(meta(NoOpRecord()))
    assert not is_metadata_record(b"hello") and not is_metadata_record(None) and not is_metadata_record(b"")


SUPPORTED = FeatureView().supported  # what we register, and what a Kafka 3.9 controller supports


def test_bootstrap_records_are_checked_as_a_kafka_controller_loads_them(tmp_path: Path) -> None:
    write_bootstrap_checkpoint(tmp_path, 21, 0)
    values, source = read_bootstrap_records(tmp_path)
    check_bootstrap_records(values, source, SUPPORTED)  # what format writes is accepted

    def fails(records: list[object]) -> str:
        with pytest.raises(ValueError) as e:
            check_bootstrap_records([meta(r) for r in records], "f", SUPPORTED)
        return str(e.value)

    mv21 = FeatureLevelRecord(name="metadata.version", feature_level=21)
    # BootstrapMetadata.fromRecords: a metadata.version record is required
    assert "No FeatureLevelRecord for metadata.version" in fails([NoOpRecord()])
    # BootstrapMetadata: nothing before MINIMUM_BOOTSTRAP_VERSION (3.3-IV0 = 4)
    assert "before 3.3-IV0 are not supported" in fails([FeatureLevelRecord(name="metadata.version", feature_level=3)])
    check_bootstrap_records([meta(FeatureLevelRecord(name="metadata.version", feature_level=4))], "f", SUPPORTED)
    # FeatureControlManager.replay: a Kafka 3.9 controller stops on levels it does not support
    assert "only supports versions 1-21" in fails([FeatureLevelRecord(name="metadata.version", feature_level=22)])
    assert "only supports versions 0" in fails([mv21, FeatureLevelRecord(name="group.version", feature_level=1)])
    assert "kraft.version" in fails([mv21, FeatureLevelRecord(name="kraft.version", feature_level=2)])
    # level 0 of a feature nobody supports is fine (it removes the feature)
    check_bootstrap_records([meta(mv21), meta(FeatureLevelRecord(name="group.version", feature_level=0))],
                            "f", SUPPORTED)


def test_controller_registration_record_follows_listener_info() -> None:
    R = w.ControllerRegistrationRequest
    inc = uuid.uuid4()

    def req(*listeners: tuple[str, int, int]) -> w.ControllerRegistrationRequest:
        return R(controller_id=3, incarnation_id=inc, zk_migration_ready=False,
                 listeners=[R.Listener(name=n, host="h", port=p, security_protocol=sp) for n, p, sp in listeners],
                 features=[R.Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)])

    rec = controller_registration_record(req(("CONTROLLER", 1, 0), ("SSL_CTL", 2, 1), ("CONTROLLER", 3, 0)))
    # a repeated name keeps its first position and its last value (Kafka's LinkedHashMap)
    assert [(e.name, e.port, e.security_protocol) for e in rec.end_points] == [("CONTROLLER", 3, 0), ("SSL_CTL", 2, 1)]
    assert (rec.controller_id, rec.incarnation_id, rec.features[0].max_supported_version) == (3, inc, 1)
    decoded, version = decode_metadata_record(meta(rec))
    assert version == 0 and decoded == rec
    # an unknown security protocol: Kafka's followers could not replay the record
    with pytest.raises(ValueError, match="Unknown security protocol 9 in listener X"):
        controller_registration_record(req(("CONTROLLER", 1, 0), ("X", 2, 9)))


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
