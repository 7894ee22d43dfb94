"""Replication: Fetch validation and answers (long-poll), the follower's side of a
fetch (append, divergence), the high watermark, and the read index
(Kafka's handleFetchRequest/handleFetchResponse, LeaderState.maybeUpdateHighWatermark).

Each function is a rule of :class:`~kraftnode.raft.raft_node.RaftNode` (bound there as a
method of the same name with a leading underscore), taking the node as ``node``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kraftnode.raft import errors
from kraftnode.raft.actions import (
    AppendCompleted,
    FatalError,
    FlushLog,
    HighWatermarkAdvanced,
    ReadIndexCompleted,
)
from kraftnode.raft.batches import Batch
from kraftnode.raft.inflight import InFlight, ParkedFetch
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.messages import (
    DescribeQuorumData,
    DivergingEpoch,
    FetchRequest,
    FetchResponse,
    ReplicaStateView,
    SnapshotId,
)
from kraftnode.raft.states import FollowerState, LeaderState
from kraftnode.raft.voters import ReplicaKey

if TYPE_CHECKING:
    from kraftnode.raft.raft_node import RaftNode


def fetch_error(node: RaftNode, code: int, top_level: bool = False) -> FetchResponse:
    # Kafka answers every Fetch error with an unknown (-1) high watermark.
    return FetchResponse(
        code if top_level else errors.NONE, errors.NONE if top_level else code,
        -1, node._current_leader(), node.log.start_offset,
        node_endpoints=node._leader_node_endpoints(),
    )


def reported_high_watermark(node: RaftNode) -> int:
    """The high watermark as we tell others. A new leader's is unknown (-1) until an
    entry of its own epoch commits, as Kafka's LeaderState reports it: sending the
    value it held as a follower could be lower than a follower's own, and a Java
    follower treats a high watermark that goes backwards as fatal."""
    st = node.state
    if isinstance(st, LeaderState) and st.tracker.majority_offset() <= st.tracker.epoch_start_offset:
        return -1
    return node.high_watermark


def validate_leader_epoch(node: RaftNode, request_epoch: int) -> int:
    if request_epoch < node.epoch:
        return errors.FENCED_LEADER_EPOCH
    if request_epoch > node.epoch:
        return errors.UNKNOWN_LEADER_EPOCH
    if not isinstance(node.state, LeaderState):
        return errors.NOT_LEADER_OR_FOLLOWER
    return errors.NONE


def on_fetch_request(node: RaftNode, request_id: int, req: FetchRequest, now_ms: int) -> None:
    if not node._cluster_ok(req.cluster_id):
        node._respond(request_id, node._fetch_error(errors.INCONSISTENT_CLUSTER_ID, top_level=True))
        return
    if (req.max_wait_ms < 0 or req.fetch_offset < 0 or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.current_leader_epoch):  # KafkaRaftClient.handleFetchRequest
        node._respond(request_id, node._fetch_error(errors.INVALID_REQUEST))
        return
    error = node._validate_leader_epoch(req.current_leader_epoch)
    if error != errors.NONE:
        node._respond(request_id, node._fetch_error(error))
        return
    st = node.state
    assert isinstance(st, LeaderState)
    key = ReplicaKey.of(req.replica_id, req.replica_directory_id)
    st.tracker.record_voter_contact(key, now_ms)
    node._learn_directory_id(st, key)
    diverging, snapshot = node._validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch)
    if diverging is None and snapshot is None and req.replica_id >= 0:
        st.tracker.record_fetch(key, req.fetch_offset, node.log.end_offset, now_ms)
        hw_before = node.high_watermark
        node._maybe_advance_high_watermark(st, now_ms)
        if node.high_watermark != hw_before:
            # This fetch moved the HW: answer at once so the fetcher learns it.
            node._answer_fetch(request_id, req, now_ms)
            return
    if (
        diverging is None and snapshot is None and req.max_wait_ms > 0
        and req.fetch_offset >= node.log.end_offset
    ):
        node._parked.append(ParkedFetch(request_id, req, now_ms + req.max_wait_ms))
        return
    node._answer_fetch(request_id, req, now_ms)


def validate_offset_and_epoch(node: RaftNode, offset: int, epoch: int
) -> tuple[DivergingEpoch | None, SnapshotId | None]:
    """Kafka's validateOffsetAndEpoch: valid, diverging (with the epoch end), or snapshot."""
    log = node.log
    if log.start_offset == 0 and offset == 0:
        return None, None
    snap = log.latest_snapshot_id()
    if snap is not None and (
        offset < log.start_offset or (offset == log.start_offset and epoch != snap.epoch) or epoch < snap.epoch
    ):
        return None, SnapshotId(snap.offset, snap.epoch)
    end = log.end_offset_for_epoch(epoch)
    if end.epoch != epoch or offset > end.offset:
        return DivergingEpoch(end.epoch, end.offset), None
    return None, None


def answer_fetch(node: RaftNode, request_id: int, req: FetchRequest, now_ms: int) -> None:
    """Build the Fetch answer now (also used when a parked fetch completes)."""
    error = node._validate_leader_epoch(req.current_leader_epoch)
    if error != errors.NONE:
        node._respond(request_id, node._fetch_error(error))
        return
    diverging, snapshot = node._validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch)
    records: list[Batch] = []
    if diverging is None and snapshot is None and req.fetch_offset < node.log.end_offset:
        records = node.log.read(req.fetch_offset, min(req.max_bytes, node.config.fetch_max_bytes))
    node._respond(request_id, FetchResponse(
        errors.NONE, errors.NONE, node._reported_high_watermark(), node._current_leader(),
        node.log.start_offset, diverging, snapshot, tuple(records), node._leader_node_endpoints(),
    ))


def complete_parked(node: RaftNode, now_ms: int) -> None:
    """New data or a new high watermark: answer every parked fetch."""
    if not node._parked:
        return
    parked, node._parked = node._parked, []
    for p in parked:
        node._answer_fetch(p.request_id, p.request, now_ms)


def on_fetch_response(node: RaftNode, source: int, inflight: InFlight, resp: FetchResponse, now_ms: int) -> None:
    st = node.state
    if resp.error_code != errors.NONE:
        if (resp.error_code == errors.INCONSISTENT_CLUSTER_ID and isinstance(st, FollowerState)
                and st.leader_id == source):
            node._failed = True
            node._actions.append(FatalError(resp.error_code, f"leader {source} reports another cluster id"))
            return
        node._backoff(source, now_ms)
        return
    leader = resp.current_leader
    endpoints = node._endpoints_from_nodes(leader.leader_id, resp.node_endpoints)
    if node._maybe_handle_leader_info(leader.leader_id, leader.leader_epoch, endpoints, now_ms):
        return
    st = node.state
    if (
        not isinstance(st, FollowerState) or st.leader_id != source or leader.leader_epoch != st.epoch
        or resp.partition_error_code != errors.NONE
    ):
        node._backoff(source, now_ms)
        return
    if inflight.fetch_offset != node.log.end_offset:
        return  # an answer to a position we no longer hold
    if not st.leader_resigned:
        # A fetch answered just before the leader's EndQuorumEpoch (another connection, so
        # maybe delivered after it) must not undo the resignation's election timer.
        st.fetch_deadline = now_ms + node.config.fetch_timeout_ms
        st.fetched = True
    if resp.diverging_epoch is not None:
        node._on_diverging_epoch(source, resp, resp.diverging_epoch, now_ms)
        return
    elif resp.snapshot_id is not None:
        if node.snapshots is None:
            node._backoff(source, now_ms)  # no snapshot support: keep retrying slowly
            return
        snap_id = OffsetAndEpoch(resp.snapshot_id.epoch, resp.snapshot_id.end_offset)
        if snap_id.offset < node.high_watermark or snap_id.epoch > st.epoch:
            node._backoff(source, now_ms)
            return
        node.snapshots.begin_snapshot_download(snap_id)
        st.snapshot = (snap_id, 0)
        return
    elif resp.records:
        if not node._append_as_follower(st, resp.records):
            node._backoff(source, now_ms)
            return
    node._set_high_watermark(min(resp.high_watermark, node.log.end_offset), now_ms)


def on_diverging_epoch(node: RaftNode, source: int, resp: FetchResponse, diverging: DivergingEpoch, now_ms: int) -> None:
    """KIP-595: the leader's log diverges from ours: truncate (never below the high
    watermark: that is fatal) and fetch again; the HW is only adopted once our log is
    known to match the leader's."""
    if diverging.end_offset < node.high_watermark:
        node._failed = True
        node._actions.append(FatalError(
            errors.INVALID_REQUEST,
            f"leader {source} asked to truncate to {diverging.end_offset}, "
            f"below the high watermark {node.high_watermark}",
        ))
        return
    node._truncate_to_diverging(diverging)


def truncate_to_diverging(node: RaftNode, diverging: DivergingEpoch) -> None:
    """Kafka's truncateToEndOffset: cut back to where our log agrees with the leader's."""
    log = node.log
    if diverging.epoch <= 0:
        offset = min(max(diverging.end_offset, 0), log.end_offset)
    else:
        local = log.end_offset_for_epoch(diverging.epoch)
        if local.epoch == diverging.epoch:
            offset = min(local.offset, diverging.end_offset)
        else:
            offset = local.offset
    offset = max(offset, 0)
    log.truncate_to(offset)
    node.history.truncate_new_entries(log.end_offset)  # followers only: no leader state to update


def append_as_follower(node: RaftNode, st: FollowerState, batches: Sequence[Batch]) -> bool:
    expected = node.log.end_offset
    last_epoch = node.log.last_fetched_epoch
    for batch in batches:
        if batch.base_offset != expected or batch.last_offset < batch.base_offset:
            return False
        if batch.epoch > st.epoch or batch.epoch < last_epoch:
            return False
        expected = batch.last_offset + 1
        last_epoch = batch.epoch
    node.log.append_as_follower(batches)
    node.history.observe(batches)
    node._actions.append(FlushLog(node.log.end_offset))
    return True


def send_fetch(node: RaftNode, destination: int, epoch: int, now_ms: int) -> None:
    offset = node.log.end_offset
    node._send(destination, FetchRequest(
        node.config.cluster_id, node.local_key.id, node.local_key.directory_id,
        node.config.fetch_max_wait_ms, epoch, offset, node.log.last_fetched_epoch,
        node.log.start_offset, node.config.fetch_max_bytes,
    ), now_ms, fetch_offset=offset)


def flush_leader(node: RaftNode, st: LeaderState, now_ms: int) -> None:
    if node._actions and isinstance(node._actions[-1], FlushLog):
        node._actions[-1] = FlushLog(node.log.end_offset)
    else:
        node._actions.append(FlushLog(node.log.end_offset))
    st.tracker.update_local(node.log.end_offset, now_ms)
    node._maybe_advance_high_watermark(st, now_ms)


def maybe_advance_high_watermark(node: RaftNode, st: LeaderState, now_ms: int) -> None:
    new_hw = st.tracker.candidate_high_watermark(node.high_watermark)
    if new_hw is not None:
        st.tracker.high_watermark_known = True
        node._set_high_watermark(new_hw, now_ms)


def set_high_watermark(node: RaftNode, hw: int, now_ms: int) -> None:
    node._set_high_watermark_inner(hw, now_ms)
    node._complete_reads()


def set_high_watermark_inner(node: RaftNode, hw: int, now_ms: int) -> None:
    if hw <= node.high_watermark:
        return
    node.high_watermark = hw
    node._actions.append(HighWatermarkAdvanced(hw))
    if node._pending_appends:
        done = [(o, h) for o, h in node._pending_appends if o < hw]
        if done:
            node._pending_appends = [(o, h) for o, h in node._pending_appends if o >= hw]
            for offset, handle in done:
                node._actions.append(AppendCompleted(handle, offset, errors.NONE))
    if isinstance(node.state, LeaderState):
        node._voter_changes_committed(node.state)
        node._complete_parked(now_ms)


def complete_reads(node: RaftNode) -> None:
    if not node._reads or not isinstance(node.state, LeaderState) or node._reported_high_watermark() < 0:
        return
    voters = node.voters
    confirmed = sorted((node._read_confirmed.get(v, 0) if v != node.local_key.id else node._read_round)
                       for v in voters.ids)
    # The highest round a majority has confirmed.
    majority_round = node._read_round_confirmed(confirmed[len(confirmed) - voters.majority_size()])
    done = [r for r in node._reads if r[1] <= majority_round]
    if done:
        node._reads = [r for r in node._reads if r[1] > majority_round]
        for handle, _ in done:
            node._actions.append(ReadIndexCompleted(handle, node.high_watermark, errors.NONE))


def read_round_confirmed(node: RaftNode, majority_round: int) -> int:
    """Read index rule: a read completes once a majority has confirmed a round at or
    after it (the rounds confirmed by a majority are passed in, the highest first wins)."""
    return majority_round


def describe_quorum(node: RaftNode, now_ms: int) -> DescribeQuorumData:
    """The leader's DescribeQuorum view (KIP-836 fields); an error elsewhere."""
    st = node.state
    if not isinstance(st, LeaderState):
        return DescribeQuorumData(errors.NOT_LEADER_OR_FOLLOWER, node.leader_id, node.epoch, -1)
    tracker = st.tracker
    tracker.clear_inactive_observers(now_ms)

    def view(key: ReplicaKey, end: int, fetch_ts: int, caught_ts: int) -> ReplicaStateView:
        return ReplicaStateView(key.id, key.directory_id, end, fetch_ts, caught_ts)

    voters = []
    for rid, p in tracker.voters.items():
        if rid == node.local_key.id:
            voters.append(view(p.key, node.log.end_offset, now_ms, now_ms))
        else:
            voters.append(view(p.key, p.end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp))
    observers = [
        view(p.key, p.end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp)
        for p in tracker.observers.values()
    ]
    nodes = {vnode.key.id: vnode.endpoints for vnode in node.voters}
    return DescribeQuorumData(
        errors.NONE, node.local_key.id, st.epoch, node._reported_high_watermark(), tuple(voters),
        tuple(observers), nodes
    )
