"""A consumer's view of the quorum's log: the group coordinator's batches as empty batches
(:func:`hide_group_batches`, used by the consumer Fetch in kraftnode.server.handlers.applications)."""

from __future__ import annotations

from typing import Any

from kraftnode.groups.records import RECORD_KEY_PREFIX


def hide_group_batches(records: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """A consumer's view of the log without the coordinator's batches: each batch of group
    records becomes an empty batch over the same offsets (the header alone, no records,
    as a compacted Kafka log keeps one), so consumers step over it as over compacted-away
    records. Without this a client that commits after every batch it receives (KafkaJS,
    the verifiable consumer) would consume its own OffsetCommit record, commit again, and
    so on, for ever. Raft replicas and raw readers see the log as it is."""
    import struct as _struct

    from crc32c import crc32c

    from recordbatch import CorruptBatchError, iter_batches
    from recordbatch import layout as L

    view = memoryview(records) if not isinstance(records, memoryview) else records
    if len(view) < L.RECORDS_OFFSET:
        return records
    out: bytearray | None = None
    kept = 0
    it = iter_batches(view)
    try:
        for b in it:
            start = it.position - b.size_in_bytes
            if not _is_group_batch(b):
                continue
            if out is None:
                out = bytearray()
            out += view[kept:start]
            header = bytearray(view[start:start + L.RECORDS_OFFSET])
            _struct.pack_into(">i", header, L.LENGTH_OFFSET, L.RECORDS_OFFSET - L.LENGTH_OFFSET - 4)
            _struct.pack_into(">i", header, L.RECORDS_COUNT_OFFSET, 0)
            _struct.pack_into(">I", header, L.CRC_OFFSET, crc32c(bytes(header[L.ATTRIBUTES_OFFSET:])))
            out += header
            kept = it.position
    except CorruptBatchError:
        return records
    if out is None:
        return records
    out += view[kept:]
    return out


def _is_group_batch(b: Any) -> bool:
    """A batch the coordinator wrote: no producer id, not control, uncompressed, its first
    record keyed with the reserved prefix (the coordinator writes only such batches)."""
    from recordbatch.layout import RECORDS_OFFSET
    from recordbatch.wire import read_varint, read_varlong

    if b.is_control or b.producer_id >= 0 or b.compression_id != 0 or b.records_count <= 0:
        return False
    try:
        data = b.buffer[RECORDS_OFFSET:]
        _length, pos = read_varint(data, 0)
        pos += 1  # attributes
        _ts, pos = read_varlong(data, pos)
        _od, pos = read_varint(data, pos)
        klen, pos = read_varint(data, pos)
        return klen >= len(RECORD_KEY_PREFIX) and bytes(data[pos:pos + len(RECORD_KEY_PREFIX)]) == RECORD_KEY_PREFIX
    except (ValueError, IndexError):
        return False
