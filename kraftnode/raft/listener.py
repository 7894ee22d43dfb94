"""Application-facing side of the commit interface: listeners and a dispatcher.

The core announces commits with ``HighWatermarkAdvanced`` actions and leader
changes with ``StateChanged``; it never calls application code itself (that
would run before the driver has executed the preceding barrier actions). A
driver feeds every *executed* action to :class:`CommitDispatcher`, which reads
the newly committed batches from the log and hands them to the listeners in
offset order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kraftnode.raft.actions import Action, HighWatermarkAdvanced, StateChanged
from kraftnode.raft.batches import Batch
from kraftnode.raft.log import RaftLog


class RaftListener(Protocol):
    """What an application implements to follow the replicated log."""

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        """Committed batches, contiguous and in offset order, each delivered once."""
        ...

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        """The known leader changed (``leader_id`` -1: none known in ``epoch``)."""
        ...


class CommitDispatcher:
    """Delivers committed batches and leader changes to registered listeners."""

    def __init__(self, log: RaftLog, max_bytes_per_read: int = 1 << 20) -> None:
        self.log = log
        self.max_bytes_per_read = max_bytes_per_read
        self.next_offset = log.start_offset
        self.high_watermark = 0
        self._listeners: list[RaftListener] = []
        self._leader: tuple[int, int] | None = None

    def register(self, listener: RaftListener) -> None:
        self._listeners.append(listener)

    def on_action(self, action: Action) -> None:
        """Call with each action after the driver has executed it."""
        if isinstance(action, HighWatermarkAdvanced):
            self.high_watermark = max(self.high_watermark, action.high_watermark)
            self._deliver()
        elif isinstance(action, StateChanged):
            leader = (action.leader_id, action.epoch)
            if leader != self._leader:
                self._leader = leader
                for listener in self._listeners:
                    listener.handle_leader_change(action.leader_id, action.epoch)

    def _deliver(self) -> None:
        while self.next_offset < self.high_watermark:
            batches = self.log.read(self.next_offset, self.max_bytes_per_read)
            ready = [b for b in batches if b.last_offset < self.high_watermark]
            if not ready:
                return  # the HW is inside a batch: wait until the whole batch commits
            for listener in self._listeners:
                listener.handle_commit(ready)
            self.next_offset = ready[-1].last_offset + 1
