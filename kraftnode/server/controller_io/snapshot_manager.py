"""Snapshot generation, loading and log cleaning, as a Kafka 3.9 controller does them.

* **Generation** (Kafka's ``SnapshotGenerator``): once the committed batch bytes applied
  since the last snapshot reach ``metadata.log.max.record.bytes.between.snapshots``
  (20 MiB) or ``metadata.log.max.snapshot.interval.ms`` (1 h) has passed with new
  records, the state machine's state is written to ``<end offset>-<epoch>.checkpoint.part``,
  fsynced and renamed (``kraftnode.log.snapshot``) by a child process forked at that
  offset (``kraftnode.snapshot.fork.enable``; :mod:`.forked`: nothing is copied on the
  event loop), or else captured on the loop and written in a worker thread; commits
  continue meanwhile.
* **Cleaning** (Kafka's ``KafkaMetadataLog.maybeClean``): while the log and the
  snapshots together exceed ``metadata.max.retention.bytes`` (100 MiB), or the oldest
  snapshot's LastContainedLogTimestamp is older than ``metadata.max.retention.ms``
  (7 days), the oldest snapshot is deleted, the log start offset advances to the next
  snapshot and every segment wholly below it is deleted.  The latest snapshot is never
  deleted, and nothing is deleted before the snapshot that covers it is durable.
* **Start-up** (``prepare_storage``): leftover ``.checkpoint.part``/``.checkpoint.deleted``
  files are removed; every snapshot is validated (CRCs, header first, footer last,
  offsets) and a bad one -- or a ``.checkpoint`` file whose name is not
  ``<20 digits>-<10 digits>.checkpoint`` -- is refused with a message naming the file
  and moved aside (``<name>.corrupt``); the latest valid snapshot is loaded into the
  state machine and only the log after it is replayed.  When no valid snapshot covers
  the log start offset, the node cannot rebuild its state from what it has: the log
  is reset to start at the newest valid snapshot (or 0) and the node catches up from
  the leader (FetchSnapshot).  It never starts from a wrong state.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio

from kraftnode.log.metadata_log import MetadataLog, SnapshotConfig
from kraftnode.log.snapshot import (
    PARTIAL_SUFFIX,
    SUFFIX,
    SnapshotError,
    SnapshotId,
    list_snapshots,
    parse_snapshot_file_name,
    read_snapshot_batches,
    snapshot_file_name,
    validate_snapshot,
    write_snapshot,
)
from kraftnode.metadata.state_machine import (
    SnapshotRecords,
    StateMachineRunner,
    snapshot_data_records,
)
from kraftnode.raft.batches import VotersControlRecord
from kraftnode.server.controller_io.forked import run_in_child
from kraftnode.server.raft_io.disk_log import to_control_messages
from recordbatch import CorruptBatchError, Record, build_batch
from recordbatch.control import decode_control_record
from recordbatch.generated import SnapshotHeaderRecord, VotersRecord

log = logging.getLogger("kraftnode.snapshots")

__all__ = ["SnapshotConfig", "SnapshotManager", "prepare_storage", "clean_leftovers", "snapshot_timestamp",
           "DELETED_SUFFIX", "CORRUPT_SUFFIX"]

DELETED_SUFFIX = ".deleted"
CORRUPT_SUFFIX = ".corrupt"
# Records per data batch of a snapshot, and a byte bound per batch (Kafka's
# RecordsSnapshotWriter batches up to the controller's max batch size, 8 KiB records)
SNAPSHOT_BATCH_RECORDS = 1000
SNAPSHOT_BATCH_BYTES = 1024 * 1024
YIELD_EVERY_RECORDS = 64


# ------------------------------------------------------------------ start-up
def clean_leftovers(partition_dir: Path) -> list[str]:
    """Delete ``.checkpoint.part`` and ``.checkpoint.deleted`` files, as Kafka does at start-up."""
    removed = []
    for name in sorted(os.listdir(partition_dir)):
        if name.endswith(SUFFIX + PARTIAL_SUFFIX) or name.endswith(SUFFIX + DELETED_SUFFIX):
            os.unlink(partition_dir / name)
            removed.append(name)
    return removed


def snapshot_timestamp(path: Path) -> int:
    """The SnapshotHeader's LastContainedLogTimestamp (-1 if unreadable)."""
    try:
        for b in read_snapshot_batches(path):
            for r in b.records():
                _t, msg = decode_control_record(r)
                if isinstance(msg, SnapshotHeaderRecord):
                    return int(msg.last_contained_log_timestamp)
                return -1
    except (SnapshotError, CorruptBatchError, ValueError, OSError):
        return -1
    return -1


def _refuse(partition_dir: Path, name: str, why: str) -> None:
    log.error("refusing snapshot %s: %s; moved aside to %s%s", partition_dir / name, why, name, CORRUPT_SUFFIX)
    os.replace(partition_dir / name, partition_dir / (name + CORRUPT_SUFFIX))


def prepare_storage(mlog: MetadataLog, runner: StateMachineRunner | None) -> SnapshotId | None:
    """Clean leftovers, refuse bad snapshots, load the latest valid one into ``runner``.

    Returns the snapshot loaded (None: the state starts empty at the log start offset)."""
    pdir = mlog.dir
    for name in clean_leftovers(pdir):
        log.info("deleted the leftover snapshot file %s", pdir / name)
    for name in sorted(os.listdir(pdir)):
        if name.endswith(SUFFIX) and parse_snapshot_file_name(name) is None:
            _refuse(pdir, name, "the name is not <20-digit end offset>-<10-digit epoch>.checkpoint")
    loaded: SnapshotId | None = None
    for sid in reversed(list_snapshots(pdir)):
        name = snapshot_file_name(sid)
        try:
            validate_snapshot(pdir / name)
        except (SnapshotError, CorruptBatchError, ValueError) as e:
            _refuse(pdir, name, str(e).replace(f"{pdir / name}: ", ""))
            continue
        if loaded is None:
            loaded = sid
    start = mlog.start_offset
    if loaded is None and start > 0 or loaded is not None and loaded.offset < start:
        # the log was cleaned up to a snapshot that is gone: what remains cannot rebuild the state
        restart = loaded.offset if loaded is not None else 0
        log.error("no valid snapshot covers the log start offset %d in %s: the log restarts at offset "
                  "%d and the node catches up from the leader", start, pdir, restart)
        mlog.truncate_fully_and_start_at(restart)
    elif loaded is not None and loaded.offset > mlog.end_offset:
        mlog.truncate_fully_and_start_at(loaded.offset)
    if runner is not None:
        if loaded is not None and loaded.offset > 0:
            path = pdir / snapshot_file_name(loaded)
            runner.load_snapshot(snapshot_data_records(read_snapshot_batches(path)), loaded.offset,
                                 snapshot_timestamp(path))
            log.info("state loaded from snapshot %s; replaying the log from offset %d", path.name, loaded.offset)
        else:
            runner.next_offset = max(runner.next_offset, mlog.start_offset)
    return loaded


# ------------------------------------------------------------------ writing
def _encode_batches(records: SnapshotRecords, now_ms: int, yield_gil: bool) -> Iterator[bytes]:
    batch: list[Record] = []
    size = 0
    for n, (k, v) in enumerate(records):
        batch.append(Record(k, v, timestamp=now_ms))
        size += (len(k) if k else 0) + (len(v) if v else 0) + 16
        if yield_gil and n % YIELD_EVERY_RECORDS == 0:
            # In a worker thread: hand the GIL to the event loop often, so commits wait for
            # tens of microseconds of encoding, not for a whole switch interval (5 ms). (A
            # forked child has no loop to yield to: there it cost 15% of the write.)
            time.sleep(0)
        if len(batch) >= SNAPSHOT_BATCH_RECORDS or size >= SNAPSHOT_BATCH_BYTES:
            yield build_batch(batch, now_ms=now_ms)
            batch, size = [], 0
    if batch:
        yield build_batch(batch, now_ms=now_ms)


def write_state_snapshot(partition_dir: Path, sid: SnapshotId, writer: Callable[[], SnapshotRecords], *,
                         last_timestamp: int, kraft_version: int, voters: VotersRecord | None,
                         now_ms: int | None = None, yield_gil: bool = True) -> Path:
    """Write ``writer``'s records as snapshot ``sid`` (``.part``, fsync, rename); ``yield_gil``:
    running beside the node's event loop (a worker thread), not alone (a forked child)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return write_snapshot(partition_dir, sid, _encode_batches(writer(), now, yield_gil),
                          last_contained_log_timestamp=last_timestamp, now_ms=now,
                          kraft_version=kraft_version, voters=voters)


def epoch_at(mlog: MetadataLog, offset: int, default: int) -> int:
    """The epoch of the batch holding ``offset`` (from the leader epoch cache)."""
    epoch = default
    for e, start in mlog.epoch_entries():
        if start <= offset:
            epoch = e
        else:
            break
    return epoch


class SnapshotManager:
    """Decides when to snapshot, writes off the loop, then cleans (see the module doc).

    ``voters_at(offset)`` gives ``(kraft_version, VotersRecord | None)`` in force at an
    offset (the raft core's voter history), for the snapshot's header batch."""

    def __init__(self, mlog: MetadataLog, runner: StateMachineRunner, config: SnapshotConfig,
                 voters_at: Callable[[int], tuple[int, VotersRecord | None]],
                 on_snapshots_changed: Callable[[], None] = lambda: None,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.mlog = mlog
        self.runner = runner
        self.config = config
        self.voters_at = voters_at
        self.on_snapshots_changed = on_snapshots_changed
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.in_progress: SnapshotId | None = None
        self.last_snapshot_ms = self.clock_ms()
        self.generated: list[SnapshotId] = []
        self.failed: str | None = None

    def latest(self) -> SnapshotId | None:
        snaps = list_snapshots(self.mlog.dir)
        return snaps[-1] if snaps else None

    def due(self) -> bool:
        """Kafka's SnapshotGenerator triggers: bytes since the last snapshot, or the interval."""
        r = self.runner
        if self.in_progress is not None or not r.sm.snapshot_allowed():
            return False
        if r.bytes_since_snapshot <= 0 or r.next_offset <= self.mlog.start_offset:
            return False
        interval = self.config.max_snapshot_interval_ms
        if r.bytes_since_snapshot < self.config.max_bytes_between_snapshots and not (
                interval > 0 and self.clock_ms() - self.last_snapshot_ms >= interval):
            return False
        # a directory listing, so only once a trigger fired (run() asks 10 times a second):
        # a snapshot installed from the leader may already cover what was applied
        latest = self.latest()
        return latest is None or latest.offset < r.next_offset

    def capture(self, *, in_child: bool = False) -> tuple[SnapshotId, Callable[[], Path]]:
        """On the loop: fix the snapshot id and the state; returns the blocking write.

        ``in_child``: the write runs in a process forked now, whose memory is the state at
        this moment: the state machine's ``snapshot()`` is called there, not copied here."""
        r = self.runner
        end = r.next_offset
        latest = self.latest()
        sid = SnapshotId(end, epoch_at(self.mlog, end - 1, latest.epoch if latest else 0))
        sm = r.sm
        captured = None if in_child else sm.snapshot()
        kraft_version, voters = self.voters_at(end - 1)
        ts = r.last_timestamp
        r.bytes_since_snapshot = 0
        self.last_snapshot_ms = self.clock_ms()
        self.in_progress = sid
        pdir = self.mlog.dir

        def write() -> Path:
            writer = captured if captured is not None else sm.snapshot()
            return write_state_snapshot(pdir, sid, writer, last_timestamp=ts, kraft_version=kraft_version,
                                        voters=voters, yield_gil=not in_child)
        return sid, write

    async def maybe_generate(self) -> bool:
        """Generate a snapshot if one is due (written in a forked child process, or in a
        worker thread: ``SnapshotConfig.fork``)."""
        if not self.due():
            return False
        fork = self.config.fork
        sid, write = self.capture(in_child=fork)
        how = "in a worker thread"
        try:
            if fork:
                fork_ms = await run_in_child(write)
                path = self.mlog.dir / snapshot_file_name(sid)
                how = f"in a child process, forked in {fork_ms:.0f} ms"
            else:
                path = await anyio.to_thread.run_sync(write)
        except (OSError, ValueError) as e:
            log.error("writing snapshot %s failed: %s", snapshot_file_name(sid), e)
            self.failed = str(e)
            return False
        finally:
            self.in_progress = None
        self.generated.append(sid)
        log.info("generated snapshot %s (%d bytes, %s)", path.name, path.stat().st_size, how)
        self.on_snapshots_changed()
        self.maybe_clean()
        return True

    # -------------------------------------------------------------- following the log
    def catch_up(self, high_watermark: int, max_batches: int = 2000) -> bool:
        """Apply committed batches below ``high_watermark``; True if more remain.

        After a snapshot was installed (FetchSnapshot) the log starts above what was
        applied: the state is reloaded from that snapshot first."""
        r = self.runner
        if high_watermark <= r.next_offset:
            return False
        if r.next_offset < self.mlog.start_offset:
            self.reload_latest()
        # Batch by batch, stopping where a snapshot falls due (as Kafka's controller checks
        # after every committed batch): every replica snapshots at the same offsets.  Until
        # that snapshot is captured (``maybe_generate``), nothing more is applied, whoever calls.
        limit = self.config.max_bytes_between_snapshots
        if r.bytes_since_snapshot >= limit and self.due():
            return False
        applied = 0
        for b in self.mlog.batches(r.next_offset, high_watermark):
            r.apply_batches((b,), min(b.last_offset + 1, high_watermark))
            applied += 1
            if applied >= max_batches or (self.in_progress is None and r.bytes_since_snapshot >= limit
                                           and r.sm.snapshot_allowed()):
                break
        if applied == 0:
            return False
        return r.next_offset < high_watermark

    def reload_latest(self) -> None:
        sid = self.latest()
        if sid is None or sid.offset < self.mlog.start_offset:
            raise ValueError(f"no snapshot covers the log start offset {self.mlog.start_offset}")
        path = self.mlog.dir / snapshot_file_name(sid)
        try:
            self.runner.load_snapshot(snapshot_data_records(read_snapshot_batches(path)), sid.offset,
                                      snapshot_timestamp(path))
        except (SnapshotError, CorruptBatchError) as e:
            raise ValueError(f"snapshot {path}: {e}") from None
        log.info("state loaded from snapshot %s", path.name)
        if self._forget_below_log_start():
            self.on_snapshots_changed()

    async def run(self, high_watermark: Callable[[], int], clean_interval_s: float = 60.0) -> None:
        """Follow the high watermark, generate snapshots when due, clean periodically.

        Logs once when the state first reaches the high watermark it learned: the node's
        metadata is then loaded and current (Kafka's MetadataLoader logs "The loader finished
        catching up to the current high water mark"; the restart bench waits for either)."""
        next_clean = time.monotonic() + clean_interval_s
        caught_up = False
        while True:
            hw = high_watermark()
            try:
                more = self.catch_up(hw)
            except ValueError as e:
                log.error("cannot apply the committed log: %s; snapshots stop", e)
                self.failed = str(e)
                return
            if not caught_up and hw > 0 and self.runner.next_offset >= hw:
                caught_up = True
                log.info("the metadata state caught up with the high watermark %d", hw)
            if await self.maybe_generate():
                more = True
            if time.monotonic() >= next_clean:
                next_clean = time.monotonic() + clean_interval_s
                self.maybe_clean()
            await anyio.sleep(0 if more else 0.1)

    # -------------------------------------------------------------- cleaning
    def maybe_clean(self) -> bool:
        """``KafkaMetadataLog.maybeClean``: retention by size, then by time."""
        did = self._forget_below_log_start()
        did = self._clean_by_size() or did
        did = self._clean_by_time() or did
        if did:
            self.on_snapshots_changed()
        return did

    def _forget_below_log_start(self) -> bool:
        """Snapshots below the log start offset (left by an installed snapshot, which
        restarts the log at its end: Kafka's ``truncateToLatestSnapshot`` forgets them)."""
        snaps = list_snapshots(self.mlog.dir)
        start = self.mlog.start_offset
        old = [s for s in snaps[:-1] if s.offset < start]
        for sid in old:
            self._delete_snapshot_file(sid, start)
        return bool(old)

    def _delete_snapshot_file(self, sid: SnapshotId, start: int) -> None:
        name = snapshot_file_name(sid)
        deleted = self.mlog.dir / (name + DELETED_SUFFIX)
        os.replace(self.mlog.dir / name, deleted)   # Kafka's Snapshots.markForDelete
        os.unlink(deleted)
        log.info("deleted snapshot %s: the log start offset is now %d", name, start)

    def _log_size(self) -> int:
        return sum(size for _b, _e, size in self.mlog.segments())

    def _clean(self, should_delete: Callable[[SnapshotId], bool]) -> bool:
        snaps = list_snapshots(self.mlog.dir)
        did = False
        for older, nxt in zip(snaps, snaps[1:], strict=False):
            if not should_delete(older):
                return did
            if not self.delete_before_snapshot(nxt):
                return did
            did = True
        return did

    def _clean_by_size(self) -> bool:
        limit = self.config.retention_bytes
        if limit < 0:
            return False
        sizes = {s: (self.mlog.dir / snapshot_file_name(s)).stat().st_size
                 for s in list_snapshots(self.mlog.dir)}
        total = [sum(sizes.values())]

        def should(s: SnapshotId) -> bool:
            if self._log_size() + total[0] > limit:
                total[0] -= sizes.get(s, 0)
                return True
            return False
        return self._clean(should)

    def _clean_by_time(self) -> bool:
        limit = self.config.retention_ms
        if limit < 0:
            return False
        now = self.clock_ms()

        def should(s: SnapshotId) -> bool:
            ts = snapshot_timestamp(self.mlog.dir / snapshot_file_name(s))
            return ts >= 0 and now - ts > limit
        return self._clean(should)

    def delete_before_snapshot(self, sid: SnapshotId) -> bool:
        """Advance the log start offset to ``sid`` (a durable snapshot, not past the latest),
        delete the segments wholly below it and every older snapshot."""
        snaps = list_snapshots(self.mlog.dir)
        if sid not in snaps or sid.offset <= self.mlog.start_offset or sid.offset > snaps[-1].offset:
            return False
        if sid.offset > self.mlog.end_offset:
            return False
        segments = self.mlog.advance_start_offset(sid.offset)
        for old in snaps:
            if old >= sid:
                break
            self._delete_snapshot_file(old, sid.offset)
        log.info("log start offset advanced to %d (snapshot %s); %d segment(s) deleted", sid.offset,
                 snapshot_file_name(sid), segments)
        return True


def voters_record(voters: Any) -> VotersRecord:
    """A raft ``VoterSet`` as the VotersRecord a snapshot's header batch carries."""
    rec = to_control_messages([VotersControlRecord(voters)])[0]
    assert isinstance(rec, VotersRecord)
    return rec


def voters_at(node: Any, offset: int) -> tuple[int, VotersRecord | None]:
    """(kraft.version, voters) in force at ``offset`` per a raft node's voter history: a
    static quorum (no voters record ever) writes kraft.version 0 and no voters."""
    history = node.history
    if history.latest_voters_offset() is None:
        return 0, None
    return 1, voters_record(history.voters_at(offset))
