"""Leadership: becoming leader, resigning, BeginQuorumEpoch and EndQuorumEpoch, and
leadership transfer (Kafka's handleBeginQuorumEpoch*/handleEndQuorumEpoch*, KIP-595).
What a leader owes when its leadership ends is failed by ``LeaderState.close``.
"""

from __future__ import annotations

from kraftnode.raft import errors, reconfig
from kraftnode.raft.batches import (
    ControlRecord,
    KRaftVersionControlRecord,
    LeaderChangeRecord,
    VotersControlRecord,
)
from kraftnode.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
)
from kraftnode.raft.rules import epochs, replication, timers, validation, voter_changes
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import (
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
)
from kraftnode.raft.tracker import ReplicaProgress, ReplicaTracker
from kraftnode.raft.transfer import PendingTransfer
from kraftnode.raft.voters import ReplicaKey, VoterNode, VoterSet


def become_leader(node: RaftCore, cand: CandidateState, now_ms: int) -> None:
    voters = node.voters
    epoch_start = node.log.end_offset
    tracker = node.replica_tracker(cand.epoch, epoch_start, voters, now_ms)
    st = LeaderState(cand.epoch, node.local_key.id, tracker)
    node.transition(st)
    granting = tuple(n.key for n in voters if n.key.id in cand.granted)
    records: list[ControlRecord] = [LeaderChangeRecord(node.local_key.id, tuple(voters.keys()), granting)]
    kraft_version = node.history.kraft_version()
    local = voter_changes.local_voter_node(node)
    if kraft_version >= 1 and (
        node.history.latest_voters_offset() == -1
        or (node.local_endpoints and reconfig.voter_node_needs_update(voters, local))
    ):
        # Kafka 3.9's LeaderState at the start of an epoch: when the voter set still comes
        # from the bootstrap checkpoint (0-0), which replicas never fetch, or describes this
        # leader with stale endpoints / kraft.version range, write the (updated) set to the
        # log, so observers (voters-to-be) learn kraft.version and the voters.
        updated = reconfig.update_voter(voters, local) or voters
        records += [KRaftVersionControlRecord(kraft_version), VotersControlRecord(updated)]
    elif kraft_version == 0:
        # Kafka 4.1's LeaderState: in a static quorum, the set an upgrade would write
        # starts as the static set with this leader described as it is now.
        if not local.endpoints:
            local = VoterNode(local.key, voters.endpoints_of(local.key.id), *node.local_kraft_versions)
        tracker.volatile_voters = reconfig.update_voter_ignoring_directory_id(voters, local)
    batch = node.log.append_as_leader(records, cand.epoch, is_control=True)
    if node.history.observe([batch]):
        voter_changes.voter_set_changed(node, now_ms)
    replication.flush_leader(node, st, now_ms)


def replica_tracker(node: RaftCore, epoch: int, epoch_start: int, voters: VoterSet, now_ms: int) -> ReplicaTracker:
    """The replication bookkeeping of a new leader epoch."""
    return ReplicaTracker(node.local_key, epoch, epoch_start, voters, now_ms, node.config.check_quorum_timeout_ms)


def resign(node: RaftCore, now_ms: int, preferred_override: tuple[ReplicaKey, ...] | None = None) -> None:
    st = node.state
    assert isinstance(st, LeaderState)
    preferred = preferred_override or tuple(st.tracker.voters_by_descending_offset())
    others = {k.id for k in node.voters.keys() if k.id != node.local_key.id}
    node.transition(ResignedState(st.epoch, node.local_key.id, timers.election_deadline(node, now_ms),
                                  preferred, others))


def bqe_response(node: RaftCore, error: int, partition_error: int) -> BeginQuorumEpochResponse:
    return BeginQuorumEpochResponse(error, partition_error, node.leader_id, node.epoch,
                                    validation.leader_node_endpoints(node))


def on_begin_quorum_epoch(node: RaftCore, request_id: int, req: BeginQuorumEpochRequest, now_ms: int) -> None:
    if not validation.cluster_ok(node, req.cluster_id):
        node.respond(request_id, bqe_response(node, errors.INCONSISTENT_CLUSTER_ID, errors.NONE))
        return
    # Kafka 3.9's order (KafkaRaftClient.handleBeginQuorumEpochRequest): the stale-epoch
    # and leader-id checks (validateVoterOnlyRequest), then the leader is adopted, and only
    # then is the voter key checked. A leader that names this replica with another
    # directory id is still followed (its answer says INVALID_VOTER_KEY), and a stale
    # leader is fenced with our epoch whatever key it sent, so it learns the newer epoch.
    if req.leader_epoch < node.epoch:
        node.respond(request_id, bqe_response(node, errors.NONE, errors.FENCED_LEADER_EPOCH))
        return
    if req.leader_id < 0 or (req.leader_epoch == node.epoch and req.leader_id == node.local_key.id):
        node.respond(request_id, bqe_response(node, errors.NONE, errors.INVALID_REQUEST))
        return
    if (not epochs.maybe_handle_leader_info(node, req.leader_id, req.leader_epoch, req.leader_endpoints, now_ms)
            and isinstance(node.state, ProspectiveState) and req.leader_epoch == node.epoch):
        epochs.become_follower(node, req.leader_epoch, req.leader_id, req.leader_endpoints, now_ms)
    if not validation.valid_voter_key(node, req.voter_id, req.voter_directory_id):
        node.respond(request_id, bqe_response(node, errors.NONE, errors.INVALID_VOTER_KEY))
        return
    node.respond(request_id, bqe_response(node, errors.NONE, errors.NONE))


def on_begin_quorum_epoch_response(node: RaftCore, source: int, resp: BeginQuorumEpochResponse, now_ms: int,
                                   read_round: int = -1) -> None:
    endpoints = validation.endpoints_from_nodes(node, resp.leader_id, resp.node_endpoints)
    if epochs.maybe_handle_leader_info(node, resp.leader_id, resp.leader_epoch, endpoints, now_ms):
        return
    st = node.state
    if resp.error_code == errors.NONE and resp.partition_error_code == errors.NONE and isinstance(st, LeaderState) \
            and resp.leader_epoch == st.epoch:
        st.tracker.acknowledge(source)
        if read_round > st.read_confirmed.get(source, 0):
            st.read_confirmed[source] = read_round
            replication.complete_reads(node)
    else:
        node.backoff(source, now_ms)


def eqe_response(node: RaftCore, error: int, partition_error: int) -> EndQuorumEpochResponse:
    return EndQuorumEpochResponse(error, partition_error, node.leader_id, node.epoch,
                                  validation.leader_node_endpoints(node))


def on_end_quorum_epoch(node: RaftCore, request_id: int, req: EndQuorumEpochRequest, now_ms: int) -> None:
    if not validation.cluster_ok(node, req.cluster_id):
        node.respond(request_id, eqe_response(node, errors.INCONSISTENT_CLUSTER_ID, errors.NONE))
        return
    if req.leader_epoch < node.epoch:
        node.respond(request_id, eqe_response(node, errors.NONE, errors.FENCED_LEADER_EPOCH))
        return
    st = node.state
    if isinstance(st, LeaderState) and req.leader_id == node.local_key.id and req.leader_epoch == st.epoch:
        on_transfer_request(node, request_id, st, req, now_ms)
        return
    if req.leader_id < 0 or req.leader_id == node.local_key.id:
        node.respond(request_id, eqe_response(node, errors.NONE, errors.INVALID_REQUEST))
        return
    epochs.maybe_handle_leader_info(node, req.leader_id, req.leader_epoch, req.leader_endpoints, now_ms)
    st = node.state
    if isinstance(st, FollowerState) and st.leader_id == req.leader_id and st.epoch == req.leader_epoch:
        st.fetch_deadline = now_ms + timers.end_epoch_backoff(node, req.preferred_candidates)
        st.fetched = False  # KIP-996: the leader has gone; pre-votes may be granted
        st.leader_resigned = True
    node.respond(request_id, eqe_response(node, errors.NONE, errors.NONE))


def on_transfer_request(node: RaftCore, request_id: int, st: LeaderState, req: EndQuorumEpochRequest,
                        now_ms: int) -> None:
    """Leadership transfer (see :mod:`kraftnode.raft.transfer`)."""
    if len(req.preferred_candidates) != 1 or st.transfer is not None:
        node.respond(request_id, eqe_response(node, errors.NONE, errors.INVALID_REQUEST))
        return
    wanted = req.preferred_candidates[0]
    vnode = node.voters.node(wanted.id)
    if wanted.id == node.local_key.id or vnode is None or not node.voters.is_voter(wanted):
        code = errors.INVALID_REQUEST if wanted.id == node.local_key.id else errors.VOTER_NOT_FOUND
        node.respond(request_id, eqe_response(node, errors.NONE, code))
        return
    progress = st.tracker.voters.get(wanted.id)
    if progress is not None and 0 <= progress.last_fetch_timestamp < now_ms - node.config.fetch_timeout_ms:
        # Fetched before, but not within the fetch timeout: paused, cut off or gone. (One
        # that has not fetched from this new leader yet gets the election timeout to do so.)
        node.respond(request_id, eqe_response(node, errors.NONE, errors.REQUEST_TIMED_OUT))
        return
    st.transfer = PendingTransfer(request_id, vnode.key, now_ms + node.config.election_timeout_ms)
    maybe_complete_transfer(node, st, now_ms)


def maybe_complete_transfer(node: RaftCore, st: LeaderState, now_ms: int) -> None:
    transfer = st.transfer
    assert transfer is not None
    progress = st.tracker.voters.get(transfer.target.id)
    # N's fetch offset is durable on N: once it reaches our end, N's log is at least as
    # up to date as every voter's, so its election cannot be refused for its log.
    if not node.transfer_target_caught_up(progress):
        return
    st.transfer = None
    node.respond(transfer.request_id, eqe_response(node, errors.NONE, errors.NONE))
    resign(node, now_ms, (transfer.target,))


def transfer_target_caught_up(node: RaftCore, progress: ReplicaProgress | None) -> bool:
    """A transfer resigns only once the successor has this leader's whole log."""
    return progress is not None and progress.end_offset >= node.log.end_offset


def on_end_quorum_epoch_response(node: RaftCore, source: int, resp: EndQuorumEpochResponse, now_ms: int) -> None:
    endpoints = validation.endpoints_from_nodes(node, resp.leader_id, resp.node_endpoints)
    if epochs.maybe_handle_leader_info(node, resp.leader_id, resp.leader_epoch, endpoints, now_ms):
        return
    st = node.state
    if resp.error_code == errors.NONE and resp.partition_error_code == errors.NONE and isinstance(st, ResignedState):
        st.unacked.discard(source)
    else:
        node.backoff(source, now_ms)
