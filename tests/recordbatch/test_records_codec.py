"""The two record encoders (column-wise fast path, general per-record loop) write the
same bytes, and the fast path really is the one taken for ordinary batches."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recordbatch import Record
from recordbatch.records_codec import _encode_general, _encode_plain, encode_records

BASE = 1_700_000_000_000

# Sizes and deltas straddle the fast path's table limits (8192) and the 1/2/3-byte
# varint boundaries, so both acceptance and fallback are exercised.
length_st = st.sampled_from([0, 1, 63, 64, 100, 8100, 8191, 8192, 9000])
bytes_st = st.none() | st.binary(max_size=130) | length_st.map(bytes)
ts_st = st.none() | st.integers(min_value=BASE - 9000, max_value=BASE + 9000)
headers_st = st.sampled_from([(), (), (), [("h", b"v")], [("k", None)]])
record_st = st.builds(Record, key=bytes_st, value=bytes_st, headers=headers_st, timestamp=ts_st)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record_st, min_size=1, max_size=90),
    base_ts=st.integers(min_value=BASE - 100, max_value=BASE + 100),
    now_ms=st.integers(min_value=BASE - 9000, max_value=BASE + 9000),
)
def test_fast_path_writes_the_general_loops_bytes(
    records: list[Record], base_ts: int, now_ms: int
) -> None:
    general = _encode_general(records, base_ts, now_ms)
    plain = _encode_plain(records, base_ts, now_ms)
    if plain is not None:
        assert b"".join(plain[0]) == b"".join(general[0])
        assert plain[1:] == general[1:]
    parts, max_ts, count = encode_records(records, base_ts, now_ms)
    assert (b"".join(parts), max_ts, count) == (b"".join(general[0]), *general[1:])


def test_fast_path_taken_for_plain_batches_and_refused_otherwise() -> None:
    plain = [Record(b"k%d" % i, b"v" * 100, (), BASE + i) for i in range(1000)]
    assert _encode_plain(plain, BASE, BASE) is not None
    nulls = [Record(None, None), Record(b"", b"x", (), BASE - 5)]
    assert _encode_plain(nulls, BASE, BASE) is not None
    with_header = plain[:5] + [Record(b"k", b"v", [("h", b"x")], BASE)]
    assert _encode_plain(with_header, BASE, BASE) is None
    assert _encode_plain([Record(b"k", bytes(9000), (), BASE)], BASE, BASE) is None
    assert _encode_plain([Record(b"k", b"v", (), BASE - 9000)], BASE, BASE) is None
    many = [Record(None, b"v", (), BASE)] * 8192
    assert _encode_plain(many, BASE, BASE) is None
