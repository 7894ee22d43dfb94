"""Codec formats (what Kafka's Java client writes) and bounded decompression."""

from __future__ import annotations

import gzip
import struct
import time
import tracemalloc
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from kafka import codec as kafka_codec

from recordbatch import CorruptBatchError, DecompressionLimitError, iter_batches
from recordbatch import compression as C
from recordbatch import layout as L
from tests.recordbatch.conftest import craft_batch

PAYLOAD = b"".join(b"record %06d with some repeated text; " % i for i in range(5000))
MiB = 1 << 20


@pytest.mark.parametrize("codec", [L.CODEC_GZIP, L.CODEC_SNAPPY, L.CODEC_LZ4, L.CODEC_ZSTD])
def test_round_trip(codec: int) -> None:
    for data in (b"", b"x", PAYLOAD):
        assert C.decompress(codec, C.compress(codec, data)) == data


def test_snappy_uses_xerial_framing_with_32k_blocks() -> None:
    out = C.compress(L.CODEC_SNAPPY, PAYLOAD)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert pos == len(out)
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(blocks) == PAYLOAD
    # kafka-python's independent xerial reader agrees.
    assert kafka_codec.snappy_decode(out) == PAYLOAD


def test_snappy_raw_block_fallback() -> None:
    raw = snappy.compress(PAYLOAD)  # a bare raw snappy block, as some clients send
    assert C.decompress(L.CODEC_SNAPPY, raw) == PAYLOAD


def test_lz4_frame_as_kafka_writes_it() -> None:
    out = C.compress(L.CODEC_LZ4, PAYLOAD)
    info = lz4.frame.get_frame_info(out)
    assert info["block_size"] == 64 * 1024
    assert not info["block_linked"]  # independent blocks: Kafka's reader requires them
    assert not info["content_checksum"] and not info["block_checksum"]
    assert info["content_size"] == 0
    assert out[4] & 0xC0 == 0x40  # FLG version 01


def test_lz4_frames_from_other_writers_decode() -> None:
    for kw in ({}, {"block_linked": True, "content_checksum": True, "store_size": True}):
        assert C.decompress(L.CODEC_LZ4, lz4.frame.compress(PAYLOAD, **kw)) == PAYLOAD


def test_gzip_members_and_other_writers() -> None:
    assert C.decompress(L.CODEC_GZIP, gzip.compress(PAYLOAD, mtime=0)) == PAYLOAD
    two = gzip.compress(PAYLOAD[:1000]) + gzip.compress(PAYLOAD[1000:])
    assert C.decompress(L.CODEC_GZIP, two) == PAYLOAD
    with pytest.raises(CorruptBatchError, match="trailing"):
        C.decompress(L.CODEC_GZIP, gzip.compress(PAYLOAD) + b"junk")
    with pytest.raises(CorruptBatchError):
        C.decompress(L.CODEC_GZIP, b"\x1f\x8b not really gzip")


def test_zstd_multiple_frames_streaming_writer_and_skippable_frames() -> None:
    cctx = zstandard.ZstdCompressor()
    co = cctx.compressobj()  # streaming: no content size, like zstd-jni's stream
    streamed = co.compress(PAYLOAD[:3000]) + co.flush()
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    data = streamed + skippable + cctx.compress(PAYLOAD[3000:])
    assert C.decompress(L.CODEC_ZSTD, data) == PAYLOAD
    with pytest.raises(CorruptBatchError):
        C.decompress(L.CODEC_ZSTD, data + b"\x00\x01")
    with pytest.raises(CorruptBatchError):
        C.decompress(L.CODEC_ZSTD, b"definitely not zstd")


# ---------------------------------------------------------------- bombs

LIMIT = 8 * MiB


def _gzip_bomb() -> bytes:
    """2 GiB of zeros as 32 concatenated 64 MiB gzip members (~2 MiB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MiB)
    member = b"".join(c.compress(zeros) for _ in range(64)) + c.flush()
    return member * 32


def _zstd_bomb() -> bytes:
    """2 GiB of zeros as 16 frames of 128 MiB, each declaring no content size."""
    co = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
    zeros = bytes(MiB)
    frame = b"".join(co.compress(zeros) for _ in range(128)) + co.flush()
    return frame * 16


def _lz4_bomb() -> bytes:
    """1 GiB of zeros in one frame without a content size (~4 MiB)."""
    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    zeros = bytes(MiB)
    return bytes(c.begin() + b"".join(c.compress(zeros) for _ in range(1024)) + c.flush())


def _lz4_claiming_bomb() -> bytes:
    """An lz4 frame that says its content is 1 TiB."""
    c = lz4.frame.LZ4FrameCompressor(block_linked=False)
    # The library refuses to finish a frame that lies; write the end mark by hand.
    return bytes(c.begin(source_size=1 << 40) + c.compress(bytes(1000)) + b"\x00\x00\x00\x00")


def _snappy_claiming_bomb() -> bytes:
    """Xerial blocks whose preambles claim 4 GiB in total."""
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


def _snappy_raw_claiming_bomb() -> bytes:
    return b"\xff\xff\xff\xff\x0f" + b"\x00" * 10


BOMBS: dict[str, tuple[int, Callable[[], bytes]]] = {
    "gzip": (L.CODEC_GZIP, _gzip_bomb),
    "zstd": (L.CODEC_ZSTD, _zstd_bomb),
    "lz4": (L.CODEC_LZ4, _lz4_bomb),
    "lz4-claim": (L.CODEC_LZ4, _lz4_claiming_bomb),
    "snappy-claim": (L.CODEC_SNAPPY, _snappy_claiming_bomb),
    "snappy-raw-claim": (L.CODEC_SNAPPY, _snappy_raw_claiming_bomb),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bombs_are_refused_quickly_with_bounded_memory(name: str) -> None:
    codec, make = BOMBS[name]
    bomb = make()
    batch_bytes = craft_batch(bomb, records_count=1, attributes=codec)
    (batch,) = iter_batches(batch_bytes)
    batch.validate()
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(DecompressionLimitError):
            batch.decode_records(max_decompressed_bytes=LIMIT)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 5.0, f"{name}: refusing took {elapsed:.2f}s"
    assert peak < 3 * LIMIT, f"{name}: peak {peak / MiB:.1f} MiB for an {LIMIT / MiB:.0f} MiB limit"


def test_zstd_frame_claiming_huge_content_size_is_refused_before_decoding() -> None:
    # Single-segment frame header with an 8-byte content size of 4 GiB + a raw block.
    fhd = 0xC0 | 0x20  # FCS 8 bytes, single segment
    frame = (
        struct.pack("<I", 0xFD2FB528)
        + bytes([fhd])
        + struct.pack("<Q", 4 << 30)
        + (1 | (0 << 1) | (3 << 3)).to_bytes(3, "little")  # last, raw, 3 bytes
        + b"abc"
    )
    with pytest.raises(DecompressionLimitError, match="claim"):
        C.decompress(L.CODEC_ZSTD, frame, LIMIT)


def test_default_limit_refuses_a_bomb() -> None:
    (batch,) = iter_batches(craft_batch(_zstd_bomb(), records_count=1, attributes=L.CODEC_ZSTD))
    with pytest.raises(DecompressionLimitError):
        batch.decode_records()


def test_data_exactly_at_the_limit_is_accepted() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    for codec in (L.CODEC_GZIP, L.CODEC_SNAPPY, L.CODEC_LZ4, L.CODEC_ZSTD):
        packed = C.compress(codec, data)
        assert C.decompress(codec, packed, len(data)) == data
        with pytest.raises(DecompressionLimitError):
            C.decompress(codec, packed, len(data) - 1)
