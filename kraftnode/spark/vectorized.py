"""Vectorised decoding of many records at once with numpy, into Arrow arrays.

Why: the ``kraft-log`` source must turn millions of ~100-byte records per second
into Arrow columns on two cores.  Decoding one record at a time in Python and
building Arrow arrays from Python lists costs several microseconds per row.
Here only the unavoidable sequential step -- following each record's length
prefix to find where the next one starts -- is a Python loop (a few bytecodes per
record); every other field is decoded for all records of a chunk at once with
numpy (one gather per varint byte), and keys/values become Arrow ``binary_view``
arrays pointing into the file's buffer, which Arrow's C++ cast turns into plain
``binary`` (the copy happens in C++, not Python).

Everything is validated: a record whose fields do not exactly fill its stated
length, a negative length other than -1, or a varint longer than allowed makes
:func:`decode_chunk` return ``None`` so the caller falls back to the reference
decoder, which names the problem.  Records with headers also take that path.
"""

from __future__ import annotations

from array import array
from typing import Any, Final

import numpy as np
import pyarrow as pa

__all__ = ["record_starts", "decode_chunk", "binary_column", "Chunk"]

# zigzag value of a 1- or 2-byte varint, indexed by the 14-bit unsigned payload
_DEC: Final[tuple[int, ...]] = tuple((u >> 1) ^ -(u & 1) for u in range(1 << 14))

U8 = np.dtype(np.uint8)


def record_starts(buf: Any, sections: list[tuple[int, int, int]], out: array[int]) -> bool:
    """Append the start of every record of ``sections`` ((start, end, count) of
    record sections in ``buf``) to ``out``; False if lengths do not chain up to
    each section's end exactly."""
    dec = _DEC
    ap = out.append
    try:
        for start, end, count in sections:
            p = start
            for _ in range(count):
                ap(p)
                q = p
                b = buf[p]
                if b < 0x80:
                    p += 1 + dec[b]
                else:
                    b2 = buf[p + 1]
                    if b2 < 0x80:
                        p += 2 + dec[(b & 0x7F) | (b2 << 7)]
                    else:
                        return False  # records over 8 KiB: rare, reference path
                if p <= q or p > end:
                    return False
            if p != end:
                return False
    except IndexError:
        return False
    return True


def _uvarints(b: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Unsigned varints at every ``pos`` -> (values uint64, next positions, ok)."""
    last = len(b) - 1
    byte = b[np.minimum(pos, last)]
    val = (byte & 0x7F).astype(np.uint64)
    more = byte >= 0x80
    nxt = pos + 1
    k = 1
    while more.any():
        if k >= max_bytes:
            return val, nxt, False
        byte = b[np.minimum(pos + k, last)]
        val |= np.where(more, (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k), np.uint64(0))
        nxt = nxt + more
        more &= byte >= 0x80
        k += 1
    return val, nxt, True


def _varints(b: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray, bool]:
    u, nxt, ok = _uvarints(b, pos, max_bytes)
    v = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)
    return v, nxt, ok


def _rows(b: np.ndarray, width: int) -> np.ndarray:
    """Overlapping ``width``-byte windows of ``b``: row i is b[i:i+width] (no copy)."""
    return np.lib.stride_tricks.as_strided(b, shape=(len(b) - width + 1, width), strides=(1, 1),
                                           writeable=False)


def binary_column(data: pa.Buffer, b: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A ``binary`` array of ``data[starts[i]:starts[i]+lengths[i]]`` (length -1 = null).

    Built as an Arrow ``binary_view`` array over ``data`` -- 16 bytes per element:
    length, then either the value inline (<= 12 bytes) or its 4-byte prefix, buffer
    index and offset -- and cast to ``binary`` by Arrow (Spark does not take views).
    """
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    lens = np.maximum(lengths, 0).astype(np.int32)
    views = np.zeros((n, 4), dtype="<i4")
    views[:, 0] = lens
    raw = views.view(np.uint8).reshape(n, 16)
    long_idx = np.nonzero(lens > 12)[0]
    if len(long_idx):
        s = starts[long_idx]
        raw[long_idx, 4:8] = _rows(b, 4)[s]
        views[long_idx, 3] = s
    short_idx = np.nonzero((lens > 0) & (lens <= 12))[0]
    if len(short_idx):
        s = starts[short_idx]
        room = len(b) - 12
        if room >= 0:
            near_end = s > room
            g = _rows(b, 12)[np.minimum(s, room)]
        else:
            near_end = np.ones(len(s), bool)
            g = np.zeros((len(s), 12), np.uint8)
        g = g * (np.arange(12)[None, :] < lens[short_idx][:, None])
        for j in np.nonzero(near_end)[0].tolist():  # the last bytes of the buffer
            st, ln = int(s[j]), int(lens[short_idx[j]])
            g[j, :] = 0
            g[j, :ln] = b[st:st + ln]
        raw[short_idx, 4:16] = g
    nulls = lengths < 0
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    view_arr = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), data],
                                     null_count=null_count)
    return view_arr.cast(pa.binary())


class Chunk:
    """Per-record numpy columns of one vectorised chunk (record order)."""

    __slots__ = ("batch_index", "offset", "timestamp", "key_start", "key_len", "value_start",
                 "value_len", "record_size")

    def __init__(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            setattr(self, k, v)

    batch_index: np.ndarray
    offset: np.ndarray
    timestamp: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    record_size: np.ndarray


def decode_chunk(b: np.ndarray, starts: np.ndarray, counts: np.ndarray, base_offsets: np.ndarray,
                 base_ts: np.ndarray, append_ts: np.ndarray) -> Chunk | None:
    """Decode the records starting at ``starts`` (all batches of a chunk, in order).

    ``counts`` etc. are per batch; ``append_ts`` is the max timestamp for
    LogAppendTime batches and -1 otherwise.  None if any record is malformed or
    has headers (the caller then uses the reference decoder for these batches).
    """
    bi = np.repeat(np.arange(len(counts)), counts)
    rec_len, p, ok1 = _varints(b, starts, 5)
    end = p + rec_len
    p = p + 1  # attributes
    ts_delta, p, ok2 = _varints(b, p, 10)
    off_delta, p, ok3 = _varints(b, p, 5)
    klen, p, ok4 = _varints(b, p, 5)
    kstart = p
    p = p + np.maximum(klen, 0)
    vlen, p, ok5 = _varints(b, p, 5)
    vstart = p
    p = p + np.maximum(vlen, 0)
    hcount, p, ok6 = _varints(b, p, 5)
    if not (ok1 and ok2 and ok3 and ok4 and ok5 and ok6):
        return None
    if (p != end).any() or (hcount != 0).any() or (klen < -1).any() or (vlen < -1).any():
        return None
    ats = append_ts[bi]
    ts = np.where(ats >= 0, ats, base_ts[bi] + ts_delta)
    return Chunk(batch_index=bi, offset=base_offsets[bi] + off_delta, timestamp=ts,
                 key_start=kstart, key_len=klen, value_start=vstart, value_len=vlen,
                 record_size=end - starts)

