"""KRaft snapshot files: ``<20-digit end offset>-<10-digit epoch>.checkpoint``.

A snapshot is a file of v2 batches whose first record is the SnapshotHeader control
record and whose last is the SnapshotFooter.  It is written to
``<name>.checkpoint.part`` and only renamed into place after an fsync (then the
directory is fsynced), so a crash never leaves a half snapshot under a real name;
stray ``.part`` files are deleted on start-up, as Kafka does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kraftnode.errors import LocalError
from kraftnode.log.fileutil import fsync_dir
from recordbatch import BatchView, CorruptBatchError, iter_batches, set_base_offset_and_epoch
from recordbatch.control import (
    ControlType,
    build_kraft_control_batch,
    parse_control_key,
)
from recordbatch.generated import (
    KRaftVersionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
)

__all__ = [
    "SnapshotError",
    "SnapshotId",
    "SnapshotReader",
    "SnapshotWriter",
    "delete_snapshot",
    "list_snapshots",
    "read_snapshot_batches",
    "snapshot_file_name",
    "parse_snapshot_file_name",
    "validate_snapshot",
    "write_snapshot",
    "BOOTSTRAP_SNAPSHOT_ID",
    "SUFFIX",
]

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".part"
_NAME_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
MAX_SNAPSHOT_BATCH_BYTES = 8 * 1024 * 1024


class SnapshotError(LocalError, ValueError):
    """A snapshot file is malformed: corrupt batch, missing header or footer, trailing bytes."""


@dataclass(frozen=True, order=True)
class SnapshotId:
    offset: int
    epoch: int


BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)


def snapshot_file_name(sid: SnapshotId) -> str:
    return f"{sid.offset:020d}-{sid.epoch:010d}{SUFFIX}"


def parse_snapshot_file_name(name: str) -> SnapshotId | None:
    m = _NAME_RE.match(name)
    return SnapshotId(int(m.group(1)), int(m.group(2))) if m else None


def delete_snapshot(partition_dir: str | os.PathLike[str], sid: SnapshotId) -> bool:
    """Remove a snapshot file (and fsync the directory); False if it did not exist."""
    try:
        (Path(partition_dir) / snapshot_file_name(sid)).unlink()
    except FileNotFoundError:
        return False
    fsync_dir(partition_dir)
    return True


def list_snapshots(partition_dir: str | os.PathLike[str], *, delete_partial: bool = False) -> list[SnapshotId]:
    """Snapshot ids in the directory, oldest first (optionally removing stray ``.part`` files)."""
    out = []
    for name in os.listdir(partition_dir):
        if delete_partial and name.endswith(SUFFIX + PARTIAL_SUFFIX):
            os.unlink(os.path.join(partition_dir, name))
            continue
        sid = parse_snapshot_file_name(name)
        if sid is not None:
            out.append(sid)
    return sorted(out)


class SnapshotWriter:
    """Appends whole batches to ``<id>.checkpoint.part``; ``freeze`` publishes the file."""

    def __init__(self, partition_dir: str | os.PathLike[str], sid: SnapshotId) -> None:
        self.dir = Path(partition_dir)
        self.id = sid
        self.path = self.dir / snapshot_file_name(sid)
        self.part_path = self.path.with_name(self.path.name + PARTIAL_SUFFIX)
        if self.path.exists():
            raise FileExistsError(f"snapshot {self.path} already exists")
        self._fd = os.open(self.part_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self.frozen = False

    def append(self, batches: bytes | bytearray | memoryview) -> None:
        mv = memoryview(batches)
        while mv:
            n = os.write(self._fd, mv)
            mv = mv[n:]
            self.size += n

    def freeze(self) -> Path:
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        os.replace(self.part_path, self.path)
        fsync_dir(self.dir)
        self.frozen = True
        return self.path

    def close(self) -> None:
        """Abandon an unfrozen snapshot (its partial file is removed)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if not self.frozen:
            try:
                self.part_path.unlink()
            except FileNotFoundError:
                pass

    def __enter__(self) -> SnapshotWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_snapshot(
    partition_dir: str | os.PathLike[str],
    sid: SnapshotId,
    data_batches: Iterable[bytes] = (),
    *,
    last_contained_log_timestamp: int,
    now_ms: int,
    kraft_version: int = 0,
    voters: VotersRecord | None = None,
) -> Path:
    """Write a complete snapshot as Kafka's ``RecordsSnapshotWriter`` lays it out.

    First batch: [SnapshotHeader] plus, with kraft.version >= 1, [KRaftVersion] and the
    voters; then the caller's batches (their base offsets are rewritten to follow on);
    then a [SnapshotFooter] batch.  Every batch carries the snapshot's epoch.
    """
    header_msgs: list[SnapshotHeaderRecord | KRaftVersionRecord | VotersRecord] = [
        SnapshotHeaderRecord(version_=0, last_contained_log_timestamp=last_contained_log_timestamp)
    ]
    if kraft_version >= 1:
        header_msgs.append(KRaftVersionRecord(version_=0, kraft_version=kraft_version))
        if voters is not None:
            header_msgs.append(voters)
    with SnapshotWriter(partition_dir, sid) as w:
        first = build_kraft_control_batch(header_msgs, base_offset=0, partition_leader_epoch=sid.epoch,
                                          timestamp=now_ms)
        w.append(first)
        next_offset = len(header_msgs)
        for b in data_batches:
            buf = bytearray(b)
            pos = 0
            for v in iter_batches(buf):
                set_base_offset_and_epoch(memoryview(buf)[pos:pos + v.size_in_bytes], next_offset, sid.epoch)
                next_offset = v.next_offset
                pos += v.size_in_bytes
            w.append(buf)
        footer = build_kraft_control_batch([SnapshotFooterRecord(version_=0)], base_offset=next_offset,
                                           partition_leader_epoch=sid.epoch, timestamp=now_ms)
        w.append(footer)
        return w.freeze()


class SnapshotReader:
    """A frozen snapshot file: raw chunks (for FetchSnapshot) and batch iteration."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        sid = parse_snapshot_file_name(self.path.name)
        self.id = sid
        self._fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size

    def read(self, position: int, max_bytes: int) -> bytes:
        """Raw bytes [position, position + max_bytes) (not cut at batch boundaries)."""
        if position < 0 or position > self.size:
            raise SnapshotError(f"{self.path}: position {position} outside [0, {self.size}]")
        return os.pread(self._fd, max(0, min(max_bytes, self.size - position)), position)

    def batches(self, *, window: int = 8 * 1024 * 1024) -> Iterator[BatchView]:
        """Every batch, read window by window; trailing or impossible bytes raise SnapshotError."""
        pos = 0
        while pos < self.size:
            buf = self.read(pos, max(window, MAX_SNAPSHOT_BATCH_BYTES))
            it = iter_batches(buf, max_batch_bytes=MAX_SNAPSHOT_BATCH_BYTES)
            try:
                yield from it
            except CorruptBatchError as e:
                raise SnapshotError(f"{self.path}: {e}") from None
            if it.position == 0:
                raise SnapshotError(f"{self.path}: {self.size - pos} trailing bytes after the last batch")
            pos += it.position

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_snapshot_batches(path: str | os.PathLike[str]) -> Iterator[BatchView]:
    """Every batch of a snapshot file, streamed (see :class:`SnapshotReader`)."""
    with SnapshotReader(path) as r:
        yield from r.batches()


def _control_type(view: BatchView, first: bool) -> int:
    records = view.decode_records()
    if not records:
        raise SnapshotError("empty control batch")
    rec = records[0] if first else records[-1]
    return parse_control_key(rec.key)[1]


def validate_snapshot(path: str | os.PathLike[str]) -> int:
    """Check CRCs, offsets, and header-first/footer-last; return the number of batches."""
    views = []
    expected = 0
    for v in read_snapshot_batches(path):
        try:
            v.validate()
        except CorruptBatchError as e:
            raise SnapshotError(f"{path}: {e}") from None
        if v.base_offset != expected:
            raise SnapshotError(f"{path}: batch at offset {v.base_offset}, expected {expected}")
        expected = v.next_offset
        views.append(v)
    if not views:
        raise SnapshotError(f"{path}: snapshot has no batches")
    try:
        if not views[0].is_control or _control_type(views[0], True) != ControlType.SNAPSHOT_HEADER:
            raise SnapshotError(f"{path}: the first record is not a SnapshotHeader control record")
        if not views[-1].is_control or _control_type(views[-1], False) != ControlType.SNAPSHOT_FOOTER:
            raise SnapshotError(f"{path}: the last record is not a SnapshotFooter control record")
    except CorruptBatchError as e:
        raise SnapshotError(f"{path}: {e}") from None
    return len(views)
