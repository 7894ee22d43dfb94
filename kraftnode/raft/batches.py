"""Batches as the core sees them, and the typed control records it understands.

A batch covers offsets ``base_offset..last_offset`` written in leader ``epoch``.
Application records are opaque objects the core never inspects (the on-disk log
adapter may hand over a whole v2 record batch as one bytes object, with
``last_offset`` taken from its header). Control batches carry decoded control
records, because the core must react to LeaderChange, Voters and KRaftVersion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kraftnode.raft.voters import ReplicaKey, VoterSet


@dataclass(frozen=True, slots=True)
class LeaderChangeRecord:
    """Control record type 2: written by a new leader at the start of its epoch."""

    leader_id: int
    voters: tuple[ReplicaKey, ...]
    granting_voters: tuple[ReplicaKey, ...]
    version: int = 0


@dataclass(frozen=True, slots=True)
class VotersControlRecord:
    """Control record type 5 (VotersRecord): the voter set from this offset on."""

    voters: VoterSet
    version: int = 0


@dataclass(frozen=True, slots=True)
class KRaftVersionControlRecord:
    """Control record type 6 (KRaftVersionRecord): the kraft.version from this offset on."""

    kraft_version: int
    version: int = 0


ControlRecord = LeaderChangeRecord | VotersControlRecord | KRaftVersionControlRecord


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch of the replicated log.

    ``records`` holds opaque application records, or :data:`ControlRecord`
    instances when ``is_control`` is true. ``size_bytes`` is what the batch costs
    against a Fetch's max_bytes (the encoded size for the on-disk log).
    """

    base_offset: int
    last_offset: int
    epoch: int
    records: Sequence[object]
    is_control: bool = False
    size_bytes: int = 64

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def record_count(self) -> int:
        return self.last_offset - self.base_offset + 1

    def control_records(self) -> list[ControlRecord]:
        """The typed control records of a control batch (empty for data batches)."""
        if not self.is_control:
            return []
        return [
            r
            for r in self.records
            if isinstance(r, LeaderChangeRecord | VotersControlRecord | KRaftVersionControlRecord)
        ]
