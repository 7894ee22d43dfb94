"""Compression codecs for record batches, with bounded decompression.

Formats are the ones Kafka's Java client writes, so that genuine consumers read
our batches and we read theirs:

* gzip   -- RFC 1952 gzip member(s) (``GZIPOutputStream``).
* snappy -- xerial "snappy-java" stream framing: 16-byte header
  (``\\x82SNAPPY\\x00``, version 1, compatible 1) then ``[int32 length][raw snappy
  block]`` for each 32 KiB of input.  Decoding also accepts a bare raw snappy
  block, as snappy-java, Kafka and librdkafka do.
* lz4    -- one LZ4 frame with independent 64 KiB blocks, no content size, no
  checksums (``KafkaLZ4BlockOutputStream``); any valid frame decodes.
* zstd   -- zstd frame(s); decoding reads across frames.

Decompression never trusts the input with memory: sizes the stream states are
checked against the limit before allocating, and streaming decoders produce at
most ``limit + 1`` bytes before giving up with :class:`DecompressionLimitError`.
Truncated or malformed streams raise :class:`CorruptBatchError`.
"""

from __future__ import annotations

import threading
import zlib
from typing import Final

import cramjam
import lz4.frame
import zstandard

from recordbatch.errors import CorruptBatchError, DecompressionLimitError
from recordbatch.layout import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NAMES,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "compress",
    "decompress",
]

DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 32 * 1024 * 1024
"""Default ceiling for one batch's decompressed records: 4x Kafka's 8 MiB KRaft batch
limit and 32x the default ``message.max.bytes``, yet small enough that a bomb cannot
hurt the process."""

_CHUNK: Final = 256 * 1024
_Buffer = bytes | bytearray | memoryview

# --------------------------------------------------------------------------- gzip

_GZIP_WBITS: Final = 31  # zlib: gzip wrapper only
_GZIP_MAGIC: Final = b"\x1f\x8b"


def _gzip_compress(data: _Buffer, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: _Buffer, limit: int) -> bytes:
    out: list[bytes] = []
    total = 0
    d = zlib.decompressobj(_GZIP_WBITS)
    pending: _Buffer = data
    try:
        while True:
            chunk = d.decompress(pending, min(_CHUNK, limit - total + 1))
            total += len(chunk)
            if total > limit:
                raise DecompressionLimitError(
                    f"gzip data inflates to more than the {limit}-byte limit"
                )
            out.append(chunk)
            if d.eof:
                rest = d.unused_data
                if not rest:
                    break
                if rest[:2] != _GZIP_MAGIC:  # concatenated members are fine, garbage is not
                    raise CorruptBatchError(f"{len(rest)} trailing bytes after gzip stream")
                d = zlib.decompressobj(_GZIP_WBITS)
                pending = rest
                continue
            before = len(pending)
            pending = d.unconsumed_tail
            if not chunk and (not pending or len(pending) == before):
                # No output and no input consumed: the stream ends early (or zlib is
                # stuck, which must not become an endless loop).
                raise CorruptBatchError("truncated gzip stream")
    except zlib.error as e:
        raise CorruptBatchError(f"invalid gzip data: {e}") from None
    return b"".join(out)


# --------------------------------------------------------------------------- snappy

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
_XERIAL_BLOCK: Final = 32 * 1024


def _snappy_compress(data: _Buffer) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
    return b"".join(parts)


def _snappy_preamble(block: memoryview) -> int:
    """Uncompressed length stated at the start of a raw snappy block (a uvarint)."""
    value = 0
    for i in range(5):
        if i >= len(block):
            break
        b = block[i]
        value |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return value
    raise CorruptBatchError("invalid snappy block: bad uncompressed-length preamble")


def _snappy_decompress(data: _Buffer, limit: int) -> bytes:
    view = memoryview(data)
    if view[:8].tobytes() == _XERIAL_MAGIC:
        if len(view) < 16:
            raise CorruptBatchError("truncated xerial snappy header")
        blocks: list[memoryview] = []
        pos = 16
        n = len(view)
        while pos < n:
            if pos + 4 > n:
                raise CorruptBatchError("truncated xerial snappy block length")
            size = int.from_bytes(view[pos : pos + 4], "big")
            pos += 4
            if size > n - pos:
                raise CorruptBatchError(
                    f"xerial snappy block of {size} bytes exceeds the {n - pos} remaining"
                )
            blocks.append(view[pos : pos + size])
            pos += size
    else:
        blocks = [view]  # raw snappy, as older clients and librdkafka may send
    sizes = [_snappy_preamble(b) for b in blocks]
    total = sum(sizes)
    if total > limit:
        raise DecompressionLimitError(
            f"snappy data claims {total} decompressed bytes, over the {limit}-byte limit"
        )
    out = bytearray(total)
    target = memoryview(out)
    pos = 0
    try:
        for block, size in zip(blocks, sizes, strict=True):
            written = cramjam.snappy.decompress_raw_into(block, target[pos : pos + size])
            if written != size:
                raise CorruptBatchError("snappy block decompressed to the wrong length")
            pos += size
    except cramjam.DecompressionError as e:
        raise CorruptBatchError(f"invalid snappy data: {e}") from None
    return bytes(out)


# --------------------------------------------------------------------------- lz4


def _lz4_compress(data: _Buffer, level: int) -> bytes:
    out: bytes = lz4.frame.compress(
        data,
        compression_level=level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    return out


def _lz4_decompress(data: _Buffer, limit: int) -> bytes:
    try:
        info = lz4.frame.get_frame_info(data)
    except RuntimeError as e:
        raise CorruptBatchError(f"invalid lz4 frame header: {e}") from None
    claimed = info.get("content_size", 0)
    if claimed > limit:
        raise DecompressionLimitError(
            f"lz4 frame claims {claimed} decompressed bytes, over the {limit}-byte limit"
        )
    d = lz4.frame.LZ4FrameDecompressor()
    out: list[bytes] = []
    total = 0
    pending: _Buffer = data
    try:
        while not d.eof:
            chunk = d.decompress(pending, max_length=min(_CHUNK, limit - total + 1))
            pending = b""
            total += len(chunk)
            if total > limit:
                raise DecompressionLimitError(
                    f"lz4 data inflates to more than the {limit}-byte limit"
                )
            out.append(chunk)
            if not d.eof and (d.needs_input or not chunk):
                # Out of input before the end mark; an empty chunk with input pending
                # would mean no progress, which must not become an endless loop.
                raise CorruptBatchError("truncated lz4 frame")
    except RuntimeError as e:
        raise CorruptBatchError(f"invalid lz4 data: {e}") from None
    if d.unused_data:
        raise CorruptBatchError(f"{len(d.unused_data)} trailing bytes after lz4 frame")
    return b"".join(out)


# --------------------------------------------------------------------------- zstd

_ZSTD_MAGIC: Final = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK: Final = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC: Final = 0x184D2A50
_ZSTD_MAX_BLOCK: Final = 128 * 1024
_ZSTD_FCS_SIZES: Final = (0, 2, 4, 8)
_ZSTD_DICT_ID_SIZES: Final = (0, 1, 2, 4)


def _zstd_scan(view: memoryview) -> tuple[int, int]:
    """Walk the frame/block structure without decompressing.

    Returns (sum of the content sizes frames declare, upper bound of the output the
    blocks can produce).  Raises CorruptBatchError if a frame or block is truncated
    or the bytes are not zstd -- the streaming decoder alone would report a
    truncated stream as a silently shorter output.
    """
    n = len(view)
    pos = 0
    declared = 0
    bound = 0
    if n == 0:
        raise CorruptBatchError("empty zstd data")
    while pos < n:
        if pos + 4 > n:
            raise CorruptBatchError("truncated zstd frame magic")
        magic = int.from_bytes(view[pos : pos + 4], "little")
        pos += 4
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if pos + 4 > n:
                raise CorruptBatchError("truncated zstd skippable frame")
            size = int.from_bytes(view[pos : pos + 4], "little")
            pos += 4 + size
            if pos > n:
                raise CorruptBatchError("truncated zstd skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptBatchError(f"not a zstd frame (magic 0x{magic:08x})")
        if pos >= n:
            raise CorruptBatchError("truncated zstd frame header")
        fhd = view[pos]
        pos += 1
        if fhd & 0x08:
            raise CorruptBatchError("zstd frame header has the reserved bit set")
        single_segment = bool(fhd & 0x20)
        fcs_flag = fhd >> 6
        fcs_size = 1 if (fcs_flag == 0 and single_segment) else _ZSTD_FCS_SIZES[fcs_flag]
        header_rest = (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[fhd & 0x03] + fcs_size
        if pos + header_rest > n:
            raise CorruptBatchError("truncated zstd frame header")
        if fcs_size:
            fcs = int.from_bytes(view[pos + header_rest - fcs_size : pos + header_rest], "little")
            declared += fcs + (256 if fcs_size == 2 else 0)
        pos += header_rest
        while True:
            if pos + 3 > n:
                raise CorruptBatchError("truncated zstd block header")
            bh = int.from_bytes(view[pos : pos + 3], "little")
            pos += 3
            last = bh & 1
            btype = (bh >> 1) & 3
            bsize = bh >> 3
            if btype == 0:  # raw
                pos += bsize
                bound += bsize
            elif btype == 1:  # RLE: one byte repeated bsize times
                pos += 1
                bound += bsize
            elif btype == 2:
                pos += bsize
                bound += _ZSTD_MAX_BLOCK
            else:
                raise CorruptBatchError("zstd block with the reserved block type")
            if pos > n:
                raise CorruptBatchError("truncated zstd block")
            if last:
                break
        if fhd & 0x04:  # content checksum
            pos += 4
            if pos > n:
                raise CorruptBatchError("truncated zstd content checksum")
    return declared, bound


class _ZstdContexts(threading.local):
    """Per-thread zstd contexts: creating one costs ~10 us, and zstandard's
    (de)compressor objects must not be shared between threads."""

    def __init__(self) -> None:
        self.dctx = zstandard.ZstdDecompressor()
        self.cctx: dict[int, zstandard.ZstdCompressor] = {}


_ZSTD: Final = _ZstdContexts()


def _zstd_compress(data: _Buffer, level: int) -> bytes:
    cctx = _ZSTD.cctx.get(level)
    if cctx is None:
        cctx = _ZSTD.cctx[level] = zstandard.ZstdCompressor(level=level)
    return cctx.compress(data)


def _zstd_decompress(data: _Buffer, limit: int) -> bytes:
    view = memoryview(data)
    declared, _bound = _zstd_scan(view)
    if declared > limit:
        raise DecompressionLimitError(
            f"zstd frames claim {declared} decompressed bytes, over the {limit}-byte limit"
        )
    out: list[bytes] = []
    total = 0
    try:
        with _ZSTD.dctx.stream_reader(view, read_across_frames=True) as reader:
            while True:
                chunk = reader.read(min(_CHUNK, limit - total + 1))
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise DecompressionLimitError(
                        f"zstd data inflates to more than the {limit}-byte limit"
                    )
                out.append(chunk)
    except zstandard.ZstdError as e:
        raise CorruptBatchError(f"invalid zstd data: {e}") from None
    return b"".join(out)


# --------------------------------------------------------------------------- dispatch

DEFAULT_LEVELS: Final = {CODEC_GZIP: 6, CODEC_LZ4: 0, CODEC_ZSTD: 3}


def compress(codec: int, data: _Buffer, level: int | None = None) -> bytes:
    """Compress a records section with codec id ``codec`` (Kafka numbering)."""
    if codec == CODEC_LZ4:
        return _lz4_compress(data, DEFAULT_LEVELS[codec] if level is None else level)
    if codec == CODEC_ZSTD:
        return _zstd_compress(data, DEFAULT_LEVELS[codec] if level is None else level)
    if codec == CODEC_GZIP:
        return _gzip_compress(data, DEFAULT_LEVELS[codec] if level is None else level)
    if codec == CODEC_SNAPPY:
        return _snappy_compress(data)
    if codec == CODEC_NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: _Buffer, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress a records section, producing at most ``limit`` bytes.

    Raises DecompressionLimitError past the limit, CorruptBatchError for
    malformed input or an unknown codec id.
    """
    if codec == CODEC_LZ4:
        return _lz4_decompress(data, limit)
    if codec == CODEC_ZSTD:
        return _zstd_decompress(data, limit)
    if codec == CODEC_GZIP:
        return _gzip_decompress(data, limit)
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, limit)
    if codec == CODEC_NONE:
        return bytes(data)
    raise CorruptBatchError(f"unknown compression codec id {codec} (valid: 0-4, {', '.join(CODEC_NAMES)})")
