"""Opening the metadata log after a crash: Kafka's ``LogLoader``, beside the log it loads.

Crash recovery re-scans every segment from the one holding the persisted recovery point
(always at least the last segment), truncates at the first torn or corrupt batch, deletes any
later segment, rebuilds indexes and repairs the leader epoch cache, then fsyncs what it kept.
Below the recovery point the log is trusted: a segment there only has its index files
rebuilt when they are missing or corrupt, one line each in Kafka's words.  A gap between
segments (an interrupted ``truncate_fully_and_start_at``) drops the segments below it.  See
``docs/storage.md``.

The two offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``) live here too: recovery reads them, the log writes them.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kraftnode.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from kraftnode.log.epoch_cache import LeaderEpochCache
from kraftnode.log.fileutil import fsync_dir
from kraftnode.log.segment import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_segment_file_name,
)
from kraftnode.vocabulary import METADATA_PARTITION, METADATA_TOPIC
from recordbatch import BatchView

__all__ = ["LOG_START_OFFSET_FILE", "RECOVERY_POINT_FILE", "Recovered", "load_epoch_cache",
           "read_offset_checkpoint", "recover", "write_offset_checkpoint"]

# the log's own logger: recovery lines keep the name they had inside MetadataLog
log = logging.getLogger("kraftnode.log.metadata_log")

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"


@dataclass
class Recovered:
    """What recovery kept: the segments (oldest first), the log start and end offsets, and
    how many bytes of torn or corrupt data it dropped (for operators and tests)."""

    segments: list[LogSegment]
    start_offset: int
    end_offset: int
    truncated_bytes: int


def read_offset_checkpoint(log_dir: Path, name: str) -> int | None:
    """The metadata partition's offset in one of Kafka's offset checkpoint files (None when
    absent or unreadable: recovery then assumes the worst)."""
    try:
        rows = read_checkpoint(log_dir / name, 3)
    except CheckpointError as e:
        log.warning("ignoring %s: %s", name, e)
        return None
    for topic, partition, offset in rows or []:
        if topic == METADATA_TOPIC and partition == str(METADATA_PARTITION):
            try:
                return int(offset)
            except ValueError:
                return None
    return None


def write_offset_checkpoint(log_dir: Path, name: str, offset: int) -> None:
    write_checkpoint(log_dir / name, [(METADATA_TOPIC, METADATA_PARTITION, offset)])


def load_epoch_cache(partition_dir: Path) -> tuple[LeaderEpochCache, bool]:
    """The leader epoch cache, and whether it was lost (unreadable: rebuilt from the log by
    re-scanning it all)."""
    try:
        return LeaderEpochCache.load(partition_dir), False
    except CheckpointError as e:
        log.warning("rebuilding leader epoch cache from the log: %s", e)
        return LeaderEpochCache(partition_dir / EPOCH_CHECKPOINT_FILE), True


def _log_index_rebuild(seg: LogSegment, problems: list[str]) -> None:
    """The one line logged for each segment whose index files are rebuilt (Kafka's wording)."""
    missing = [p for p in problems if p.endswith(" is missing")]
    if missing and len(missing) == len(problems):
        log.error("Could not find %s corresponding to log file %s, recovering segment and rebuilding "
                  "index files...", " and ".join(p.removesuffix(" is missing") for p in missing),
                  seg.log_path)
    else:
        log.warning("Found a corrupted index file corresponding to log file %s due to %s, recovering "
                    "segment and rebuilding index files...", seg.log_path, "; ".join(problems))


def recover(partition_dir: Path, log_dir: Path, epoch_cache: LeaderEpochCache, *,
            epoch_cache_lost: bool, max_batch_bytes: int, index_interval_bytes: int,
            clock_ms: Callable[[], int]) -> Recovered:
    """Open (and if need be repair) the segments of ``partition_dir``; ``epoch_cache`` is
    repaired in place and persisted, as are both offset checkpoints."""
    truncated = 0
    segs, stored_start, rp, fresh = _open_segments(partition_dir, log_dir, epoch_cache_lost=epoch_cache_lost,
                                                   index_interval_bytes=index_interval_bytes, clock_ms=clock_ms)
    # first segment re-scanned: the one holding the recovery point (never after the last)
    first_scan = max(0, bisect.bisect_right([seg.base_offset for seg in segs], rp) - 1)
    kept: list[LogSegment] = []
    recovered: list[LogSegment] = []
    # (epoch, base offset) at each epoch change of the re-scanned batches; views are
    # not kept, so a re-scan holds one read window in memory, not the segment.
    scanned: list[tuple[int, int]] = []

    def note_epoch(v: BatchView) -> None:
        e = v.partition_leader_epoch
        if e >= 0 and (not scanned or scanned[-1][0] != e):
            scanned.append((e, v.base_offset))

    rescan_start_offset: int | None = None
    cache_reset = False
    i = 0
    while i < len(segs):
        seg = segs[i]
        is_last = i == len(segs) - 1
        rebuilt: int | None = None  # bytes dropped by a rebuild below the recovery point
        if i < first_scan and not is_last:
            verdict, rebuilt, epochs = _below_recovery_point(seg, segs[i + 1].base_offset, max_batch_bytes)
            if verdict != "damaged":
                kept.append(seg)
                if verdict == "rebuilt":
                    recovered.append(seg)
                i += 1
                continue
            # the log itself is damaged (or ends early) there: from this segment on,
            # everything counts as re-scanned, and its epochs are the re-scanned ones
            first_scan = i
            for e, b in epochs:
                if e >= 0 and (not scanned or scanned[-1][0] != e):
                    scanned.append((e, b))
        elif not fresh:
            problems = seg.index_problems()
            if problems:
                _log_index_rebuild(seg, problems)
        if rescan_start_offset is None:
            rescan_start_offset = seg.base_offset
        dropped = rebuilt if rebuilt is not None else seg.recover(
            max_batch_bytes, note_epoch, keep_valid_indexes=not fresh)
        if dropped:
            log.warning("truncated %d invalid bytes at the end of %s", dropped, seg.log_path.name)
            truncated += dropped
        kept.append(seg)
        recovered.append(seg)
        nxt = segs[i + 1] if not is_last else None
        if nxt is not None and nxt.base_offset != seg.next_offset:
            if nxt.base_offset > seg.next_offset and not dropped:
                # a gap: an interrupted truncate_fully_and_start_at; the later segments win
                log.warning("dropping segments below a gap at offset %d", nxt.base_offset)
                for s in kept:
                    s.delete()
                kept, recovered, scanned = [], [], []
                rescan_start_offset = None
                epoch_cache.clear(persist=False)
                cache_reset = True
                i += 1
                continue
            # a torn or overlapping segment: nothing after it can have been flushed
            for s in segs[i + 1:]:
                truncated += s.file_size
                s.delete()
            break
        i += 1
    start, end = _settle(partition_dir, log_dir, epoch_cache, kept, recovered, scanned,
                         rescan_start_offset=rescan_start_offset, cache_reset=cache_reset,
                         stored_start=stored_start)
    return Recovered(kept, start, end, truncated)


def _open_segments(partition_dir: Path, log_dir: Path, *, epoch_cache_lost: bool, index_interval_bytes: int,
                   clock_ms: Callable[[], int]) -> tuple[list[LogSegment], int | None, int, bool]:
    """The segments of ``partition_dir`` in offset order (one empty segment at the stored log
    start when there is none), orphan index files removed; with the stored log start offset,
    the recovery point (0 when it, or the epoch cache it relies on, is missing) and whether the
    log was empty."""
    names = sorted(os.listdir(partition_dir))
    bases = sorted(b for n in names if (b := parse_segment_file_name(n)) is not None)
    base_set = set(bases)
    for n in names:  # orphan index files (e.g. a deletion interrupted by a crash)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            b = parse_segment_file_name(n, suffix)
            if b is not None and b not in base_set:
                (partition_dir / n).unlink()
    stored_start = read_offset_checkpoint(log_dir, LOG_START_OFFSET_FILE)
    rp = read_offset_checkpoint(log_dir, RECOVERY_POINT_FILE)
    if rp is None or epoch_cache_lost or not (partition_dir / EPOCH_CHECKPOINT_FILE).exists():
        rp = 0
    fresh = not bases
    if fresh:
        bases = [max(stored_start or 0, 0)]
    segs = [LogSegment(partition_dir, b, index_interval_bytes=index_interval_bytes,
                       created_ms=clock_ms(), create_indexes=fresh) for b in bases]
    return segs, stored_start, rp, fresh


def _below_recovery_point(seg: LogSegment, next_base: int, max_batch_bytes: int
                          ) -> tuple[str, int | None, list[tuple[int, int]]]:
    """A segment below the recovery point (not the last): ``("trusted", None, [])`` when its
    indexes load; otherwise they are rebuilt -- the log is trusted, only this segment's indexes
    are rebuilt (as Kafka's LogLoader recovers just that segment), one line each -- giving
    ``("rebuilt", ...)`` when its batches reach ``next_base``, else ``("damaged", bytes dropped,
    (epoch, base offset) at each epoch change of its batches)``."""
    problem = seg.load_indexes_problem(next_base)
    if problem is None:
        return "trusted", None, []
    _log_index_rebuild(seg, seg.index_problems() or [problem])
    epochs: list[tuple[int, int]] = []

    def note_own(v: BatchView, out: list[tuple[int, int]] = epochs) -> None:
        if not out or out[-1][0] != v.partition_leader_epoch:  # epoch changes only
            out.append((v.partition_leader_epoch, v.base_offset))

    rebuilt = seg.recover(max_batch_bytes, note_own)
    if not rebuilt and seg.next_offset == next_base:
        return "rebuilt", rebuilt, epochs
    return "damaged", rebuilt, epochs


def _settle(partition_dir: Path, log_dir: Path, epoch_cache: LeaderEpochCache, kept: list[LogSegment],
            recovered: list[LogSegment], scanned: list[tuple[int, int]], *, rescan_start_offset: int | None,
            cache_reset: bool, stored_start: int | None) -> tuple[int, int]:
    """After the scan: the epoch cache trusted below the re-scan and rebuilt from the batches
    above it, the recovered segments synced, both offset checkpoints written; (log start, end)."""
    end = kept[-1].next_offset
    cache = epoch_cache
    changed = cache_reset
    changed |= cache.truncate_from_end(end if rescan_start_offset is None else rescan_start_offset,
                                       persist=False)
    for epoch, base in scanned:
        changed |= cache.assign(epoch, base, persist=False)
    scanned.clear()
    first_base = kept[0].base_offset
    start = first_base if stored_start is None else max(first_base, min(stored_start, end))
    changed |= cache.truncate_from_start(start, persist=False)
    if changed or not cache.path or not cache.path.exists():
        cache.flush()
    for seg in recovered:
        seg.sync()
        seg.sync_indexes()
    fsync_dir(partition_dir)
    write_offset_checkpoint(log_dir, RECOVERY_POINT_FILE, end)
    if stored_start != start:
        write_offset_checkpoint(log_dir, LOG_START_OFFSET_FILE, start)
    return start, end
