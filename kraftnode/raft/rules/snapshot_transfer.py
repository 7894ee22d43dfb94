"""Snapshot transfer (KIP-630): serving FetchSnapshot chunks as leader and
downloading/installing them as follower (Kafka's handleFetchSnapshotRequest/Response).
"""

from __future__ import annotations

from kraftnode.raft import errors
from kraftnode.raft.history import VoterSetHistory
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.messages import FetchSnapshotRequest, FetchSnapshotResponse
from kraftnode.raft.rules import epochs, replication, timers, validation
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import FollowerState, LeaderState
from kraftnode.raft.voters import ReplicaKey


def on_fetch_snapshot(node: RaftCore, request_id: int, req: FetchSnapshotRequest, now_ms: int) -> None:
    """Serve a chunk of the leader's snapshot (KIP-630)."""

    def answer(error: int, size: int = -1, position: int = -1, data: bytes = b"") -> None:
        node.respond(request_id, FetchSnapshotResponse(
            errors.NONE, error, req.snapshot_id, validation.current_leader(node), size, position, data,
            validation.leader_node_endpoints(node),
        ))

    if not validation.cluster_ok(node, req.cluster_id):
        node.respond(request_id, FetchSnapshotResponse(
            errors.INCONSISTENT_CLUSTER_ID, errors.NONE, req.snapshot_id, validation.current_leader(node)))
        return
    error = replication.validate_leader_epoch(node, req.current_leader_epoch)
    if error != errors.NONE:
        answer(error)
        return
    st = node.state
    assert isinstance(st, LeaderState)
    st.tracker.record_voter_contact(ReplicaKey.of(req.replica_id, req.replica_directory_id), now_ms)
    snap_id = OffsetAndEpoch(req.snapshot_id.epoch, req.snapshot_id.end_offset)
    chunk = None
    if node.snapshots is not None and req.position >= 0:
        chunk = node.snapshots.read_snapshot_chunk(
            snap_id, req.position, min(max(req.max_bytes, 1), node.config.fetch_max_bytes))
    if chunk is None:
        answer(errors.POSITION_OUT_OF_RANGE if req.position < 0 else errors.SNAPSHOT_NOT_FOUND)
        return
    data, size = chunk
    if req.position >= size:  # Kafka: position must be inside the snapshot
        answer(errors.POSITION_OUT_OF_RANGE)
        return
    answer(errors.NONE, size, req.position, data)


def on_fetch_snapshot_response(node: RaftCore, source: int, resp: FetchSnapshotResponse, now_ms: int) -> None:
    leader = resp.current_leader
    endpoints = validation.endpoints_from_nodes(node, leader.leader_id, resp.node_endpoints)
    if epochs.maybe_handle_leader_info(node, leader.leader_id, leader.leader_epoch, endpoints, now_ms):
        return
    st = node.state
    if not isinstance(st, FollowerState) or st.leader_id != source or st.snapshot is None:
        node.backoff(source, now_ms)
        return
    snap_id, position = st.snapshot
    got = resp.snapshot_id
    error = resp.partition_error_code
    if resp.error_code == errors.NONE and (
            error == errors.SNAPSHOT_NOT_FOUND or (error == errors.NONE and (got.end_offset < 0 or got.epoch < 0))):
        # Kafka's handleFetchSnapshotResponse: the leader no longer has that snapshot (it
        # took a newer one). The leader answered: reset the fetch timer and Fetch again at
        # once, to learn the snapshot it has now.
        st.snapshot = None
        st.fetch_deadline = timers.fetch_deadline(node, now_ms)
        return
    if resp.error_code != errors.NONE or error != errors.NONE:
        if error == errors.POSITION_OUT_OF_RANGE:
            st.snapshot = None  # fetch again: the leader will name its current snapshot
        node.backoff(source, now_ms)
        return
    data = resp.unaligned_records
    if (got.end_offset, got.epoch) != (snap_id.offset, snap_id.epoch) or resp.position != position \
            or resp.size < 0 or position + len(data) > resp.size or (not data and position < resp.size):
        st.snapshot = None
        node.backoff(source, now_ms)
        return
    assert node.snapshots is not None
    st.fetch_deadline = timers.fetch_deadline(node, now_ms)
    node.snapshots.write_snapshot_chunk(snap_id, position, data)
    position += len(data)
    if position < resp.size:
        st.snapshot = (snap_id, position)
        return
    st.snapshot = None
    node.snapshots.install_snapshot(snap_id)
    node.history = VoterSetHistory.load(node.history.static_voters, node.log)
    node.flush(node.log.end_offset)
    # A snapshot holds committed data only.
    replication.set_high_watermark(node, snap_id.offset, now_ms)
