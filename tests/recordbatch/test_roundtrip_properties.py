"""Property tests: any batch we build decodes back to the same header and records,
for every codec and every combination of batch attributes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordbatch as rb
from recordbatch import Record, build_batch, iter_batches

NOW = 1_700_000_000_000

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
)
record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=300),
    headers=headers_st,
    timestamp=st.none() | st.integers(min_value=-(2**40), max_value=2**45),
)
records_st = st.lists(record_st, min_size=1, max_size=40)
codec_st = st.sampled_from(rb.CODEC_NAMES)

SETTINGS = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


ATTRIBUTE_COMBINATIONS = [
    (ts_type, txn, ctl, horizon)
    for ts_type in (rb.CREATE_TIME, rb.LOG_APPEND_TIME)
    for txn in (False, True)
    for ctl in (False, True)
    for horizon in (False, True)
]


@pytest.mark.parametrize("compression", rb.CODEC_NAMES)
@pytest.mark.parametrize(
    "timestamp_type, is_transactional, is_control, has_horizon", ATTRIBUTE_COMBINATIONS
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_st,
    horizon_ms=st.integers(min_value=0, max_value=2**45),
    base_offset=st.integers(min_value=0, max_value=2**62),
    epoch=st.integers(min_value=-1, max_value=2**31 - 1),
    producer_id=st.integers(min_value=-1, max_value=2**63 - 1),
    producer_epoch=st.integers(min_value=-1, max_value=2**15 - 1),
    base_sequence=st.integers(min_value=-1, max_value=2**31 - 1),
)
def test_build_then_decode_round_trips(
    compression: str,
    timestamp_type: int,
    is_transactional: bool,
    is_control: bool,
    has_horizon: bool,
    records: list[Record],
    horizon_ms: int,
    base_offset: int,
    epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> None:
    """Every codec x every attribute combination (16), random records and header fields."""
    delete_horizon = horizon_ms if has_horizon else None
    data = build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        compression=compression,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        now_ms=NOW,
        delete_horizon_ms=delete_horizon,
    )
    it = iter_batches(data)
    (batch,) = list(it)
    assert it.position == len(data) and not it.incomplete
    batch.validate()
    assert batch.is_valid()

    stamps = [NOW if r.timestamp is None else r.timestamp for r in records]
    assert batch.magic == 2
    assert batch.base_offset == base_offset
    assert batch.partition_leader_epoch == epoch
    assert batch.size_in_bytes == len(data) == batch.batch_length + 12
    assert batch.compression == compression
    assert batch.timestamp_type == timestamp_type
    assert batch.is_transactional is is_transactional
    assert batch.is_control is is_control
    assert batch.has_delete_horizon is (delete_horizon is not None)
    assert batch.last_offset_delta == len(records) - 1
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.next_offset == batch.last_offset + 1
    expected_base_ts = stamps[0] if delete_horizon is None else delete_horizon
    assert batch.base_timestamp == expected_base_ts
    assert batch.max_timestamp == max(stamps)
    assert batch.producer_id == producer_id
    assert batch.producer_epoch == producer_epoch
    assert batch.base_sequence == base_sequence
    assert batch.records_count == len(records)
    assert batch.crc == batch.compute_crc()

    decoded = list(batch.records())
    assert [d.offset for d in decoded] == list(range(base_offset, base_offset + len(records)))
    if timestamp_type == rb.LOG_APPEND_TIME:
        assert [d.timestamp for d in decoded] == [max(stamps)] * len(records)
    else:
        assert [d.timestamp for d in decoded] == stamps
    assert [d.key for d in decoded] == [r.key for r in records]
    assert [d.value for d in decoded] == [r.value for r in records]
    assert [d.headers for d in decoded] == [tuple(r.headers) for r in records]
    assert all(d.attributes == 0 for d in decoded)


@SETTINGS
@given(records=records_st, compression=codec_st)
def test_rebuilding_decoded_records_is_byte_identical(
    records: list[Record], compression: str
) -> None:
    """Encoding is deterministic: decode + rebuild reproduces the batch exactly."""
    data = build_batch(records, base_offset=7, compression=compression, now_ms=NOW)
    (batch,) = iter_batches(data)
    again = build_batch(
        [Record(r.key, r.value, r.headers, r.timestamp) for r in batch.records()],
        base_offset=7,
        compression=compression,
        now_ms=NOW,
    )
    assert again == data


@settings(max_examples=50, deadline=None)
@given(batches=st.lists(st.tuples(records_st, codec_st), min_size=1, max_size=6))
def test_concatenated_batches_iterate_in_order(batches: list[tuple[list[Record], str]]) -> None:
    offset = 0
    buf = bytearray()
    expected = []
    for records, codec in batches:
        buf += build_batch(records, base_offset=offset, compression=codec, now_ms=NOW)
        expected.append((offset, len(records), codec))
        offset += len(records)
    views = list(iter_batches(buf))
    assert [(v.base_offset, v.records_count, v.compression) for v in views] == expected
    assert all(v.is_valid() for v in views)
    # The views share the caller's buffer: no copies were made.
    assert all(v.buffer.obj is buf for v in views)
