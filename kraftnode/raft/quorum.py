"""Quorum arithmetic, as pure functions (etcd's ``quorum/`` package, Kafka's LeaderState sums).

Every question of "how many is enough" the leader asks lives here, with table tests of its own
(tests/kraftnode/raft/test_quorum.py): the offset a majority of voters has replicated, whether a
high watermark may move to it (Raft's figure-8 rule), and how many other voters must fetch for
check-quorum to hold. :class:`~kraftnode.raft.tracker.ReplicaTracker` keeps the per-replica
state and asks these functions.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["majority", "majority_offset", "advanced_high_watermark", "commits_current_epoch",
           "other_voters_needed"]


def majority(voter_count: int) -> int:
    """How many voters make a majority of ``voter_count`` voters (1 of 1, 2 of 2 or 3, 3 of 4 or 5)."""
    return voter_count // 2 + 1


def majority_offset(voter_end_offsets: Iterable[int]) -> int:
    """The largest offset that a majority of voters has durably replicated (-1 with no voters):
    the median from the top, so that with 2k+1 or 2k+2 voters k+1 of them are at or above it."""
    offsets = sorted(voter_end_offsets, reverse=True)
    return offsets[len(offsets) // 2] if offsets else -1


def commits_current_epoch(offset: int, epoch_start_offset: int) -> bool:
    """Raft's figure-8 rule (Kafka's LeaderState.maybeUpdateHighWatermark): a high watermark at
    ``offset`` must cover an entry of this epoch, i.e. pass the epoch start offset, before
    earlier epochs' entries count as committed."""
    return offset > epoch_start_offset


def advanced_high_watermark(majority_offset: int, current_hw: int) -> int | None:
    """The new high watermark from a majority offset that passed :func:`commits_current_epoch`,
    or None if it cannot advance: never below the current high watermark (it does not go back
    when the voter set shrinks or a voter restarts with less)."""
    return majority_offset if majority_offset > current_hw else None


def other_voters_needed(voter_count: int, leader_is_voter: bool) -> int:
    """How many voters other than the leader must fetch within the check-quorum timeout
    (Kafka's LeaderState.updateCheckQuorumForFollowingVoter): a majority, less the leader itself
    when it votes; 0 when the leader alone is a majority (check-quorum does not apply)."""
    return majority(voter_count) - (1 if leader_is_voter else 0)
