"""One log segment: ``<base offset %020d>.log`` plus its ``.index`` and ``.timeindex``.

A segment is append-only until it is rolled.  Writes use ``pwrite`` at the
segment's known size, so the bytes past ``size`` (a torn write from a crash, or a
write in progress) are never visible to readers; ``size`` only advances after the
whole batch is written.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
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


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


class LogSegment:
    """A segment file with its sparse indexes and the bookkeeping Kafka keeps per segment."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int, created_ms: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = directory / segment_file_name(base_offset)
        self.index = OffsetIndex(directory / segment_file_name(base_offset, INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX), base_offset)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = 0
        self.next_offset = base_offset
        self.dirty = False
        self._bytes_since_index = 0
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp = -1
        self.rolling_base_timestamp: int | None = None

    # -------------------------------------------------------------------------- state
    @property
    def file_size(self) -> int:
        return os.fstat(self.fd).st_size

    def _track(self, view: BatchView, position: int) -> None:
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
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp = -1
        self.rolling_base_timestamp = None

    def recover(self, max_batch_bytes: int, on_batch: Callable[[BatchView], None] | None = None) -> int:
        """Re-scan the whole file, rebuild both indexes, truncate at the first bad batch.

        A batch is kept only if its header is possible, its CRC and record count check
        out, its base offset continues the previous batch exactly and its offsets fit
        the segment.  Returns the number of bytes truncated.
        """
        self._reset_state()
        self.index.reset()
        self.time_index.reset()
        file_size = self.file_size
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
        self.size = pos
        truncated = file_size - pos
        if truncated:
            os.ftruncate(self.fd, pos)
            self.dirty = True
        return truncated

    def load_indexes(self, next_offset: int) -> bool:
        """Load existing indexes for a segment not being re-scanned; False if they need rebuilding.

        The log itself is trusted here (it is below the recovery point), so only the
        index files are checked, and the size and timestamp state come from the file.
        """
        self.size = self.file_size
        self.next_offset = next_offset
        try:
            self.index.load(max(self.size, 1))
            self.time_index.load(next_offset)
        except IndexCorruptError:
            return False
        if self.size > 0 and next_offset == self.base_offset:
            return False
        if self.time_index.entries():
            ts, off = self.time_index.entries()[-1]
            self.max_timestamp_so_far, self.offset_of_max_timestamp = ts, off
        return True

    # -------------------------------------------------------------------------- reads
    def find_position(self, offset: int) -> tuple[int, int] | None:
        """(position, base offset) of the batch containing ``offset``, or None if past the end."""
        if offset >= self.next_offset:
            return None
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
    def truncate_to(self, offset: int, max_batch_bytes: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (Kafka's ``truncateTo``)."""
        found = self.find_position(offset)
        if found is None:
            return
        pos, base = found
        os.ftruncate(self.fd, pos)
        self.dirty = True
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        # recompute the per-segment state from what is left (cheap: rare operation)
        self.recover(max_batch_bytes)
        assert self.next_offset == base

    # -------------------------------------------------------------------------- lifecycle
    def on_roll(self) -> None:
        """Kafka appends the final max-timestamp entry to the time index when a segment rolls."""
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)

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
