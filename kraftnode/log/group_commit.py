"""Group commit: many callers ask for durability, one ``fdatasync`` serves them all.

Callers from any thread ask :meth:`GroupCommit.flush` to make the log durable up to the end
offset they saw.  While one caller runs the sync, the others wait; when it returns, everyone
whose offset it covered is done, and the next caller still short of its target runs the
next sync for everything appended meanwhile.  Nothing is reported durable before its sync
returns, and a failed sync reports nothing.

The same turn-taking serves the log's exclusive operations (truncation, deleting segments,
closing): :meth:`GroupCommit.exclusive` waits for a running sync and keeps the next one out,
so a sync never sees files half truncated.

Lock order: the log's own lock may be held while this object's condition is taken, never
the other way round (a sync takes the log's lock itself, briefly, to see what is dirty).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["GroupCommit"]


class GroupCommit:
    """The flushed end offset of one log, and whose turn it is to sync."""

    def __init__(self, flushed_offset: int) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._busy = False
        self._flushed_offset = flushed_offset

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is durable."""
        with self._cv:
            return self._flushed_offset

    def flush(self, target: int, sync: Callable[[], int]) -> int:
        """Make offsets below ``target`` durable; return the flushed end offset.

        ``sync`` runs alone (no other sync, no exclusive operation), fsyncs what was appended
        and returns the end offset it covered; when it raises, nothing new counts as durable."""
        with self._cv:
            while True:
                if self._flushed_offset >= target:
                    return self._flushed_offset
                if not self._busy:
                    break
                self._cv.wait()
            self._busy = True
        synced_to = -1
        ok = False
        try:
            synced_to = sync()
            ok = True
        finally:
            with self._cv:
                if ok:
                    self._flushed_offset = max(self._flushed_offset, synced_to)
                self._busy = False
                self._cv.notify_all()
        with self._cv:
            return self._flushed_offset

    def lower_to(self, offset: int) -> None:
        """The log was truncated to ``offset``: nothing above it is durable any more."""
        with self._cv:
            self._flushed_offset = min(self._flushed_offset, offset)

    def reset_to(self, offset: int) -> None:
        """The log restarted at ``offset``, everything durable (a snapshot was installed)."""
        with self._cv:
            self._flushed_offset = offset

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Exclusive use of the files against a concurrent sync (and other exclusive users)."""
        with self._cv:
            while self._busy:
                self._cv.wait()
            self._busy = True
        try:
            yield
        finally:
            with self._cv:
                self._busy = False
                self._cv.notify_all()
