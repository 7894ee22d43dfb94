"""Voter changes (KIP-853): AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter, the
kraft.version upgrade and auto-join, as Kafka's internals/AddVoterHandler,
RemoveVoterHandler and UpdateVoterHandler. A pending add or remove ends with
``LeaderState.finish_add`` / ``finish_remove``: committed (see
:func:`kraftnode.raft.rules.replication.voter_changes_committed`), timed out, refused or
aborted.
"""

from __future__ import annotations

from kraftnode.raft import errors, reconfig
from kraftnode.raft.batches import ControlRecord, KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CurrentLeader,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    Request,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
)
from kraftnode.raft.rules import epochs, replication, validation
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import FollowerState, LeaderState
from kraftnode.raft.voters import ReplicaKey, VoterNode, VoterSet


def voter_set_changed(node: RaftCore, now_ms: int) -> None:
    """A VotersRecord was appended or truncated away: the new set applies at once (KIP-853)."""
    st = node.state
    if isinstance(st, LeaderState):
        st.tracker.update_voter_set(node.voters)
        replication.maybe_advance_high_watermark(node, st, now_ms)


def local_voter_node(node: RaftCore) -> VoterNode:
    lo, hi = node.local_kraft_versions
    return VoterNode(node.local_key, node.local_endpoints, lo, hi)


def should_update_voter(node: RaftCore) -> bool:
    """A voter whose entry in the (dynamic) voter set differs from what it is now; in a
    static quorum (kraft.version 0), a voter that has not yet told this leader its
    directory id, endpoints and kraft.version range (Kafka 4.1, for the upgrade)."""
    if node.local_key.directory_id is None or not node.local_endpoints:
        return False
    if node.history.kraft_version() < 1:
        st = node.state
        return isinstance(st, FollowerState) and not st.voter_updated and node.is_voter
    return reconfig.voter_node_needs_update(node.voters, local_voter_node(node))


def should_auto_join(node: RaftCore, st: FollowerState) -> bool:
    """An observer that may ask to join: auto-join on, a dynamic quorum, an identity and
    endpoints to offer, and caught up with the leader (fetched, at its high watermark)."""
    if not node.config.auto_join or node.history.kraft_version() < 1:
        return False
    if node.local_key.directory_id is None or not node.local_endpoints:
        return False
    return st.fetched and st.snapshot is None and node.log.end_offset >= node.high_watermark > 0


def auto_join_request(node: RaftCore) -> Request:
    """AddRaftVoter for ourselves, or first RemoveRaftVoter for the stale voter that has
    our id under another directory id (Kafka 4.x's auto-join). The AddRaftVoter asks to be
    answered at the append (AckWhenCommitted false, v1; Kafka 4.4's ``buildAddVoterRequest``):
    the joiner does not fetch while its request is out, and when its own fetch is needed to
    commit the new voter set (a quorum of one growing to two) an answer at the commit would
    never come before the joiner's fetch timeout."""
    cid = node.config.cluster_id
    old = node.voters.node(node.local_key.id)
    if old is not None:
        return RemoveRaftVoterRequest(cid, old.key.id, old.key.directory_id)
    return AddRaftVoterRequest(cid, node.config.request_timeout_ms, node.local_key.id,
                               node.local_key.directory_id, node.local_endpoints, ack_when_committed=False)


def learn_directory_id(node: RaftCore, st: LeaderState, key: ReplicaKey) -> None:
    """Static quorum: a voter's Fetch names its directory id (ReplicaDirectoryId, which
    Kafka 3.9 voters send too); the upgrade's voter set takes it if it has none yet."""
    volatile = st.tracker.volatile_voters
    if volatile is None or key.directory_id is None:
        return
    vnode = volatile.node(key.id)
    if vnode is None or vnode.key.directory_id is not None:
        return
    st.tracker.volatile_voters = reconfig.update_voter_ignoring_directory_id(
        volatile, VoterNode(key, vnode.endpoints, vnode.min_kraft_version, vnode.max_kraft_version))


def kraft_version_upgrade(node: RaftCore, version: int, validate_only: bool
                          ) -> tuple[int, str | None, tuple[ControlRecord, ...]]:
    """KafkaRaftClient.upgradeKRaftVersion (Kafka 4.1): on the leader of a static quorum,
    the control batch to append: KRaftVersionRecord(``version``) and the VotersRecord of
    every voter's directory id, endpoints and kraft.version range. Returns (error code,
    message, records); no records for a refusal, a validation or a no-op. The node
    appends them (:meth:`RaftNode.upgrade_kraft_version`)."""
    st = node.state
    if node.failed or not isinstance(st, LeaderState) or st.transfer is not None:
        return errors.NOT_LEADER_OR_FOLLOWER, None, ()
    tracker = st.tracker
    persisted = node.history.kraft_version()
    refusal = reconfig.kraft_upgrade_refusal(persisted, version, tracker.upgraded_kraft_version,
                                             tracker.volatile_voters)
    if refusal is not None:
        return errors.INVALID_UPDATE_VERSION, refusal, ()
    volatile = tracker.volatile_voters
    if validate_only or persisted == version or tracker.upgraded_kraft_version == version or volatile is None:
        return errors.NONE, None, ()
    tracker.volatile_voters = None
    tracker.upgraded_kraft_version = version
    return errors.NONE, None, (KRaftVersionControlRecord(version), VotersControlRecord(volatile))


def voter_change_precheck(node: RaftCore, st: LeaderState, verb: str, now_ms: int) -> tuple[int, str] | None:
    """The checks every voter change starts with, in Kafka's order."""
    tracker = st.tracker
    expire_voter_changes(node, st, now_ms)
    if tracker.pending_add is not None or tracker.pending_remove is not None:
        return errors.REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle previous voter change request"
    if not tracker.high_watermark_known:
        return errors.REQUEST_TIMED_OUT, (
            "Request timed out waiting for leader to establish HWM and fence previous voter changes")
    kraft_version = node.history.kraft_version()
    if kraft_version < 1:
        return errors.UNSUPPORTED_VERSION, (
            f"Cluster doesn't support {verb} voter because the kraft.version feature is {kraft_version}")
    offset = node.history.latest_voters_offset()
    if offset is None or offset >= node.high_watermark:
        return errors.REQUEST_TIMED_OUT, (
            f"Request timed out waiting for voters to commit the latest voter change at {offset} "
            f"with HWM {node.high_watermark}")
    return None


def append_voters(node: RaftCore, st: LeaderState, voters: VoterSet, now_ms: int) -> int:
    """Append a VotersRecord (effective at once); returns its offset. The caller flushes."""
    batch = node.log.append_as_leader([VotersControlRecord(voters)], st.epoch, is_control=True)
    if node.history.observe([batch]):
        voter_set_changed(node, now_ms)
    return batch.last_offset


def commit_voters(node: RaftCore, st: LeaderState, now_ms: int) -> None:
    replication.flush_leader(node, st, now_ms)
    replication.complete_parked(node, st, now_ms)


def expire_voter_changes(node: RaftCore, st: LeaderState, now_ms: int) -> None:
    tracker = st.tracker
    if tracker.pending_add is not None and tracker.pending_add.deadline <= now_ms:
        node.emit(*st.finish_add(errors.REQUEST_TIMED_OUT, None))
    if tracker.pending_remove is not None and tracker.pending_remove.deadline <= now_ms:
        node.emit(*st.finish_remove(errors.REQUEST_TIMED_OUT, None))


def on_add_voter(node: RaftCore, request_id: int, req: AddRaftVoterRequest, now_ms: int) -> None:
    def answer(code: int, message: str | None = None) -> None:
        node.respond(request_id, AddRaftVoterResponse(code, message))

    if not validation.cluster_ok(node, req.cluster_id):
        answer(errors.INCONSISTENT_CLUSTER_ID)
        return
    st = node.state
    if not isinstance(st, LeaderState):
        answer(errors.NOT_LEADER_OR_FOLLOWER)
        return
    key = ReplicaKey.of(req.voter_id, req.voter_directory_id)
    if req.voter_id < 0 or key.directory_id is None:
        answer(errors.INVALID_REQUEST, "Add voter request didn't include a valid voter")
        return
    listener = node.config.listener_name
    if not reconfig.has_listener(req.listeners, listener):
        answer(errors.INVALID_REQUEST, f"Add voter request didn't include the endpoint "
                                       f"({list(req.listeners)}) for the default listener {listener}")
        return
    refused = node.voter_change_precheck(st, "adding", now_ms)
    if refused is not None:
        answer(*refused)
        return
    voters = node.voters
    if key.id in voters.ids:
        answer(errors.DUPLICATE_VOTER, f"The voter id for {reconfig.key_text(key)} is already part of "
                                       f"the set of voters {reconfig.keys_text(voters.keys())}.")
        return
    if not node.can_send(key.id, now_ms):
        answer(errors.REQUEST_TIMED_OUT, f"New voter {reconfig.key_text(key)} is not ready to receive requests")
        return
    st.tracker.pending_add = reconfig.PendingAdd(
        request_id, key, req.listeners, now_ms + node.config.request_timeout_ms,
        ack_when_committed=req.ack_when_committed)
    # Discover the new voter's supported kraft.version range on its controller listener.
    node.send(key.id, ApiVersionsRequest(), now_ms,
              endpoints=tuple(e for e in req.listeners if e.name == listener))


def on_api_versions_response(node: RaftCore, source: int, resp: ApiVersionsResponse, now_ms: int) -> None:
    st = node.state
    if not isinstance(st, LeaderState):
        return
    pending = st.tracker.pending_add
    if pending is None or pending.last_offset is not None or pending.key.id != source:
        return  # not the probe we are waiting for (e.g. the add already expired)
    key = pending.key
    shown_key = reconfig.key_text(key)

    def abort(code: int, message: str) -> None:
        node.emit(*st.finish_add(code, message))

    if resp.error_code != errors.NONE:
        abort(errors.REQUEST_TIMED_OUT, "Aborted add voter operation for since "
                                        f"API_VERSIONS returned an error {errors.name(resp.error_code)}")
        return
    kraft_version = node.history.kraft_version()
    supported = resp.kraft_version_range
    if supported is None or not reconfig.supports(supported, kraft_version):
        shown = f"(min: {supported[0]}, max: {supported[1]}" if supported else "(min: 0, max: 0)"
        abort(errors.INVALID_REQUEST, f"Aborted add voter operation for {shown_key} since the "
                                      f"kraft.version range {shown} doesn't support the finalized version {kraft_version}")
        return
    if not st.tracker.is_replica_caught_up(key, now_ms):
        abort(errors.REQUEST_TIMED_OUT, f"Aborted add voter operation for {shown_key} since it is lagging behind")
        return
    voters = reconfig.add_voter(node.voters, VoterNode(key, pending.endpoints, supported[0], supported[1]))
    if voters is None:  # cannot happen while the operation is pending; never append twice
        abort(errors.DUPLICATE_VOTER, f"{shown_key} is already a voter")
        return
    pending.last_offset = append_voters(node, st, voters, now_ms)
    if not pending.ack_when_committed:
        # AddRaftVoter v1 with AckWhenCommitted false: Kafka's AddVoterHandler answers once
        # the leader has appended the VotersRecord; the change stays pending until it commits,
        # so a further voter change is still refused until then. The answer follows our flush
        # (commit_voters), so "written locally" is also durable here.
        commit_voters(node, st, now_ms)
        if st.tracker.pending_add is pending:  # else committed at once and answered by that
            pending.answered = True
            node.respond(pending.request_id, AddRaftVoterResponse(errors.NONE, None))
        return
    commit_voters(node, st, now_ms)


def on_remove_voter(node: RaftCore, request_id: int, req: RemoveRaftVoterRequest, now_ms: int) -> None:
    def answer(code: int, message: str | None = None) -> None:
        node.respond(request_id, RemoveRaftVoterResponse(code, message))

    if not validation.cluster_ok(node, req.cluster_id):
        answer(errors.INCONSISTENT_CLUSTER_ID)
        return
    st = node.state
    if not isinstance(st, LeaderState):
        answer(errors.NOT_LEADER_OR_FOLLOWER)
        return
    key = ReplicaKey.of(req.voter_id, req.voter_directory_id)
    if req.voter_id < 0 or key.directory_id is None:
        answer(errors.INVALID_REQUEST, "Remove voter request didn't include a valid voter")
        return
    refused = node.voter_change_precheck(st, "removing", now_ms)
    if refused is not None:
        answer(*refused)
        return
    voters = reconfig.remove_voter(node.voters, key)
    if voters is None:
        answer(errors.VOTER_NOT_FOUND, f"Cannot remove voter {reconfig.key_text(key)} from the set of "
                                       f"voters {reconfig.keys_text(node.voters.keys())}")
        return
    offset = append_voters(node, st, voters, now_ms)
    st.tracker.pending_remove = reconfig.PendingRemove(
        request_id, key, offset, now_ms + node.config.request_timeout_ms)
    commit_voters(node, st, now_ms)


def on_update_voter(node: RaftCore, request_id: int, req: UpdateRaftVoterRequest, now_ms: int) -> None:
    def answer(code: int) -> None:
        eps = validation.leader_node_endpoints(node)
        node.respond(request_id, UpdateRaftVoterResponse(code, validation.current_leader(node), eps[0] if eps else None))

    if not validation.cluster_ok(node, req.cluster_id):
        node.respond(request_id, UpdateRaftVoterResponse(errors.INCONSISTENT_CLUSTER_ID, CurrentLeader(-1, -1)))
        return
    error = replication.validate_leader_epoch(node, req.current_leader_epoch)
    if error != errors.NONE:
        answer(error)
        return
    st = node.state
    assert isinstance(st, LeaderState)
    key = ReplicaKey.of(req.voter_id, req.voter_directory_id)
    lo, hi = req.min_supported_version, req.max_supported_version
    if (req.voter_id < 0 or key.directory_id is None
            or not reconfig.has_listener(req.listeners, node.config.listener_name)
            or lo < 0 or hi < 0 or hi < lo):
        answer(errors.INVALID_REQUEST)
        return
    volatile = st.tracker.volatile_voters
    if node.history.kraft_version() < 1 and volatile is not None:
        # Kafka 4.1: a static quorum keeps the update in memory, for an upgrade to write.
        if not st.tracker.high_watermark_known:
            answer(errors.REQUEST_TIMED_OUT)
            return
        if not reconfig.supports((lo, hi), 0):
            answer(errors.INVALID_REQUEST)
            return
        updated = reconfig.update_voter_ignoring_directory_id(volatile, VoterNode(key, req.listeners, lo, hi))
        if updated is None:
            answer(errors.VOTER_NOT_FOUND)
            return
        st.tracker.volatile_voters = updated
        st.tracker.record_voter_contact(key, now_ms)
        answer(errors.NONE)
        return
    refused = node.voter_change_precheck(st, "updating", now_ms)
    if refused is not None:
        answer(refused[0])
        return
    if not reconfig.supports((lo, hi), node.history.kraft_version()):
        answer(errors.INVALID_REQUEST)
        return
    voters = reconfig.update_voter(node.voters, VoterNode(key, req.listeners, lo, hi))
    if voters is None:
        answer(errors.VOTER_NOT_FOUND)
        return
    # UpdateVoterHandler appends and answers at once, without waiting for the commit.
    append_voters(node, st, voters, now_ms)
    commit_voters(node, st, now_ms)
    answer(errors.NONE)


def on_update_voter_response(node: RaftCore, source: int, resp: UpdateRaftVoterResponse, now_ms: int) -> None:
    st = node.state
    if (isinstance(st, FollowerState) and st.leader_id == source
            and resp.error_code in (errors.NONE, errors.UNSUPPORTED_VERSION)):
        # Static quorum: told once per leader (a Kafka 3.9 leader answers
        # UNSUPPORTED_VERSION: it keeps no in-memory voters, so do not ask again).
        st.voter_updated = True
    if resp.error_code in (errors.NONE, errors.UNSUPPORTED_VERSION, errors.INVALID_REQUEST,
                           errors.REQUEST_TIMED_OUT):
        return  # the leader was reached; the next period retries if still needed
    leader = resp.current_leader
    nodes = (resp.leader_endpoint,) if resp.leader_endpoint is not None else ()
    endpoints = validation.endpoints_from_nodes(node, leader.leader_id, nodes)
    if epochs.maybe_handle_leader_info(node, leader.leader_id, leader.leader_epoch, endpoints, now_ms):
        return
    node.backoff(source, now_ms)
