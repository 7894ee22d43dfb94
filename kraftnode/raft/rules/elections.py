"""Elections (KIP-595, KIP-996): votes and pre-votes, candidacy and winning it
(Kafka's KafkaRaftClient.handleVoteRequest / handleVoteResponse and
QuorumState.transitionToCandidate / transitionToProspective).
"""

from __future__ import annotations

from typing import cast

from kraftnode.raft import errors, prevote
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.messages import VoteRequest, VoteResponse
from kraftnode.raft.rules import epochs, leadership, timers, validation
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    UnattachedState,
    VotedState,
)
from kraftnode.raft.voters import Endpoint, ReplicaKey


def become_candidate(node: RaftCore, now_ms: int) -> None:
    st = node.state
    retries = st.retries + 1 if isinstance(st, CandidateState | ProspectiveState) else 1
    cand = CandidateState(st.epoch + 1, retries, timers.election_deadline(node, now_ms), {node.local_key.id})
    node.transition(cand)
    maybe_win(node, cand, now_ms)


def start_election(node: RaftCore, now_ms: int) -> None:
    """An election or fetch timer expired: pre-vote first (KIP-996) or elect at once (3.9)."""
    if not node.config.pre_vote:
        become_candidate(node, now_ms)
        return
    st = node.state
    leader_id, endpoints = -1, cast(tuple[Endpoint, ...], ())
    if isinstance(st, FollowerState):
        leader_id, endpoints = st.leader_id, st.leader_endpoints
    voted = node.voted_key
    retries = st.retries if isinstance(st, CandidateState) else 0
    pro = ProspectiveState(st.epoch, leader_id, endpoints, voted, timers.election_deadline(node, now_ms), retries,
                           {node.local_key.id})
    node.transition(pro)
    maybe_win_pre_vote(node, pro, now_ms)


def maybe_win_pre_vote(node: RaftCore, pro: ProspectiveState, now_ms: int) -> None:
    voters = node.voters
    if prevote.prospective_won(pro, voters.ids, voters.majority_size()):
        become_candidate(node, now_ms)


def prospective_lost(node: RaftCore, pro: ProspectiveState, now_ms: int) -> None:
    """Kafka 4.0's prospectiveTransitionAfterElectionLoss: back to the leader we knew
    (stickiness), or wait out a fresh election timer, keeping any vote of this epoch."""
    if pro.leader_id >= 0:
        epochs.become_follower(node, pro.epoch, pro.leader_id, pro.leader_endpoints, now_ms)
    elif pro.voted_key is not None and not pro.voted_key.matches(node.local_key):
        node.transition(VotedState(pro.epoch, pro.voted_key, timers.election_deadline(node, now_ms)))
    else:
        node.transition(UnattachedState(pro.epoch, timers.election_deadline(node, now_ms)))


def maybe_win(node: RaftCore, cand: CandidateState, now_ms: int) -> None:
    voters = node.voters
    if len(cand.granted & voters.ids) >= voters.majority_size():
        leadership.become_leader(node, cand, now_ms)


def vote_response(node: RaftCore, error: int, partition_error: int, granted: bool) -> VoteResponse:
    return VoteResponse(error, partition_error, node.leader_id, node.epoch, granted,
                        validation.leader_node_endpoints(node))


def on_vote_request(node: RaftCore, request_id: int, req: VoteRequest, now_ms: int) -> None:
    if not validation.cluster_ok(node, req.cluster_id):
        node.respond(request_id, vote_response(node, errors.INCONSISTENT_CLUSTER_ID, errors.NONE, False))
        return
    if req.pre_vote:
        on_pre_vote_request(node, request_id, req)
        return
    # Kafka 3.9's order of checks (KafkaRaftClient.handleVoteRequest): the candidate's
    # last offset and epoch, then validateVoterOnlyRequest (stale epoch, bad id), then
    # the epoch bump, and only then whether the request was meant for this replica.
    if refused_vote_request(node, request_id, req, last_epoch_may_equal=False):
        return
    if req.candidate_epoch > node.epoch:
        epochs.become_unattached(node, req.candidate_epoch, now_ms)
    if not validation.valid_voter_key(node, req.voter_id, req.voter_directory_id):
        node.respond(request_id, vote_response(node, errors.NONE, errors.INVALID_VOTER_KEY, False))
        return
    candidate = ReplicaKey.of(req.candidate_id, req.candidate_directory_id)
    up_to_date = candidate_log_up_to_date(node, req)
    st = node.state
    granted = node.grants_vote(candidate, up_to_date)
    if granted and (isinstance(st, UnattachedState) or (isinstance(st, ProspectiveState) and st.voted_key is None)):
        node.transition(VotedState(st.epoch, candidate, timers.election_deadline(node, now_ms)))
    node.respond(request_id, vote_response(node, errors.NONE, errors.NONE, granted))


def grants_vote(node: RaftCore, candidate: ReplicaKey, up_to_date: bool) -> bool:
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


def on_pre_vote_request(node: RaftCore, request_id: int, req: VoteRequest) -> None:
    """KIP-996: answer a pre-vote. Nothing changes here: no epoch bump, no vote on record."""
    if not node.config.pre_vote:
        # Without pre-vote we do not speak Vote v2 (the driver never lets it through).
        node.respond(request_id, vote_response(node, errors.UNSUPPORTED_VERSION, errors.NONE, False))
        return
    # The prospective sends its current epoch, so its last epoch may equal it.
    if refused_vote_request(node, request_id, req, last_epoch_may_equal=True):
        return
    if not validation.valid_voter_key(node, req.voter_id, req.voter_directory_id):
        node.respond(request_id, vote_response(node, errors.NONE, errors.INVALID_VOTER_KEY, False))
        return
    up_to_date = candidate_log_up_to_date(node, req)
    granted = req.candidate_id != node.local_key.id and node.grants_pre_vote(up_to_date)
    node.respond(request_id, vote_response(node, errors.NONE, errors.NONE, granted))


def grants_pre_vote(node: RaftCore, up_to_date: bool) -> bool:
    """KIP-996: a pre-vote needs an up-to-date log and no live leader (stickiness)."""
    return prevote.can_grant_pre_vote(node.state, up_to_date)


def refused_vote_request(node: RaftCore, request_id: int, req: VoteRequest, *,
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
    node.respond(request_id, vote_response(node, errors.NONE, error, False))
    return True


def candidate_log_up_to_date(node: RaftCore, req: VoteRequest) -> bool:
    """KIP-595: the candidate's (last epoch, end offset) is at least this log's."""
    return OffsetAndEpoch(req.last_offset_epoch, req.last_offset) >= OffsetAndEpoch(
        node.log.last_fetched_epoch, node.log.end_offset)


def on_vote_response(node: RaftCore, source: int, resp: VoteResponse, now_ms: int) -> None:
    st = node.state
    if isinstance(st, ProspectiveState) and resp.error_code == errors.UNSUPPORTED_VERSION:
        # A voter without Vote v2 (Kafka 3.9): skip the pre-vote, as Kafka 4.0 does.
        become_candidate(node, now_ms)
        return
    if resp.error_code == errors.INCONSISTENT_CLUSTER_ID:
        if isinstance(st, CandidateState | ProspectiveState):
            _count_vote(node, st, source, False, now_ms)
        return
    if resp.error_code != errors.NONE:
        node.backoff(source, now_ms)
        return
    # As Kafka's maybeHandleCommonResponse: a rejection (e.g. FENCED_LEADER_EPOCH)
    # still carries the voter's epoch and leader, which a stale candidate must adopt.
    endpoints = validation.endpoints_from_nodes(node, resp.leader_id, resp.node_endpoints)
    if epochs.maybe_handle_leader_info(node, resp.leader_id, resp.leader_epoch, endpoints, now_ms):
        return
    if resp.partition_error_code != errors.NONE:
        node.backoff(source, now_ms)
        return
    st = node.state
    if isinstance(st, CandidateState | ProspectiveState) and resp.leader_epoch == st.epoch:
        _count_vote(node, st, source, resp.vote_granted, now_ms)


def _count_vote(node: RaftCore, st: CandidateState | ProspectiveState, source: int, granted: bool,
                now_ms: int) -> None:
    """A voter's answer, counted by the state that asked: a prospective's pre-vote may
    lead to a real election, a candidate's vote to leadership; enough refusals lose."""
    (st.granted if granted else st.rejected).add(source)
    if isinstance(st, ProspectiveState):
        if granted:
            maybe_win_pre_vote(node, st, now_ms)
        else:
            maybe_lose_pre_vote(node, st, now_ms)
    elif granted:
        maybe_win(node, st, now_ms)
    else:
        maybe_lose(node, st, now_ms)


def maybe_lose_pre_vote(node: RaftCore, st: ProspectiveState, now_ms: int) -> None:
    voters = node.voters
    if prevote.prospective_lost(st, voters.ids, voters.majority_size()):
        prospective_lost(node, st, now_ms)


def maybe_lose(node: RaftCore, st: CandidateState, now_ms: int) -> None:
    """A majority rejected us: stop this election now and back off."""
    voters = node.voters
    if st.backoff_until is None and len(st.rejected & voters.ids) > len(voters) - voters.majority_size():
        st.backoff_until = now_ms + timers.binary_backoff(node, st.retries)
