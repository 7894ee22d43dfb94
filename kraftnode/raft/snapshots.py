"""Optional snapshot transfer (FetchSnapshot, KIP-630) as seen by the core.

A node built without a :class:`SnapshotStore` answers FetchSnapshot with
SNAPSHOT_NOT_FOUND and, as a follower told to fetch a snapshot, keeps retrying.
With one, the leader serves chunks of its latest snapshot and a follower whose
fetch position fell below the leader's log start downloads it, installs it
(the log then starts at the snapshot's end offset) and resumes fetching.
Snapshots only ever hold committed data, so installing one also raises the
high watermark to its end offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kraftnode.raft.batches import ControlRecord
from kraftnode.raft.log import OffsetAndEpoch


class SnapshotStore(Protocol):
    def read_snapshot_chunk(
        self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        """``(bytes from position, total size)`` of snapshot ``snapshot_id``; None if absent."""
        ...

    def begin_snapshot_download(self, snapshot_id: OffsetAndEpoch) -> None:
        """Start receiving ``snapshot_id`` (discarding any partial download)."""
        ...

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        """Store ``data`` at ``position`` of the snapshot being downloaded."""
        ...

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> Sequence[ControlRecord]:
        """Freeze the download and reset the log to start at its end offset.

        Must be durable by the time the next ``FlushLog`` completes. Returns the
        snapshot's control records (KRaftVersion, Voters) for the voter history.
        """
        ...
