"""What the Raft core needs from a replicated log, and an in-memory implementation.

The core mutates the log directly through :class:`RaftLog` (appends and
truncations must be visible to its next read) but never makes anything durable
itself: durability is the driver's job, requested with a ``FlushLog`` action.
The on-disk log (``kraftnode/log/``) is adapted to this protocol by the server.

Offsets follow Kafka: ``end_offset`` is the offset the next record gets; the
high watermark is exclusive (records below it are committed).
"""

from __future__ import annotations

import bisect
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kraftnode.raft.batches import Batch, ControlRecord


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """An (end) offset and the epoch it belongs to; ordered by epoch first, as Kafka does."""

    epoch: int
    offset: int


#: Kafka's "undefined" answer of the epoch cache.
UNDEFINED = OffsetAndEpoch(-1, -1)


class RaftLog(Protocol):
    """The log operations the core uses. Implementations must be deterministic."""

    @property
    def start_offset(self) -> int:
        """First offset still in the log (the latest snapshot's end offset, or 0)."""
        ...

    @property
    def end_offset(self) -> int:
        """The offset the next appended record will get."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch (or of the latest snapshot when the log is empty), 0 if none."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's leader-epoch-cache lookup.

        Returns the largest epoch <= ``epoch`` present in the log and the offset
        where it ends (the start of the next higher epoch, or ``end_offset`` for the
        latest epoch). When ``epoch`` is older than every epoch in the log, returns
        ``(epoch, start offset of the first epoch)``; when the cache is empty or
        ``epoch`` is newer than every epoch, returns the latest epoch and ``end_offset``.
        """
        ...

    def append_as_leader(self, records: Sequence[object], epoch: int, is_control: bool = False) -> Batch:
        """Append one batch at ``end_offset`` stamped with ``epoch``; return it."""
        ...

    def append_as_follower(self, batches: Sequence[Batch]) -> None:
        """Append batches received from the leader; the first must start at ``end_offset``."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every batch containing offsets >= ``offset``; no-op when offset >= end."""
        ...

    def read(self, from_offset: int, max_bytes: int) -> list[Batch]:
        """Batches from ``from_offset`` on, at least one if any exists, then up to ``max_bytes``."""
        ...

    def control_batches(self, from_offset: int) -> Iterable[Batch]:
        """The control batches at or after ``from_offset`` (to rebuild the voter set at start)."""
        ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """(epoch, end offset) of the latest snapshot, or None."""
        ...

    def latest_snapshot_control_records(self) -> Sequence[ControlRecord]:
        """Control records (Voters, KRaftVersion) stored in the latest snapshot."""
        ...

    def flush(self) -> None:
        """Make every appended batch durable. Called by the driver, never by the core."""
        ...


class MemoryRaftLog:
    """An in-memory :class:`RaftLog` (and snapshot store) with an explicit durability point.

    ``flushed_offset`` is the end offset as of the last :meth:`flush`. A snapshot is
    the pickled batches below it (a test-only format); the tests' ``HarnessLog``
    (tests/kraftnode/raft/harness_log.py) adds what only a harness needs: losing the
    unflushed tail in a crash and compacting a prefix into a snapshot.
    """

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self._bases: list[int] = []
        # (epoch, start offset) pairs, ascending.
        self._epochs: list[tuple[int, int]] = []
        self.flushed_offset = 0
        self._start = 0
        self.snapshot_id: OffsetAndEpoch | None = None
        self.snapshot_batches: list[Batch] = []
        self._snapshot_bytes = b""
        self._download: tuple[OffsetAndEpoch, bytearray] | None = None

    # -- queries ------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self._start

    @property
    def last_fetched_epoch(self) -> int:
        if self.batches:
            return self.batches[-1].epoch
        return self.snapshot_id.epoch if self.snapshot_id is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        if epoch < 0:
            return UNDEFINED
        epochs = self._epochs
        if not epochs:
            return OffsetAndEpoch(min(epoch, self.last_fetched_epoch), self.end_offset)
        latest_epoch = epochs[-1][0]
        if epoch >= latest_epoch:
            return OffsetAndEpoch(latest_epoch, self.end_offset)
        # First entry with epoch > requested.
        i = bisect.bisect_right(epochs, epoch, key=lambda e: e[0])
        higher_start = epochs[i][1]
        if i == 0:
            snap = self.snapshot_id
            if snap is not None and epoch >= snap.epoch:
                # Older than every epoch left in the log: the snapshot says where it ends.
                return OffsetAndEpoch(snap.epoch, snap.offset)
            return OffsetAndEpoch(epoch, higher_start)
        return OffsetAndEpoch(epochs[i - 1][0], higher_start)

    def read(self, from_offset: int, max_bytes: int) -> list[Batch]:
        i = bisect.bisect_right(self._bases, from_offset) - 1
        if i < 0:
            i = 0
        out: list[Batch] = []
        used = 0
        for batch in self.batches[i:]:
            if batch.last_offset < from_offset:
                continue
            if out and used + batch.size_bytes > max_bytes:
                break
            out.append(batch)
            used += batch.size_bytes
        return out

    def control_batches(self, from_offset: int) -> Iterable[Batch]:
        return [b for b in self.batches if b.is_control and b.last_offset >= from_offset]

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return self.snapshot_id

    def latest_snapshot_control_records(self) -> Sequence[ControlRecord]:
        return [r for b in self.snapshot_batches for r in b.control_records()]

    def batch_at(self, offset: int) -> Batch | None:
        """The batch containing ``offset``, also inside the snapshot (for tests and checks)."""
        if offset < self._start:
            j = bisect.bisect_right(self.snapshot_batches, offset, key=lambda b: b.base_offset) - 1
            if j >= 0 and self.snapshot_batches[j].last_offset >= offset:
                return self.snapshot_batches[j]
            return None
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0 or i >= len(self.batches):
            return None
        batch = self.batches[i]
        return batch if batch.base_offset <= offset <= batch.last_offset else None

    # -- mutations ----------------------------------------------------------
    def _push(self, batch: Batch) -> None:
        if batch.base_offset != self.end_offset:
            raise ValueError(
                f"batch base offset {batch.base_offset} is not the log end offset {self.end_offset}"
            )
        if batch.last_offset < batch.base_offset:
            raise ValueError("empty batch")
        if batch.epoch < self.last_fetched_epoch:
            raise ValueError(f"batch epoch {batch.epoch} below the log's epoch {self.last_fetched_epoch}")
        if not self._epochs or self._epochs[-1][0] != batch.epoch:
            self._epochs.append((batch.epoch, batch.base_offset))
        self.batches.append(batch)
        self._bases.append(batch.base_offset)

    def append_as_leader(self, records: Sequence[object], epoch: int, is_control: bool = False) -> Batch:
        if not records:
            raise ValueError("cannot append an empty batch")
        base = self.end_offset
        batch = Batch(base, base + len(records) - 1, epoch, tuple(records), is_control,
                      size_bytes=64 + 16 * len(records))
        self._push(batch)
        return batch

    def append_as_follower(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            self._push(batch)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset}, below the log start {self._start}")
        i = bisect.bisect_left(self._bases, offset)
        # A batch straddling ``offset`` goes too (Kafka truncates whole batches).
        if i > 0 and self.batches[i - 1].last_offset >= offset:
            i -= 1
        del self.batches[i:]
        del self._bases[i:]
        new_end = self.end_offset
        while self._epochs and self._epochs[-1][1] >= new_end:
            self._epochs.pop()
        self.flushed_offset = min(self.flushed_offset, new_end)

    def flush(self) -> None:
        self.flushed_offset = self.end_offset

    # -- snapshots (SnapshotStore) -------------------------------------------
    def read_snapshot_chunk(
        self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        if snapshot_id != self.snapshot_id:
            return None
        data = self._snapshot_bytes
        return data[position:position + max(1, max_bytes)], len(data)

    def begin_snapshot_download(self, snapshot_id: OffsetAndEpoch) -> None:
        self._download = (snapshot_id, bytearray())

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        if self._download is None or self._download[0] != snapshot_id or position != len(self._download[1]):
            raise ValueError("snapshot chunk out of order")
        self._download[1].extend(data)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> Sequence[ControlRecord]:
        if self._download is None or self._download[0] != snapshot_id:
            raise ValueError("no such snapshot download")
        data = bytes(self._download[1])
        self._download = None
        batches: list[Batch] = pickle.loads(data)  # test-only format written by compact()
        self.batches.clear()
        self._bases.clear()
        self._epochs.clear()
        self.snapshot_batches = batches
        self.snapshot_id = snapshot_id
        self._snapshot_bytes = data
        self._start = snapshot_id.offset
        self.flushed_offset = self._start
        return self.latest_snapshot_control_records()
