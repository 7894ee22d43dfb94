"""The durable quorum-state value (Kafka's ElectionState / QuorumStateData)."""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.raft.voters import ReplicaKey


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What must survive a restart: the epoch, its known leader, and this node's vote.

    Written by the driver to ``quorum-state`` (data_version = kraft.version).
    ``leader_id`` is -1 when no leader is known; ``voted_key`` is None when the
    node has not voted in ``epoch``.
    """

    epoch: int
    leader_id: int = -1
    voted_key: ReplicaKey | None = None

    @property
    def has_leader(self) -> bool:
        return self.leader_id >= 0

    @property
    def voted_id(self) -> int:
        return self.voted_key.id if self.voted_key is not None else -1
