"""The metadata image as the default state machine: Kafka 3.9's replace/remove semantics
per record type, transactions, application records, and snapshot write/load."""

from __future__ import annotations

import uuid

from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata.state import MetadataState
from kraftnode.metadata.state_machine import KeyValueStateMachine, StateMachine, StateMachineRunner
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    ClientQuotaRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from recordbatch import Record, build_batch, iter_batches


def meta_batch(msgs: list[object], base: int) -> bytes:
    return build_batch([Record(None, encode_metadata_record(m, 0)) for m in msgs], base_offset=base)


def app_batch(kvs: list[tuple[bytes | None, bytes | None]], base: int) -> bytes:
    return build_batch([Record(k, v) for k, v in kvs], base_offset=base)


def run(st: StateMachine, data: bytes, end: int) -> StateMachineRunner:
    r = StateMachineRunner(st)
    r.apply_batches(iter_batches(data), end)
    return r


def snapshot_types(st: MetadataState) -> list[str]:
    out = []
    for k, v in st.snapshot()():
        if k is None:
            assert v is not None
            out.append(type(decode_metadata_record(v)[0]).__name__)
        else:
            out.append("app")
    return out


T1, T2 = uuid.uuid4(), uuid.uuid4()


def history() -> bytes:
    inc = uuid.uuid4()
    msgs: list[object] = [
        FeatureLevelRecord(name="metadata.version", feature_level=21),
        FeatureLevelRecord(name="kraft.version", feature_level=1),
        RegisterBrokerRecord(broker_id=1, incarnation_id=inc, broker_epoch=5, end_points=[], features=[],
                             fenced=True),
        RegisterBrokerRecord(broker_id=2, incarnation_id=inc, broker_epoch=6, end_points=[], features=[]),
        UnfenceBrokerRecord(id=1, epoch=5),
        UnregisterBrokerRecord(broker_id=2, broker_epoch=6),
        RegisterControllerRecord(controller_id=3000, incarnation_id=inc, end_points=[], features=[]),
        TopicRecord(name="a", topic_id=T1),
        PartitionRecord(partition_id=0, topic_id=T1, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                        partition_epoch=0),
        PartitionChangeRecord(partition_id=0, topic_id=T1, leader=-1),
        PartitionChangeRecord(partition_id=0, topic_id=T1, isr=[]),
        TopicRecord(name="b", topic_id=T2),
        ConfigRecord(resource_type=2, resource_name="b", name="retention.ms", value="1"),
        RemoveTopicRecord(topic_id=T2),
        ConfigRecord(resource_type=2, resource_name="a", name="cleanup.policy", value="compact"),
        ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value="1"),
        ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value=None),
        ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="user", entity_name="u")],
                          key="producer_byte_rate", value=10.0, remove=False),
        ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=1000),
        ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=2000),
        AccessControlEntryRecord(id=T1, resource_type=2, resource_name="a", pattern_type=3, principal="User:u",
                                 host="*", operation=3, permission_type=3),
        AccessControlEntryRecord(id=T2, resource_type=2, resource_name="b", pattern_type=3, principal="User:v",
                                 host="*", operation=3, permission_type=3),
        RemoveAccessControlEntryRecord(id=T2),
        UserScramCredentialRecord(name="u", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096),
        UserScramCredentialRecord(name="v", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096),
        RemoveUserScramCredentialRecord(name="v", mechanism=1),
    ]
    return meta_batch(msgs, 0)


def test_image_semantics_per_record_type() -> None:
    data = history()
    st = MetadataState()
    r = run(st, data, 26)
    img = st.image
    assert r.next_offset == 26 and st.next_offset == 26
    assert img.features == {"metadata.version": 21, "kraft.version": 1}
    assert list(img.brokers) == [1] and img.brokers[1][0].fenced is False
    assert list(img.controllers) == [3000]
    assert list(img.topics) == [T1] and T2 not in img.partitions
    p = img.partitions[T1][0][0]
    # PartitionRegistration.merge: a leader change bumps the leader epoch, every change the partition epoch
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (-1, 1, 2, [])
    assert img.configs == {(2, "a"): {"cleanup.policy": "compact"}}
    assert img.next_producer_id == 2000
    assert list(img.acls) == [T1] and list(img.scram) == [(1, "u")]
    assert len(img.client_quotas) == 1


def test_snapshot_is_written_in_metadata_image_write_order_and_loads_back() -> None:
    st = MetadataState()
    run(st, history(), 26)
    types = snapshot_types(st)
    assert types == ["FeatureLevelRecord", "FeatureLevelRecord", "ZkMigrationStateRecord", "RegisterBrokerRecord",
                     "RegisterControllerRecord", "TopicRecord", "PartitionRecord", "ConfigRecord",
                     "ClientQuotaRecord", "ProducerIdsRecord", "AccessControlEntryRecord",
                     "UserScramCredentialRecord"]
    assert decode_metadata_record(next(iter(st.snapshot()()))[1] or b"")[0].name == "metadata.version"
    loaded = MetadataState()
    loaded.load_snapshot(st.snapshot()())
    assert list(loaded.snapshot()()) == list(st.snapshot()())
    assert loaded.metadata_version == 21 and 3000 in loaded.controllers and not loaded.empty


def test_aborted_transaction_is_rolled_back_and_no_snapshot_inside_a_transaction() -> None:
    st = MetadataState()
    data = meta_batch([FeatureLevelRecord(name="metadata.version", feature_level=21),
                       BeginTransactionRecord(name="t"), TopicRecord(name="x", topic_id=T1)], 0)
    run(st, data, 3)
    assert T1 in st.image.topics and not st.snapshot_allowed()
    r = StateMachineRunner(st, 3)
    r.apply_batches(iter_batches(meta_batch([AbortTransactionRecord(reason="x")], 3)), 4)
    assert T1 not in st.image.topics and st.snapshot_allowed() and st.metadata_version == 21
    r.apply_batches(iter_batches(meta_batch([BeginTransactionRecord(name="t"), TopicRecord(name="y", topic_id=T2),
                                              EndTransactionRecord()], 4)), 7)
    assert T2 in st.image.topics and st.snapshot_allowed()


def test_fence_with_a_stale_epoch_changes_nothing() -> None:
    st = MetadataState()
    run(st, meta_batch([RegisterBrokerRecord(broker_id=1, incarnation_id=T1, broker_epoch=5, end_points=[],
                                             features=[], fenced=False),
                        FenceBrokerRecord(id=1, epoch=4)], 0), 2)
    assert st.image.brokers[1][0].fenced is False


def test_application_records_are_compacted_by_key_and_unkeyed_ones_are_log_only() -> None:
    st = MetadataState()
    data = app_batch([(b"k1", b"v1"), (b"k2", b"v2"), (None, b"log-only"), (b"k1", b"v3"), (b"k2", None)], 0)
    run(st, data, 5)
    assert st.app == {b"k1": b"v3"} and st.foreign_records == 5 and st.empty
    assert list(st.snapshot()()) == [(b"k1", b"v3")]
    kv = KeyValueStateMachine()
    run(kv, data, 5)
    assert kv.data == {b"k1": b"v3"} and kv.unkeyed_records == 1


def test_the_snapshot_writer_sees_the_state_at_capture_time() -> None:
    st = MetadataState()
    r = run(st, app_batch([(b"a", b"1")], 0), 1)
    writer = st.snapshot()
    r.apply_batches(iter_batches(app_batch([(b"a", b"2"), (b"b", b"3")], 1)), 3)
    assert list(writer()) == [(b"a", b"1")]
    assert dict(st.snapshot()()) == {b"a": b"2", b"b": b"3"}


def test_runner_applies_each_record_exactly_once() -> None:
    kv = KeyValueStateMachine()
    r = StateMachineRunner(kv)
    data = app_batch([(None, b"x")] * 3, 0) + app_batch([(None, b"y")] * 2, 3)
    r.apply_batches(iter_batches(data), 3)
    r.apply_batches(iter_batches(data), 5)   # the first batch again: skipped
    r.apply_batches(iter_batches(data), 5)
    assert kv.unkeyed_records == 5 and r.next_offset == 5 and r.applied_batches == 2


def test_last_timestamp_is_the_last_batchs_not_the_largest() -> None:
    # The snapshot header's LastContainedLogTimestamp: Kafka's MetadataBatchLoader keeps the
    # appendTimestamp (max timestamp) of the last batch it loaded, also when an earlier batch
    # carried a later one (a producer's clock behind the leader's, records from an older leader)
    later = build_batch([Record(b"a", b"1", timestamp=2_000)], base_offset=0, now_ms=2_000)
    earlier = build_batch([Record(b"b", b"2", timestamp=1_500)], base_offset=1, now_ms=1_500)
    r = run(KeyValueStateMachine(), later + earlier, 2)
    assert r.last_timestamp == 1_500


def _generic(b: object) -> list[tuple[bytes | None, bytes | None]]:
    return [(None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value))
            for r in b.records()]  # type: ignore[attr-defined]


def test_a_snapshots_values_are_read_as_the_record_decoder_reads_them() -> None:
    """snapshot_data_records reads the values of a snapshot's batches (uncompressed, null keys, no
    headers) without building records: over random batches -- and the same batches with a byte
    changed -- it yields what the record decoder yields, or leaves the batch to the decoder, which
    then raises as it always did; never a record the decoder would not give."""
    import random

    from kraftnode.metadata.state_machine import null_key_values, snapshot_data_records
    from recordbatch import BatchView, CorruptBatchError, Record, build_batch

    rng = random.Random(630)
    taken = 0
    for _ in range(250):
        n = rng.choice([1, 2, 5, 70, 300])
        plain = rng.random() < 0.6   # a snapshot's batch; else now and then a key, a header, a null...
        recs = []
        for _ in range(n):
            value = bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 60, 100] + [9000] * (not plain))))
            odd = not plain and rng.random() < 0.05
            recs.append(Record(rng.choice([None, b"k"]) if odd else None,
                               rng.choice([value, None]) if odd else value,
                               headers=rng.choice([(), (("h", b"v"),)]) if odd else (),
                               timestamp=1000 + rng.randrange(1 << 40) if odd else 1000))
        raw = bytearray(build_batch(recs, base_offset=rng.randrange(1 << 20), now_ms=1000,
                                    compression="none" if plain else rng.choice(["none"] * 5 + ["gzip"])))
        b = BatchView(raw)
        want = _generic(b)
        got = null_key_values(b)
        if got is not None:
            taken += 1
            assert [(None, v) for v in got] == want
        assert list(snapshot_data_records([b])) == want
        for _ in range(6):   # a byte changed in the records: the same records, or the decoder's error
            bad = bytearray(raw)
            pos = rng.randrange(61, len(bad)) if len(bad) > 61 else 60
            bad[pos] = rng.randrange(256)
            bb = BatchView(bad)
            try:
                want_bad: list[tuple[bytes | None, bytes | None]] | str = _generic(bb)
            except CorruptBatchError as e:
                want_bad = str(e)
            try:
                got_bad: list[tuple[bytes | None, bytes | None]] | str = list(snapshot_data_records([bb]))
            except CorruptBatchError as e:
                got_bad = str(e)
            assert got_bad == want_bad
    assert taken > 100
