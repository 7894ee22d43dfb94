"""The segmented ``__cluster_metadata-0`` log, in Kafka 3.9's on-disk format.

What the raft core needs from its log, with Kafka's semantics:

- ``append_as_leader`` assigns offsets and the leader epoch to batches in place;
  ``append_as_follower`` appends batches exactly as the leader sent them after
  checking CRCs, offset contiguity and epoch monotonicity;
- ``flush`` is a group commit (``group_commit.py``): callers from any thread ask for
  durability, one of them runs ``fdatasync`` for everyone who arrived meanwhile, and
  each gets back the flushed end offset.  Nothing is reported durable before its fsync
  returns;
- ``read`` returns whole batches from an offset up to a byte limit (one
  ``pread`` into a buffer, then memoryview slices; no record is decoded);
- ``truncate_to`` (divergence), ``truncate_fully_and_start_at`` (snapshot install),
  ``advance_start_offset`` (delete whole segments below a snapshot);
- ``end_offset_for_epoch`` answers from the leader epoch cache.

Opening the log runs crash recovery (``recovery.py``, Kafka's ``LogLoader``): every
segment from the persisted recovery point on is re-scanned and cut at the first torn or
corrupt batch.  See ``docs/storage.md``.
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
from kraftnode.log.fileutil import fsync_dir
from kraftnode.log.group_commit import GroupCommit
from kraftnode.log.partition_metadata import ensure_partition_metadata
from kraftnode.log.recovery import (
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    load_epoch_cache,
    recover,
    write_offset_checkpoint,
)
from kraftnode.log.segment import LogSegment
from kraftnode.vocabulary import (
    METADATA_LOG_SEGMENT_BYTES,
    METADATA_LOG_SEGMENT_MIN_BYTES,
    METADATA_LOG_SEGMENT_MS,
    METADATA_MAX_RETENTION_BYTES,
    METADATA_MAX_RETENTION_MS,
    METADATA_PARTITION,
    METADATA_SNAPSHOT_MAX_INTERVAL_MS,
    METADATA_SNAPSHOT_MAX_NEW_RECORD_BYTES,
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
    "SnapshotConfig",
    "METADATA_PARTITION_DIR",
]

log = logging.getLogger(__name__)

METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-{METADATA_PARTITION}"
LOCK_FILE = ".lock"
# KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest batch the quorum writes or accepts.
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
INDEX_INTERVAL_BYTES_DEFAULT = 4096


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
class SnapshotConfig:
    """When snapshots of the metadata log are generated and how much log is retained behind
    them (Kafka's keys and defaults; ``-1`` retention: unbounded).  Filled from the key table by
    :func:`kraftnode.config.consumers.snapshot_config`; read by
    :class:`kraftnode.server.controller_io.snapshot_manager.SnapshotManager`."""

    #: metadata.log.max.record.bytes.between.snapshots
    max_bytes_between_snapshots: int = METADATA_SNAPSHOT_MAX_NEW_RECORD_BYTES
    #: metadata.log.max.snapshot.interval.ms (0: never by time)
    max_snapshot_interval_ms: int = METADATA_SNAPSHOT_MAX_INTERVAL_MS
    #: metadata.max.retention.bytes
    retention_bytes: int = METADATA_MAX_RETENTION_BYTES
    #: metadata.max.retention.ms
    retention_ms: int = METADATA_MAX_RETENTION_MS
    #: kraftnode.snapshot.fork.enable: write each snapshot in a forked child process (the
    #: library's default is a worker thread; ``kraftnode start`` reads the key, default true)
    fork: bool = False


@dataclass(frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    batches: int
    size_in_bytes: int
    # the appended batches' headers as written (offsets and epoch assigned), for
    # observers such as producer state: no re-read of what was just appended
    views: tuple[BatchView, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class _LastAppend:
    """The bytes of the last leader append as written, for reads of exactly them (a
    follower's Fetch at the offset it starts at, while nothing came after it). Only an
    append rolls a segment or writes to one, and every truncation drops this, so while the
    log still ends at ``end_offset`` these bytes are the tail of the last segment (where
    they lie in it follows from its size)."""

    first_offset: int
    end_offset: int
    data: memoryview


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
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._dirty: set[LogSegment] = set()
        self._dir_dirty = False
        self._rolled_since_checkpoint = False
        self._closed = False
        self._failed: OSError | None = None
        self._last_leader_append: _LastAppend | None = None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._lock_log_dir()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            ensure_partition_metadata(self.dir)
            self.epoch_cache, cache_lost = load_epoch_cache(self.dir)
            recovered = recover(self.dir, self.log_dir, self.epoch_cache, epoch_cache_lost=cache_lost,
                                max_batch_bytes=self.config.max_batch_bytes,
                                index_interval_bytes=self.config.index_interval_bytes,
                                clock_ms=self._clock_ms)
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._segments = recovered.segments
        self._bases = [seg.base_offset for seg in recovered.segments]
        self._start_offset = recovered.start_offset
        self._recovery_point = recovered.end_offset
        self._commit = GroupCommit(recovered.end_offset)
        #: bytes of torn or corrupt data dropped by recovery, for operators and tests
        self.truncated_on_open = recovered.truncated_bytes

    def _lock_log_dir(self) -> int:
        """Hold ``<log dir>/.lock`` as Kafka does, so two processes never share a log."""
        fd = os.open(self.log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogError(f"{self.log_dir} is locked by another process (or another open log)") from None
        return fd

    # ================================================================== properties
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
        return self._commit.flushed_offset

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

    def _new_segment(self, base_offset: int) -> LogSegment:
        seg = LogSegment(self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                         created_ms=self._clock_ms(), create_indexes=True)
        self._dir_dirty = True
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
            info = self._append_validated(mv, views)
            # ``buf`` is this log's own copy, never written again: a read of exactly this
            # append (every follower's next Fetch) is served from it, not from the file
            self._last_leader_append = _LastAppend(info.first_offset, self._segments[-1].next_offset,
                                                   mv.toreadonly())
            return info

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
        with self._lock:
            self._check_open()
            target = self._segments[-1].next_offset
        return self._commit.flush(target, self._sync)

    def _sync(self) -> int:
        """One group-commit sync (it runs alone): fsync what is dirty; the end offset covered."""
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
                write_offset_checkpoint(self.log_dir, RECOVERY_POINT_FILE, synced_to)
            self._recovery_point = max(self._recovery_point, synced_to)
            return synced_to
        except OSError as e:
            # After a failed fsync the page cache may have dropped the dirty pages: nothing
            # written since the last good flush can be trusted, so the log stops (as Kafka
            # takes a log directory offline) rather than retrying and lying.
            self._failed = e
            raise

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
            last = self._last_leader_append
            if (last is not None and offset == last.first_offset and end == last.end_offset
                    and len(last.data) <= max_bytes and max_offset is None):
                # what the file would give: all of the last append, whole batches (min_one_batch moot)
                seg = self._segments[-1]
                return ReadInfo(offset, last.data, seg.base_offset, seg.size - len(last.data))
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
        with self._commit.exclusive(), self._lock:
            self._check_open()
            if offset >= self._segments[-1].next_offset:
                return self._segments[-1].next_offset
            self._last_leader_append = None
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
            self._commit.lower_to(end)
            write_offset_checkpoint(self.log_dir, RECOVERY_POINT_FILE, self._recovery_point)
            return end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and restart it empty at ``offset`` (after installing a snapshot)."""
        with self._commit.exclusive(), self._lock:
            self._check_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        # Order matters for crashes: every intermediate state on disk must open as a
        # consistent log. Newer segments go first (a plain tail truncation), then the
        # segment at ``offset`` is emptied or created, then the older ones go.
        self._last_leader_append = None
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
        self._commit.reset_to(offset)
        write_offset_checkpoint(self.log_dir, LOG_START_OFFSET_FILE, offset)
        write_offset_checkpoint(self.log_dir, RECOVERY_POINT_FILE, offset)
        self.epoch_cache.clear()

    def advance_start_offset(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (a snapshot's end offset) and delete every
        segment that lies wholly below it.  Returns the number of segments deleted."""
        with self._commit.exclusive(), self._lock:
            self._check_open()
            end = self._segments[-1].next_offset
            if offset <= self._start_offset:
                return 0
            if offset > end:
                raise LogError(f"cannot advance the start offset to {offset}, past the end offset {end}")
            self._start_offset = offset
            write_offset_checkpoint(self.log_dir, LOG_START_OFFSET_FILE, offset)
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
        with self._commit.exclusive(), self._lock:
            if self._failed is None:
                for seg in self._segments:
                    seg.on_close()  # Kafka's LogSegment.close(): the time index's final entry
                    seg.sync_indexes()
                write_offset_checkpoint(self.log_dir, RECOVERY_POINT_FILE, self._segments[-1].next_offset)
            for seg in self._segments:
                seg.close()
            self._closed = True
            os.close(self._lock_fd)

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
