"""Voter set and kraft.version as of each log offset (Kafka's VoterSetHistory).

The latest value includes *uncommitted* entries (KIP-853: a voter set takes
effect as soon as it is appended); truncating the log reverts it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from kraftnode.raft.batches import Batch, KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.log import RaftLog
from kraftnode.raft.voters import VoterSet


class VoterSetHistory:
    """Voter sets and kraft.versions keyed by the offset of the record that set them."""

    @staticmethod
    def load(static_voters: VoterSet, log: RaftLog) -> VoterSetHistory:
        """The history as of ``log``: its latest snapshot's control records, then the
        control batches after the snapshot (at start-up and after installing a snapshot)."""
        history = VoterSetHistory(static_voters)
        snap = log.latest_snapshot_id()
        if snap is not None:
            history.load_snapshot(log.latest_snapshot_control_records(), snap.offset)
        history.observe(log.control_batches(log.start_offset))
        return history

    def __init__(self, static_voters: VoterSet) -> None:
        self.static_voters = static_voters
        self._voter_offsets: list[int] = []
        self._voter_sets: list[VoterSet] = []
        self._version_offsets: list[int] = []
        self._versions: list[int] = []

    def latest(self) -> VoterSet:
        return self._voter_sets[-1] if self._voter_sets else self.static_voters

    def latest_voters_offset(self) -> int | None:
        """Offset of the record that set the latest voter set: -1 for the bootstrap
        checkpoint (0-0), None for the static set of ``controller.quorum.voters``."""
        return self._voter_offsets[-1] if self._voter_offsets else None

    def kraft_version(self) -> int:
        return self._versions[-1] if self._versions else 0

    def voters_at(self, offset: int) -> VoterSet:
        """The voter set in force for a record at ``offset``."""
        i = bisect.bisect_right(self._voter_offsets, offset)
        return self._voter_sets[i - 1] if i > 0 else self.static_voters

    def observe(self, batches: Iterable[Batch]) -> bool:
        """Record the control records of newly appended batches; True if the voter set changed."""
        changed = False
        for batch in batches:
            if not batch.is_control:
                continue
            offset = batch.base_offset
            for record in batch.control_records():
                if isinstance(record, VotersControlRecord):
                    self._voter_offsets.append(offset)
                    self._voter_sets.append(record.voters)
                    changed = True
                elif isinstance(record, KRaftVersionControlRecord):
                    self._version_offsets.append(offset)
                    self._versions.append(record.kraft_version)
                offset += 1
        return changed

    def load_snapshot(self, records: Iterable[object], snapshot_end_offset: int) -> None:
        """Take the control records of a snapshot as in force just before its end offset."""
        offset = max(snapshot_end_offset - 1, -1)
        for record in records:
            if isinstance(record, VotersControlRecord):
                self._voter_offsets.append(offset)
                self._voter_sets.append(record.voters)
            elif isinstance(record, KRaftVersionControlRecord):
                self._version_offsets.append(offset)
                self._versions.append(record.kraft_version)

    def truncate_new_entries(self, end_offset: int) -> bool:
        """Forget values set at offsets >= ``end_offset``; True if the voter set changed."""
        i = bisect.bisect_left(self._voter_offsets, end_offset)
        changed = i < len(self._voter_offsets)
        del self._voter_offsets[i:]
        del self._voter_sets[i:]
        j = bisect.bisect_left(self._version_offsets, end_offset)
        del self._version_offsets[j:]
        del self._versions[j:]
        return changed
