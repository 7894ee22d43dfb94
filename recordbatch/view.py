"""Zero-copy views over v2 record batches in a buffer.

The replication path (Fetch responses, segment files) moves batches as bytes:
:func:`iter_batches` walks a buffer reading only each batch's length and magic,
and every :class:`BatchView` reads header fields straight from a memoryview of
the caller's buffer on access.  Nothing is copied and records are not decoded
unless :meth:`BatchView.records` is called; CRC validation is on demand.
"""

from __future__ import annotations

from collections.abc import Iterator

from crc32c import crc32c

from recordbatch import layout as L
from recordbatch.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from recordbatch.errors import CorruptBatchError
from recordbatch.record import RecordView
from recordbatch.records_codec import MIN_RECORD_SIZE, decode_records
from recordbatch.wire import I8, I16, I32, I64, U32

__all__ = [
    "BatchView",
    "BatchIterator",
    "iter_batches",
    "set_base_offset_and_epoch",
    "assign_offsets",
]

_Buffer = bytes | bytearray | memoryview

_i64 = I64.unpack_from
_i32 = I32.unpack_from
_i16 = I16.unpack_from
_i8 = I8.unpack_from
_u32 = U32.unpack_from


def _magic_error(magic: int) -> CorruptBatchError:
    if magic in (0, 1):
        return CorruptBatchError(
            f"record batch magic {magic} (legacy message format v{magic}) is unsupported:"
            " only magic 2 (v2 record batches) is accepted; KRaft logs are v2 only"
        )
    return CorruptBatchError(f"unknown record batch magic {magic} (only magic 2 is supported)")


def _as_bytes_view(buffer: _Buffer) -> memoryview:
    view = memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class BatchView:
    """One v2 record batch, backed by a memoryview of exactly its bytes.

    Header fields are properties reading the buffer, so a view reflects in-place
    patches made by :func:`set_base_offset_and_epoch`.  Construction checks only
    what is needed to delimit the batch (size and magic); call :meth:`validate`
    or :meth:`is_valid` to check the CRC.
    """

    __slots__ = ("buffer",)

    buffer: memoryview

    def __init__(self, buffer: _Buffer) -> None:
        view = _as_bytes_view(buffer)
        n = len(view)
        if n < L.HEADER_SIZE_UP_TO_MAGIC:
            raise CorruptBatchError(f"record batch of {n} bytes is shorter than its header")
        magic = view[L.MAGIC_OFFSET]
        if magic != L.CURRENT_MAGIC:
            raise _magic_error(magic if magic < 128 else magic - 256)
        if n < L.HEADER_SIZE:
            raise CorruptBatchError(
                f"record batch of {n} bytes is shorter than the {L.HEADER_SIZE}-byte v2 header"
            )
        length = _i32(view, L.LENGTH_OFFSET)[0]
        if length + L.LOG_OVERHEAD != n:
            raise CorruptBatchError(
                f"batch length field says {length + L.LOG_OVERHEAD} bytes but the buffer holds {n}"
            )
        self.buffer = view

    @classmethod
    def _trusted(cls, view: memoryview) -> BatchView:
        """Wrap a slice the iterator has already delimited and checked."""
        self = cls.__new__(cls)
        self.buffer = view
        return self

    # ---------------------------------------------------------------- header fields
    @property
    def base_offset(self) -> int:
        return int(_i64(self.buffer, L.BASE_OFFSET_OFFSET)[0])

    @property
    def batch_length(self) -> int:
        return int(_i32(self.buffer, L.LENGTH_OFFSET)[0])

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def partition_leader_epoch(self) -> int:
        return int(_i32(self.buffer, L.PARTITION_LEADER_EPOCH_OFFSET)[0])

    @property
    def magic(self) -> int:
        return int(_i8(self.buffer, L.MAGIC_OFFSET)[0])

    @property
    def crc(self) -> int:
        return int(_u32(self.buffer, L.CRC_OFFSET)[0])

    @property
    def attributes(self) -> int:
        return int(_i16(self.buffer, L.ATTRIBUTES_OFFSET)[0])

    @property
    def compression_id(self) -> int:
        return int(self.buffer[L.ATTRIBUTES_OFFSET + 1] & L.COMPRESSION_MASK)

    @property
    def compression(self) -> str:
        """Codec name: none, gzip, snappy, lz4, zstd -- or ``unknown(N)`` for ids 5-7,
        which :meth:`validate` and :meth:`records` reject."""
        cid = self.compression_id
        return L.CODEC_NAMES[cid] if cid < len(L.CODEC_NAMES) else f"unknown({cid})"

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.buffer[L.ATTRIBUTES_OFFSET + 1] & L.TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.buffer[L.ATTRIBUTES_OFFSET + 1] & L.TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.buffer[L.ATTRIBUTES_OFFSET + 1] & L.CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Set by log compaction (KIP-534): base_timestamp then holds the delete horizon."""
        return bool(self.buffer[L.ATTRIBUTES_OFFSET + 1] & L.DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_offset_delta(self) -> int:
        return int(_i32(self.buffer, L.LAST_OFFSET_DELTA_OFFSET)[0])

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return int(_i64(self.buffer, L.BASE_TIMESTAMP_OFFSET)[0])

    @property
    def max_timestamp(self) -> int:
        return int(_i64(self.buffer, L.MAX_TIMESTAMP_OFFSET)[0])

    @property
    def producer_id(self) -> int:
        return int(_i64(self.buffer, L.PRODUCER_ID_OFFSET)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_i16(self.buffer, L.PRODUCER_EPOCH_OFFSET)[0])

    @property
    def base_sequence(self) -> int:
        return int(_i32(self.buffer, L.BASE_SEQUENCE_OFFSET)[0])

    @property
    def records_count(self) -> int:
        return int(_i32(self.buffer, L.RECORDS_COUNT_OFFSET)[0])

    def header(self) -> tuple[int, ...]:
        """All 13 header fields in wire order, read with one unpack."""
        return tuple(L.HEADER.unpack_from(self.buffer, 0))

    # ---------------------------------------------------------------- validation
    def compute_crc(self) -> int:
        """CRC-32C of attributes..end, computed on the memoryview (no copy)."""
        return int(crc32c(self.buffer[L.ATTRIBUTES_OFFSET:]))

    def is_valid(self) -> bool:
        """True if the stored CRC matches.  The cheap check for the replication path."""
        buf = self.buffer
        return bool(_u32(buf, L.CRC_OFFSET)[0] == crc32c(buf[L.ATTRIBUTES_OFFSET:]))

    def validate(self) -> None:
        """Raise CorruptBatchError naming the first problem found: CRC mismatch,
        negative record count, unknown codec, or (uncompressed) a record count the
        records section cannot hold.  Kafka's ``ensureValid`` checks size and CRC;
        the extra checks are free and refuse nonsense before anyone decodes it."""
        stored = self.crc
        computed = self.compute_crc()
        if stored != computed:
            raise CorruptBatchError(
                f"record batch at offset {self.base_offset} is corrupt: stored CRC"
                f" 0x{stored:08x} != computed CRC 0x{computed:08x}"
            )
        count = self.records_count
        if count < 0:
            raise CorruptBatchError(f"invalid negative record count {count}")
        if self.compression_id >= len(L.CODEC_NAMES):
            raise CorruptBatchError(f"unknown compression codec id {self.compression_id}")
        if self.compression_id == L.CODEC_NONE:
            if count * MIN_RECORD_SIZE > len(self.buffer) - L.HEADER_SIZE:
                raise CorruptBatchError(
                    f"record count {count} cannot fit in {len(self.buffer) - L.HEADER_SIZE} bytes"
                )

    # ---------------------------------------------------------------- records
    def records_data(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        """The records section, decompressed (bounded by ``max_decompressed_bytes``)."""
        return decompress(
            self.compression_id, self.buffer[L.RECORDS_OFFSET:], max_decompressed_bytes
        )

    def decode_records(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> list[RecordView]:
        """Decode every record (decompressing first); raises CorruptBatchError.

        Does not check the CRC -- call :meth:`validate` first for untrusted input.
        """
        count = self.records_count
        if count == 0 and len(self.buffer) == L.HEADER_SIZE:
            return []  # an empty batch kept by compaction: header only, nothing to inflate
        data = self.records_data(max_decompressed_bytes)
        log_append = self.max_timestamp if self.timestamp_type == L.LOG_APPEND_TIME else None
        return decode_records(data, count, self.base_offset, self.base_timestamp, log_append)

    def records(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> Iterator[RecordView]:
        """Iterator over decoded records.  Decoding happens eagerly, so any corruption
        is raised by this call, not halfway through iteration."""
        return iter(self.decode_records(max_decompressed_bytes))

    def __repr__(self) -> str:
        return (
            f"BatchView(base_offset={self.base_offset}, last_offset={self.last_offset},"
            f" size={self.size_in_bytes}, epoch={self.partition_leader_epoch},"
            f" records={self.records_count}, compression={self.compression},"
            f" control={self.is_control}, transactional={self.is_transactional})"
        )


class BatchIterator:
    """Iterator over the batches of a buffer, yielding :class:`BatchView`.

    Stops at the end of the buffer or at a partial trailing batch (normal in
    Fetch responses, which are cut at a byte limit).  Afterwards ``position`` is
    the number of bytes taken by complete batches and ``incomplete`` says whether
    bytes were left over.  An impossible header raises CorruptBatchError.
    """

    __slots__ = ("_view", "_max", "position", "incomplete")

    def __init__(self, buffer: _Buffer, *, max_batch_bytes: int | None = None) -> None:
        self._view = _as_bytes_view(buffer)
        self._max = max_batch_bytes
        self.position = 0
        self.incomplete = False

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> BatchView:
        view = self._view
        pos = self.position
        remaining = len(view) - pos
        if remaining < L.HEADER_SIZE_UP_TO_MAGIC:
            self.incomplete = remaining > 0
            raise StopIteration
        length = _i32(view, pos + L.LENGTH_OFFSET)[0]
        magic = view[pos + L.MAGIC_OFFSET]
        if magic != L.CURRENT_MAGIC:
            raise _magic_error(magic if magic < 128 else magic - 256)
        if length < L.MIN_BATCH_LENGTH:
            raise CorruptBatchError(
                f"record batch at byte {pos} has length {length},"
                f" less than the minimum {L.MIN_BATCH_LENGTH}"
            )
        size = length + L.LOG_OVERHEAD
        limit = self._max
        if limit is not None and size > limit:
            raise CorruptBatchError(
                f"record batch at byte {pos} is {size} bytes, over the {limit}-byte limit"
            )
        if size > remaining:
            self.incomplete = True
            raise StopIteration
        self.position = pos + size
        return BatchView._trusted(view[pos : pos + size])


def iter_batches(buffer: _Buffer, *, max_batch_bytes: int | None = None) -> BatchIterator:
    """Iterate the v2 batches in ``buffer`` as zero-copy :class:`BatchView` objects."""
    return BatchIterator(buffer, max_batch_bytes=max_batch_bytes)


def set_base_offset_and_epoch(
    buffer: bytearray | memoryview, base_offset: int, partition_leader_epoch: int
) -> None:
    """Patch a batch's base offset and partition leader epoch in place.

    Neither field is covered by the CRC, so a leader assigns offsets and its epoch to
    a producer's batch without re-encoding or re-checksumming it.
    """
    view = _as_bytes_view(buffer)
    if view.readonly:
        raise TypeError("set_base_offset_and_epoch needs a writable buffer (bytearray)")
    if len(view) < L.HEADER_SIZE:
        raise CorruptBatchError(f"record batch of {len(view)} bytes is shorter than its header")
    magic = view[L.MAGIC_OFFSET]
    if magic != L.CURRENT_MAGIC:
        raise _magic_error(magic if magic < 128 else magic - 256)
    I64.pack_into(view, L.BASE_OFFSET_OFFSET, base_offset)
    I32.pack_into(view, L.PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def assign_offsets(
    buffer: bytearray | memoryview,
    next_offset: int,
    partition_leader_epoch: int,
    *,
    max_batch_bytes: int | None = None,
) -> int:
    """Leader side of an append: validate every batch of a producer's records and
    patch its base offset and epoch in place; return the offset after the last batch.

    Checks happen for all batches before any is patched, so a bad request leaves
    the buffer untouched.  Each batch must pass :meth:`BatchView.validate`, hold
    contiguous offsets (``records_count == last_offset_delta + 1``, as producers
    write them), and the buffer must end exactly at a batch boundary.
    """
    it = iter_batches(buffer, max_batch_bytes=max_batch_bytes)
    views = list(it)
    if it.incomplete:
        raise CorruptBatchError(
            f"{len(it._view) - it.position} bytes after the last complete batch"
        )
    if not views:
        raise CorruptBatchError("no record batches to append")
    for view in views:
        view.validate()
        if view.records_count != view.last_offset_delta + 1:
            raise CorruptBatchError(
                f"batch holds {view.records_count} records but its last offset delta is"
                f" {view.last_offset_delta}: producer batches must have contiguous offsets"
            )
    for view in views:
        set_base_offset_and_epoch(view.buffer, next_offset, partition_leader_epoch)
        next_offset += view.records_count
    return next_offset
