"""Planted bugs, to prove the simulation (and the unit tests) can catch them.

Each plant is a subclass of the core (:class:`RaftNode`) that overrides one of the rules
a test may replace (``grants_vote``, ``grants_pre_vote``, ``read_round_confirmed``, ...:
the table at the end of :class:`RaftNode`) with a broken version. The core itself knows
nothing of them: :func:`node_class` builds the class a test constructs instead of ``RaftNode``.
"""

from __future__ import annotations

from functools import cache

from kraftnode.raft.actions import PersistElectionState, SendResponse, StateChanged
from kraftnode.raft.messages import DivergingEpoch, FetchResponse, VoteRequest, VoteResponse
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.rules import replication
from kraftnode.raft.states import LeaderState, VotedState
from kraftnode.raft.tracker import ReplicaProgress, ReplicaTracker
from kraftnode.raft.voters import ReplicaKey, VoterSet

#: Advance the high watermark without requiring an entry of the current epoch.
HW_WITHOUT_CURRENT_EPOCH = "hw_without_current_epoch"
#: Grant a vote to a second candidate in an epoch where we already voted.
DOUBLE_VOTE = "double_vote"
#: Send the vote-granting response before persisting the vote.
REPLY_BEFORE_PERSIST = "reply_before_persist"
#: Ignore the DivergingEpoch of a fetch response (no truncation), still adopt the HW.
SKIP_DIVERGENCE_TRUNCATION = "skip_divergence_truncation"
#: Leadership transfer: resign at once, without waiting for the successor to catch up.
TRANSFER_WITHOUT_CATCH_UP = "transfer_without_catch_up"
#: Read index: complete reads without waiting for a majority to confirm leadership.
STALE_READ = "stale_read"
#: KIP-996: grant pre-votes even while following a live leader (no stickiness).
PRE_VOTE_IGNORES_LEADER = "pre_vote_ignores_leader"

ALL: dict[str, str] = {
    HW_WITHOUT_CURRENT_EPOCH: "leader advances HW over old-epoch entries (Raft figure 8)",
    DOUBLE_VOTE: "voter grants two candidates in one epoch",
    REPLY_BEFORE_PERSIST: "vote reply sent before the vote is durable",
    SKIP_DIVERGENCE_TRUNCATION: "follower ignores DivergingEpoch but adopts the HW",
    PRE_VOTE_IGNORES_LEADER: "follower grants pre-votes while it hears from its leader",
    TRANSFER_WITHOUT_CATCH_UP: "leadership transfer resigns before the successor has the leader's log",
    STALE_READ: "a leader answers linearizable reads without confirming its leadership",
}


def validate(plants: frozenset[str]) -> frozenset[str]:
    unknown = plants - ALL.keys()
    if unknown:
        raise ValueError(f"unknown plants: {sorted(unknown)}")
    return plants


class _OldEpochTracker(ReplicaTracker):
    def commits_current_epoch(self, offset: int) -> bool:
        return True


class _HwWithoutCurrentEpoch(RaftNode):
    def replica_tracker(self, epoch: int, epoch_start: int, voters: VoterSet, now_ms: int) -> ReplicaTracker:
        return _OldEpochTracker(self.local_key, epoch, epoch_start, voters, now_ms,
                                self.config.check_quorum_timeout_ms)


class _DoubleVote(RaftNode):
    def grants_vote(self, candidate: ReplicaKey, up_to_date: bool) -> bool:
        if isinstance(self.state, VotedState) and candidate.id != self.local_key.id and up_to_date:
            return True
        return super().grants_vote(candidate, up_to_date)


class _ReplyBeforePersist(RaftNode):
    """The vote's own PersistElectionState (of the move to voted) goes after the reply."""

    def on_vote_request(self, request_id: int, req: VoteRequest, now_ms: int) -> None:
        before = self.take_actions()
        super().on_vote_request(request_id, req, now_ms)
        new = self.take_actions()
        voted = [i for i, a in enumerate(new) if isinstance(a, StateChanged) and a.state == "voted"]
        granted = any(isinstance(a, SendResponse) and isinstance(a.response, VoteResponse)
                      and a.response.vote_granted for a in new)
        if granted and voted and voted[-1] > 0 and isinstance(new[voted[-1] - 1], PersistElectionState):
            persist = new.pop(voted[-1] - 1)
            new.append(persist)
        self.emit(*before, *new)


class _SkipDivergenceTruncation(RaftNode):
    def on_diverging_epoch(self, source: int, resp: FetchResponse, diverging: DivergingEpoch, now_ms: int) -> None:
        # keep the divergent tail and trust the leader's HW anyway
        replication.set_high_watermark(self, min(resp.high_watermark, self.log.end_offset), now_ms)


class _TransferWithoutCatchUp(RaftNode):
    def transfer_target_caught_up(self, progress: ReplicaProgress | None) -> bool:
        return True


class _StaleRead(RaftNode):
    def read_round_confirmed(self, st: LeaderState, majority_round: int) -> int:
        return st.read_round


class _PreVoteIgnoresLeader(RaftNode):
    def grants_pre_vote(self, up_to_date: bool) -> bool:
        return up_to_date or super().grants_pre_vote(up_to_date)


CLASSES: dict[str, type[RaftNode]] = {
    HW_WITHOUT_CURRENT_EPOCH: _HwWithoutCurrentEpoch,
    DOUBLE_VOTE: _DoubleVote,
    REPLY_BEFORE_PERSIST: _ReplyBeforePersist,
    SKIP_DIVERGENCE_TRUNCATION: _SkipDivergenceTruncation,
    TRANSFER_WITHOUT_CATCH_UP: _TransferWithoutCatchUp,
    STALE_READ: _StaleRead,
    PRE_VOTE_IGNORES_LEADER: _PreVoteIgnoresLeader,
}


@cache
def node_class(plants: frozenset[str] = frozenset()) -> type[RaftNode]:
    """The core class with ``plants`` planted (RaftNode itself for none)."""
    validate(plants)
    if not plants:
        return RaftNode
    bases = tuple(CLASSES[p] for p in sorted(plants))
    return bases[0] if len(bases) == 1 else type("PlantedRaftNode", bases, {})
