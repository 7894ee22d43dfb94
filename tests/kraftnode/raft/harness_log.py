"""MemoryRaftLog plus what only a test harness does to a log: crash and compact.

The core and the server never crash or compact a log themselves (the server's on-disk
log does its own cleaning); the unit tests and the simulation do, so these live here.
"""

from __future__ import annotations

import bisect
import pickle

from kraftnode.raft.log import MemoryRaftLog, OffsetAndEpoch


class HarnessLog(MemoryRaftLog):
    """A :class:`MemoryRaftLog` that can lose its unflushed tail and compact a prefix."""

    def crash(self, keep_unflushed_batches: int = 0) -> None:
        """Simulate a crash: the unflushed tail is lost except its first N batches."""
        i = bisect.bisect_left(self._bases, self.flushed_offset)
        keep = min(i + keep_unflushed_batches, len(self.batches))
        self.truncate_to(self.batches[keep - 1].next_offset if keep > 0 else self._start)
        self.flushed_offset = self.end_offset

    def compact(self, offset: int, delete: bool = True) -> OffsetAndEpoch:
        """Snapshot everything below ``offset`` (a batch boundary, committed) and delete it
        (``delete=False``: keep it, as the server's log does until its retention is exceeded)."""
        if offset <= self._start or offset > self.flushed_offset:
            raise ValueError(f"cannot snapshot at {offset}: log holds {self._start}..{self.flushed_offset}")
        i = bisect.bisect_left(self._bases, offset)
        if i >= len(self._bases) + 1 or (i < len(self._bases) and self._bases[i] != offset) or (
            i == len(self._bases) and self.end_offset != offset
        ):
            raise ValueError(f"{offset} is not a batch boundary")
        removed = self.batches[:i]
        epoch = removed[-1].epoch
        self.snapshot_batches = self.snapshot_batches + removed
        self.snapshot_id = OffsetAndEpoch(epoch, offset)
        self._snapshot_bytes = pickle.dumps(self.snapshot_batches)
        if not delete:
            return self.snapshot_id
        del self.batches[:i]
        del self._bases[:i]
        self._start = offset
        # Keep the epoch covering the new start, starting there (as Kafka's epoch cache does).
        kept = [(e, max(s, offset)) for j, (e, s) in enumerate(self._epochs)
                if j + 1 == len(self._epochs) or self._epochs[j + 1][1] > offset]
        self._epochs = kept if self.batches else []
        return self.snapshot_id
