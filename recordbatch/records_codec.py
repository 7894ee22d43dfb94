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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from recordbatch.errors import CorruptBatchError
from recordbatch.record import Header, Record, RecordView
from recordbatch.wire import DecodeError, read_varint, read_varlong, varint

__all__ = ["encode_records", "decode_records", "MIN_RECORD_SIZE"]

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
    records: Iterable[Record], base_timestamp: int, now_ms: int
) -> tuple[list[bytes], int, int]:
    """Encode ``records`` with offset deltas 0, 1, 2, ... relative to ``base_timestamp``.

    Records whose timestamp is None get ``now_ms``.  Returns (pieces to join,
    max timestamp, record count); the caller joins the pieces once, together with
    the header, so record bytes are copied exactly once.
    """
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
