"""Building v2 record batches.

The leader builds batches for its own appends (control records, metadata) and
assigns offsets and timestamps here; batches from producers are never rebuilt,
only patched in place (see :func:`recordbatch.set_base_offset_and_epoch`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from crc32c import crc32c

from recordbatch import layout as L
from recordbatch.compression import compress
from recordbatch.record import Record
from recordbatch.records_codec import encode_records

__all__ = ["build_batch", "codec_id"]

_INT32_MAX = 2**31 - 1


def codec_id(compression: str) -> int:
    """Kafka's codec id for a compression name (none, gzip, snappy, lz4, zstd)."""
    try:
        return L.CODEC_IDS[compression]
    except KeyError:
        raise ValueError(
            f"unknown compression {compression!r}: expected one of {', '.join(L.CODEC_NAMES)}"
        ) from None


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = 0,
    compression: str = "none",
    timestamp_type: int = L.CREATE_TIME,
    producer_id: int = L.NO_PRODUCER_ID,
    producer_epoch: int = L.NO_PRODUCER_EPOCH,
    base_sequence: int = L.NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    now_ms: int | None = None,
    delete_horizon_ms: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch with offsets base_offset, base_offset+1, ...

    The base timestamp is the first record's timestamp (as Kafka does, even when a
    later record is older); the max timestamp is the largest.  Records with
    timestamp None are stamped ``now_ms`` (default: the current time).  With
    ``delete_horizon_ms`` the delete-horizon attribute is set and the base
    timestamp holds the horizon, as log compaction writes it.

    A compressed batch always uses the requested codec, even when compression
    does not shrink the records (Java's producer behaves the same way).
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if len(records) > _INT32_MAX:
        raise ValueError("too many records for one batch")
    if timestamp_type not in (L.CREATE_TIME, L.LOG_APPEND_TIME):
        raise ValueError(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not {timestamp_type}")
    codec = codec_id(compression)
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        first_ts = records[0].timestamp
        base_ts = now_ms if first_ts is None else first_ts
    parts, max_ts, count = encode_records(records, base_ts, now_ms)
    if delete_horizon_ms is not None:
        # max_ts started from the horizon; recompute from the records themselves.
        max_ts = max(now_ms if r.timestamp is None else r.timestamp for r in records)
    attributes = codec
    if timestamp_type == L.LOG_APPEND_TIME:
        attributes |= L.TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= L.TRANSACTIONAL_MASK
    if is_control:
        attributes |= L.CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= L.DELETE_HORIZON_MASK
    body = b"".join(parts)
    if codec != L.CODEC_NONE:
        body = compress(codec, body, compression_level)
    covered = L.CRC_COVERED_HEADER.pack(
        attributes,
        count - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(body, crc32c(covered))
    head = L.HEADER.pack(
        base_offset,
        L.HEADER_SIZE - L.LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        L.CURRENT_MAGIC,
        crc,
        attributes,
        count - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    return head + body
