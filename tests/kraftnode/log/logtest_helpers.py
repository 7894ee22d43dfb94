"""Helpers shared by the log tests: real batches, a small segment configuration."""

from __future__ import annotations

from kraftnode.log import LogConfig
from recordbatch import Record, build_batch

SMALL = LogConfig(segment_bytes=8 * 1024, segment_min_bytes=12, index_interval_bytes=512)


def batch(n: int = 3, size: int = 100, ts: int = 1_000, epoch: int = 0, base: int = 0) -> bytes:
    return build_batch([Record(b"k", bytes([i % 256]) * size, (), ts + i) for i in range(n)],
                       base_offset=base, partition_leader_epoch=epoch, now_ms=ts)
