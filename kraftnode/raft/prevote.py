"""KIP-996 pre-vote and leader stickiness, as Kafka 4.0 implements it.

Enabled by ``RaftConfig.pre_vote`` (``kraftnode.raft.pre.vote.enable``); off, the
core behaves exactly as Kafka 3.9's. The rules, from Kafka 4.0's EpochState
``canGrantVote(replicaKey, isLogUpToDate, isPreVote)`` implementations:

* A voter whose election or fetch timer expires becomes *prospective* at its
  current epoch and sends Vote requests with ``PreVote=true`` (Vote v2). Nothing is
  bumped or persisted, by the sender or by the voters answering.
* A pre-vote is granted when the prospective's log is at least as up to date as
  ours, except by a leader and a follower that has fetched from its leader since it
  started following (``hasFetchedFromLeader``): leader stickiness. A resigned leader
  grants one (``ResignedState.canGrantVote``): it has stepped down, and its preferred
  successor must win over the followers that still refuse.
* A majority of grants makes the prospective a candidate (epoch + 1, a real
  election). A majority of refusals or the election timeout sends it back to
  following the leader it knew (or to waiting, without one).
* A peer that does not speak Vote v2 (a Kafka 3.9 voter) answers, through the
  driver, UNSUPPORTED_VERSION: the prospective becomes a candidate at once, so an
  election with a 3.9 peer in the quorum proceeds as 3.9's does.
"""

from __future__ import annotations

from kraftnode.raft.states import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
    VotedState,
)

#: The first Vote version that carries PreVote.
PRE_VOTE_VERSION = 2


def can_grant_pre_vote(state: EpochState, log_up_to_date: bool) -> bool:
    """Whether ``state`` grants a pre-vote to a prospective (Kafka 4.0's rules, unchanged in
    4.4): a leader never; a follower that has fetched from its leader never; every other state
    -- a resigned leader included (``ResignedState.canGrantVote``: it has stepped down, so an
    up-to-date successor, the preferred one of its EndQuorumEpoch, may stand) -- when the
    prospective's log is at least as up to date."""
    if isinstance(state, LeaderState):
        return False
    if isinstance(state, FollowerState):
        return log_up_to_date and not state.fetched
    if isinstance(state, UnattachedState | VotedState | ProspectiveState | CandidateState | ResignedState):
        return log_up_to_date
    return False  # pragma: no cover - every state is listed above


def prospective_lost(state: ProspectiveState, voter_ids: frozenset[int], majority: int) -> bool:
    """A majority of voters refused: no point waiting for the rest."""
    return len(state.rejected & voter_ids) > len(voter_ids) - majority


def prospective_won(state: ProspectiveState, voter_ids: frozenset[int], majority: int) -> bool:
    return len(state.granted & voter_ids) >= majority
