"""One log segment: ``<base offset %020d>.log`` plus its ``.index`` and ``.timeindex``.

A segment is append-only until it is rolled.  Writes use ``pwrite`` at the
segment's known size, so the bytes past ``size`` (a torn write from a crash, or a
write in progress) are never visible to readers; ``size`` only advances after the
whole batch is written.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from kraftnode.log.index import IndexCorruptError, OffsetIndex, TimeIndex
from recordbatch import BatchView, CorruptBatchError, iter_batches
from recordbatch import layout as L

__all__ = ["LogSegment", "segment_file_name", "parse_segment_file_name"]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_SCAN_WINDOW = 8 * 1024 * 1024
_HOP = struct.Struct(">qi")  # base offset, batch length
_I32 = struct.Struct(">i")
_INT32_MAX = 2**31 - 1
#: the last batches of a segment whose positions it keeps in memory (see LogSegment)
_TAIL_BATCHES = 256


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


class _EntryCheck:
    """Whether existing index entries describe the re-scanned batches (fed in order)."""

    def __init__(self, offsets: list[tuple[int, int]], times: list[tuple[int, int]]) -> None:
        self.offsets, self.times = offsets, times
        self.i = self.j = 0
        self.ok = True

    def feed(self, position: int, view: BatchView) -> None:
        if not self.ok:
            return
        if self.i < len(self.offsets):
            off, pos = self.offsets[self.i]
            if pos < position or (pos == position and off != view.last_offset):
                self.ok = False  # an entry between batch starts, or naming another offset
                return
            if pos == position:
                self.i += 1
        if self.j < len(self.times):
            ts, off = self.times[self.j]
            if off < view.last_offset or (off == view.last_offset and ts != view.max_timestamp):
                self.ok = False
                return
            if off == view.last_offset:
                self.j += 1

    def done(self, final_entry: tuple[int, int] | None) -> bool:
        """All entries matched, and the last time entry is the final one a close appends."""
        last = self.times[-1] if self.times else None
        return self.ok and self.i == len(self.offsets) and self.j == len(self.times) and last == final_entry


class LogSegment:
    """A segment file with its sparse indexes and the bookkeeping Kafka keeps per segment."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int, created_ms: int,
                 create_indexes: bool = False) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = directory / segment_file_name(base_offset)
        self.index = OffsetIndex(directory / segment_file_name(base_offset, INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX), base_offset)
        if create_indexes:
            # a new segment has both index files from its creation, as Kafka's has; created
            # before the .log, so a crash in between leaves orphans (deleted on open), never
            # a segment without its indexes
            self.index.create()
            self.time_index.create()
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = 0
        self.next_offset = base_offset
        self.dirty = False
        self._bytes_since_index = 0
        # Where the last batches appended in this process start (base offsets and positions,
        # in order, every batch from the first listed to the end; between _TAIL_BATCHES and
        # twice that many): the tail, which is what caught-up followers fetch. Without it a
        # read finds its batch from the sparse index by reading batch headers, one pread
        # each, up to index.interval.bytes of them.
        self._tail_bases: list[int] = []
        self._tail_positions: list[int] = []
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp = -1
        self.rolling_base_timestamp: int | None = None

    # -------------------------------------------------------------------------- state
    @property
    def file_size(self) -> int:
        return os.fstat(self.fd).st_size

    def _track(self, view: BatchView, position: int) -> None:
        # One Kafka ``LogSegment.append`` call per batch: what a Kafka 3.9 leader does
        # (KafkaRaftClient appends each batch on its own), what Kafka's ``recover`` does,
        # and what every Kafka since KAFKA-806 does for multi-batch appends too.
        if self.rolling_base_timestamp is None:
            self.rolling_base_timestamp = view.max_timestamp
        if view.max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = view.max_timestamp
            self.offset_of_max_timestamp = view.last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.index.append(view.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += view.size_in_bytes
        if len(self._tail_bases) >= 2 * _TAIL_BATCHES:
            del self._tail_bases[:_TAIL_BATCHES], self._tail_positions[:_TAIL_BATCHES]
        self._tail_bases.append(view.base_offset)
        self._tail_positions.append(position)
        self.next_offset = view.next_offset

    # -------------------------------------------------------------------------- append
    def append(self, data: bytes | bytearray | memoryview, views: list[BatchView]) -> None:
        """Write ``data`` (the concatenation of ``views``, already validated) at the end."""
        mv = memoryview(data)
        pos = self.size
        while mv:
            n = os.pwrite(self.fd, mv, pos)
            mv = mv[n:]
            pos += n
        position = self.size
        for v in views:
            self._track(v, position)
            position += v.size_in_bytes
        self.size = position
        self.dirty = True

    def relative_offset_fits(self, last_offset: int) -> bool:
        return 0 <= last_offset - self.base_offset <= _INT32_MAX

    # -------------------------------------------------------------------------- recovery
    def _reset_state(self) -> None:
        self.size = 0
        self.next_offset = self.base_offset
        self._bytes_since_index = 0
        self._tail_bases.clear()
        self._tail_positions.clear()
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp = -1
        self.rolling_base_timestamp = None

    def index_problems(self) -> list[str]:
        """What is wrong with the index files as files (missing, cut mid-entry); [] if nothing."""
        out = []
        for name, idx in (("offset index", self.index), ("time index", self.time_index)):
            why = idx.problem()
            if why is not None:
                out.append(f"{name} file {idx.path.name} is {why}" if why == "missing"
                           else f"{name} file {idx.path.name}: {why}")
        return out

    def _existing_entries(self, file_size: int) -> _EntryCheck | None:
        """The index files' entries, if both are well-formed files, to be checked by a re-scan."""
        if self.index_problems():
            return None
        try:
            self.index.load(max(file_size, 1))
            self.time_index.load(2**63 - 1)
        except IndexCorruptError:
            return None
        return _EntryCheck(self.index.entries(), self.time_index.entries())

    def recover(self, max_batch_bytes: int, on_batch: Callable[[BatchView], None] | None = None,
                *, keep_valid_indexes: bool = False) -> int:
        """Re-scan the whole file, rebuild both indexes, truncate at the first bad batch.

        A batch is kept only if its header is possible, its CRC and record count check
        out, its base offset continues the previous batch exactly and its offsets fit
        the segment.  Returns the number of bytes truncated.  As Kafka's
        ``LogSegment.recover``: the time index ends with the segment's largest timestamp
        (``maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar, skipFullCheck=true)``),
        and the next append counts ``index.interval.bytes`` from zero (Kafka's segment
        object is new after a restart).

        With ``keep_valid_indexes`` the index files are kept as they are when they describe
        the log exactly as a clean close leaves them (every offset entry at the batch ending
        at its offset, every time entry at a batch ending at its offset with that batch's
        largest timestamp, the final time entry present, nothing beyond the log): what
        Kafka keeps after a clean shutdown.  Otherwise they are rewritten.
        """
        file_size = self.file_size
        check = self._existing_entries(file_size) if keep_valid_indexes else None
        self._reset_state()
        self.index.begin_rebuild()
        self.time_index.begin_rebuild()
        pos = self._scan_valid_prefix(file_size, max_batch_bytes, on_batch, check)
        self.size = pos
        truncated = file_size - pos
        if truncated:
            os.ftruncate(self.fd, pos)
            self.dirty = True
        self.on_roll()
        self._bytes_since_index = 0
        if check is not None and not truncated and check.done(self.time_index.last_entry()):
            self.index.end_rebuild(write=False)
            self.time_index.end_rebuild(write=False)
            self.index.restore(check.offsets)
            self.time_index.restore(check.times)
        else:
            self.index.end_rebuild(write=True)
            self.time_index.end_rebuild(write=True)
        return truncated

    def _scan_valid_prefix(self, file_size: int, max_batch_bytes: int,
                           on_batch: Callable[[BatchView], None] | None, check: _EntryCheck | None) -> int:
        """The length of the file's valid prefix (:meth:`recover`'s rules), read window by window;
        every valid batch is tracked (indexes, state) and given to ``check`` and ``on_batch``."""
        pos = 0
        expected = self.base_offset
        window = _SCAN_WINDOW
        while pos < file_size:
            buf = os.pread(self.fd, min(window, file_size - pos), pos)
            it = iter_batches(buf, max_batch_bytes=max_batch_bytes)
            ok = True
            progressed = 0
            try:
                for view in it:
                    try:
                        view.validate()
                    except CorruptBatchError:
                        ok = False
                        break
                    if view.base_offset != expected or not self.relative_offset_fits(view.last_offset):
                        ok = False
                        break
                    self._track(view, pos + progressed)
                    if check is not None:
                        check.feed(pos + progressed, view)
                    progressed += view.size_in_bytes
                    expected = view.next_offset
                    if on_batch is not None:
                        on_batch(view)
            except CorruptBatchError:
                ok = False
            pos += progressed
            if not ok:
                break
            if it.incomplete:
                if progressed:
                    continue
                # one batch larger than the window: size the window to it, or give up at EOF
                if len(buf) >= L.LOG_OVERHEAD:
                    length = _I32.unpack_from(buf, L.LENGTH_OFFSET)[0]
                    need = length + L.LOG_OVERHEAD
                    if need > len(buf) and pos + need <= file_size and need > window:
                        window = need
                        continue
                break
            if progressed == 0:
                break
        return pos

    def load_indexes(self, next_offset: int) -> bool:
        """Load existing indexes for a segment not being re-scanned; False if they need rebuilding.

        The log itself is trusted here (it is below the recovery point), so only the
        index files are checked, and the size and timestamp state come from the file.
        """
        return self.load_indexes_problem(next_offset) is None

    def load_indexes_problem(self, next_offset: int) -> str | None:
        """:meth:`load_indexes`, returning why the indexes need rebuilding (None: loaded)."""
        self.size = self.file_size
        self.next_offset = next_offset
        try:
            self.index.load(max(self.size, 1))
            self.time_index.load(next_offset)
        except IndexCorruptError as e:
            return str(e)
        if self.size > 0 and next_offset == self.base_offset:
            return "the segment has bytes but no offsets"
        last_index_entry = self.index.last_entry()
        if last_index_entry is not None:
            # the last entry must name the last offset of the batch it points at (the
            # check kafka-dump-log.sh --verify-index-only makes, for one entry)
            off, pos = last_index_entry
            hdr = os.pread(self.fd, L.LAST_OFFSET_DELTA_OFFSET + 4, pos)
            if len(hdr) < L.LAST_OFFSET_DELTA_OFFSET + 4:
                return f"{self.index.path.name}: entry ({off}, {pos}) points past the log"
            base = _HOP.unpack_from(hdr, 0)[0]
            if base + _I32.unpack_from(hdr, L.LAST_OFFSET_DELTA_OFFSET)[0] != off:
                return f"{self.index.path.name}: entry ({off}, {pos}) does not point at the batch ending at {off}"
        last_time_entry = self.time_index.last_entry()
        if last_time_entry is not None:
            self.max_timestamp_so_far, self.offset_of_max_timestamp = last_time_entry
        self._bytes_since_index = 0
        return None

    # -------------------------------------------------------------------------- reads
    def find_position(self, offset: int) -> tuple[int, int] | None:
        """(position, base offset) of the batch containing ``offset``, or None if past the end."""
        if offset >= self.next_offset:
            return None
        bases = self._tail_bases
        if bases and offset >= bases[0]:
            i = bisect.bisect_right(bases, offset) - 1
            return self._tail_positions[i], bases[i]
        _, pos = self.index.lookup(offset)
        while pos < self.size:
            hdr = os.pread(self.fd, L.LAST_OFFSET_DELTA_OFFSET + 4, pos)
            if len(hdr) < L.LAST_OFFSET_DELTA_OFFSET + 4:
                return None
            base, length = _HOP.unpack_from(hdr, 0)
            delta = _I32.unpack_from(hdr, L.LAST_OFFSET_DELTA_OFFSET)[0]
            if base + delta >= offset:
                return pos, base
            pos += length + L.LOG_OVERHEAD
        return None

    def read(self, position: int, max_bytes: int) -> bytes:
        end = min(self.size, position + max_bytes)
        if end <= position:
            return b""
        return os.pread(self.fd, end - position, position)

    def batch_size_at(self, position: int) -> int:
        hdr = os.pread(self.fd, L.LOG_OVERHEAD, position)
        return int(_I32.unpack_from(hdr, L.LENGTH_OFFSET)[0]) + L.LOG_OVERHEAD

    # -------------------------------------------------------------------------- truncation
    def _headers_from(self, position: int, max_batch_bytes: int) -> Iterator[BatchView]:
        """Batch headers from ``position`` to the end (read window by window, not validated)."""
        pos = position
        while pos < self.size:
            buf = os.pread(self.fd, min(max(_SCAN_WINDOW, max_batch_bytes + L.LOG_OVERHEAD), self.size - pos), pos)
            it = iter_batches(buf, max_batch_bytes=max_batch_bytes)
            try:
                yield from it
            except CorruptBatchError:
                return
            if it.position == 0:
                return
            pos += it.position

    def truncate_to(self, offset: int, max_batch_bytes: int, now_ms: int) -> None:
        """Remove every batch whose last offset is >= ``offset``, as Kafka's ``LogSegment.truncateTo``:
        index entries for offsets >= ``offset`` go, the ones below stay as written, the
        next append counts ``index.interval.bytes`` from zero, and the largest timestamp
        is the last time index entry's or a larger one found after it in the log."""
        found = self.find_position(offset)
        if found is None:
            return
        pos, base = found
        cut = bisect.bisect_left(self._tail_positions, pos)
        del self._tail_bases[cut:], self._tail_positions[cut:]
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        os.ftruncate(self.fd, pos)
        self.dirty = True
        self.size = pos
        self.next_offset = base
        if pos == 0:
            self.created_ms = now_ms
            self.rolling_base_timestamp = None
        self._bytes_since_index = 0
        if self.max_timestamp_so_far >= 0:  # Kafka's readLargestTimestamp
            last = self.time_index.last_entry() or (-1, self.base_offset)
            best_ts, best_off = -1, -1
            for v in self._headers_from(self.index.lookup(last[1])[1], max_batch_bytes):
                if v.max_timestamp > best_ts:
                    best_ts, best_off = v.max_timestamp, v.last_offset
            self.max_timestamp_so_far, self.offset_of_max_timestamp = \
                (best_ts, best_off) if best_ts > last[0] else last

    # -------------------------------------------------------------------------- lifecycle
    def on_roll(self) -> None:
        """The time index's final entry, as Kafka's ``onBecomeInactiveSegment`` (roll),
        ``close`` and ``recover`` append it: ``(maxTimestampSoFar, offsetOfMaxTimestampSoFar)``
        unless the last entry already has that timestamp.  (Kafka then trims both files to
        their entries; ours never hold anything else.)"""
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)

    on_close = on_roll

    def sync(self) -> None:
        os.fdatasync(self.fd)

    def sync_indexes(self) -> None:
        self.index.flush()
        self.time_index.flush()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.index.close()
        self.time_index.close()

    def delete(self) -> None:
        self.close()
        self.index.delete()
        self.time_index.delete()
        try:
            self.log_path.unlink()
        except FileNotFoundError:
            pass
