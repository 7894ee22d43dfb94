"""The leader epoch cache and its ``leader-epoch-checkpoint`` file.

Divergence detection (KIP-595 fetch validation) asks "where does epoch E end in
your log?".  Kafka answers from ``LeaderEpochFileCache``, a sorted list of
(epoch, start offset) pairs; we keep the same list with the same update and query
rules so that our answers match a Kafka replica's byte for byte.

The file is rewritten atomically (temp, fsync, rename, fsync dir) on every change;
epoch changes are rare (one per election), so this costs nothing on the hot path.
On open, the log truncates the cache to its recovered end offset and re-assigns
epochs from the batches it re-scanned, so a checkpoint that ran ahead of or behind
the log is repaired, as Kafka does during recovery.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path

from kraftnode.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

__all__ = ["EpochEntry", "LeaderEpochCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
FILE_NAME = "leader-epoch-checkpoint"

EpochEntry = tuple[int, int]  # (epoch, start_offset)


class LeaderEpochCache:
    """Epoch -> start offset, persisted in Kafka's ``leader-epoch-checkpoint`` format."""

    def __init__(self, path: str | os.PathLike[str] | None, entries: list[EpochEntry] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._entries: list[EpochEntry] = list(entries or [])

    @classmethod
    def load(cls, partition_dir: str | os.PathLike[str]) -> LeaderEpochCache:
        path = Path(partition_dir) / FILE_NAME
        rows = read_checkpoint(path, 2)
        entries: list[EpochEntry] = []
        for row in rows or []:
            try:
                epoch, start = int(row[0]), int(row[1])
            except ValueError:
                raise CheckpointError(f"{path}: malformed entry {' '.join(row)!r}") from None
            if entries and (epoch <= entries[-1][0] or start < entries[-1][1]):
                raise CheckpointError(f"{path}: entries are not increasing at epoch {epoch}")
            entries.append((epoch, start))
        return cls(path, entries)

    # -- queries -----------------------------------------------------------------------------
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the entry whose start offset is the greatest <= ``offset``."""
        idx = bisect.bisect_right([s for _, s in self._entries], offset) - 1
        return self._entries[idx][0] if idx >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``LeaderEpochFileCache.endOffsetFor``: ``(epoch, end offset)``.

        - undefined epoch, or one above every known epoch -> ``(-1, -1)``;
        - the latest epoch -> ``(epoch, log_end_offset)``;
        - otherwise the start offset of the next higher epoch, paired with the greatest
          known epoch <= the requested one (or the requested epoch itself when it is
          below every known epoch).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and requested_epoch == self._entries[-1][0]:
            return requested_epoch, log_end_offset
        epochs = [e for e, _ in self._entries]
        hi = bisect.bisect_right(epochs, requested_epoch)
        if hi >= len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_start = self._entries[hi][1]
        if hi == 0:
            return requested_epoch, higher_start
        return self._entries[hi - 1][0], higher_start

    # -- updates -----------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``assign``); True if changed."""
        if epoch < 0:
            return False
        last = self.latest_entry()
        if last is not None and not (epoch != last[0] or start_offset < last[1]):
            return False
        kept = [(e, s) for e, s in self._entries if not (e >= epoch or s >= start_offset)]
        if not kept or epoch > kept[-1][0]:
            kept.append((epoch, start_offset))
        if kept == self._entries:
            return False
        self._entries = kept
        if persist:
            self.flush()
        return True

    def truncate_from_end(self, end_offset: int, *, persist: bool = True) -> bool:
        """Drop entries starting at or after ``end_offset`` (log truncated to ``end_offset``)."""
        kept = [(e, s) for e, s in self._entries if s < end_offset]
        if kept == self._entries:
            return False
        self._entries = kept
        if persist:
            self.flush()
        return True

    def truncate_from_start(self, start_offset: int, *, persist: bool = True) -> bool:
        """Forget epochs wholly before ``start_offset``; the one covering it now starts there."""
        below = [(e, s) for e, s in self._entries if s <= start_offset]
        if not below:
            return False
        rest = [(e, s) for e, s in self._entries if s > start_offset]
        kept = [(below[-1][0], start_offset)] + rest
        if kept == self._entries:
            return False
        self._entries = kept
        if persist:
            self.flush()
        return True

    def clear(self, *, persist: bool = True) -> None:
        self._entries = []
        if persist:
            self.flush()

    def flush(self) -> None:
        if self.path is not None:
            write_checkpoint(self.path, self._entries)
