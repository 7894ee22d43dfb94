"""Elections (KIP-595, KIP-996): votes and pre-votes, the moves between leaderless
states, election timers and backoffs (Kafka's KafkaRaftClient.handleVoteRequest /
handleVoteResponse and QuorumState.transitionTo*).

Each function is a rule of :class:`~kraftnode.raft.raft_node.RaftNode` (bound there as a
method of the same name with a leading underscore), taking the node as ``node``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from kraftnode.raft import errors, prevote
from kraftnode.raft.election import ElectionState
from kraftnode.raft.inflight import ELECTION_BACKOFF_BASE_MS
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.messages import VoteRequest, VoteResponse
from kraftnode.raft.states import (
    CandidateState,
    EpochState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from kraftnode.raft.voters import Endpoint, ReplicaKey

if TYPE_CHECKING:
    from kraftnode.raft.raft_node import RaftNode


def initial_state(node: RaftNode, election: ElectionState, now_ms: int) -> EpochState:
    log_epoch = node.log.last_fetched_epoch
    if election.epoch < log_epoch:
        return UnattachedState(log_epoch, node._election_deadline_or_none(now_ms))
    epoch = election.epoch
    if election.leader_id == node.local_key.id:
        others = {k.id for k in node.voters.keys() if k.id != node.local_key.id}
        return ResignedState(epoch, node.local_key.id, node._election_deadline(now_ms), (), others)
    voted = election.voted_key
    if election.has_leader:
        return FollowerState(
            epoch, election.leader_id, node.voters.endpoints_of(election.leader_id),
            now_ms + node.config.fetch_timeout_ms,
            update_voter_deadline=now_ms + node._update_voter_period_ms(),
        )
    if voted is not None and voted.matches(node.local_key) and node.is_voter:
        return CandidateState(epoch, 1, node._election_deadline(now_ms), {node.local_key.id})
    if voted is not None:
        return VotedState(epoch, voted, node._election_deadline(now_ms))
    return UnattachedState(epoch, node._election_deadline_or_none(now_ms))


def become_unattached(node: RaftNode, epoch: int, now_ms: int) -> None:
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
        deadline = node._election_deadline(now_ms)
    node._transition(UnattachedState(epoch, deadline), now_ms)


def become_follower(node: RaftNode, epoch: int, leader_id: int, endpoints: tuple[Endpoint, ...], now_ms: int) -> None:
    if not endpoints:
        endpoints = node.voters.endpoints_of(leader_id)
    # An auto-joining observer asks as soon as it is caught up with this leader (then
    # once per period): waiting a whole period first, an observer that loses its leader
    # now and then (a fetch timeout) would never ask at all.
    first = now_ms if node.config.auto_join and not node.is_voter else now_ms + node._update_voter_period_ms()
    node._transition(FollowerState(
        epoch, leader_id, endpoints, now_ms + node.config.fetch_timeout_ms, update_voter_deadline=first,
    ), now_ms)


def become_candidate(node: RaftNode, now_ms: int) -> None:
    st = node.state
    retries = st.retries + 1 if isinstance(st, CandidateState | ProspectiveState) else 1
    cand = CandidateState(st.epoch + 1, retries, node._election_deadline(now_ms), {node.local_key.id})
    node._transition(cand, now_ms)
    node._maybe_win(cand, now_ms)


def start_election(node: RaftNode, now_ms: int) -> None:
    """An election or fetch timer expired: pre-vote first (KIP-996) or elect at once (3.9)."""
    if not node.config.pre_vote:
        node._become_candidate(now_ms)
        return
    st = node.state
    leader_id, endpoints = -1, cast(tuple[Endpoint, ...], ())
    if isinstance(st, FollowerState):
        leader_id, endpoints = st.leader_id, st.leader_endpoints
    voted = node.quorum.voted_key
    retries = st.retries if isinstance(st, CandidateState) else 0
    pro = ProspectiveState(st.epoch, leader_id, endpoints, voted, node._election_deadline(now_ms), retries,
                      {node.local_key.id})
    node._transition(pro, now_ms)
    node._maybe_win_pre_vote(pro, now_ms)


def maybe_win_pre_vote(node: RaftNode, pro: ProspectiveState, now_ms: int) -> None:
    voters = node.voters
    if prevote.prospective_won(pro, voters.ids, voters.majority_size()):
        node._become_candidate(now_ms)


def prospective_lost(node: RaftNode, pro: ProspectiveState, now_ms: int) -> None:
    """Kafka 4.0's prospectiveTransitionAfterElectionLoss: back to the leader we knew
    (stickiness), or wait out a fresh election timer, keeping any vote of this epoch."""
    if pro.leader_id >= 0:
        node._become_follower(pro.epoch, pro.leader_id, pro.leader_endpoints, now_ms)
    elif pro.voted_key is not None and not pro.voted_key.matches(node.local_key):
        node._transition(VotedState(pro.epoch, pro.voted_key, node._election_deadline(now_ms)), now_ms)
    else:
        node._transition(UnattachedState(pro.epoch, node._election_deadline(now_ms)), now_ms)


def maybe_win(node: RaftNode, cand: CandidateState, now_ms: int) -> None:
    voters = node.voters
    if len(cand.granted & voters.ids) >= voters.majority_size():
        node._become_leader(cand, now_ms)


def maybe_handle_leader_info(node: RaftNode, leader_id: int, epoch: int, endpoints: tuple[Endpoint, ...], now_ms: int
) -> bool:
    """Adopt a higher epoch or a newly learned leader (Kafka's maybeTransition)."""
    if epoch > node.epoch:
        if leader_id >= 0 and leader_id != node.local_key.id:
            node._become_follower(epoch, leader_id, endpoints, now_ms)
        else:
            node._become_unattached(epoch, now_ms)
        return True
    if (
        epoch == node.epoch
        and leader_id >= 0
        and leader_id != node.local_key.id
        and (isinstance(node.state, UnattachedState | VotedState | CandidateState)
             or (isinstance(node.state, ProspectiveState) and node.state.leader_id < 0))
    ):
        node._become_follower(epoch, leader_id, endpoints, now_ms)
        return True
    return False


def election_deadline(node: RaftNode, now_ms: int) -> int:
    timeout = node.config.election_timeout_ms
    return now_ms + timeout + node.rng.randrange(timeout)


def election_deadline_or_none(node: RaftNode, now_ms: int) -> int | None:
    return node._election_deadline(now_ms) if node.is_voter else None


def binary_backoff(node: RaftNode, retries: int) -> int:
    bound = 2 << min(20, max(0, retries - 1))
    return min(ELECTION_BACKOFF_BASE_MS * node.rng.randrange(bound), node.config.election_backoff_max_ms)


def end_epoch_backoff(node: RaftNode, preferred: Sequence[ReplicaKey]) -> int:
    """Successor-rank backoff, as Kafka's endEpochElectionBackoff and
    strictExponentialElectionBackoffMs: our position in the list (its length when we are
    not in it); position 0 stands at once -- also for an empty list, which a leader
    restarted into Resigned sends; a voter missing from a non-empty list waits
    election.backoff.max.ms; rank p of n waits (max >> (n - 1)) << (p - 1), capped."""
    n = len(preferred)
    position = next((i for i, key in enumerate(preferred) if key.matches(node.local_key)), n)
    most = node.config.election_backoff_max_ms
    if position == 0:
        return 0
    if position >= n:
        return most
    return min(most, (most >> (n - 1)) << (position - 1))


def vote_response(node: RaftNode, error: int, partition_error: int, granted: bool) -> VoteResponse:
    return VoteResponse(error, partition_error, node.leader_id, node.epoch, granted,
                        node._leader_node_endpoints())


def on_vote_request(node: RaftNode, request_id: int, req: VoteRequest, now_ms: int) -> None:
    if not node._cluster_ok(req.cluster_id):
        node._respond(request_id, node._vote_response(errors.INCONSISTENT_CLUSTER_ID, errors.NONE, False))
        return
    if req.pre_vote:
        node._on_pre_vote_request(request_id, req)
        return
    # Kafka 3.9's order of checks (KafkaRaftClient.handleVoteRequest): the candidate's
    # last offset and epoch, then validateVoterOnlyRequest (stale epoch, bad id), then
    # the epoch bump, and only then whether the request was meant for this replica.
    if node._refused_vote_request(request_id, req, last_epoch_may_equal=False):
        return
    if req.candidate_epoch > node.epoch:
        node._become_unattached(req.candidate_epoch, now_ms)
    if not node._valid_voter_key(req.voter_id, req.voter_directory_id):
        node._respond(request_id, node._vote_response(errors.NONE, errors.INVALID_VOTER_KEY, False))
        return
    candidate = ReplicaKey.of(req.candidate_id, req.candidate_directory_id)
    up_to_date = node._candidate_log_up_to_date(req)
    st = node.state
    granted = node._grants_vote(candidate, up_to_date)
    if granted and (isinstance(st, UnattachedState) or (isinstance(st, ProspectiveState) and st.voted_key is None)):
        node._transition(VotedState(st.epoch, candidate, node._election_deadline(now_ms)), now_ms)
    node._respond(request_id, node._vote_response(errors.NONE, errors.NONE, granted))


def grants_vote(node: RaftNode, candidate: ReplicaKey, up_to_date: bool) -> bool:
    """Kafka's EpochState.canGrantVote: one vote per epoch, only to an up-to-date log,
    only while no leader is known (the epoch was already bumped to the candidate's)."""
    st = node.state
    if candidate.id == node.local_key.id:
        return False
    if isinstance(st, UnattachedState):
        return up_to_date
    if isinstance(st, VotedState):
        return st.voted_key.matches(candidate)
    if isinstance(st, ProspectiveState) and st.leader_id < 0:
        # Kafka 4.0's ProspectiveState: the vote cast in this epoch, if any, binds.
        return st.voted_key.matches(candidate) if st.voted_key is not None else up_to_date
    return False


def on_pre_vote_request(node: RaftNode, request_id: int, req: VoteRequest) -> None:
    """KIP-996: answer a pre-vote. Nothing changes here: no epoch bump, no vote on record."""
    if not node.config.pre_vote:
        # Without pre-vote we do not speak Vote v2 (the driver never lets it through).
        node._respond(request_id, node._vote_response(errors.UNSUPPORTED_VERSION, errors.NONE, False))
        return
    # The prospective sends its current epoch, so its last epoch may equal it.
    if node._refused_vote_request(request_id, req, last_epoch_may_equal=True):
        return
    if not node._valid_voter_key(req.voter_id, req.voter_directory_id):
        node._respond(request_id, node._vote_response(errors.NONE, errors.INVALID_VOTER_KEY, False))
        return
    up_to_date = node._candidate_log_up_to_date(req)
    granted = req.candidate_id != node.local_key.id and node._grants_pre_vote(up_to_date)
    node._respond(request_id, node._vote_response(errors.NONE, errors.NONE, granted))


def grants_pre_vote(node: RaftNode, up_to_date: bool) -> bool:
    """KIP-996: a pre-vote needs an up-to-date log and no live leader (stickiness)."""
    return prevote.can_grant_pre_vote(node.state, up_to_date)


def refused_vote_request(node: RaftNode, request_id: int, req: VoteRequest, *,
                          last_epoch_may_equal: bool) -> bool:
    """The checks a vote and a pre-vote request share, in Kafka's order (the candidate's
    last offset and epoch, a stale epoch, a bad candidate id); answers and returns True
    when one fails. A pre-vote's last epoch may equal its (current, unbumped) epoch."""
    last_epoch_bad = (req.last_offset_epoch > req.candidate_epoch if last_epoch_may_equal
                      else req.last_offset_epoch >= req.candidate_epoch)
    if req.last_offset < 0 or req.last_offset_epoch < 0 or last_epoch_bad:
        error = errors.INVALID_REQUEST
    elif req.candidate_epoch < node.epoch:
        error = errors.FENCED_LEADER_EPOCH
    elif req.candidate_id < 0:
        error = errors.INVALID_REQUEST
    else:
        return False
    node._respond(request_id, node._vote_response(errors.NONE, error, False))
    return True


def candidate_log_up_to_date(node: RaftNode, req: VoteRequest) -> bool:
    """KIP-595: the candidate's (last epoch, end offset) is at least this log's."""
    return OffsetAndEpoch(req.last_offset_epoch, req.last_offset) >= OffsetAndEpoch(
        node.log.last_fetched_epoch, node.log.end_offset)


def on_vote_response(node: RaftNode, source: int, resp: VoteResponse, now_ms: int) -> None:
    st = node.state
    if isinstance(st, ProspectiveState) and resp.error_code == errors.UNSUPPORTED_VERSION:
        # A voter without Vote v2 (Kafka 3.9): skip the pre-vote, as Kafka 4.0 does.
        node._become_candidate(now_ms)
        return
    if resp.error_code == errors.INCONSISTENT_CLUSTER_ID:
        if isinstance(st, CandidateState | ProspectiveState):
            _count_vote(node, st, source, False, now_ms)
        return
    if resp.error_code != errors.NONE:
        node._backoff(source, now_ms)
        return
    # As Kafka's maybeHandleCommonResponse: a rejection (e.g. FENCED_LEADER_EPOCH)
    # still carries the voter's epoch and leader, which a stale candidate must adopt.
    endpoints = node._endpoints_from_nodes(resp.leader_id, resp.node_endpoints)
    if node._maybe_handle_leader_info(resp.leader_id, resp.leader_epoch, endpoints, now_ms):
        return
    if resp.partition_error_code != errors.NONE:
        node._backoff(source, now_ms)
        return
    st = node.state
    if isinstance(st, CandidateState | ProspectiveState) and resp.leader_epoch == st.epoch:
        _count_vote(node, st, source, resp.vote_granted, now_ms)


def _count_vote(node: RaftNode, st: CandidateState | ProspectiveState, source: int, granted: bool,
                now_ms: int) -> None:
    """A voter's answer, counted by the state that asked: a prospective's pre-vote may
    lead to a real election, a candidate's vote to leadership; enough refusals lose."""
    (st.granted if granted else st.rejected).add(source)
    if isinstance(st, ProspectiveState):
        if granted:
            node._maybe_win_pre_vote(st, now_ms)
        else:
            node._maybe_lose_pre_vote(st, now_ms)
    elif granted:
        node._maybe_win(st, now_ms)
    else:
        node._maybe_lose(st, now_ms)


def maybe_lose_pre_vote(node: RaftNode, st: ProspectiveState, now_ms: int) -> None:
    voters = node.voters
    if prevote.prospective_lost(st, voters.ids, voters.majority_size()):
        node._prospective_lost(st, now_ms)


def maybe_lose(node: RaftNode, st: CandidateState, now_ms: int) -> None:
    """A majority rejected us: stop this election now and back off."""
    voters = node.voters
    if st.backoff_until is None and len(st.rejected & voters.ids) > len(voters) - voters.majority_size():
        st.backoff_until = now_ms + node._binary_backoff(st.retries)
