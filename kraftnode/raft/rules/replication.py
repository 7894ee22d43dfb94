"""Replication: Fetch validation and answers (long-poll), the follower's side of a
fetch (append, divergence), the high watermark and what waits for it (appends, voter
changes, parked fetches), and the read index (Kafka's handleFetchRequest /
handleFetchResponse, LeaderState.maybeUpdateHighWatermark, onUpdateLeaderHighWatermark).
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftnode.raft import errors
from kraftnode.raft.actions import AppendCompleted, HighWatermarkAdvanced, ReadIndexCompleted
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
from kraftnode.raft.rules import epochs, timers, validation
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import FollowerState, LeaderState
from kraftnode.raft.voters import ReplicaKey


def fetch_error(node: RaftCore, code: int, top_level: bool = False) -> FetchResponse:
    # Kafka answers every Fetch error with an unknown (-1) high watermark.
    return FetchResponse(
        code if top_level else errors.NONE, errors.NONE if top_level else code,
        -1, validation.current_leader(node), node.log.start_offset,
        node_endpoints=validation.leader_node_endpoints(node),
    )


def reported_high_watermark(node: RaftCore) -> int:
    """The high watermark as we tell others. A new leader's is unknown (-1) until an
    entry of its own epoch commits, as Kafka's LeaderState reports it: sending the
    value it held as a follower could be lower than a follower's own, and a Java
    follower treats a high watermark that goes backwards as fatal."""
    st = node.state
    if isinstance(st, LeaderState) and st.tracker.majority_offset() <= st.tracker.epoch_start_offset:
        return -1
    return node.high_watermark


def validate_leader_epoch(node: RaftCore, request_epoch: int) -> int:
    if request_epoch < node.epoch:
        return errors.FENCED_LEADER_EPOCH
    if request_epoch > node.epoch:
        return errors.UNKNOWN_LEADER_EPOCH
    if not isinstance(node.state, LeaderState):
        return errors.NOT_LEADER_OR_FOLLOWER
    return errors.NONE


def on_fetch_request(node: RaftCore, request_id: int, req: FetchRequest, now_ms: int) -> None:
    if not validation.cluster_ok(node, req.cluster_id):
        node.respond(request_id, fetch_error(node, errors.INCONSISTENT_CLUSTER_ID, top_level=True))
        return
    if (req.max_wait_ms < 0 or req.fetch_offset < 0 or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.current_leader_epoch):  # KafkaRaftClient.handleFetchRequest
        node.respond(request_id, fetch_error(node, errors.INVALID_REQUEST))
        return
    error = validate_leader_epoch(node, req.current_leader_epoch)
    if error != errors.NONE:
        node.respond(request_id, fetch_error(node, error))
        return
    st = node.state
    assert isinstance(st, LeaderState)
    key = ReplicaKey.of(req.replica_id, req.replica_directory_id)
    st.tracker.record_voter_contact(key, now_ms)
    node.learn_directory_id(st, key)
    diverging, snapshot = fetch_position(node, req.fetch_offset, req.last_fetched_epoch)
    if diverging is None and snapshot is None and req.replica_id >= 0:
        st.tracker.record_fetch(key, req.fetch_offset, node.log.end_offset, now_ms)
        # A fetch that moves the HW is parked like any other caught-up fetch, as Kafka 3.9's
        # leader does (KafkaRaftClient.tryCompleteFetchRequest: onUpdateLeaderHighWatermark
        # completes appends, not fetches): the replica learns the new HW with the next
        # records, or when its long poll ends. Answering it at once would cost every
        # follower a second round trip per commit, and its next fetch would race the next
        # append (not yet parked when the records come: sent only after the leader's flush).
        maybe_advance_high_watermark(node, st, now_ms)
    # KIP-1166 (Fetch v18, Kafka 4.4's tryCompleteFetchRequest / isHighWatermarkUpdated): a
    # replica whose high watermark is behind the one the answer carries is answered at once,
    # so that followers learn a commit without waiting for the next records or the end of
    # their long poll. Without v18 the request's value is Long.MAX_VALUE: parked as before.
    if (
        diverging is None and snapshot is None and req.max_wait_ms > 0
        and req.fetch_offset >= node.log.end_offset
        and not req.high_watermark < reported_high_watermark(node)
    ):
        st.parked.append(ParkedFetch(request_id, req, now_ms + req.max_wait_ms))
        return
    answer_fetch(node, request_id, req, now_ms)


def validate_offset_and_epoch(node: RaftCore, offset: int, epoch: int
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


def fetch_position(node: RaftCore, offset: int, epoch: int
) -> tuple[DivergingEpoch | None, SnapshotId | None]:
    """What a leader answers a Fetch at ``offset``/``epoch`` (KafkaRaftClient.tryCompleteFetchRequest).
    KAFKA-15078 (Kafka 3.6 on): a replica with an empty log (offset 0) is sent to the latest
    snapshot, unless that is the bootstrap snapshot (0, 0), even while the log still starts at 0:
    loading one snapshot costs a new broker or controller far less than replaying the log. Any
    other offset: :func:`validate_offset_and_epoch`."""
    if offset == 0:
        snap = node.log.latest_snapshot_id()
        if snap is not None and (snap.offset, snap.epoch) != (0, 0):
            return None, SnapshotId(snap.offset, snap.epoch)
    return validate_offset_and_epoch(node, offset, epoch)


def answer_fetch(node: RaftCore, request_id: int, req: FetchRequest, now_ms: int) -> None:
    """Build the Fetch answer now (also used when a parked fetch completes)."""
    error = validate_leader_epoch(node, req.current_leader_epoch)
    if error != errors.NONE:
        node.respond(request_id, fetch_error(node, error))
        return
    diverging, snapshot = fetch_position(node, req.fetch_offset, req.last_fetched_epoch)
    records: list[Batch] = []
    if diverging is None and snapshot is None and req.fetch_offset < node.log.end_offset:
        records = node.log.read(req.fetch_offset, min(req.max_bytes, node.config.fetch_max_bytes))
    node.respond(request_id, FetchResponse(
        errors.NONE, errors.NONE, reported_high_watermark(node), validation.current_leader(node),
        node.log.start_offset, diverging, snapshot, tuple(records), validation.leader_node_endpoints(node),
    ))


def complete_parked(node: RaftCore, st: LeaderState, now_ms: int) -> None:
    """New data or a new high watermark: answer every parked fetch."""
    if not st.parked:
        return
    parked, st.parked = st.parked, []
    for p in parked:
        answer_fetch(node, p.request_id, p.request, now_ms)


def on_fetch_response(node: RaftCore, source: int, inflight: InFlight, resp: FetchResponse, now_ms: int) -> None:
    st = node.state
    if resp.error_code != errors.NONE:
        if (resp.error_code == errors.INCONSISTENT_CLUSTER_ID and isinstance(st, FollowerState)
                and st.leader_id == source):
            node.fail(resp.error_code, f"leader {source} reports another cluster id")
            return
        node.backoff(source, now_ms)
        return
    leader = resp.current_leader
    endpoints = validation.endpoints_from_nodes(node, leader.leader_id, resp.node_endpoints)
    if epochs.maybe_handle_leader_info(node, leader.leader_id, leader.leader_epoch, endpoints, now_ms):
        return
    st = node.state
    if (
        not isinstance(st, FollowerState) or st.leader_id != source or leader.leader_epoch != st.epoch
        or resp.partition_error_code != errors.NONE
    ):
        node.backoff(source, now_ms)
        return
    if inflight.fetch_offset != node.log.end_offset:
        return  # an answer to a position we no longer hold
    if not (st.leader_resigned and now_ms >= st.fetch_deadline):
        # Kafka's handleFetchResponse resets the fetch timer on every successful fetch, also
        # after an EndQuorumEpoch shortened it (a fetch answered before the resignation but
        # delivered after it); only once that shortened timer has run out is it too late, as
        # Kafka's poll loop fires an expired timer before it handles the next message.
        st.fetch_deadline = timers.fetch_deadline(node, now_ms)
    if not st.leader_resigned:
        st.fetched = True  # KIP-996: a resigned leader is not one to stick to
    if resp.diverging_epoch is not None:
        node.on_diverging_epoch(source, resp, resp.diverging_epoch, now_ms)
        return
    elif resp.snapshot_id is not None:
        if node.snapshots is None:
            node.backoff(source, now_ms)  # no snapshot support: keep retrying slowly
            return
        snap_id = OffsetAndEpoch(resp.snapshot_id.epoch, resp.snapshot_id.end_offset)
        if snap_id.offset < node.high_watermark or snap_id.epoch > st.epoch:
            node.backoff(source, now_ms)
            return
        node.snapshots.begin_snapshot_download(snap_id)
        st.snapshot = (snap_id, 0)
        return
    elif resp.records:
        if not append_as_follower(node, st, resp.records):
            node.backoff(source, now_ms)
            return
    set_high_watermark(node, min(resp.high_watermark, node.log.end_offset), now_ms)


def on_diverging_epoch(node: RaftCore, source: int, resp: FetchResponse, diverging: DivergingEpoch,
                       now_ms: int) -> None:
    """KIP-595: the leader's log diverges from ours: truncate (never below the high
    watermark: that is fatal) and fetch again; the HW is only adopted once our log is
    known to match the leader's."""
    if diverging.end_offset < node.high_watermark:
        node.fail(errors.INVALID_REQUEST, f"leader {source} asked to truncate to {diverging.end_offset}, "
                                          f"below the high watermark {node.high_watermark}")
        return
    truncate_to_diverging(node, diverging)


def truncate_to_diverging(node: RaftCore, diverging: DivergingEpoch) -> None:
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


def append_as_follower(node: RaftCore, st: FollowerState, batches: Sequence[Batch]) -> bool:
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
    node.flush(node.log.end_offset)
    return True


def send_fetch(node: RaftCore, destination: int, epoch: int, now_ms: int) -> None:
    offset = node.log.end_offset
    node.send(destination, FetchRequest(
        node.config.cluster_id, node.local_key.id, node.local_key.directory_id,
        node.config.fetch_max_wait_ms, epoch, offset, node.log.last_fetched_epoch,
        node.log.start_offset, node.config.fetch_max_bytes,
        # v18 (KIP-1166): what we know of the high watermark (sent to leaders that speak v18)
        high_watermark=node.high_watermark,
    ), now_ms, fetch_offset=offset)


def flush_leader(node: RaftCore, st: LeaderState, now_ms: int) -> None:
    """The leader's log must be durable before its own end offset counts towards the HW."""
    node.flush(node.log.end_offset)
    st.tracker.update_local(node.log.end_offset, now_ms)
    maybe_advance_high_watermark(node, st, now_ms)


def maybe_advance_high_watermark(node: RaftCore, st: LeaderState, now_ms: int) -> None:
    new_hw = st.tracker.candidate_high_watermark(node.high_watermark)
    if new_hw is not None:
        st.tracker.high_watermark_known = True
        set_high_watermark(node, new_hw, now_ms)


def set_high_watermark(node: RaftCore, hw: int, now_ms: int) -> None:
    set_high_watermark_inner(node, hw, now_ms)
    complete_reads(node)


def set_high_watermark_inner(node: RaftCore, hw: int, now_ms: int) -> None:
    """Commit up to ``hw``; a leader then completes the appends and the voter change that
    waited for it. Parked fetches stay parked (Kafka's onUpdateLeaderHighWatermark leaves
    its fetch purgatory alone): new records or the end of their long poll answer them."""
    if hw <= node.high_watermark:
        return
    node.high_watermark = hw
    node.emit(HighWatermarkAdvanced(hw))
    st = node.state
    if not isinstance(st, LeaderState):
        return
    if st.pending_appends:
        done = [(o, h) for o, h in st.pending_appends if o < hw]
        if done:
            st.pending_appends = [(o, h) for o, h in st.pending_appends if o >= hw]
            node.emit(*(AppendCompleted(handle, offset, errors.NONE) for offset, handle in done))
    voter_changes_committed(node, st)


def voter_changes_committed(node: RaftCore, st: LeaderState) -> None:
    """The high watermark moved: answer the change whose VotersRecord it now covers
    (Kafka's AddVoterHandler / RemoveVoterHandler.highWatermarkUpdated)."""
    tracker = st.tracker
    add = tracker.pending_add
    if add is not None and add.last_offset is not None and node.high_watermark > add.last_offset:
        node.emit(*st.finish_add(errors.NONE, None))
    remove = tracker.pending_remove
    if remove is not None and node.high_watermark > remove.last_offset:
        node.emit(*st.finish_remove(errors.NONE, None))
        if not node.voters.is_voter(node.local_key):
            # RemoveVoterHandler: a leader outside the committed voter set resigns
            # (on the next poll, as Kafka's requestResign).
            tracker.resign_requested = True


def complete_reads(node: RaftCore) -> None:
    st = node.state
    if not isinstance(st, LeaderState) or not st.reads or reported_high_watermark(node) < 0:
        return
    voters = node.voters
    confirmed = sorted((st.read_confirmed.get(v, 0) if v != node.local_key.id else st.read_round)
                       for v in voters.ids)
    # The highest round a majority has confirmed.
    majority_round = node.read_round_confirmed(st, confirmed[len(confirmed) - voters.majority_size()])
    done = [r for r in st.reads if r[1] <= majority_round]
    if done:
        st.reads = [r for r in st.reads if r[1] > majority_round]
        node.emit(*(ReadIndexCompleted(handle, node.high_watermark, errors.NONE) for handle, _ in done))


def read_round_confirmed(node: RaftCore, st: LeaderState, majority_round: int) -> int:
    """Read index rule: a read completes once a majority has confirmed a round at or
    after it (the rounds confirmed by a majority are passed in, the highest first wins)."""
    return majority_round


def describe_quorum(node: RaftCore, now_ms: int) -> DescribeQuorumData:
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
        errors.NONE, node.local_key.id, st.epoch, reported_high_watermark(node), tuple(voters),
        tuple(observers), nodes
    )
