"""Sparse offset and time indexes (``.index`` / ``.timeindex``) in Kafka's layout.

``.index``: 8-byte entries, big-endian int32 offset relative to the segment's base
offset and int32 byte position of a batch in the ``.log`` file.  ``.timeindex``:
12-byte entries, int64 max timestamp so far and the int32 relative offset of the
batch holding it.  Entries are added every ``index.interval.bytes`` (4096) of log,
keyed by the last offset of the batch at that position, exactly as Kafka's
``LogSegment.append`` does, so Kafka's ``DumpLogSegments --verify-index-only`` would
accept our files.

Both files exist from the moment the segment does (empty until their first entry).
Kafka preallocates index files to ``segment.index.bytes`` and trims them to their
entries on roll and close; a preallocated file is *not* safe to leave behind, because
Kafka reads an existing index as full to its length (``AbstractIndex`` positions a
pre-existing file at its end), zeros included.  We append exactly the entries
written, so our files always have the size Kafka's have after ``trimToValidSize``.
Indexes are never trusted for correctness: they only shorten scans, and any index
that fails its sanity check is rebuilt from the log.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from kraftnode.errors import LocalError

__all__ = ["IndexCorruptError", "OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
# segment.index.bytes default (10 MiB): an index larger than this is not one of ours.
MAX_INDEX_BYTES = 10 * 1024 * 1024


class IndexCorruptError(LocalError, ValueError):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


class _IndexFile:
    entry_size = 8

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd = -1
        self._dirty = False
        self._pending: list[bytes] | None = None  # entries of a rebuild not yet written

    def _open(self) -> None:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def create(self) -> None:
        """Create the (empty) file now, as a new segment's indexes are created with it."""
        self._open()

    def problem(self) -> str | None:
        """Why this file cannot be an index we wrote (missing, or cut mid-entry), or None."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return "missing"
        if size % self.entry_size:
            return f"size {size} is not a multiple of {self.entry_size}"
        if size > MAX_INDEX_BYTES:
            return f"size {size} is larger than any index we write"
        return None

    def _read_all(self) -> bytes:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            raise IndexCorruptError(f"{self.path}: missing") from None
        if size % self.entry_size:
            raise IndexCorruptError(f"{self.path}: size {size} is not a multiple of {self.entry_size}")
        if size > MAX_INDEX_BYTES:
            raise IndexCorruptError(f"{self.path}: size {size} is larger than any index we write")
        with open(self.path, "rb") as f:
            data = f.read()
        if len(data) != size:
            raise IndexCorruptError(f"{self.path}: changed while being read")
        return data

    def _append_raw(self, raw: bytes) -> None:
        if self._pending is not None:
            self._pending.append(raw)
            return
        self._open()
        os.lseek(self._fd, 0, os.SEEK_END)
        os.write(self._fd, raw)
        self._dirty = True

    def _truncate_entries(self, n: int) -> None:
        if self._pending is not None:
            del self._pending[n:]
            return
        self._open()
        os.ftruncate(self._fd, n * self.entry_size)
        self._dirty = True

    def _clear(self) -> None:
        raise NotImplementedError

    def begin_rebuild(self) -> None:
        """Start rebuilding: entries go to memory only, the file is left as it is until
        :meth:`end_rebuild` (so a valid file can be kept)."""
        self._clear()
        self._pending = []

    def end_rebuild(self, *, write: bool) -> None:
        """Write the rebuilt entries over the file (``write``), or keep the file as it was."""
        pending, self._pending = self._pending, None
        if write and pending is not None:
            self._open()
            os.ftruncate(self._fd, 0)
            data = b"".join(pending)
            if data:
                os.pwrite(self._fd, data, 0)
            self._dirty = True

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


class OffsetIndex(_IndexFile):
    """Maps offsets to file positions; ``lookup`` gives a position at or before the offset."""

    entry_size = 8

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        super().__init__(Path(path), base_offset)
        self._offsets: list[int] = []
        self._positions: list[int] = []

    def load(self, log_size: int) -> None:
        """Load and sanity-check against the log file's size; raises :class:`IndexCorruptError`."""
        data = self._read_all()
        offsets: list[int] = []
        positions: list[int] = []
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if rel < 0 or pos < 0 or pos >= log_size:
                raise IndexCorruptError(f"{self.path}: entry ({rel}, {pos}) out of range")
            if offsets and (rel + self.base_offset <= offsets[-1] or pos <= positions[-1]):
                raise IndexCorruptError(f"{self.path}: entries are not increasing")
            offsets.append(rel + self.base_offset)
            positions.append(pos)
        self._offsets, self._positions = offsets, positions

    def _clear(self) -> None:
        self._offsets, self._positions = [], []

    def restore(self, entries: list[tuple[int, int]]) -> None:
        """Entries as :meth:`entries` returned them, in memory (the file holds them)."""
        self._offsets = [o for o, _ in entries]
        self._positions = [p for _, p in entries]

    def reset(self) -> None:
        self._clear()
        self._truncate_entries(0)

    def __len__(self) -> int:
        return len(self._offsets)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._offsets, self._positions, strict=True))

    def last_entry(self) -> tuple[int, int] | None:
        """(offset, position) of the last entry, or None when empty."""
        return (self._offsets[-1], self._positions[-1]) if self._offsets else None

    @property
    def last_offset(self) -> int:
        return self._offsets[-1] if self._offsets else self.base_offset

    def append(self, offset: int, position: int) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            return
        self._append_raw(_OFFSET_ENTRY.pack(offset - self.base_offset, position))
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= ``offset``, or ``(base_offset, 0)``."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        n = bisect.bisect_left(self._offsets, offset)
        if n < len(self._offsets):
            del self._offsets[n:], self._positions[n:]
            self._truncate_entries(n)


class TimeIndex(_IndexFile):
    """Maps max timestamps to offsets; only increasing timestamps are recorded."""

    entry_size = 12

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        super().__init__(Path(path), base_offset)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []

    def load(self, log_end_offset: int) -> None:
        data = self._read_all()
        ts: list[int] = []
        offs: list[int] = []
        for t, rel in _TIME_ENTRY.iter_unpack(data):
            off = rel + self.base_offset
            if rel < 0 or off >= max(log_end_offset, self.base_offset + 1):
                raise IndexCorruptError(f"{self.path}: entry ({t}, {rel}) out of range")
            if ts and (t <= ts[-1] or off < offs[-1]):
                raise IndexCorruptError(f"{self.path}: entries are not increasing")
            ts.append(t)
            offs.append(off)
        self._timestamps, self._offsets = ts, offs

    def _clear(self) -> None:
        self._timestamps, self._offsets = [], []

    def restore(self, entries: list[tuple[int, int]]) -> None:
        """Entries as :meth:`entries` returned them, in memory (the file holds them)."""
        self._timestamps = [t for t, _ in entries]
        self._offsets = [o for _, o in entries]

    def reset(self) -> None:
        self._clear()
        self._truncate_entries(0)

    def __len__(self) -> int:
        return len(self._offsets)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._timestamps, self._offsets, strict=True))

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry, or None when empty."""
        return (self._timestamps[-1], self._offsets[-1]) if self._offsets else None

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._timestamps and (timestamp <= self._timestamps[-1] or offset < self._offsets[-1]):
            return
        self._append_raw(_TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= ``timestamp``, or ``(-1, base_offset)``."""
        i = bisect.bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self._offsets[i]

    def truncate_to(self, offset: int) -> None:
        n = bisect.bisect_left(self._offsets, offset)
        if n < len(self._offsets):
            del self._timestamps[n:], self._offsets[n:]
            self._truncate_entries(n)
