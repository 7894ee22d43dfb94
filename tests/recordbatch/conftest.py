"""Helpers for crafting (possibly hostile) record batches byte by byte."""

from __future__ import annotations

from crc32c import crc32c

from recordbatch import layout as L


def craft_batch(
    records_section: bytes,
    *,
    records_count: int,
    attributes: int = 0,
    base_offset: int = 0,
    last_offset_delta: int | None = None,
    magic: int = 2,
    batch_length: int | None = None,
    base_timestamp: int = 0,
    max_timestamp: int = 0,
) -> bytes:
    """A batch header with a correct CRC over whatever records section is given."""
    lod = max(records_count - 1, 0) if last_offset_delta is None else last_offset_delta
    length = L.HEADER_SIZE - L.LOG_OVERHEAD + len(records_section) if batch_length is None else batch_length
    head = bytearray(
        L.HEADER.pack(base_offset, length, 0, magic, 0, attributes, lod, base_timestamp,
                      max_timestamp, -1, -1, -1, records_count)
    )
    body = bytes(head[L.ATTRIBUTES_OFFSET:]) + records_section
    L.HEADER.__class__(">I").pack_into(head, L.CRC_OFFSET, crc32c(body))
    return bytes(head) + records_section


def recrc(batch: bytes | bytearray) -> bytes:
    """Recompute the CRC of a (tampered) batch so that decoding goes past the CRC check."""
    out = bytearray(batch)
    L.HEADER.__class__(">I").pack_into(out, L.CRC_OFFSET, crc32c(bytes(out[L.ATTRIBUTES_OFFSET:])))
    return bytes(out)
