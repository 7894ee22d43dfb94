"""Control records: keys, the KRaft control values, transaction markers."""

from __future__ import annotations

import struct
import uuid

import pytest

import recordbatch as rb
from recordbatch import ControlType, CorruptBatchError, Record, iter_batches
from recordbatch.generated import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
)

TS = 1_700_000_000_000
DIR = uuid.UUID("0123456789abcdef0123456789abcdef")


def voters() -> VotersRecord:
    return VotersRecord(
        version_=0,
        voters=[
            VotersRecord.Voter(
                voter_id=1,
                voter_directory_id=DIR,
                endpoints=[VotersRecord.Endpoint(name="CONTROLLER", host="localhost", port=9093)],
                kraft_version_feature=VotersRecord.KRaftVersionFeature(
                    min_supported_version=0, max_supported_version=1
                ),
            )
        ],
    )


def test_control_type_numbers_match_kafka() -> None:
    assert [(t.name, t.value) for t in ControlType] == [
        ("ABORT", 0), ("COMMIT", 1), ("LEADER_CHANGE", 2), ("SNAPSHOT_HEADER", 3),
        ("SNAPSHOT_FOOTER", 4), ("KRAFT_VERSION", 5), ("KRAFT_VOTERS", 6),
    ]


def test_leader_change_batch_bytes() -> None:
    msg = LeaderChangeMessage(
        version_=0,
        leader_id=2,
        voters=[LeaderChangeMessage.Voter(voter_id=1), LeaderChangeMessage.Voter(voter_id=2)],
        granting_voters=[LeaderChangeMessage.Voter(voter_id=2)],
    )
    data = rb.leader_change_batch(msg, base_offset=40, partition_leader_epoch=5, timestamp=TS)
    (v,) = iter_batches(data)
    v.validate()
    assert (v.is_control, v.is_transactional, v.records_count) == (True, False, 1)
    assert (v.base_offset, v.partition_leader_epoch, v.base_timestamp) == (40, 5, TS)
    assert (v.producer_id, v.producer_epoch, v.base_sequence) == (-1, -1, -1)
    (rec,) = v.records()
    assert rec.key == b"\x00\x00\x00\x02"
    # LeaderChangeMessage v0 (flexible): Version int16, LeaderId int32, Voters and
    # GrantingVoters as compact arrays of {VoterId int32, no tags}, no tags.
    expected_value = (
        struct.pack(">hi", 0, 2)
        + b"\x03" + struct.pack(">i", 1) + b"\x00" + struct.pack(">i", 2) + b"\x00"
        + b"\x02" + struct.pack(">i", 2) + b"\x00"
        + b"\x00"
    )
    assert rec.value == expected_value
    assert rb.decode_control_record(rec) == (ControlType.LEADER_CHANGE, msg)


@pytest.mark.parametrize(
    "message, helper",
    [
        (SnapshotHeaderRecord(version_=0, last_contained_log_timestamp=TS), rb.snapshot_header_batch),
        (SnapshotFooterRecord(version_=0), rb.snapshot_footer_batch),
        (KRaftVersionRecord(version_=0, kraft_version=1), rb.kraft_version_batch),
        (voters(), rb.voters_batch),
    ],
)
def test_typed_helpers_round_trip(message: object, helper: object) -> None:
    data = helper(message, base_offset=0, partition_leader_epoch=1, timestamp=TS)  # type: ignore[operator]
    (v,) = iter_batches(data)
    (rec,) = v.records()
    ctype, value = rb.decode_control_record(rec)
    assert value == message
    assert rec.key == struct.pack(">hh", 0, ctype)


def test_bootstrap_checkpoint_batch_holds_three_control_records() -> None:
    msgs: list[rb.KRaftControlMessage] = [
        SnapshotHeaderRecord(version_=0, last_contained_log_timestamp=0),
        KRaftVersionRecord(version_=0, kraft_version=1),
        voters(),
    ]
    data = rb.build_kraft_control_batch(msgs, base_offset=0, partition_leader_epoch=0, timestamp=TS)
    (v,) = iter_batches(data)
    recs = list(v.records())
    assert [r.offset for r in recs] == [0, 1, 2]
    assert [rb.decode_control_record(r) for r in recs] == [
        (ControlType.SNAPSHOT_HEADER, msgs[0]),
        (ControlType.KRAFT_VERSION, msgs[1]),
        (ControlType.KRAFT_VOTERS, msgs[2]),
    ]


@pytest.mark.parametrize("commit", [True, False])
def test_transaction_markers_read_by_kafka_python_and_aiokafka(commit: bool) -> None:
    data = rb.end_txn_marker_batch(
        commit, 17, producer_id=4000, producer_epoch=3, base_offset=9,
        partition_leader_epoch=2, timestamp=TS,
    )
    (v,) = iter_batches(data)
    assert v.is_control and v.is_transactional and v.producer_id == 4000
    (rec,) = v.records()
    assert rb.decode_control_record(rec) == (int(commit), rb.EndTransactionMarker(0, 17))
    assert rec.value == struct.pack(">hi", 0, 17)

    kafka_records = pytest.importorskip("kafka.record.default_records")
    (theirs,) = list(kafka_records.DefaultRecordBatch(data))
    assert theirs.type == int(commit) and theirs.commit is commit and theirs.offset == 9
    aio = pytest.importorskip("aiokafka.record.default_records")
    batch = aio.DefaultRecordBatch(data)
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()


def test_bad_keys_and_values() -> None:
    with pytest.raises(CorruptBatchError, match="key"):
        rb.decode_control_record(Record(b"\x00\x00\x00", b""))
    with pytest.raises(CorruptBatchError, match="key"):
        rb.decode_control_record(Record(None, b""))
    with pytest.raises(CorruptBatchError, match="version"):
        rb.decode_control_record(Record(b"\xff\xff\x00\x02", b""))
    with pytest.raises(CorruptBatchError, match="LeaderChangeMessage"):
        rb.decode_control_record(Record(b"\x00\x00\x00\x02", b"\x00\x00\x00"))
    with pytest.raises(CorruptBatchError, match="marker"):
        rb.decode_control_record(Record(b"\x00\x00\x00\x01", b"\x00"))
    # Unknown (newer) control types are passed through undecoded, as Kafka skips them.
    assert rb.decode_control_record(Record(b"\x00\x00\x00\x63", b"raw")) == (99, b"raw")
    # A higher key version is read as version 0.
    assert rb.decode_control_record(Record(b"\x00\x05\x00\x01", b"\x00\x00\x00\x00\x00\x03"))[0] == 1


def test_generic_control_batch() -> None:
    data = rb.build_control_batch(
        ControlType.SNAPSHOT_FOOTER, SnapshotFooterRecord(version_=0).encode(0),
        base_offset=3, partition_leader_epoch=1, timestamp=TS,
    )
    (v,) = iter_batches(data)
    (rec,) = v.records()
    assert rb.parse_control_key(rec.key) == (0, 4)
    assert rb.decode_control_record(rec) == (4, SnapshotFooterRecord(version_=0))
