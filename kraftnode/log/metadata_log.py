"""The segmented ``__cluster_metadata-0`` log, in Kafka 3.9's on-disk format.

What the raft core needs from its log, with Kafka's semantics:

- ``append_as_leader`` assigns offsets and the leader epoch to batches in place;
  ``append_as_follower`` appends batches exactly as the leader sent them after
  checking CRCs, offset contiguity and epoch monotonicity;
- ``flush`` is a group commit: callers from any thread ask for durability, one of
  them runs ``fdatasync`` for everyone who arrived meanwhile, and each gets back
  the flushed end offset.  Nothing is reported durable before its fsync returns;
- ``read`` returns whole batches from an offset up to a byte limit (one
  ``pread`` into a buffer, then memoryview slices; no record is decoded);
- ``truncate_to`` (divergence), ``truncate_fully_and_start_at`` (snapshot install),
  ``advance_start_offset`` (delete whole segments below a snapshot);
- ``end_offset_for_epoch`` answers from the leader epoch cache.

Crash recovery on open re-scans every segment from the one holding the persisted
recovery point (always at least the last segment), truncates at the first torn or
corrupt batch, deletes any later segment, rebuilds indexes and repairs the epoch
cache, then fsyncs what it kept.  See ``docs/storage.md``.
"""

from __future__ import annotations

import bisect
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kraftnode.errors import ConfigError, LocalError
from kraftnode.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from kraftnode.log.epoch_cache import LeaderEpochCache
from kraftnode.log.fileutil import fsync_dir
from kraftnode.log.partition_metadata import ensure_partition_metadata
from kraftnode.log.segment import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_segment_file_name,
)
from kraftnode.vocabulary import (
    METADATA_LOG_SEGMENT_BYTES,
    METADATA_LOG_SEGMENT_MIN_BYTES,
    METADATA_LOG_SEGMENT_MS,
    METADATA_PARTITION,
    METADATA_TOPIC,
)
from recordbatch import BatchView, CorruptBatchError, iter_batches, set_base_offset_and_epoch

__all__ = [
    "AppendInfo",
    "InvalidAppendError",
    "LogConfig",
    "LogError",
    "MetadataLog",
    "OffsetOutOfRangeError",
    "ReadInfo",
    "METADATA_PARTITION_DIR",
]

log = logging.getLogger(__name__)

METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-{METADATA_PARTITION}"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
LOCK_FILE = ".lock"
# KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest batch the quorum writes or accepts.
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
INDEX_INTERVAL_BYTES_DEFAULT = 4096


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


class LogError(LocalError):
    """Base class for log operation errors (local: the log cannot tell who asked)."""


class OffsetOutOfRangeError(LogError):
    """A read asked for an offset outside [start offset, end offset]."""


class InvalidAppendError(LogError):
    """Batches offered for append break the log's invariants (offsets, epochs, CRC)."""


@dataclass(frozen=True)
class LogConfig:
    """Segment settings, named and defaulted as Kafka's metadata log configs."""

    segment_bytes: int = METADATA_LOG_SEGMENT_BYTES  # metadata.log.segment.bytes
    segment_ms: int = METADATA_LOG_SEGMENT_MS  # metadata.log.segment.ms
    segment_min_bytes: int = METADATA_LOG_SEGMENT_MIN_BYTES  # metadata.log.segment.min.bytes
    index_interval_bytes: int = INDEX_INTERVAL_BYTES_DEFAULT  # index.interval.bytes
    max_batch_bytes: int = MAX_BATCH_SIZE_BYTES

    def __post_init__(self) -> None:
        if self.segment_bytes < self.segment_min_bytes:
            raise ConfigError(
                f"Cannot set metadata.log.segment.bytes below {self.segment_min_bytes}: {self.segment_bytes}"
            )
        if self.segment_ms < 1:
            raise ConfigError(f"Invalid value {self.segment_ms} for configuration metadata.log.segment.ms")


@dataclass(frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    batches: int
    size_in_bytes: int
    # the appended batches' headers as written (offsets and epoch assigned), for
    # observers such as producer state: no re-read of what was just appended
    views: tuple[BatchView, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True)
class ReadInfo:
    """Whole batches starting with the one that contains ``fetch_offset``."""

    fetch_offset: int
    records: memoryview
    segment_base_offset: int
    position: int


class MetadataLog:
    """The ``__cluster_metadata-0`` partition directory under a metadata log dir."""

    def __init__(self, log_dir: str | os.PathLike[str], config: LogConfig | None = None,
                 *, clock_ms: Callable[[], int] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.dir = self.log_dir / METADATA_PARTITION_DIR
        self.config = config or LogConfig()
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.RLock()
        self._flush_cv = threading.Condition(threading.Lock())
        self._flush_busy = False
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._dirty: set[LogSegment] = set()
        self._dir_dirty = False
        self._rolled_since_checkpoint = False
        self._start_offset = 0
        self._flushed_offset = 0
        self._recovery_point = 0
        self._closed = False
        self._failed: OSError | None = None
        self._epoch_cache_lost = False
        self.truncated_on_open = 0  # bytes dropped by recovery, for operators and tests
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._lock_log_dir()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            ensure_partition_metadata(self.dir)
            self.epoch_cache = self._load_epoch_cache()
            self._open_segments()
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _lock_log_dir(self) -> int:
        """Hold ``<log dir>/.lock`` as Kafka does, so two processes never share a log."""
        fd = os.open(self.log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogError(f"{self.log_dir} is locked by another process (or another open log)") from None
        return fd

    # ================================================================== opening / recovery
    def _load_epoch_cache(self) -> LeaderEpochCache:
        try:
            return LeaderEpochCache.load(self.dir)
        except CheckpointError as e:
            log.warning("rebuilding leader epoch cache from the log: %s", e)
            self._epoch_cache_lost = True
            return LeaderEpochCache(self.dir / "leader-epoch-checkpoint")

    def _read_offset_checkpoint(self, name: str) -> int | None:
        try:
            rows = read_checkpoint(self.log_dir / name, 3)
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

    def _write_offset_checkpoint(self, name: str, offset: int) -> None:
        write_checkpoint(self.log_dir / name, [(METADATA_TOPIC, METADATA_PARTITION, offset)])

    def _new_segment(self, base_offset: int) -> LogSegment:
        seg = LogSegment(self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                         created_ms=self._clock_ms(), create_indexes=True)
        self._dir_dirty = True
        return seg

    def _open_segments(self) -> None:
        names = sorted(os.listdir(self.dir))
        bases = sorted(b for n in names if (b := parse_segment_file_name(n)) is not None)
        base_set = set(bases)
        for n in names:  # orphan index files (e.g. a deletion interrupted by a crash)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                b = parse_segment_file_name(n, suffix)
                if b is not None and b not in base_set:
                    (self.dir / n).unlink()
        stored_start = self._read_offset_checkpoint(LOG_START_OFFSET_FILE)
        rp = self._read_offset_checkpoint(RECOVERY_POINT_FILE)
        if rp is None or self._epoch_cache_lost or not (self.dir / "leader-epoch-checkpoint").exists():
            rp = 0
        fresh = not bases
        if fresh:
            bases = [max(stored_start or 0, 0)]
        segs = [LogSegment(self.dir, b, index_interval_bytes=self.config.index_interval_bytes,
                           created_ms=self._clock_ms(), create_indexes=fresh) for b in bases]
        # first segment re-scanned: the one holding the recovery point (never after the last)
        first_scan = max(0, bisect.bisect_right(bases, rp) - 1)
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
                problem = seg.load_indexes_problem(segs[i + 1].base_offset)
                if problem is None:
                    kept.append(seg)
                    i += 1
                    continue
                # Below the recovery point: the log is trusted, only this segment's indexes
                # are rebuilt (as Kafka's LogLoader recovers just that segment), one line each.
                _log_index_rebuild(seg, seg.index_problems() or [problem])
                epochs: list[tuple[int, int]] = []

                def note_own(v: BatchView, out: list[tuple[int, int]] = epochs) -> None:
                    if not out or out[-1][0] != v.partition_leader_epoch:  # epoch changes only
                        out.append((v.partition_leader_epoch, v.base_offset))

                rebuilt = seg.recover(self.config.max_batch_bytes, note_own)
                if not rebuilt and seg.next_offset == segs[i + 1].base_offset:
                    kept.append(seg)
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
                self.config.max_batch_bytes, note_epoch, keep_valid_indexes=not fresh)
            if dropped:
                log.warning("truncated %d invalid bytes at the end of %s", dropped, seg.log_path.name)
                self.truncated_on_open += dropped
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
                    self.epoch_cache.clear(persist=False)
                    cache_reset = True
                    i += 1
                    continue
                # a torn or overlapping segment: nothing after it can have been flushed
                for s in segs[i + 1:]:
                    self.truncated_on_open += s.file_size
                    s.delete()
                break
            i += 1
        self._segments = kept
        self._bases = [s.base_offset for s in kept]
        end = kept[-1].next_offset
        # epoch cache: trust it below the re-scan, rebuild it from the batches above
        cache = self.epoch_cache
        changed = cache_reset
        changed |= cache.truncate_from_end(end if rescan_start_offset is None else rescan_start_offset,
                                           persist=False)
        for epoch, base in scanned:
            changed |= cache.assign(epoch, base, persist=False)
        scanned.clear()
        first_base = kept[0].base_offset
        start = first_base if stored_start is None else max(first_base, min(stored_start, end))
        self._start_offset = start
        changed |= cache.truncate_from_start(start, persist=False)
        if changed or not cache.path or not cache.path.exists():
            cache.flush()
        for seg in recovered:
            seg.sync()
            seg.sync_indexes()
        fsync_dir(self.dir)
        self._dir_dirty = False
        self._flushed_offset = end
        self._recovery_point = end
        self._write_offset_checkpoint(RECOVERY_POINT_FILE, end)
        if stored_start != start:
            self._write_offset_checkpoint(LOG_START_OFFSET_FILE, start)

    # ================================================================== properties
    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def end_offset(self) -> int:
        """Log end offset: the offset the next appended record gets."""
        with self._lock:
            return self._segments[-1].next_offset

    @property
    def start_offset(self) -> int:
        with self._lock:
            return self._start_offset

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is durable (fsynced)."""
        with self._flush_cv:
            return self._flushed_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch in the log (0 when none: the core substitutes the snapshot's)."""
        with self._lock:
            e = self.epoch_cache.latest_epoch
            return e if e >= 0 else 0

    def segments(self) -> list[tuple[int, int, int]]:
        """(base offset, next offset, size in bytes) per segment, oldest first."""
        with self._lock:
            return [(s.base_offset, s.next_offset, s.size) for s in self._segments]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's ``LeaderEpochFileCache.endOffsetFor(epoch, logEndOffset)``."""
        with self._lock:
            return self.epoch_cache.end_offset_for(epoch, self._segments[-1].next_offset)

    def epoch_entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return self.epoch_cache.entries()

    # ================================================================== append
    def _check_open(self) -> None:
        if self._closed:
            raise LogError("log is closed")
        if self._failed is not None:
            raise LogError(f"log is offline after a failed fsync: {self._failed}")

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int) -> LogSegment:
        seg = self._segments[-1]
        cfg = self.config
        if seg.size == 0:
            return seg
        if seg.rolling_base_timestamp is not None and seg.rolling_base_timestamp >= 0:
            waited = max_ts - seg.rolling_base_timestamp
        else:
            waited = self._clock_ms() - seg.created_ms
        if (seg.size > cfg.segment_bytes - size or waited > cfg.segment_ms
                or not seg.relative_offset_fits(last_offset)):
            return self._roll()
        return seg

    def _roll(self) -> LogSegment:
        old = self._segments[-1]
        old.on_roll()
        new = self._new_segment(old.next_offset)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._dirty.add(old)
        self._rolled_since_checkpoint = True
        return new

    def _append_validated(self, data: bytes | bytearray | memoryview, views: list[BatchView]) -> AppendInfo:
        if not views:
            end = self._segments[-1].next_offset
            return AppendInfo(end, end - 1, 0, 0)
        max_ts = max(v.max_timestamp for v in views)
        size = len(data)
        seg = self._maybe_roll(size, max_ts, views[-1].last_offset)
        seg.append(data, views)
        self._dirty.add(seg)
        for v in views:
            if v.partition_leader_epoch >= 0:
                self.epoch_cache.assign(v.partition_leader_epoch, v.base_offset)
        return AppendInfo(views[0].base_offset, views[-1].last_offset, len(views), size,
                          tuple(views))

    def _check_batch(self, v: BatchView) -> None:
        try:
            v.validate()
        except CorruptBatchError as e:
            raise InvalidAppendError(str(e)) from None

    def append_as_leader(self, batches: bytes | bytearray | memoryview | Sequence[bytes], epoch: int) -> AppendInfo:
        """Append batches built by the leader, assigning contiguous offsets and ``epoch``.

        The batches are copied once into a private buffer and patched in place (base
        offset and partition leader epoch are outside the CRC), so the caller's bytes
        are never modified.
        """
        if isinstance(batches, (bytes, bytearray, memoryview)):
            buf = bytearray(batches)
        else:
            buf = bytearray(b"".join(batches))
        with self._lock:
            self._check_open()
            latest = self.epoch_cache.latest_epoch
            if epoch < 0 or epoch < latest:
                raise InvalidAppendError(f"leader epoch {epoch} is below the log's latest epoch {latest}")
            next_offset = self._segments[-1].next_offset
            views: list[BatchView] = []
            mv = memoryview(buf)
            try:
                it = iter_batches(mv, max_batch_bytes=self.config.max_batch_bytes)
                pos = 0
                for v in it:
                    self._check_batch(v)
                    set_base_offset_and_epoch(mv[pos:pos + v.size_in_bytes], next_offset, epoch)
                    views.append(v)
                    next_offset = v.next_offset
                    pos += v.size_in_bytes
            except CorruptBatchError as e:
                raise InvalidAppendError(str(e)) from None
            if it.incomplete or it.position != len(buf):
                raise InvalidAppendError("leader append ends with a partial batch")
            if not views:
                raise InvalidAppendError("leader append contains no batch")
            return self._append_validated(mv, views)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append the leader's batches unchanged after validating them.

        Requirements: CRC and record count valid, the first base offset equals the log
        end offset, each batch continues the previous one exactly, and partition leader
        epochs never decrease.  A partial trailing batch (a Fetch response cut at its
        byte limit) is ignored, as Kafka's follower ignores it.
        """
        with self._lock:
            self._check_open()
            expected = self._segments[-1].next_offset
            epoch = self.epoch_cache.latest_epoch
            views: list[BatchView] = []
            try:
                it = iter_batches(records, max_batch_bytes=self.config.max_batch_bytes)
                for v in it:
                    self._check_batch(v)
                    if v.base_offset != expected:
                        raise InvalidAppendError(
                            f"batch base offset {v.base_offset} does not continue the log at {expected}")
                    if v.partition_leader_epoch < epoch:
                        raise InvalidAppendError(
                            f"batch epoch {v.partition_leader_epoch} at offset {v.base_offset} is below "
                            f"the log's latest epoch {epoch}")
                    epoch = v.partition_leader_epoch
                    expected = v.next_offset
                    views.append(v)
                used = it.position
            except CorruptBatchError as e:
                raise InvalidAppendError(str(e)) from None
            return self._append_validated(memoryview(records)[:used], views)

    # ================================================================== flush
    def flush(self) -> int:
        """Make everything appended so far durable; return the flushed end offset.

        Safe to call from several threads at once: while one caller runs fdatasync,
        others wait and the next sync covers everything they appended (group commit).
        """
        # Lock order: ``_lock`` is never requested while ``_flush_cv`` is held (truncation
        # holds ``_lock`` and then takes ``_flush_cv``).
        with self._lock:
            self._check_open()
            target = self._segments[-1].next_offset
        with self._flush_cv:
            while True:
                if self._flushed_offset >= target:
                    return self._flushed_offset
                if not self._flush_busy:
                    break
                self._flush_cv.wait()
            self._flush_busy = True
        synced_to = -1
        ok = False
        try:
            with self._lock:
                self._check_open()
                synced_to = self._segments[-1].next_offset
                dirty = list(self._dirty)
                self._dirty.clear()
                dir_dirty, self._dir_dirty = self._dir_dirty, False
                rolled, self._rolled_since_checkpoint = self._rolled_since_checkpoint, False
                active = self._segments[-1]
            for seg in sorted(dirty, key=lambda s: s.base_offset):
                seg.sync()
                if seg is not active:
                    seg.sync_indexes()
            if dir_dirty:
                fsync_dir(self.dir)
            if rolled:
                self._write_offset_checkpoint(RECOVERY_POINT_FILE, synced_to)
            self._recovery_point = max(self._recovery_point, synced_to)
            ok = True
        except OSError as e:
            # After a failed fsync the page cache may have dropped the dirty pages: nothing
            # written since the last good flush can be trusted, so the log stops (as Kafka
            # takes a log directory offline) rather than retrying and lying.
            self._failed = e
            raise
        finally:
            with self._flush_cv:
                if ok:
                    self._flushed_offset = max(self._flushed_offset, synced_to)
                self._flush_busy = False
                self._flush_cv.notify_all()
        with self._flush_cv:
            return self._flushed_offset

    def _exclusive(self) -> _FlushToken:
        return _FlushToken(self)

    # ================================================================== read
    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
             max_offset: int | None = None) -> ReadInfo:
        """Whole batches from the one containing ``offset``, at most ``max_bytes`` in total.

        With ``min_one_batch`` (Kafka's behaviour for the first partition of a fetch)
        the first batch is returned even if it alone exceeds ``max_bytes``.  With
        ``max_offset`` (a high watermark, for consumers) only batches lying wholly
        below it are returned.  Reads never cross a segment boundary, as in Kafka.
        """
        with self._lock:
            self._check_open()
            end = self._segments[-1].next_offset
            if offset < self._start_offset or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is outside the log range [{self._start_offset}, {end}]")
            empty = memoryview(b"")
            if offset == end or (max_offset is not None and offset >= max_offset):
                return ReadInfo(offset, empty, self._segments[-1].base_offset, self._segments[-1].size)
            i = bisect.bisect_right(self._bases, offset) - 1
            while i < len(self._segments):
                seg = self._segments[i]
                found = seg.find_position(offset)
                if found is not None:
                    break
                i += 1
            else:
                return ReadInfo(offset, empty, self._segments[-1].base_offset, self._segments[-1].size)
            pos, _ = found
            data = seg.read(pos, max(0, max_bytes))
            it = iter_batches(data)
            cut = 0
            for v in it:
                if max_offset is not None and v.next_offset > max_offset:
                    break
                cut += v.size_in_bytes
            if cut == 0 and min_one_batch and not it.position:
                data = seg.read(pos, seg.batch_size_at(pos))
                first = next(iter_batches(data), None)
                if first is not None and (max_offset is None or first.next_offset <= max_offset):
                    cut = len(data)
            return ReadInfo(offset, memoryview(data)[:cut], seg.base_offset, pos)

    def batches(self, from_offset: int, to_offset: int | None = None, *,
                chunk_bytes: int = 1 << 20) -> Iterator[BatchView]:
        """Every batch from the one containing ``from_offset`` up to ``to_offset`` (default:
        the end offset at the time of the call), read ``chunk_bytes`` at a time.  For
        scans such as finding control batches; the replication path uses :meth:`read`."""
        stop = self.end_offset if to_offset is None else to_offset
        offset = max(from_offset, self.start_offset)
        while offset < stop:
            info = self.read(offset, chunk_bytes)
            if not len(info.records):
                return
            for v in iter_batches(info.records):
                if v.base_offset >= stop:
                    return
                yield v
                offset = v.next_offset

    # ================================================================== truncation / deletion
    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``; returns the new end offset.

        Kafka removes the whole batch that contains ``offset``.  If that batch begins
        below the log start offset, the log restarts empty at ``offset`` instead (a log
        never ends below its start).  The truncation is fsynced before returning so
        truncated entries cannot reappear after a crash.
        """
        with self._exclusive(), self._lock:
            self._check_open()
            if offset >= self._segments[-1].next_offset:
                return self._segments[-1].next_offset
            if offset < self._start_offset:
                raise LogError(f"cannot truncate to {offset}, below the log start offset {self._start_offset}")
            i = bisect.bisect_right(self._bases, offset) - 1
            found = self._segments[i].find_position(offset)
            if found is not None and found[1] < self._start_offset:
                self._truncate_fully_locked(offset)
                return offset
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                seg = self._segments.pop()
                self._bases.pop()
                self._dirty.discard(seg)
                seg.delete()
            seg = self._segments[-1]
            seg.truncate_to(offset, self.config.max_batch_bytes, self._clock_ms())
            seg.sync()
            seg.sync_indexes()
            fsync_dir(self.dir)
            end = seg.next_offset
            self.epoch_cache.truncate_from_end(end)
            self._recovery_point = min(self._recovery_point, end)
            with self._flush_cv:
                self._flushed_offset = min(self._flushed_offset, end)
            self._write_offset_checkpoint(RECOVERY_POINT_FILE, self._recovery_point)
            return end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and restart it empty at ``offset`` (after installing a snapshot)."""
        with self._exclusive(), self._lock:
            self._check_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        # Order matters for crashes: every intermediate state on disk must open as a
        # consistent log. Newer segments go first (a plain tail truncation), then the
        # segment at ``offset`` is emptied or created, then the older ones go.
        old = self._segments
        for seg in reversed(old):
            if seg.base_offset > offset:
                seg.delete()
        fsync_dir(self.dir)
        same = next((s for s in old if s.base_offset == offset), None)
        if same is not None:
            same.truncate_to(offset, self.config.max_batch_bytes, self._clock_ms())
            new = same
        else:
            new = self._new_segment(offset)
        new.sync()
        fsync_dir(self.dir)
        for seg in old:
            if seg.base_offset < offset:
                seg.delete()
        fsync_dir(self.dir)
        self._segments = [new]
        self._bases = [offset]
        self._dirty.clear()
        self._dir_dirty = False
        self._start_offset = offset
        self._recovery_point = offset
        with self._flush_cv:
            self._flushed_offset = offset
        self._write_offset_checkpoint(LOG_START_OFFSET_FILE, offset)
        self._write_offset_checkpoint(RECOVERY_POINT_FILE, offset)
        self.epoch_cache.clear()

    def advance_start_offset(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (a snapshot's end offset) and delete every
        segment that lies wholly below it.  Returns the number of segments deleted."""
        with self._exclusive(), self._lock:
            self._check_open()
            end = self._segments[-1].next_offset
            if offset <= self._start_offset:
                return 0
            if offset > end:
                raise LogError(f"cannot advance the start offset to {offset}, past the end offset {end}")
            self._start_offset = offset
            self._write_offset_checkpoint(LOG_START_OFFSET_FILE, offset)
            deleted = 0
            while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
                seg = self._segments.pop(0)
                self._bases.pop(0)
                self._dirty.discard(seg)
                seg.delete()
                deleted += 1
            if deleted:
                fsync_dir(self.dir)
            self.epoch_cache.truncate_from_start(offset)
            return deleted

    # ================================================================== close
    def close(self) -> None:
        """Flush everything, persist the recovery point and close the files (an offline log
        is closed without flushing: its unflushed tail is left to recovery)."""
        if self._closed:
            return
        if self._failed is None:
            self.flush()
        with self._exclusive(), self._lock:
            if self._failed is None:
                for seg in self._segments:
                    seg.on_close()  # Kafka's LogSegment.close(): the time index's final entry
                    seg.sync_indexes()
                self._write_offset_checkpoint(RECOVERY_POINT_FILE, self._segments[-1].next_offset)
            for seg in self._segments:
                seg.close()
            self._closed = True
            os.close(self._lock_fd)

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _FlushToken:
    """Exclusive use of the files against a concurrent group-commit fsync."""

    def __init__(self, owner: MetadataLog) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        o = self.owner
        with o._flush_cv:
            while o._flush_busy:
                o._flush_cv.wait()
            o._flush_busy = True

    def __exit__(self, *exc: object) -> None:
        o = self.owner
        with o._flush_cv:
            o._flush_busy = False
            o._flush_cv.notify_all()
