"""The state a replica starts in, and the moves every handler shares: adopting a newer
epoch or a newly learned leader (Kafka's QuorumState.initialize, transitionToUnattached /
transitionToFollower, and KafkaRaftClient.maybeTransition).
"""

from __future__ import annotations

from kraftnode.raft.election import ElectionState
from kraftnode.raft.rules import timers
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import (
    CandidateState,
    EpochState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from kraftnode.raft.voters import Endpoint


def initial_state(node: RaftCore, election: ElectionState, now_ms: int) -> EpochState:
    """The state the durable election state (and the log) put a starting replica in."""
    log_epoch = node.log.last_fetched_epoch
    if election.epoch < log_epoch:
        return UnattachedState(log_epoch, timers.election_deadline_or_none(node, now_ms))
    epoch = election.epoch
    if election.leader_id == node.local_key.id:
        others = {k.id for k in node.voters.keys() if k.id != node.local_key.id}
        return ResignedState(epoch, node.local_key.id, timers.election_deadline(node, now_ms), (), others)
    voted = election.voted_key
    if election.has_leader:
        return FollowerState(
            epoch, election.leader_id, node.voters.endpoints_of(election.leader_id),
            timers.fetch_deadline(node, now_ms),
            update_voter_deadline=now_ms + timers.update_voter_period_ms(node),
        )
    if voted is not None and voted.matches(node.local_key) and node.is_voter:
        return CandidateState(epoch, 1, timers.election_deadline(node, now_ms), {node.local_key.id})
    if voted is not None:
        return VotedState(epoch, voted, timers.election_deadline(node, now_ms))
    return UnattachedState(epoch, timers.election_deadline_or_none(node, now_ms))


def become_unattached(node: RaftCore, epoch: int, now_ms: int) -> None:
    """Move to a higher epoch without a leader.

    As Kafka does, a voter that was already waiting for an election
    (unattached, voted, candidate) keeps its running election timer:
    otherwise a lagging voter that keeps starting elections it cannot win
    would reset everybody's timer forever and nobody else could run.
    """
    st = node.state
    deadline: int | None
    if not node.is_voter:
        deadline = None
    elif isinstance(st, UnattachedState | VotedState | CandidateState | ProspectiveState) and st.election_deadline is not None:
        deadline = st.election_deadline
    else:
        deadline = timers.election_deadline(node, now_ms)
    node.transition(UnattachedState(epoch, deadline))


def become_follower(node: RaftCore, epoch: int, leader_id: int, endpoints: tuple[Endpoint, ...], now_ms: int) -> None:
    if not endpoints:
        endpoints = node.voters.endpoints_of(leader_id)
    # An auto-joining observer asks as soon as it is caught up with this leader (then
    # once per period): waiting a whole period first, an observer that loses its leader
    # now and then (a fetch timeout) would never ask at all.
    first = now_ms if node.config.auto_join and not node.is_voter else now_ms + timers.update_voter_period_ms(node)
    node.transition(FollowerState(
        epoch, leader_id, endpoints, timers.fetch_deadline(node, now_ms), update_voter_deadline=first,
    ))


def maybe_handle_leader_info(node: RaftCore, leader_id: int, epoch: int, endpoints: tuple[Endpoint, ...], now_ms: int
) -> bool:
    """Adopt a higher epoch or a newly learned leader (Kafka's maybeTransition)."""
    if epoch > node.epoch:
        if leader_id >= 0 and leader_id != node.local_key.id:
            become_follower(node, epoch, leader_id, endpoints, now_ms)
        else:
            become_unattached(node, epoch, now_ms)
        return True
    if (
        epoch == node.epoch
        and leader_id >= 0
        and leader_id != node.local_key.id
        and (isinstance(node.state, UnattachedState | VotedState | CandidateState)
             or (isinstance(node.state, ProspectiveState) and node.state.leader_id < 0))
    ):
        become_follower(node, epoch, leader_id, endpoints, now_ms)
        return True
    return False
