"""Cross-checks against independent, genuine v2 record batch implementations:
kafka-python's pure-Python DefaultRecordBatch(Builder) and aiokafka's (a C
extension when built).  Their batches decode with ours to the same records, ours
decode with theirs, and uncompressed bytes are identical."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recordbatch import Record, build_batch, iter_batches

kafka_records = pytest.importorskip("kafka.record.default_records")
aiokafka_records = pytest.importorskip("aiokafka.record.default_records")

pytestmark = pytest.mark.interop

IMPLS: dict[str, tuple[Any, Any]] = {
    "kafka-python": (
        kafka_records.DefaultRecordBatchBuilder,
        kafka_records.DefaultRecordBatch,
    ),
    "aiokafka": (
        aiokafka_records.DefaultRecordBatchBuilder,
        aiokafka_records.DefaultRecordBatch,
    ),
}
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
)
# Values repeat themselves so that compression pays off: kafka-python silently
# writes an uncompressed batch when compressing would not shrink it.
value_st = st.none() | st.binary(max_size=60).map(lambda b: b * 4)
record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=30),
    value=value_st,
    headers=headers_st,
    timestamp=st.integers(min_value=0, max_value=2**43),
)
records_st = st.lists(record_st, min_size=1, max_size=30)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def their_build(impl: str, records: list[Record], codec: str, pid: int, pepoch: int, seq: int) -> bytes:
    builder_cls, _ = IMPLS[impl]
    builder = builder_cls(2, CODECS[codec], 0, pid, pepoch, seq, 1 << 30)
    for i, r in enumerate(records):
        builder.append(i, r.timestamp, r.key, r.value, list(r.headers))
    return bytes(builder.build())


def their_decode(impl: str, data: bytes) -> list[tuple[Any, ...]]:
    _, reader_cls = IMPLS[impl]
    batch = reader_cls(data)
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]


def our_decode(data: bytes) -> list[tuple[Any, ...]]:
    (batch,) = iter_batches(data)
    batch.validate()
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records()]


def expected(records: list[Record]) -> list[tuple[Any, ...]]:
    return [(i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)]


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("codec", sorted(CODECS))
@SETTINGS
@given(
    records=records_st,
    producer=st.sampled_from([(-1, -1, -1), (12345, 3, 77), (2**62, 32767, 2**31 - 100)]),
)
def test_their_batches_decode_with_ours(
    impl: str, codec: str, records: list[Record], producer: tuple[int, int, int]
) -> None:
    data = their_build(impl, records, codec, *producer)
    (batch,) = iter_batches(data)
    assert our_decode(data) == expected(records)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.records_count == len(records)
    assert batch.max_timestamp == max(r.timestamp or 0 for r in records)
    assert batch.base_timestamp == records[0].timestamp


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("codec", sorted(CODECS))
@SETTINGS
@given(records=records_st)
def test_our_batches_decode_with_theirs(impl: str, codec: str, records: list[Record]) -> None:
    data = build_batch(records, compression=codec)
    assert their_decode(impl, data) == expected(records)
    _, reader_cls = IMPLS[impl]
    theirs = reader_cls(data)
    assert theirs.compression_type == CODECS[codec]
    assert theirs.base_offset == 0 and theirs.next_offset == len(records)


@pytest.mark.parametrize("impl", sorted(IMPLS))
@SETTINGS
@given(
    records=records_st,
    producer=st.sampled_from([(-1, -1, -1), (99, 0, 0), (2**40, 5, 1000)]),
)
def test_uncompressed_bytes_identical(
    impl: str, records: list[Record], producer: tuple[int, int, int]
) -> None:
    # Java's producer (and aiokafka) leave the partition leader epoch at -1 (the
    # broker assigns it); kafka-python writes 0.  Build ours the same way.
    epoch = -1 if impl == "aiokafka" else 0
    pid, pepoch, seq = producer
    ours = build_batch(
        records,
        partition_leader_epoch=epoch,
        producer_id=pid,
        producer_epoch=pepoch,
        base_sequence=seq,
    )
    assert ours == their_build(impl, records, "none", pid, pepoch, seq)


def test_large_batch_with_long_varints_matches_kafka_python() -> None:
    """More than 8192 records and values >8 KiB take the multi-byte varint paths."""
    records = [
        Record(b"k%d" % i, bytes([i % 251]) * (i % 3 * 5000), [("h", b"v" * 300)] if i % 1000 == 0 else [], 10**12 + i * 1000)
        for i in range(9000)
    ]
    ours = build_batch(records)
    assert ours == their_build("kafka-python", records, "none", -1, -1, -1)
    assert our_decode(ours) == expected(records)


def test_zstd_batch_byte_identical_to_kafka_pythons() -> None:
    """kafka-python compresses with ``zstandard.ZstdCompressor()`` (level 3, content
    size written, no checksum); ours uses the same level and frame options, so a
    batch of ordinary records -- the benchmark's shape, taking the column encoder --
    comes out byte for byte the same, and aiokafka (level 3 too) differs only in the
    partition leader epoch it leaves at -1, which the CRC does not cover."""
    records = [
        Record(b"key-%06d" % i, (b"%08d value " % i) * 9, (), 1_700_000_000_000 + i)
        for i in range(1000)
    ]
    ours = build_batch(records, compression="zstd")
    assert ours == their_build("kafka-python", records, "zstd", -1, -1, -1)
    aio = their_build("aiokafka", records, "zstd", -1, -1, -1)
    assert ours[21:] == aio[21:] and ours[:12] == aio[:12]
    assert our_decode(ours) == expected(records)
