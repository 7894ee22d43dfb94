"""Hostile and damaged input: every failure is a CorruptBatchError (a DecodeError)
with a reason, never a crash, a hang or an unbounded allocation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordbatch as rb
from recordbatch import CorruptBatchError, Record, build_batch, iter_batches
from recordbatch import layout as L
from recordbatch.wire import DecodeError
from tests.recordbatch.conftest import craft_batch, recrc

NOW = 1_700_000_000_000
RECORDS = [
    Record(b"key-%d" % i, b"value-%d " % i * 10, [("h", b"x")] if i % 2 else (), NOW + i)
    for i in range(20)
]


def sample(codec: str = "none", base_offset: int = 100) -> bytes:
    return build_batch(RECORDS, base_offset=base_offset, compression=codec, now_ms=NOW)


def test_corrupt_batch_error_is_a_decode_error() -> None:
    assert issubclass(CorruptBatchError, DecodeError)
    assert issubclass(rb.DecompressionLimitError, CorruptBatchError)


# ---------------------------------------------------------------- CRC


@pytest.mark.parametrize("codec", rb.CODEC_NAMES)
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_flipped_bit_in_crc_coverage_is_caught(codec: str, data: st.DataObject) -> None:
    original = sample(codec)
    bit = data.draw(st.integers(min_value=L.CRC_OFFSET * 8, max_value=len(original) * 8 - 1))
    damaged = bytearray(original)
    damaged[bit // 8] ^= 1 << (bit % 8)
    (batch,) = iter_batches(bytes(damaged))
    assert not batch.is_valid()
    with pytest.raises(CorruptBatchError, match="CRC"):
        batch.validate()


def test_base_offset_and_epoch_are_outside_the_crc() -> None:
    damaged = bytearray(sample())
    rb.set_base_offset_and_epoch(damaged, 999, 42)
    (batch,) = iter_batches(damaged)
    assert batch.is_valid()
    assert (batch.base_offset, batch.partition_leader_epoch) == (999, 42)
    assert [r.offset for r in batch.records()] == list(range(999, 999 + len(RECORDS)))


# ---------------------------------------------------------------- truncation


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_every_truncation_is_incomplete_not_an_error(codec: str) -> None:
    one = sample(codec)
    two = one + sample(codec, base_offset=120)
    for cut in range(len(two)):
        it = iter_batches(two[:cut])
        views = list(it)
        assert len(views) == (1 if cut >= len(one) else 0)
        assert it.position == (len(one) if cut >= len(one) else 0)
        assert it.incomplete == (cut not in (0, len(one)))
    it = iter_batches(two)
    assert len(list(it)) == 2 and it.position == len(two) and not it.incomplete


def test_truncated_single_batch_view_is_refused() -> None:
    data = sample()
    for cut in (0, 5, 16, 17, 60, len(data) - 1):
        with pytest.raises(CorruptBatchError):
            rb.BatchView(data[:cut])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_truncated_compressed_stream_is_corrupt(codec: str) -> None:
    full = sample(codec)
    attrs = L.CODEC_IDS[codec]
    section = full[L.HEADER_SIZE :]
    for cut in sorted({1, 5, len(section) // 2, len(section) - 1}):
        data = craft_batch(section[:cut], records_count=len(RECORDS), attributes=attrs)
        (batch,) = iter_batches(data)
        batch.validate()  # the CRC matches: the damage is inside the stream
        with pytest.raises(CorruptBatchError):
            batch.decode_records()


# ---------------------------------------------------------------- lying lengths


def test_batch_length_below_minimum_is_corrupt() -> None:
    data = bytearray(sample())
    struct.pack_into(">i", data, L.LENGTH_OFFSET, 10)
    with pytest.raises(CorruptBatchError, match="minimum"):
        list(iter_batches(data))
    struct.pack_into(">i", data, L.LENGTH_OFFSET, -5)
    with pytest.raises(CorruptBatchError, match="minimum"):
        list(iter_batches(data))


def test_batch_length_beyond_limit_is_corrupt_not_incomplete() -> None:
    data = bytearray(sample())
    struct.pack_into(">i", data, L.LENGTH_OFFSET, 2**31 - 1)
    it = iter_batches(data)
    assert list(it) == [] and it.incomplete  # might be a cut Fetch response
    with pytest.raises(CorruptBatchError, match="limit"):
        list(iter_batches(data, max_batch_bytes=1 << 20))


def test_batch_length_disagreeing_with_buffer_is_refused_by_view() -> None:
    data = sample()
    with pytest.raises(CorruptBatchError, match="length"):
        rb.BatchView(data + b"\x00")


@pytest.mark.parametrize("count", [0, 19, 21, 1000, 2**31 - 1, -1, -(2**31)])
def test_lying_record_count(count: int) -> None:
    data = craft_batch(sample()[L.HEADER_SIZE :], records_count=count)
    (batch,) = iter_batches(data)
    if count < 0 or count == 2**31 - 1:  # impossible on its face: refused without decoding
        with pytest.raises(CorruptBatchError, match="count"):
            batch.validate()
    with pytest.raises(CorruptBatchError):
        batch.decode_records()


def test_lying_record_length_and_field_lengths() -> None:
    section = bytearray(sample()[L.HEADER_SIZE :])
    cases = []
    # record length varint claims more / fewer bytes than the record has
    for first in (0x7E, 0x02, 0x0C):
        s = bytearray(section)
        s[0] = first
        cases.append(bytes(s))
    # key length (byte 4: length(1-2 bytes) attrs tsDelta offsetDelta) made huge
    s = bytearray(section)
    s[5:6] = b"\xfe\xff\xff\xff\x0f"
    cases.append(bytes(s))
    # trailing garbage after the last record
    cases.append(bytes(section) + b"\x00")
    for case in cases:
        (batch,) = iter_batches(craft_batch(case, records_count=len(RECORDS)))
        with pytest.raises(CorruptBatchError):
            batch.decode_records()


def test_hostile_header_count_and_negative_header_key() -> None:
    body = b"\x00\x00\x00\x01\x01" + b"\xfe\xff\xff\xff\x07"  # attrs ts od key=null value=null hc=huge
    rec = bytes([len(body) * 2]) + body
    (batch,) = iter_batches(craft_batch(rec, records_count=1))
    with pytest.raises(CorruptBatchError, match="header"):
        batch.decode_records()
    body = b"\x00\x00\x00\x01\x01" + b"\x02" + b"\x03" + b"\x01"  # 1 header, key length -2
    rec = bytes([len(body) * 2]) + body
    (batch,) = iter_batches(craft_batch(rec, records_count=1))
    with pytest.raises(CorruptBatchError, match="negative header key"):
        batch.decode_records()
    body = b"\x00\x00\x00\x01\x01" + b"\x02" + b"\x02\xff" + b"\x01"  # header key not UTF-8
    rec = bytes([len(body) * 2]) + body
    (batch,) = iter_batches(craft_batch(rec, records_count=1))
    with pytest.raises(CorruptBatchError, match="UTF-8"):
        batch.decode_records()


def test_overlong_varint_is_corrupt() -> None:
    rec = b"\xff\xff\xff\xff\xff\xff\x01" + b"\x00" * 10
    (batch,) = iter_batches(craft_batch(rec, records_count=1))
    with pytest.raises(CorruptBatchError):
        batch.decode_records()


# ---------------------------------------------------------------- magic, codec


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_refused_clearly(magic: int) -> None:
    data = bytearray(sample())
    data[L.MAGIC_OFFSET] = magic
    with pytest.raises(CorruptBatchError, match=f"magic {magic}.*unsupported"):
        list(iter_batches(data))
    with pytest.raises(CorruptBatchError, match=f"magic {magic}"):
        rb.BatchView(bytes(data))


@pytest.mark.parametrize("magic", [3, 127, 255])
def test_unknown_magic_is_refused(magic: int) -> None:
    data = bytearray(sample())
    data[L.MAGIC_OFFSET] = magic
    with pytest.raises(CorruptBatchError, match="magic"):
        list(iter_batches(data))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_is_corrupt(codec_id: int) -> None:
    (batch,) = iter_batches(craft_batch(b"\x00" * 8, records_count=1, attributes=codec_id))
    assert batch.compression == f"unknown({codec_id})"
    with pytest.raises(CorruptBatchError, match="codec"):
        batch.validate()
    with pytest.raises(CorruptBatchError, match="codec"):
        batch.decode_records()


# ---------------------------------------------------------------- fuzz


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.binary(max_size=300))
def test_random_bytes_only_ever_raise_corrupt_batch(garbage: bytes) -> None:
    try:
        for batch in iter_batches(garbage, max_batch_bytes=1 << 20):
            batch.is_valid()
            batch.decode_records(max_decompressed_bytes=1 << 20)
    except CorruptBatchError:
        pass


@pytest.mark.parametrize("codec", rb.CODEC_NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_batches_with_fixed_crc_only_raise_corrupt_batch(
    codec: str, data: st.DataObject
) -> None:
    """Tamper with the bytes after the CRC and fix the CRC up, so the decoder itself
    (not the checksum) has to cope with whatever the mutation produced."""
    original = bytearray(sample(codec))
    n = data.draw(st.integers(min_value=1, max_value=4))
    for _ in range(n):
        pos = data.draw(st.integers(min_value=L.ATTRIBUTES_OFFSET, max_value=len(original) - 1))
        original[pos] = data.draw(st.integers(min_value=0, max_value=255))
    try:
        for batch in iter_batches(recrc(original)):
            batch.validate()
            batch.decode_records(max_decompressed_bytes=1 << 20)
    except CorruptBatchError:
        pass
