"""Leadership: becoming leader, resigning, BeginQuorumEpoch and EndQuorumEpoch, and
leadership transfer (Kafka's handleBeginQuorumEpoch*/handleEndQuorumEpoch*, KIP-595).

Each function is a rule of :class:`~kraftnode.raft.raft_node.RaftNode` (bound there as a
method of the same name with a leading underscore), taking the node as ``node``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraftnode.raft import errors, reconfig
from kraftnode.raft.actions import AppendCompleted, ReadIndexCompleted, SendResponse
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
from kraftnode.raft.states import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
)
from kraftnode.raft.tracker import ReplicaProgress, ReplicaTracker
from kraftnode.raft.transfer import PendingTransfer
from kraftnode.raft.voters import ReplicaKey, VoterNode, VoterSet

if TYPE_CHECKING:
    from kraftnode.raft.raft_node import RaftNode


def become_leader(node: RaftNode, cand: CandidateState, now_ms: int) -> None:
    voters = node.voters
    epoch_start = node.log.end_offset
    tracker = node._replica_tracker(cand.epoch, epoch_start, voters, now_ms)
    st = LeaderState(cand.epoch, node.local_key.id, tracker)
    node._transition(st, now_ms)
    granting = tuple(n.key for n in voters if n.key.id in cand.granted)
    records: list[ControlRecord] = [LeaderChangeRecord(node.local_key.id, tuple(voters.keys()), granting)]
    kraft_version = node.history.kraft_version()
    local = node._local_voter_node()
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
        node._voter_set_changed(now_ms)
    node._flush_leader(st, now_ms)


def replica_tracker(node: RaftNode, epoch: int, epoch_start: int, voters: VoterSet, now_ms: int) -> ReplicaTracker:
    """The replication bookkeeping of a new leader epoch."""
    return ReplicaTracker(node.local_key, epoch, epoch_start, voters, now_ms, node.config.check_quorum_timeout_ms)


def resign(node: RaftNode, now_ms: int, preferred_override: tuple[ReplicaKey, ...] | None = None) -> None:
    st = node.state
    assert isinstance(st, LeaderState)
    preferred = preferred_override or tuple(st.tracker.voters_by_descending_offset())
    others = {k.id for k in node.voters.keys() if k.id != node.local_key.id}
    node._transition(
        ResignedState(st.epoch, node.local_key.id, node._election_deadline(now_ms), preferred, others), now_ms
    )


def bqe_response(node: RaftNode, error: int, partition_error: int) -> BeginQuorumEpochResponse:
    return BeginQuorumEpochResponse(error, partition_error, node.leader_id, node.epoch,
                                    node._leader_node_endpoints())


def on_begin_quorum_epoch(node: RaftNode, request_id: int, req: BeginQuorumEpochRequest, now_ms: int) -> None:
    if not node._cluster_ok(req.cluster_id):
        node._respond(request_id, node._bqe_response(errors.INCONSISTENT_CLUSTER_ID, errors.NONE))
        return
    # Kafka 3.9's order (KafkaRaftClient.handleBeginQuorumEpochRequest): the stale-epoch
    # and leader-id checks (validateVoterOnlyRequest), then the leader is adopted, and only
    # then is the voter key checked. A leader that names this replica with another
    # directory id is still followed (its answer says INVALID_VOTER_KEY), and a stale
    # leader is fenced with our epoch whatever key it sent, so it learns the newer epoch.
    if req.leader_epoch < node.epoch:
        node._respond(request_id, node._bqe_response(errors.NONE, errors.FENCED_LEADER_EPOCH))
        return
    if req.leader_id < 0 or (req.leader_epoch == node.epoch and req.leader_id == node.local_key.id):
        node._respond(request_id, node._bqe_response(errors.NONE, errors.INVALID_REQUEST))
        return
    if (not node._maybe_handle_leader_info(req.leader_id, req.leader_epoch, req.leader_endpoints, now_ms)
            and isinstance(node.state, ProspectiveState) and req.leader_epoch == node.epoch):
        node._become_follower(req.leader_epoch, req.leader_id, req.leader_endpoints, now_ms)
    if not node._valid_voter_key(req.voter_id, req.voter_directory_id):
        node._respond(request_id, node._bqe_response(errors.NONE, errors.INVALID_VOTER_KEY))
        return
    node._respond(request_id, node._bqe_response(errors.NONE, errors.NONE))


def on_begin_quorum_epoch_response(node: RaftNode, source: int, resp: BeginQuorumEpochResponse, now_ms: int,
                                    read_round: int = -1) -> None:
    endpoints = node._endpoints_from_nodes(resp.leader_id, resp.node_endpoints)
    if node._maybe_handle_leader_info(resp.leader_id, resp.leader_epoch, endpoints, now_ms):
        return
    st = node.state
    if resp.error_code == errors.NONE and resp.partition_error_code == errors.NONE and isinstance(st, LeaderState) \
            and resp.leader_epoch == st.epoch:
        st.tracker.acknowledge(source)
        if read_round > node._read_confirmed.get(source, 0):
            node._read_confirmed[source] = read_round
            node._complete_reads()
    else:
        node._backoff(source, now_ms)


def eqe_response(node: RaftNode, error: int, partition_error: int) -> EndQuorumEpochResponse:
    return EndQuorumEpochResponse(error, partition_error, node.leader_id, node.epoch,
                                  node._leader_node_endpoints())


def on_end_quorum_epoch(node: RaftNode, request_id: int, req: EndQuorumEpochRequest, now_ms: int) -> None:
    if not node._cluster_ok(req.cluster_id):
        node._respond(request_id, node._eqe_response(errors.INCONSISTENT_CLUSTER_ID, errors.NONE))
        return
    if req.leader_epoch < node.epoch:
        node._respond(request_id, node._eqe_response(errors.NONE, errors.FENCED_LEADER_EPOCH))
        return
    st = node.state
    if isinstance(st, LeaderState) and req.leader_id == node.local_key.id and req.leader_epoch == st.epoch:
        node._on_transfer_request(request_id, st, req, now_ms)
        return
    if req.leader_id < 0 or req.leader_id == node.local_key.id:
        node._respond(request_id, node._eqe_response(errors.NONE, errors.INVALID_REQUEST))
        return
    node._maybe_handle_leader_info(req.leader_id, req.leader_epoch, req.leader_endpoints, now_ms)
    st = node.state
    if isinstance(st, FollowerState) and st.leader_id == req.leader_id and st.epoch == req.leader_epoch:
        st.fetch_deadline = now_ms + node._end_epoch_backoff(req.preferred_candidates)
        st.fetched = False  # KIP-996: the leader has gone; pre-votes may be granted
        st.leader_resigned = True
    node._respond(request_id, node._eqe_response(errors.NONE, errors.NONE))


def on_transfer_request(node: RaftNode, request_id: int, st: LeaderState, req: EndQuorumEpochRequest, now_ms: int) -> None:
    """Leadership transfer (see :mod:`kraftnode.raft.transfer`)."""
    if len(req.preferred_candidates) != 1 or st.transfer is not None:
        node._respond(request_id, node._eqe_response(errors.NONE, errors.INVALID_REQUEST))
        return
    wanted = req.preferred_candidates[0]
    vnode = node.voters.node(wanted.id)
    if wanted.id == node.local_key.id or vnode is None or not node.voters.is_voter(wanted):
        code = errors.INVALID_REQUEST if wanted.id == node.local_key.id else errors.VOTER_NOT_FOUND
        node._respond(request_id, node._eqe_response(errors.NONE, code))
        return
    progress = st.tracker.voters.get(wanted.id)
    if progress is not None and 0 <= progress.last_fetch_timestamp < now_ms - node.config.fetch_timeout_ms:
        # Fetched before, but not within the fetch timeout: paused, cut off or gone. (One
        # that has not fetched from this new leader yet gets the election timeout to do so.)
        node._respond(request_id, node._eqe_response(errors.NONE, errors.REQUEST_TIMED_OUT))
        return
    st.transfer = PendingTransfer(request_id, vnode.key, now_ms + node.config.election_timeout_ms)
    node._maybe_complete_transfer(st, now_ms)


def maybe_complete_transfer(node: RaftNode, st: LeaderState, now_ms: int) -> None:
    transfer = st.transfer
    assert transfer is not None
    progress = st.tracker.voters.get(transfer.target.id)
    # N's fetch offset is durable on N: once it reaches our end, N's log is at least as
    # up to date as every voter's, so its election cannot be refused for its log.
    if not node._transfer_target_caught_up(progress):
        return
    st.transfer = None
    node._respond(transfer.request_id, node._eqe_response(errors.NONE, errors.NONE))
    node._resign(now_ms, (transfer.target,))


def transfer_target_caught_up(node: RaftNode, progress: ReplicaProgress | None) -> bool:
    """A transfer resigns only once the successor has this leader's whole log."""
    return progress is not None and progress.end_offset >= node.log.end_offset


def on_end_quorum_epoch_response(node: RaftNode, source: int, resp: EndQuorumEpochResponse, now_ms: int) -> None:
    endpoints = node._endpoints_from_nodes(resp.leader_id, resp.node_endpoints)
    if node._maybe_handle_leader_info(resp.leader_id, resp.leader_epoch, endpoints, now_ms):
        return
    st = node.state
    if resp.error_code == errors.NONE and resp.partition_error_code == errors.NONE and isinstance(st, ResignedState):
        st.unacked.discard(source)
    else:
        node._backoff(source, now_ms)


def close_leader_state(node: RaftNode, old: LeaderState, new_state: EpochState) -> None:
    """Kafka's LeaderState.close(): what the leader still owed fails with
    NOT_LEADER_OR_FOLLOWER (voter changes, reads, a transfer, appends, parked fetches)."""
    node._finish_add(old, errors.NOT_LEADER_OR_FOLLOWER, None)
    node._finish_remove(old, errors.NOT_LEADER_OR_FOLLOWER, None)
    for handle, _ in node._reads:
        node._actions.append(ReadIndexCompleted(handle, -1, errors.NOT_LEADER_OR_FOLLOWER))
    node._reads.clear()
    node._read_confirmed.clear()
    if old.transfer is not None:
        node._actions.append(SendResponse(old.transfer.request_id, EndQuorumEpochResponse(
            errors.NONE, errors.NOT_LEADER_OR_FOLLOWER, new_state.leader_id, new_state.epoch, ())))
    for _, handle in node._pending_appends:
        node._actions.append(AppendCompleted(handle, -1, errors.NOT_LEADER_OR_FOLLOWER))
    node._pending_appends.clear()
    parked, node._parked = node._parked, []
    for p in parked:
        node._actions.append(SendResponse(p.request_id, node._fetch_error(errors.NOT_LEADER_OR_FOLLOWER)))
