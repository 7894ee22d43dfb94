"""Encoding and decoding of the records section of a v2 batch (the hot loops).

Record layout (Kafka's DefaultRecord)::

    length          varint   bytes that follow, up to the end of the headers
    attributes      int8     unused, 0
    timestampDelta  varlong  record timestamp - batch base timestamp
    offsetDelta     varint   record offset - batch base offset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headerCount     varint
    headers         [keyLength varint, key utf-8, valueLength varint, value]

Why the code looks the way it does: per-record cost dominates the producer and
consumer paths, so the loops bind everything they use to locals, look small
varints up in precomputed tables instead of calling a function, build named
tuples with ``tuple.__new__`` directly, and join every piece of a batch once.
Rare cases (long varints, headers) go through ordinary helper functions.

Encoding has two paths producing identical bytes.  The common batch -- no record
headers, fewer than 8192 records, records under 8 KiB, timestamps within 8 s of
the base -- is encoded column by column (:func:`_encode_plain`): one list
comprehension per field, each a tight loop that CPython 3.11 specialises, then
the columns are interleaved into the list of pieces with extended-slice
assignments, which run in C.  That costs about 70% of the general per-record
loop (:func:`_encode_general`), which handles everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Final

from recordbatch.errors import CorruptBatchError
from recordbatch.record import Header, Record, RecordView
from recordbatch.wire import DecodeError, read_varint, read_varlong, varint

__all__ = ["encode_records", "decode_records", "decode_null_key_values", "MIN_RECORD_SIZE"]

# Smallest possible encoded record: length(1) attributes(1) tsDelta(1) offsetDelta(1)
# keyLength(1) valueLength(1) headerCount(1).  Lets a decoder reject a lying
# recordsCount before doing any per-record work.
MIN_RECORD_SIZE: Final = 7
_MIN_RECORD_BODY: Final = MIN_RECORD_SIZE - 1

# Zigzag varint encodings of -_RADIUS .. _RADIUS-1 (1- and 2-byte varints), indexed by
# value + _RADIUS: offset deltas, small timestamp deltas and lengths of ~100-byte
# keys/values all hit the table.
_RADIUS: Final = 1 << 13
_ENC: Final[tuple[bytes, ...]] = tuple(varint(v) for v in range(-_RADIUS, _RADIUS))
# Zigzag decoding of 1- and 2-byte varints, indexed by the 14-bit unsigned value.
_DEC: Final[tuple[int, ...]] = tuple((u >> 1) ^ -(u & 1) for u in range(1 << 14))

# Column path tables, all indexed by a non-negative int below _RADIUS:
# varint(v); v + len(varint(v)) (bytes a key/value of length v takes, a null one
# taking as many as an empty one); len(varint(offset delta)) + 2 (attributes and
# header count bytes included); and b"\x00" + varint(size) + b"\x00", which is
# the previous record's empty header count, this record's length and attributes.
_ENC_U: Final = _ENC[_RADIUS:]
_FIELD: Final[tuple[int, ...]] = tuple(v + len(varint(v)) for v in range(_RADIUS))
_OD_FIXED: Final[tuple[int, ...]] = tuple(len(varint(v)) + 2 for v in range(_RADIUS))
_JOINT: Final[tuple[bytes, ...]] = tuple(b"\x00" + varint(v) + b"\x00" for v in range(_RADIUS))

_NULL: Final = b"\x01"  # varint(-1): null key/value
_NO_HEADERS: Final = b"\x00"
_ATTRS: Final = b"\x00"
_EMPTY: Final = b""


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [varint(len(headers))]
    append = parts.append
    for hkey, hvalue in headers:
        kb = hkey.encode("utf-8")
        append(varint(len(kb)))
        append(kb)
        if hvalue is None:
            append(_NULL)
        else:
            append(varint(len(hvalue)))
            append(hvalue)
    return b"".join(parts)


def encode_records(
    records: Sequence[Record], base_timestamp: int, now_ms: int
) -> tuple[list[bytes], int, int]:
    """Encode ``records`` with offset deltas 0, 1, 2, ... relative to ``base_timestamp``.

    Records whose timestamp is None get ``now_ms``.  Returns (pieces to join,
    max timestamp, record count); the caller joins the pieces once, so record
    bytes are copied exactly once.
    """
    plain = _encode_plain(records, base_timestamp, now_ms)
    if plain is not None:
        return plain
    return _encode_general(records, base_timestamp, now_ms)


def _encode_plain(
    records: Sequence[Record], base_timestamp: int, now_ms: int
) -> tuple[list[bytes], int, int] | None:
    """Column-wise encoding of a batch without record headers; None when the batch
    does not fit the tables (the general loop then encodes it, byte for byte the same).
    """
    n = len(records)
    if not 0 < n < _RADIUS:
        return None
    try:
        # A None key, value or timestamp is found by the TypeError it raises in
        # len() or +, which costs nothing when there is none (hence the Any types).
        keys: list[Any] = [r.key for r in records if not r.headers]
        if len(keys) != n:
            return None
        # Timestamps as indexes into _ENC (delta + _RADIUS).
        off = _RADIUS - base_timestamp
        try:
            idx: list[int] = [r.timestamp + off for r in records]  # type: ignore[operator]
        except TypeError:  # some timestamp is None
            idx = [(now_ms if r.timestamp is None else r.timestamp) + off for r in records]
        if min(idx) < 0:  # a negative index would wrap around silently
            return None
        hi = max(idx) - off
        # One C-level gather; IndexError if a delta is beyond the table.
        tsbs: Sequence[bytes] = itemgetter(*idx)(_ENC) if n > 1 else (_ENC[idx[0]],)
        enc_u = _ENC_U
        null = _NULL
        empty = _EMPTY
        values: list[Any] = [r.value for r in records]
        try:
            kbs = [enc_u[len(k)] for k in keys]  # TypeError if some key is None
        except TypeError:
            kbs = [null if k is None else enc_u[len(k)] for k in keys]
            keys = [empty if k is None else k for k in keys]
        try:
            vbs = [enc_u[len(v)] for v in values]
        except TypeError:
            vbs = [null if v is None else enc_u[len(v)] for v in values]
            values = [empty if v is None else v for v in values]
        field = _FIELD
        joint = _JOINT
        heads = [
            joint[field[len(k)] + field[len(v)] + len(t) + o]
            for k, v, t, o in zip(keys, values, tsbs, _OD_FIXED[:n], strict=True)
        ]
    except (TypeError, IndexError):
        # Odd types or values beyond the tables: the general loop either encodes
        # them or raises its own error.
        return None
    heads[0] = heads[0][1:]  # no previous record: drop its header count byte
    m = 7 * n
    parts = [_NO_HEADERS] * (m + 1)  # the last piece is the last record's header count
    parts[0:m:7] = heads
    parts[1:m:7] = tsbs
    parts[2:m:7] = _ENC_U[:n]
    parts[3:m:7] = kbs
    parts[4:m:7] = keys
    parts[5:m:7] = vbs
    parts[6:m:7] = values
    return parts, hi if hi > base_timestamp else base_timestamp, n


def _encode_general(
    records: Sequence[Record], base_timestamp: int, now_ms: int
) -> tuple[list[bytes], int, int]:
    """The per-record loop: any headers, sizes, timestamps and record counts."""
    parts: list[bytes] = []
    extend = parts.extend
    enc = _ENC
    radius = _RADIUS
    top = 2 * radius
    null = _NULL
    empty = _EMPTY
    attrs = _ATTRS
    no_headers = _NO_HEADERS
    max_ts = base_timestamp
    ts_index = radius - base_timestamp  # ts + ts_index indexes enc for varint(ts - base)
    od_index = radius  # indexes enc for varint(offset delta)
    for r in records:
        ts = r.timestamp
        if ts is None:
            ts = now_ms
        if ts > max_ts:
            max_ts = ts
        i = ts + ts_index
        tsb = enc[i] if 0 <= i < top else varint(ts - base_timestamp)
        odb = enc[od_index] if od_index < top else varint(od_index - radius)
        key = r.key
        if key is None:
            kb = null
            key = empty
            size = 2  # attributes + null key length
        else:
            size = len(key)
            kb = enc[size + radius] if size < radius else varint(size)
            size += len(kb) + 1
        value = r.value
        if value is None:
            vb = null
            value = empty
            size += 1
        else:
            vlen = len(value)
            vb = enc[vlen + radius] if vlen < radius else varint(vlen)
            size += vlen + len(vb)
        headers = r.headers
        if headers:
            hb = _encode_headers(headers)
            size += len(tsb) + len(odb) + len(hb)
        else:
            hb = no_headers
            size += len(tsb) + len(odb) + 1
        extend(
            (
                enc[size + radius] if size < radius else varint(size),
                attrs,
                tsb,
                odb,
                kb,
                key,
                vb,
                value,
                hb,
            )
        )
        od_index += 1
    return parts, max_ts, od_index - radius


def _decode_headers(data: bytes, pos: int, end: int) -> tuple[tuple[Header, ...], int]:
    count, pos = read_varint(data, pos)
    if count < 0:
        raise CorruptBatchError(f"invalid negative record header count {count}")
    if count * 2 > end - pos:  # each header takes at least 2 bytes
        raise CorruptBatchError(f"record header count {count} exceeds the record's size")
    headers: list[Header] = []
    append = headers.append
    for _ in range(count):
        klen, pos = read_varint(data, pos)
        if klen < 0:
            raise CorruptBatchError(f"invalid negative header key length {klen}")
        if pos + klen > end:
            raise CorruptBatchError("header key extends past the end of its record")
        try:
            hkey = data[pos : pos + klen].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptBatchError("header key is not valid UTF-8") from None
        pos += klen
        vlen, pos = read_varint(data, pos)
        if vlen >= 0:
            append((hkey, data[pos : pos + vlen]))
            pos += vlen
        else:
            append((hkey, None))
    return tuple(headers), pos


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> list[RecordView]:
    """Decode exactly ``count`` records filling all of ``data``.

    ``log_append_time`` (the batch's max timestamp) replaces every record's own
    timestamp when not None -- Kafka's rule for LogAppendTime batches.  Any
    truncation, size mismatch or trailing byte raises :class:`CorruptBatchError`
    naming the record index.
    """
    n = len(data)
    if count < 0:
        raise CorruptBatchError(f"invalid negative record count {count}")
    if count * MIN_RECORD_SIZE > n:
        raise CorruptBatchError(
            f"record count {count} cannot fit in {n} bytes of records"
            f" (each record takes at least {MIN_RECORD_SIZE} bytes)"
        )
    out: list[RecordView] = []
    append = out.append
    new = tuple.__new__
    rv = RecordView
    dec = _DEC
    min_body = _MIN_RECORD_BODY
    no_headers: tuple[Header, ...] = ()
    pos = 0
    i = 0
    try:
        for i in range(count):  # noqa: B007 -- i names the bad record in errors
            # Each varint: 1-byte and 2-byte forms inline via the table, longer ones
            # through the generic reader.
            b = data[pos]
            if b < 128:
                length = dec[b]
                pos += 1
            elif data[pos + 1] < 128:
                length = dec[(data[pos + 1] << 7) | (b & 127)]
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length < min_body or end > n:
                raise CorruptBatchError(
                    f"invalid record size {length} with {n - pos} bytes remaining"
                )
            attrs = data[pos]
            pos += 1
            b = data[pos]
            if b < 128:
                tsd = dec[b]
                pos += 1
            elif data[pos + 1] < 128:
                tsd = dec[(data[pos + 1] << 7) | (b & 127)]
                pos += 2
            else:
                tsd, pos = read_varlong(data, pos)
            b = data[pos]
            if b < 128:
                od = dec[b]
                pos += 1
            elif data[pos + 1] < 128:
                od = dec[(data[pos + 1] << 7) | (b & 127)]
                pos += 2
            else:
                od, pos = read_varint(data, pos)
            b = data[pos]
            if b < 128:
                klen = dec[b]
                pos += 1
            elif data[pos + 1] < 128:
                klen = dec[(data[pos + 1] << 7) | (b & 127)]
                pos += 2
            else:
                klen, pos = read_varint(data, pos)
            if klen >= 0:
                key: bytes | None = data[pos : pos + klen]
                pos += klen
            else:
                key = None
            b = data[pos]
            if b < 128:
                vlen = dec[b]
                pos += 1
            elif data[pos + 1] < 128:
                vlen = dec[(data[pos + 1] << 7) | (b & 127)]
                pos += 2
            else:
                vlen, pos = read_varint(data, pos)
            if vlen >= 0:
                value: bytes | None = data[pos : pos + vlen]
                pos += vlen
            else:
                value = None
            if data[pos] == 0:
                headers = no_headers
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, end)
            if pos != end:
                raise CorruptBatchError(
                    f"invalid record size: expected to read {length} bytes"
                    f" in record payload, but read {length + pos - end}"
                )
            append(
                new(
                    rv,
                    (
                        base_offset + od,
                        base_timestamp + tsd if log_append_time is None else log_append_time,
                        key,
                        value,
                        headers,
                        attrs,
                    ),
                )
            )
    except CorruptBatchError as e:
        raise CorruptBatchError(f"record {i}: {e}") from None
    except (IndexError, DecodeError) as e:
        raise CorruptBatchError(f"record {i}: truncated or malformed ({e})") from None
    if pos != n:
        raise CorruptBatchError(f"{n - pos} unconsumed bytes after all {count} records")
    return out


def decode_null_key_values(data: bytes, count: int) -> list[bytes] | None:
    """The values of ``count`` records filling ``data`` (an uncompressed batch's records section)
    when every one has a null key, a non-null value and no header -- a metadata snapshot's
    records -- without a record object each; None for anything else, and for any record not
    taken exactly as written: :func:`decode_records` then decides, and names what is wrong.
    Only the one- and two-byte forms of the varints are read here; a record is taken only when
    its length, its fields and its end agree exactly, and the data only when its records fill it."""
    n = len(data)
    zz = _DEC
    out: list[bytes] = []
    append = out.append
    pos = 0
    try:
        for _ in range(count):
            c = data[pos]
            if c < 128:
                length = zz[c]
                pos += 1
            elif data[pos + 1] < 128:
                length = zz[(data[pos + 1] << 7) | (c & 127)]
                pos += 2
            else:
                return None
            end = pos + length
            if length < 6 or end > n:
                return None
            # attributes (unused), then the timestamp and offset deltas (one or two bytes each)
            pos += 1
            for _field in (0, 1):
                if data[pos] < 128:
                    pos += 1
                elif data[pos + 1] < 128:
                    pos += 2
                else:
                    return None
            if data[pos] != 1:   # key length -1: a null key
                return None
            c = data[pos + 1]
            if c < 128:
                vlen = zz[c]
                pos += 2
            elif data[pos + 2] < 128:
                vlen = zz[(data[pos + 2] << 7) | (c & 127)]
                pos += 3
            else:
                return None
            vend = pos + vlen
            if vlen < 0 or vend + 1 != end or data[vend] != 0:   # then no header, and the record's end
                return None
            append(data[pos:vend])
            pos = end
    except IndexError:
        return None
    return out if pos == n else None
