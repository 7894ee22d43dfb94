"""BatchView / iter_batches / build_batch behaviour that the log and replication
layers rely on."""

from __future__ import annotations

import time

import pytest

import recordbatch as rb
from recordbatch import Record, build_batch, iter_batches

NOW = 1_700_000_000_000


def test_views_are_zero_copy_over_the_callers_buffer() -> None:
    buf = bytearray(build_batch([Record(b"a", b"1", (), NOW)]) * 3)
    views = list(iter_batches(buf))
    assert len(views) == 3
    for i, v in enumerate(views):
        assert v.buffer.obj is buf
        assert v.buffer.nbytes == v.size_in_bytes
        rb.set_base_offset_and_epoch(v.buffer, 10 * i, 7)
    # The patches went into the caller's buffer and every view sees them.
    assert [v.base_offset for v in iter_batches(buf)] == [0, 10, 20]
    assert [v.base_offset for v in views] == [0, 10, 20]
    assert all(v.partition_leader_epoch == 7 and v.is_valid() for v in views)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_iter_batches_accepts_any_buffer(kind: type) -> None:
    data = build_batch([Record(b"k", b"v", (), NOW)], base_offset=3)
    (view,) = iter_batches(kind(data))
    assert view.base_offset == 3 and [r.value for r in view.records()] == [b"v"]


def test_set_base_offset_needs_a_writable_buffer() -> None:
    data = build_batch([Record(b"k", b"v", (), NOW)])
    with pytest.raises(TypeError):
        rb.set_base_offset_and_epoch(memoryview(data), 1, 1)


def test_empty_buffer() -> None:
    it = iter_batches(b"")
    assert list(it) == [] and it.position == 0 and not it.incomplete


def test_base_timestamp_is_the_first_records_not_the_smallest() -> None:
    data = build_batch(
        [Record(b"a", b"", (), NOW + 50), Record(b"b", b"", (), NOW), Record(b"c", b"", (), NOW + 90)]
    )
    (v,) = iter_batches(data)
    assert v.base_timestamp == NOW + 50
    assert v.max_timestamp == NOW + 90
    assert [r.timestamp for r in v.records()] == [NOW + 50, NOW, NOW + 90]


def test_missing_timestamps_get_now() -> None:
    data = build_batch([Record(b"a", b"1"), Record(b"b", b"2", (), NOW + 5)], now_ms=NOW)
    (v,) = iter_batches(data)
    assert [r.timestamp for r in v.records()] == [NOW, NOW + 5]
    before = int(time.time() * 1000)
    (v,) = iter_batches(build_batch([Record(b"a", b"1")]))
    assert before <= v.base_timestamp <= int(time.time() * 1000)


def test_log_append_time_batches_report_the_max_timestamp_per_record() -> None:
    data = build_batch(
        [Record(b"a", b"", (), NOW), Record(b"b", b"", (), NOW + 9)], timestamp_type=rb.LOG_APPEND_TIME
    )
    (v,) = iter_batches(data)
    assert v.timestamp_type == 1
    assert [r.timestamp for r in v.records()] == [NOW + 9, NOW + 9]


def test_builder_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])
    with pytest.raises(ValueError, match="unknown compression"):
        build_batch([Record(b"", b"")], compression="brotli")
    with pytest.raises(ValueError, match="timestamp_type"):
        build_batch([Record(b"", b"")], timestamp_type=2)


def test_header_matches_properties() -> None:
    data = build_batch(
        [Record(b"k", b"v", (), NOW)] * 3,
        base_offset=5,
        partition_leader_epoch=9,
        producer_id=77,
        producer_epoch=2,
        base_sequence=11,
        is_transactional=True,
        compression="lz4",
    )
    (v,) = iter_batches(data)
    assert v.header() == (
        5, len(data) - 12, 9, 2, v.crc, v.attributes, 2, NOW, NOW, 77, 2, 11, 3,
    )
    assert v.attributes == 0x10 | 3
    assert "compression=lz4" in repr(v)


def test_large_offsets_and_values_use_long_varints() -> None:
    value = b"x" * 70_000  # 3-byte varint
    recs = [Record(None, value, (), NOW + i * 100_000_000) for i in range(3)]  # 4+ byte ts deltas
    recs += [Record(b"k", b"", (), NOW)] * 9000  # offset deltas beyond the 2-byte table
    (v,) = iter_batches(build_batch(recs))
    out = v.decode_records()
    assert [r.value for r in out[:3]] == [value] * 3
    assert [r.timestamp for r in out[:3]] == [NOW, NOW + 100_000_000, NOW + 200_000_000]
    assert out[-1].offset == 9002


def test_assign_offsets_patches_every_batch_of_a_produce_request() -> None:
    a = build_batch([Record(b"a", b"1", (), NOW)] * 3, partition_leader_epoch=-1)
    b = build_batch([Record(b"b", b"2", (), NOW)] * 2, partition_leader_epoch=-1, compression="zstd")
    buf = bytearray(a + b)
    assert rb.assign_offsets(buf, 100, 4) == 105
    views = list(iter_batches(buf))
    assert [(v.base_offset, v.partition_leader_epoch, v.is_valid()) for v in views] == [
        (100, 4, True), (103, 4, True)
    ]
    assert [r.offset for v in views for r in v.records()] == [100, 101, 102, 103, 104]


def test_assign_offsets_refuses_bad_requests_without_patching() -> None:
    good = build_batch([Record(b"a", b"1", (), NOW)])
    bad = bytearray(good)
    bad[-1] ^= 1  # CRC mismatch
    for payload, reason in [
        (good + bytes(bad), "CRC"),
        (good + good[:20], "after the last complete batch"),
        (b"", "no record batches"),
    ]:
        buf = bytearray(payload)
        with pytest.raises(rb.CorruptBatchError, match=reason):
            rb.assign_offsets(buf, 50, 1)
        assert buf == payload  # untouched


def test_empty_batch_left_by_compaction_decodes_to_nothing() -> None:
    from tests.recordbatch.conftest import craft_batch

    for attributes in (0, 4):  # uncompressed and a zstd attribute with no stream
        data = craft_batch(b"", records_count=0, attributes=attributes, last_offset_delta=7)
        (v,) = iter_batches(data)
        v.validate()
        assert v.records_count == 0 and v.last_offset == 7 and v.decode_records() == []
