"""Request handlers: turn parsed wire requests into core events or log reads, and back.

Raft RPCs go through the core (:class:`RaftDriver`); the application APIs (Produce,
consumer Fetch, ListOffsets, Metadata) are our extension and read or append to the
same log; the admin APIs (DescribeCluster, DescribeQuorum) report the core's view.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio

from kraftnode.log.bootstrap import METADATA_VERSIONS, MINIMUM_BOOTSTRAP_MV
from kraftnode.log.metadata_log import MAX_BATCH_SIZE_BYTES
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.framing import FrameError, Request
from kraftnode.protocol.registry import (
    ADD_RAFT_VOTER,
    ALTER_USER_SCRAM_CREDENTIALS,
    API_VERSIONS,
    BEGIN_QUORUM_EPOCH,
    CONTROLLER_REGISTRATION,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_QUORUM,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    REMOVE_RAFT_VOTER,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    UPDATE_FEATURES,
    UPDATE_RAFT_VOTER,
    VOTE,
)
from kraftnode.raft.actions import AppendCompleted
from kraftnode.raft.java_order import java_hashmap_order, replica_key_hash
from kraftnode.raft.states import Leader
from kraftnode.server import api_versions, group_offsets
from kraftnode.server import raft_wire as rw
from kraftnode.server.controller_duties import ControllerDuties, voter_address
from kraftnode.server.metadata_state import is_metadata_record
from kraftnode.server.network import Reply
from kraftnode.server.peer_client import SOFTWARE_NAME
from kraftnode.server.raft_driver import RaftDriver, now_ms
from kraftnode.server.raft_log import RawBatches
from kraftnode.server.security import api_checks
from kraftnode.server.security import authorizer as az
from kraftnode.server.security.acl_admin import AclAdmin
from kraftnode.server.security.listeners import CURRENT_LISTENER
from recordbatch import CorruptBatchError, iter_batches
from recordbatch.wire import ZERO_UUID, DecodeError, read_varint, read_varlong

log = logging.getLogger("kraftnode.handlers")

# How long a node waits for the leader's answer to a voter change it forwards: the Java
# Admin's default request.timeout.ms, after which the client has given up anyway.
VOTER_CHANGE_FORWARD_TIMEOUT_S = 30.0



@dataclass(frozen=True)
class NodeIdentity:
    node_id: int
    cluster_id: str
    listener_name: str


class NodeHandlers:
    """Routes parsed requests to the code that answers them."""

    def __init__(self, ident: NodeIdentity, driver: RaftDriver,
                 features: api_versions.FeatureView, duties: ControllerDuties | None = None,
                 authz: az.StandardAuthorizer | None = None) -> None:
        self.ident = ident
        self.driver = driver
        self.features = features
        self.producers = driver.producers
        self.duties = duties
        # client software per connection (from ApiVersions) and per fetching replica id:
        # the leader must know whether a Kafka controller replays this log (see _produce)
        self._conn_software: dict[str, str] = {}
        self.replica_software: dict[int, str] = {}
        self.group_offsets = group_offsets.GroupOffsets()  # simple consumer groups
        #: StandardAuthorizer (authorizer.class.name); None: every API allowed to everyone
        self.authz = authz
        self.acl_admin = AclAdmin(driver, duties, authz)

    # ---------------------------------------------------------------- helpers
    @property
    def core(self) -> Any:
        return self.driver.node

    def _voter_endpoints(self) -> dict[int, tuple[str, int]]:
        """Each voter's endpoint on our controller listener (the address clients use)."""
        out: dict[int, tuple[str, int]] = {}
        listener = self._listener()
        for node in self.core.voters:
            addr = voter_address(self.driver, node.key.id, listener)
            if listener != self.ident.listener_name and node.endpoint(listener) is None:
                # a static voter set names only the default listener: the controller's
                # registration (RegisterControllerRecord) has its other listeners
                addr = self._registered_endpoint(node.key.id, listener) or addr
            if addr is not None:
                out[node.key.id] = addr
        return out

    def _registered_endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        reg = self.duties.state.controllers.get(node_id) if self.duties is not None else None
        if reg is not None:
            for e in reg.end_points:
                if e.name.upper() == listener.upper():
                    return e.host, e.port
        return None

    def _listener(self) -> str:
        """The listener the request came in on (security.listeners.OnListener), else ours."""
        return CURRENT_LISTENER.get() or self.ident.listener_name

    def _controller_endpoints(self) -> dict[int, tuple[str, int]]:
        """The controllers DescribeCluster lists: the voters, and every controller registered
        (RegisterControllerRecord) with an endpoint on our listener. A Kafka 3.9 controller
        lists its registered controllers (ControllerRegistrationsPublisher
        .describeClusterControllers), so a controller that is not a voter -- one waiting to
        be added, or one removed -- is listed too; the voters are listed even before their
        registrations commit, so that a client bootstrapping then finds the quorum."""
        eps = self._voter_endpoints()
        if self.duties is not None:
            listener = self._listener().upper()
            for cid, reg in self.duties.state.controllers.items():
                ep = next((e for e in reg.end_points if e.name.upper() == listener), None)
                if cid not in eps and ep is not None:
                    eps[cid] = (ep.host, ep.port)
        return eps

    def _leader(self) -> tuple[int, int]:
        return self.core.leader_id, self.core.epoch

    def _denied(self, resource_type: int, name: str, op: int, api: int) -> bool:
        """True when the caller may not do ``op`` on the resource (security.api_checks)."""
        return self.authz is not None and api_checks.denied(self.authz, resource_type, name, op, api)

    def _authorized_ops(self, resource_type: int, name: str, without_authorizer: int) -> int:
        if self.authz is None:
            return without_authorizer
        return self.authz.authorized_operations(az.session(), resource_type, name)

    async def __call__(self, request: Request, peer: str) -> Reply | None:
        key = request.spec.key
        v = request.api_version
        body: Any = request.body
        if key == API_VERSIONS:
            resp, rv = api_versions.answer(request, self._features())
            sw = ""
            if request.body is not None and v >= 3:
                sw = f" ({body.client_software_name} {body.client_software_version})"
                self._conn_software[peer] = body.client_software_name
            log.debug("ApiVersions v%d from %s%s: answered v%d, error %d", v, peer, sw, rv,
                     resp.error_code)
            return Reply(resp, rv)
        if key == FETCH and peer in self._conn_software:
            replica = rw.fetch_replica_id(body, v)
            if replica >= 0:
                self.replica_software[replica] = self._conn_software[peer]
        handler = self._handlers.get(key)
        if handler is None:
            raise FrameError(f"{request.spec.name} is not served")
        if self.authz is not None:
            try:
                refused = api_checks.refusal(self.authz, key, v, body)
                if refused is None and key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    self.authz.check_ready(az.session())
            except az.AuthorizerNotReady:
                log.info("%s from %s before the ACLs are loaded: UNKNOWN_SERVER_ERROR (Kafka's "
                         "AuthorizerNotReadyException)", request.spec.name, az.session().principal)
                refused = api_checks.error_response(key, v, body, Errors.UNKNOWN_SERVER_ERROR)
            if refused is not None:
                return Reply(refused, v)
        result = await handler(self, body, v)
        return None if result is None else Reply(result, v)

    def _features(self) -> api_versions.FeatureView:
        """Finalized features as a Kafka 3.9 controller reports them (ControllerServer's
        FeaturesPublisher): the levels of the committed FeatureLevelRecords and the offset at
        which they last changed. kraft.version is not among them: it has no FeatureLevelRecord
        (BootstrapMetadata.fromVersions), so a 3.9 controller does not list it even in a
        dynamic quorum, and kafka-features.sh describe prints its FinalizedVersionLevel as 0
        (only a 3.9 broker's KRaftMetadataCache adds it, from the raft client)."""
        f = self.features
        f.finalized = {"metadata.version": api_versions.METADATA_VERSION_3_9}
        f.finalized_epoch = max(self.driver.high_watermark - 1, -1)
        if self.duties is not None and self.duties.state.metadata_version is not None:
            f.finalized = dict(self.duties.state.finalized)
            f.finalized_epoch = self.duties.state.features_epoch
        return f

    # ---------------------------------------------------------------- raft RPCs
    async def _vote(self, q: w.VoteRequest, v: int) -> w.VoteResponse:
        if v > self.features.api_max.get(VOTE, v):
            # Vote v2 is only spoken with pre-vote enabled (not advertised otherwise). Without it
            # this node is a Kafka 3.9 controller, which cannot parse v2 and closes the connection
            # (RequestContext.parseRequest -> InvalidRequestException -> SocketServer closes it).
            raise DecodeError(f"unsupported version {v} of Vote (we serve 0-{self.features.api_max[VOTE]}; "
                              "Vote v2 needs kraftnode.raft.pre.vote.enable=true)")
        r = rw.vote_request_from_wire(q)
        if r is None:
            return w.VoteResponse(error_code=Errors.INVALID_REQUEST)
        return rw.vote_response_to_wire(await self.driver.call(r), v)  # type: ignore[arg-type]

    async def _begin(self, q: w.BeginQuorumEpochRequest, v: int) -> w.BeginQuorumEpochResponse:
        r = rw.begin_request_from_wire(q)
        if r is None:
            return w.BeginQuorumEpochResponse(error_code=Errors.INVALID_REQUEST)
        return rw.begin_response_to_wire(await self.driver.call(r), v)  # type: ignore[arg-type]

    async def _end(self, q: w.EndQuorumEpochRequest, v: int) -> w.EndQuorumEpochResponse:
        r = rw.end_request_from_wire(q, v)
        if r is None:
            return w.EndQuorumEpochResponse(error_code=Errors.INVALID_REQUEST)
        return rw.end_response_to_wire(await self.driver.call(r), v)  # type: ignore[arg-type]

    async def _fetch_snapshot(self, q: w.FetchSnapshotRequest, v: int) -> w.FetchSnapshotResponse:
        r = rw.fetch_snapshot_request_from_wire(q)
        if r is None:
            return w.FetchSnapshotResponse(error_code=Errors.INVALID_REQUEST)
        return rw.fetch_snapshot_response_to_wire(await self.driver.call(r), v)  # type: ignore[arg-type]

    async def _fetch(self, q: w.FetchRequest, v: int) -> w.FetchResponse:
        replica = rw.fetch_replica_id(q, v)
        if replica >= 0:  # a raft replica (voter or observer)
            r = rw.fetch_request_from_wire(q, v)
            if r is None:
                return w.FetchResponse(error_code=Errors.INVALID_REQUEST)
            return rw.fetch_response_to_wire(await self.driver.call(r), v)  # type: ignore[arg-type]
        return await self._consumer_fetch(q, v)

    # ---------------------------------------------------------------- consumers
    async def _consumer_fetch(self, q: w.FetchRequest, v: int) -> w.FetchResponse:
        """A consumer (ReplicaId -1) reads committed records: up to the high watermark."""
        deadline = time.monotonic() + max(0, q.max_wait_ms) / 1000
        if self.driver.linearizable_reads and self.core.is_leader:
            # Read index: a deposed leader that has not noticed yet finds out here (and answers
            # NOT_LEADER_OR_FOLLOWER below) instead of serving a stale high watermark.
            await self.driver.read_barrier()
        while True:
            resp, got = self._consumer_fetch_once(q, v)
            if got >= max(q.min_bytes, 1) or time.monotonic() >= deadline or not self.core.is_leader:
                return resp
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await self.driver.hw_changed.wait()

    def _consumer_fetch_once(self, q: w.FetchRequest, v: int) -> tuple[w.FetchResponse, int]:
        leader, epoch = self._leader()
        total = 0
        topics = []
        budget = q.max_bytes if q.max_bytes > 0 else 0x7FFFFFFF
        for t in q.topics:
            ours = (t.topic_id == rw.METADATA_TOPIC_ID) if v >= 13 else (t.topic == rw.METADATA_TOPIC)
            # KafkaApis.handleFetchRequest: READ on each topic (a topic id we do not know is
            # UNKNOWN_TOPIC_ID before any authorization)
            read_denied = (ours or v < 13) and self._denied(
                az.TOPIC, rw.METADATA_TOPIC if v >= 13 else t.topic, az.READ, FETCH)
            parts = []
            for p in t.partitions:
                pd = w.FetchResponse.PartitionData(partition_index=p.partition, high_watermark=-1,
                                                   last_stable_offset=-1, log_start_offset=-1,
                                                   records=None)
                if v >= 13 and not ours:
                    pd.error_code = Errors.UNKNOWN_TOPIC_ID
                elif read_denied:
                    pd.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                elif not ours or p.partition != 0:
                    pd.error_code = Errors.UNKNOWN_TOPIC_ID if v >= 13 else Errors.UNKNOWN_TOPIC_OR_PARTITION
                elif not self.core.is_leader:
                    pd.error_code = Errors.NOT_LEADER_OR_FOLLOWER
                    if v >= 12:
                        pd.current_leader = w.FetchResponse.LeaderIdAndEpoch(leader_id=leader,
                                                                             leader_epoch=epoch)
                elif v >= 9 and p.current_leader_epoch >= 0 and p.current_leader_epoch != epoch:
                    pd.error_code = (Errors.FENCED_LEADER_EPOCH if p.current_leader_epoch < epoch
                                     else Errors.UNKNOWN_LEADER_EPOCH)
                else:
                    hw = self.driver.high_watermark
                    lso = self.driver.log.start_offset
                    pd.high_watermark = hw
                    pd.last_stable_offset = hw
                    pd.log_start_offset = lso
                    # Out of range only below the log start or beyond the log END offset, as
                    # Kafka's LocalLog.read: an offset between the high watermark and the log
                    # end gets no records (and waits). After a leader change the new leader's
                    # high watermark can lag the one a consumer already read up to; the Java
                    # consumer answers OFFSET_OUT_OF_RANGE by resetting its position
                    # (FetchCollector.handleOffsetOutOfRange), re-reading or skipping records.
                    if not lso <= p.fetch_offset <= self.driver.log.end_offset:
                        pd.error_code = Errors.OFFSET_OUT_OF_RANGE
                    elif p.fetch_offset < hw and budget > 0:
                        limit = min(budget, p.partition_max_bytes) if p.partition_max_bytes > 0 else budget
                        info = self.driver.log.log.read(p.fetch_offset, limit, max_offset=hw,
                                                        min_one_batch=total == 0)
                        pd.records = info.records
                        total += len(info.records)
                        budget -= len(info.records)
                    else:
                        pd.records = b""
                parts.append(pd)
            topics.append(w.FetchResponse.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id,
                                                                 partitions=parts))
        endpoints = []
        if v >= 16 and any(pd.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                           for t in topics for pd in t.partitions):
            ep = self._voter_endpoints().get(leader)
            if ep is not None:
                endpoints.append(w.FetchResponse.NodeEndpoint(node_id=leader, host=ep[0], port=ep[1]))
        return w.FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics,
                               node_endpoints=endpoints), total

    async def _list_offsets(self, q: w.ListOffsetsRequest, v: int) -> w.ListOffsetsResponse:
        if self.driver.linearizable_reads and self.core.is_leader and any(
                p.timestamp == -1 for t in q.topics for p in t.partitions):
            await self.driver.read_barrier()  # LATEST is linearizable (see _consumer_fetch)
        leader, epoch = self._leader()
        out = []
        for t in q.topics:
            parts = []
            describe_denied = self._denied(az.TOPIC, t.name, az.DESCRIBE, LIST_OFFSETS)
            for p in t.partitions:
                rp = w.ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
                if describe_denied:  # KafkaApis.handleListOffsetRequest: DESCRIBE on the topic
                    rp.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                elif t.name != rw.METADATA_TOPIC or p.partition_index != 0:
                    rp.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                elif not self.core.is_leader:
                    rp.error_code = Errors.NOT_LEADER_OR_FOLLOWER
                elif v >= 4 and p.current_leader_epoch >= 0 and p.current_leader_epoch != epoch:
                    rp.error_code = (Errors.FENCED_LEADER_EPOCH if p.current_leader_epoch < epoch
                                     else Errors.UNKNOWN_LEADER_EPOCH)
                elif p.timestamp == -1 and q.replica_id == -1 and self._epoch_start_offset() > \
                        self.driver.high_watermark:
                    # KIP-207, as Kafka's Partition.fetchOffsetForTimestamp: a new leader whose
                    # high watermark has not yet reached its epoch's start offset answers
                    # LATEST with OFFSET_NOT_AVAILABLE (the Java consumer retries it) rather
                    # than an offset below one its predecessor may already have given out. A
                    # restarted node's high watermark starts at 0: without this, seekToEnd
                    # would land at the start of the log.
                    rp.error_code = Errors.OFFSET_NOT_AVAILABLE
                else:
                    rp.offset, rp.timestamp = self._offset_for(p.timestamp)
                    if v >= 4:
                        rp.leader_epoch = epoch if rp.offset >= 0 else -1
                parts.append(rp)
            out.append(w.ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return w.ListOffsetsResponse(throttle_time_ms=0, topics=out)

    def _epoch_start_offset(self) -> int:
        """The offset at which this leader's epoch began (its log end when elected)."""
        st = self.core.state
        return st.tracker.epoch_start_offset if isinstance(st, Leader) else -1

    def _offset_for(self, ts: int) -> tuple[int, int]:
        hw = self.driver.high_watermark
        log_ = self.driver.log.log
        if ts in (-2, -4):  # EARLIEST, EARLIEST_LOCAL (nothing is tiered: the same offset)
            return log_.start_offset, -1
        if ts == -1:   # LATEST: the high watermark
            return hw, -1
        if ts == -5:   # LATEST_TIERED: nothing is tiered; Kafka's UnifiedLog answers -1
            return -1, -1
        if ts == -3:   # MAX_TIMESTAMP among committed records
            best = (-1, -1)
            for b in log_.batches(log_.start_offset, hw):
                if b.max_timestamp > best[1] and not b.is_control:
                    for r in b.records():
                        if r.timestamp == b.max_timestamp:
                            best = (r.offset, r.timestamp)
                            break
            return best
        for b in log_.batches(log_.start_offset, hw):   # first record with timestamp >= ts
            if b.max_timestamp >= ts and not b.is_control:
                for r in b.records():
                    if r.timestamp >= ts and r.offset < hw:
                        return r.offset, r.timestamp
        return -1, -1

    # ---------------------------------------------------------------- produce
    async def _produce(self, q: w.ProduceRequest, v: int) -> w.ProduceResponse | None:
        leader, epoch = self._leader()
        responses = []
        waiters: list[tuple[Any, Any, int, int]] = []
        dups: list[tuple[Any, int]] = []  # (answer, last offset) of retries we already have
        deadline = time.monotonic() + max(q.timeout_ms, 0) / 1000
        if q.acks not in (-1, 0, 1):
            code: int | None = Errors.INVALID_REQUIRED_ACKS
        elif q.transactional_id is not None:
            code = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            code = None
        if code is None and self.core.is_leader:
            await self._await_activation(deadline)
        for t in q.topic_data:
            parts = []
            # KafkaApis.handleProduceRequest: WRITE on each topic, before its existence
            write_denied = code is None and self._denied(az.TOPIC, t.name, az.WRITE, PRODUCE)
            for p in t.partition_data:
                pr = w.ProduceResponse.PartitionProduceResponse(index=p.index, base_offset=-1,
                                                                log_append_time_ms=-1, log_start_offset=-1)
                parts.append(pr)
                if code is not None:
                    pr.error_code = code
                elif write_denied:
                    pr.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                elif t.name != rw.METADATA_TOPIC or p.index != 0:
                    pr.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                elif not self.core.is_leader or not self._activated():
                    pr.error_code = Errors.NOT_LEADER_OR_FOLLOWER
                    if v >= 10:
                        pr.current_leader = w.ProduceResponse.LeaderIdAndEpoch(leader_id=leader,
                                                                               leader_epoch=epoch)
                else:
                    err, count, views = _validate_produce_records(p.records)
                    if err is None:
                        err = self._metadata_only_check(views)
                    if err is not None:
                        pr.error_code, pr.error_message = err
                        continue
                    dup_code, dup_base = self.producers.check(views[0], views[-1])
                    if dup_code:
                        pr.error_code = dup_code
                        continue
                    if dup_base is not None:  # a retry of a batch we already have
                        pr.base_offset = dup_base
                        pr.log_start_offset = self.driver.log.start_offset
                        dups.append((pr, dup_base + count - 1))
                        continue
                    base = self.driver.log.end_offset
                    _, waiter = self.driver.append_nowait([RawBatches(p.records or b"")])
                    pr.base_offset = base
                    pr.log_start_offset = self.driver.log.start_offset
                    waiters.append((pr, waiter, base, count))
            responses.append(w.ProduceResponse.TopicProduceResponse(name=t.name, partition_responses=parts))
        if q.acks == -1 and waiters:
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                for _, waiter, _, _ in waiters:
                    await waiter.done.wait()
            for pr, waiter, _base, count in waiters:
                done: AppendCompleted | None = waiter.value
                if done is None:
                    pr.error_code = Errors.REQUEST_TIMED_OUT
                elif done.error_code:
                    pr.error_code = done.error_code
                    pr.base_offset = -1
                else:
                    pr.base_offset = done.last_offset - count + 1
        if q.acks == -1 and dups:
            for pr, last in dups:
                pr.error_code = await self._await_committed(last, epoch, deadline)
                if pr.error_code:
                    pr.base_offset = -1
        if q.acks != -1 and waiters:
            await anyio.sleep(0)  # let the driver see the append before we answer (acks=1)
            for pr, waiter, _, _ in waiters:
                done = waiter.value
                if done is not None and done.error_code:
                    pr.error_code = done.error_code
                    pr.base_offset = -1
        if q.acks == 0:
            return None
        endpoints = []
        if v >= 10 and any(pr.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                           for t in responses for pr in t.partition_responses):
            ep = self._voter_endpoints().get(leader)
            if ep is not None:
                endpoints.append(w.ProduceResponse.NodeEndpoint(node_id=leader, host=ep[0], port=ep[1]))
        return w.ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=endpoints)

    async def _await_committed(self, last_offset: int, epoch: int, deadline: float) -> int:
        """Error code for an acks=-1 retry whose batch ends at ``last_offset``: wait, as for
        the original append, until the high watermark passes it. A duplicate already in the
        log need not be committed yet -- the original's request may still be waiting, or a
        new leader may hold it uncommitted from the previous epoch -- and Kafka answers
        such a retry only once it is (ReplicaManager.appendRecords parks it in a
        DelayedProduce at the duplicate's offset)."""
        while True:
            if not self.core.is_leader or self.core.epoch != epoch:
                return int(Errors.NOT_LEADER_OR_FOLLOWER)
            if self.driver.high_watermark > last_offset:
                return int(Errors.NONE)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return int(Errors.REQUEST_TIMED_OUT)
            # short slices: leadership can be lost without the high watermark moving
            with anyio.move_on_after(min(remaining, 0.1)):
                await self.driver.hw_changed.wait()

    def kafka_controllers(self) -> dict[int, str]:
        """Voters whose fetches come from software other than kraftnode: Kafka controllers,
        or Kafka's standalone raft server (TestRaftServer) in a ``__raft_performance_test``
        quorum."""
        voters = self.core.voters.ids
        return {i: sw for i, sw in self.replica_software.items() if i in voters and sw != SOFTWARE_NAME}

    def _activated(self) -> bool:
        """A controller leader takes writes once its activation records (the bootstrap
        records on an empty log, or the abort of an open transaction) are appended, so they
        come first in its epoch, as in Kafka's QuorumController (the activation is the new
        active controller's first write). A write accepted earlier would be replayed first:
        a log whose first metadata record is not the bootstrap's is "not empty", and the
        bootstrap records (metadata.version) would never be written."""
        return self.duties is None or self.duties.is_active

    async def _await_activation(self, deadline: float) -> None:
        """Wait (within the request's timeout) for this new leader's activation."""
        while self.core.is_leader and not self._activated() and time.monotonic() < deadline:
            await anyio.sleep(0.005)

    def _metadata_only_check(self, views: list[Any]) -> tuple[int, str] | None:
        """Produce accepts only records Kafka's raft nodes can read.

        Every Kafka 3.9 raft node decodes every batch it appends (KafkaRaftClient updates
        KRaftControlRecordStateMachine, whose maybeLoadLog runs RecordsIterator over the
        log) and throws on a data record that ``kraft_record_shape_error`` refuses -- a
        TestRaftServer too, although its ByteArraySerde takes any value. So the shape is
        checked while a Kafka node votes, and always in a ``__raft_performance_test``
        quorum (no controller duties), which exists to be shared with TestRaftServer: a
        record it holds before a Java voter first fetches would reach that voter later.
        A Kafka controller also halts on a committed record it cannot replay as a
        metadata record."""
        others = self.kafka_controllers()
        test_raft_quorum = self.duties is None
        if not others and not test_raft_quorum:
            return None
        names = ", ".join(f"{i} ({sw})" for i, sw in sorted(others.items()))
        who = (f"the quorum includes Kafka raft node(s) {names}, whose raft client accepts"
               if others else
               f"a {rw.METADATA_TOPIC} quorum is shared with Kafka's TestRaftServer, which accepts")
        try:
            for b in views:
                shape = kraft_record_shape_error(b)
                if shape is not None:
                    return (Errors.INVALID_RECORD,
                            f"batch at offset {b.base_offset}: {shape}; {who} only records with "
                            f"timestamp delta 0, no key, a non-empty value and no headers")
                if test_raft_quorum:
                    continue  # values are opaque bytes there: no metadata
                for r in b.records():
                    if not is_metadata_record(r.value):
                        return (Errors.INVALID_RECORD,
                                f"record at batch offset {r.offset} is not a KRaft metadata record; "
                                f"the quorum includes Kafka controller(s) {names}, which accept only "
                                f"metadata records")
        except (CorruptBatchError, ValueError) as e:
            return (Errors.CORRUPT_MESSAGE, str(e))
        return None

    async def _controller_registration(self, q: w.ControllerRegistrationRequest,
                                       v: int) -> w.ControllerRegistrationResponse:
        if self.duties is None:
            return w.ControllerRegistrationResponse(error_code=Errors.NOT_CONTROLLER)
        return await self.duties.register(q)

    # ---------------------------------------------------------------- metadata
    async def _metadata(self, q: w.MetadataRequest, v: int) -> w.MetadataResponse:
        leader, epoch = self._leader()
        eps = self._voter_endpoints()
        brokers = [w.MetadataResponse.MetadataResponseBroker(node_id=i, host=h, port=p, rack=None)
                   for i, (h, p) in sorted(eps.items())]
        voter_ids = sorted(self.core.voters.ids)
        ours = w.MetadataResponse.MetadataResponseTopic(
            error_code=0, name=rw.METADATA_TOPIC, topic_id=rw.METADATA_TOPIC_ID, is_internal=False,
            topic_authorized_operations=-2147483648,
            partitions=[w.MetadataResponse.MetadataResponsePartition(
                error_code=0 if leader >= 0 else Errors.LEADER_NOT_AVAILABLE, partition_index=0,
                leader_id=leader, leader_epoch=epoch, replica_nodes=voter_ids, isr_nodes=voter_ids,
                offline_replicas=[])])
        topics = []
        # KafkaApis.handleTopicMetadataRequest: DESCRIBE on each topic; all-topics requests
        # leave out the topics the caller may not describe, named ones get
        # TOPIC_AUTHORIZATION_FAILED
        hidden = self._denied(az.TOPIC, rw.METADATA_TOPIC, az.DESCRIBE, METADATA)
        if q.topics is None or (v == 0 and not q.topics):
            topics = [] if hidden else [ours]
        else:
            for t in q.topics:
                if t.name is not None and t.name != rw.METADATA_TOPIC and \
                        self._denied(az.TOPIC, t.name, az.DESCRIBE, METADATA):
                    topics.append(w.MetadataResponse.MetadataResponseTopic(
                        error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=t.name, topic_id=ZERO_UUID,
                        is_internal=False, partitions=[], topic_authorized_operations=-2147483648))
                elif t.name == rw.METADATA_TOPIC or (t.name is None and t.topic_id == rw.METADATA_TOPIC_ID):
                    if hidden:
                        topics.append(w.MetadataResponse.MetadataResponseTopic(
                            error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=t.name,
                            topic_id=ZERO_UUID if t.name is not None else t.topic_id,
                            is_internal=False, partitions=[], topic_authorized_operations=-2147483648))
                        continue
                    topics.append(ours)
                else:
                    topics.append(w.MetadataResponse.MetadataResponseTopic(
                        error_code=Errors.UNKNOWN_TOPIC_ID if t.name is None else Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        name=t.name, topic_id=t.topic_id if t.name is None else ZERO_UUID,
                        is_internal=False, partitions=[], topic_authorized_operations=-2147483648))
        cluster_ops = _NOT_REQUESTED
        if v >= 8:  # KafkaApis.handleTopicMetadataRequest
            if v <= 10 and q.include_cluster_authorized_operations:
                cluster_ops = self._authorized_ops(az.CLUSTER, az.CLUSTER_NAME,
                                                   CLUSTER_AUTHORIZED_OPERATIONS)
            if q.include_topic_authorized_operations:
                for found in topics:  # every topic looked up by name (not an unknown topic id)
                    if found.name is not None and found.error_code != Errors.TOPIC_AUTHORIZATION_FAILED:
                        found.topic_authorized_operations = self._authorized_ops(
                            az.TOPIC, found.name, TOPIC_AUTHORIZED_OPERATIONS)
        return w.MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=self.ident.cluster_id,
                                  controller_id=leader, topics=topics, cluster_authorized_operations=cluster_ops)

    # ---------------------------------------------------------------- admin
    async def _describe_cluster(self, q: w.DescribeClusterRequest, v: int) -> w.DescribeClusterResponse:
        et = q.endpoint_type if v >= 1 else 1
        if et not in (1, 2):
            # AuthHelper.computeDescribeClusterResponse: an otherwise empty response
            return w.DescribeClusterResponse(error_code=Errors.UNSUPPORTED_ENDPOINT_TYPE,
                                             error_message=f"Unsupported endpoint type {et}")
        eps = self._controller_endpoints()
        leader, _ = self._leader()
        if et == 2 and leader not in eps:
            # No known leader: list no controllers. The Java Admin (bootstrap.controllers)
            # ignores an empty list and asks again (AdminMetadataManager.update), as it does
            # when a Kafka quorum that is still electing has no controller registrations yet;
            # a list without a controller would make it wait for a node assignment
            # (LeastLoadedBrokerOrActiveKController) until its calls time out.
            eps = {}
        return w.DescribeClusterResponse(
            throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=et,
            # as Kafka's AuthHelper.computeDescribeClusterResponse: -1 unless listed
            cluster_id=self.ident.cluster_id, controller_id=leader if leader in eps else -1,
            brokers=[w.DescribeClusterResponse.DescribeClusterBroker(broker_id=i, host=h, port=p, rack=None)
                     for i, (h, p) in sorted(eps.items())],
            cluster_authorized_operations=self._authorized_ops(
                az.CLUSTER, az.CLUSTER_NAME, CLUSTER_AUTHORIZED_OPERATIONS)
            if q.include_cluster_authorized_operations else _NOT_REQUESTED)

    async def _describe_configs(self, q: w.DescribeConfigsRequest, v: int) -> w.DescribeConfigsResponse:
        """Configs of our one topic and of this node, as Kafka's ConfigHelper.describeConfigs
        answers them. ``kafka-topics.sh --describe`` asks for the topic's configs after its
        Metadata and fails the whole command if DescribeConfigs is not served.

        Nothing is overridden here: the topic has no topic-level configs and the node no
        dynamic broker configs, so both are answered with an empty list -- what Kafka lists
        as non-default, which is all kafka-topics.sh and kafka-configs.sh --describe print.
        Kafka would also list every default value; we do not invent a LogConfig we do not
        have. Other resource types (broker loggers, client metrics, groups) have nothing
        behind them here and get INVALID_REQUEST."""
        R = w.DescribeConfigsResponse.DescribeConfigsResult
        results = []
        for res in q.resources:
            code, msg = 0, None
            name = res.resource_name
            if res.resource_type == _CONFIG_TOPIC and self._denied(az.TOPIC, name, az.DESCRIBE_CONFIGS,
                                                                   DESCRIBE_CONFIGS):
                # ConfigHelper.handleDescribeConfigsRequest: Errors.message() as the message
                code = Errors.TOPIC_AUTHORIZATION_FAILED
                msg = api_checks.MESSAGES[code]
            elif res.resource_type in (_CONFIG_BROKER, 8) and self._denied(
                    az.CLUSTER, az.CLUSTER_NAME, az.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS):
                code = Errors.CLUSTER_AUTHORIZATION_FAILED
                msg = api_checks.MESSAGES[code]
            elif res.resource_type == _CONFIG_TOPIC:
                invalid = _invalid_topic_name(name)
                if invalid is not None:
                    code, msg = Errors.INVALID_TOPIC_EXCEPTION, invalid
                elif name != rw.METADATA_TOPIC:
                    code = Errors.UNKNOWN_TOPIC_OR_PARTITION  # Kafka sets no message here
            elif res.resource_type == _CONFIG_BROKER:
                if name and name != str(self.ident.node_id):
                    code, msg = Errors.INVALID_REQUEST, (
                        f"Unexpected broker id, expected {self.ident.node_id} or empty string, "
                        f"but received {name}")
            else:
                code, msg = Errors.INVALID_REQUEST, (
                    f"Unsupported resource type: {_CONFIG_TYPES.get(res.resource_type, 'UNKNOWN')}")
            results.append(R(error_code=code, error_message=msg, resource_type=res.resource_type,
                             resource_name=name, configs=[]))
        return w.DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def _describe_quorum(self, q: w.DescribeQuorumRequest, v: int) -> w.DescribeQuorumResponse:
        # admin tools always name __cluster_metadata; a node of a TestRaftServer quorum
        # (see raft_wire.use_topic) answers for its own topic under either name
        asked = q.topics[0].topic_name if len(q.topics) == 1 else None
        p = q.topics[0].partitions[0] if asked in (rw.METADATA_TOPIC, "__cluster_metadata") \
            and len(q.topics[0].partitions) == 1 else None
        if p is None or p.partition_index != 0:
            # as Kafka: UNKNOWN_TOPIC_OR_PARTITION for every partition asked about
            D = w.DescribeQuorumResponse
            return D(error_code=0, error_message=None, nodes=[], topics=[D.TopicData(
                topic_name=t.topic_name, partitions=[D.PartitionData(
                    partition_index=x.partition_index, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=None, leader_id=0, leader_epoch=0, high_watermark=0,
                    current_voters=[], observers=[]) for x in t.partitions]) for t in q.topics])
        d = self.core.describe_quorum(now_ms())
        if d.error_code == Errors.NOT_LEADER_OR_FOLLOWER and d.leader_id >= 0:
            # Ask for the quorum's own topic: the leader may be Kafka's TestRaftServer, which
            # answers UNKNOWN_TOPIC_OR_PARTITION for any other (KafkaRaftClient
            # .handleDescribeQuorumRequest); the answer goes back under the name asked,
            # which the Java Admin requires to be the one it sent.
            Q = w.DescribeQuorumRequest
            ask = Q(topics=[Q.TopicData(topic_name=rw.METADATA_TOPIC,
                                        partitions=[Q.PartitionData(partition_index=0)])])
            forwarded = await self._forward_to_leader(d.leader_id, DESCRIBE_QUORUM, ask, v)
            if forwarded is not None:
                for t in forwarded.topics:
                    if t.topic_name == rw.METADATA_TOPIC:
                        t.topic_name = asked
                return forwarded  # type: ignore[no-any-return]
        R = w.DescribeQuorumResponse.ReplicaState

        def rs(x: Any) -> Any:
            return R(replica_id=x.replica_id, replica_directory_id=x.replica_directory_id or ZERO_UUID,
                     log_end_offset=x.log_end_offset, last_fetch_timestamp=x.last_fetch_timestamp,
                     last_caught_up_timestamp=x.last_caught_up_timestamp)

        voters = java_hashmap_order(d.current_voters, lambda x: x.replica_id)
        observers = java_hashmap_order(
            d.observers, lambda x: replica_key_hash(x.replica_id, x.replica_directory_id))
        part = w.DescribeQuorumResponse.PartitionData(
            partition_index=0, error_code=d.error_code, leader_id=d.leader_id,
            leader_epoch=d.leader_epoch, high_watermark=d.high_watermark,
            current_voters=[rs(x) for x in voters], observers=[rs(x) for x in observers])
        if d.error_code and v >= 2:
            part.error_message = _ERROR_MESSAGES.get(d.error_code, Errors(d.error_code).name)
        nodes = []
        if v >= 2 and not d.error_code:
            for node_id, endpoints in sorted(d.nodes.items()):
                nodes.append(w.DescribeQuorumResponse.Node(node_id=node_id, listeners=[
                    w.DescribeQuorumResponse.Listener(name=e.name, host=e.host, port=e.port)
                    for e in endpoints]))
        return w.DescribeQuorumResponse(error_code=0, topics=[w.DescribeQuorumResponse.TopicData(
            topic_name=asked or rw.METADATA_TOPIC, partitions=[part])], nodes=nodes)

    async def _forward_to_leader(self, leader: int, api_key: int, q: Any, v: int) -> Any | None:
        """Ask the leader on the client's behalf, as a Kafka broker forwards DescribeQuorum,
        AddRaftVoter and RemoveRaftVoter to the active controller (KafkaApis
        forwardToControllerOrFail): clients such as kafka-python, and the Java Admin with
        bootstrap.servers (KafkaAdminClient's LeastLoadedBrokerOrActiveKController picks the
        least loaded node), send them to any node. None when the leader cannot be asked."""
        ep = self._voter_endpoints().get(leader)
        if ep is None or leader == self.ident.node_id:
            return None
        from kraftnode.server.peer_client import PeerError

        if api_key == DESCRIBE_QUORUM:
            key: tuple[str, int] = ("forward", leader)
            timeout = self.driver.request_timeout_s
        else:
            # A voter change is answered once its VotersRecord commits (or after the leader's
            # own request timeout); its own connection, so that forwarded DescribeQuorums,
            # answered one at a time per connection, do not queue behind it.
            key = ("forward-voter-change", leader)
            timeout = max(VOTER_CHANGE_FORWARD_TIMEOUT_S, self.driver.request_timeout_s)
        try:
            _, resp = await self.driver.pool.request(key, ep[0], ep[1], api_key,
                                                     lambda _v: q, timeout, v)
        except PeerError as e:
            log.info("could not forward %s to leader %d: %s", type(q).__name__[:-7], leader, e)
            return None
        return resp

    async def _update_features(self, q: w.UpdateFeaturesRequest, v: int) -> w.UpdateFeaturesResponse:
        """kafka-features.sh upgrade/downgrade/disable. Each feature is judged on its own and
        the results are listed by feature name, as Kafka 3.9's QuorumController.updateFeatures
        (FeatureControlManager.updateFeature, results in a TreeMap); a refusal Kafka would make
        is made with Kafka's message ("Invalid update version N for feature F. ...", which the
        tool prints after "Could not upgrade F to N."). Setting a feature to its current level
        succeeds, with or without ValidateOnly. A change Kafka would make is refused with
        INVALID_UPDATE_VERSION: kraftnode writes no FeatureLevelRecord outside the bootstrap
        records (docs/server.md). kraft.version is the exception: upgraded through the raft as
        Kafka 4.1 does (_kraft_version_update; Kafka 3.9 itself "upgrades" it by writing a
        FeatureLevelRecord that does not change the quorum's kraft.version -- KAFKA-18979)."""
        if not self.core.is_leader:
            return w.UpdateFeaturesResponse(throttle_time_ms=0, error_code=Errors.NOT_CONTROLLER,
                                            error_message=None, results=[])
        features = self._features()
        updates: dict[str, tuple[int, int]] = {}
        for f in q.feature_updates:
            # v0 has AllowDowngrade instead of UpgradeType (UpdateFeaturesRequest.featureUpdates)
            kind = f.upgrade_type if v >= 1 else (_SAFE_DOWNGRADE if f.allow_downgrade else _UPGRADE)
            updates[f.feature] = (f.max_version_level, kind)
        results = []
        for name, (level, kind) in sorted(updates.items()):
            if name == "kraft.version":
                code, msg = await self._kraft_version_update(features, level, kind, q.validate_only)
            else:
                msg = self._feature_update_refusal(features, name, level, kind)
                code = Errors.INVALID_UPDATE_VERSION if msg else 0
            results.append(w.UpdateFeaturesResponse.UpdatableFeatureResult(
                feature=name, error_code=code, error_message=msg))
        return w.UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                        results=results)

    async def _kraft_version_update(self, features: api_versions.FeatureView, level: int, kind: int,
                                    validate_only: bool) -> tuple[int, str | None]:
        """kraft.version as Kafka 4.1's FeatureControlManager.updateFeature changes it: the
        common checks against the raft's kraft.version, then an upgrade goes to the raft
        (KafkaRaftClient.upgradeKRaftVersion: KRaftVersionRecord and VotersRecord, answered
        once committed; its refusals are InvalidUpdateVersionException messages, unprefixed);
        any downgrade is refused. See docs/raft.md (static to dynamic upgrade)."""
        current = self.driver.node.history.kraft_version()
        msg = self._feature_update_refusal(features, "kraft.version", level, kind, current)
        if msg is not None or level == current and kind != _UPGRADE:
            return (Errors.INVALID_UPDATE_VERSION if msg else 0), msg
        if kind != _UPGRADE:
            return Errors.INVALID_UPDATE_VERSION, (f"Invalid update version {level} for feature kraft.version. "
                                                   "Can't downgrade the version of this feature.")
        code, message = await self.driver.upgrade_kraft_version(level, validate_only)
        if code == Errors.NOT_LEADER_OR_FOLLOWER:
            return Errors.NOT_CONTROLLER, None
        if code:
            log.info("kraft.version upgrade to %d refused: %s", level, message)
        else:
            log.info("kraft.version %s %d", "upgrade validated for" if validate_only else "upgraded to", level)
        return code, message

    def _feature_update_refusal(self, features: api_versions.FeatureView, name: str, level: int,
                                kind: int, raft_level: int | None = None) -> str | None:
        """None if setting ``name`` to ``level`` succeeds here, else the error message; the
        checks and their order are FeatureControlManager.updateFeature's. With ``raft_level``
        (kraft.version's current level) only the checks every feature shares are made."""
        def invalid(why: str) -> str:
            return f"Invalid update version {level} for feature {name}. {why}"

        if kind not in (_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE):
            return invalid("The controller does not support the given upgrade type.")
        current = features.finalized.get(name, 0) if raft_level is None else raft_level
        if level < 0:
            return invalid("A feature version cannot be less than 0.")
        lo, hi = features.supported.get(name, (0, 0))
        if not lo <= level <= hi:  # QuorumFeatures.reasonNotSupported
            who = f"Local controller {self.ident.node_id}"
            return invalid(f"{who} does not support this feature." if hi == 0 else
                           f"{who} only supports versions {api_versions.version_range(lo, hi)}")
        if level < current and kind == _UPGRADE:
            return invalid("Can't downgrade the version of this feature without setting the "
                           "upgrade type to either safe or unsafe downgrade.")
        if level > current and kind != _UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if raft_level is not None:
            return None
        if name == "metadata.version" and level < MINIMUM_BOOTSTRAP_MV:
            # FeatureControlManager.updateMetadataVersion
            return (f"Invalid metadata.version {level}. Unable to set a metadata.version less "
                    f"than {_MV_NAMES[MINIMUM_BOOTSTRAP_MV]}")
        if level == current:
            return None
        return invalid(f"kraftnode does not change finalized features; {name} stays at "
                       f"{_MV_NAMES.get(current, current) if name == 'metadata.version' else current}.")

    async def _voter_change(self, q: Any, v: int) -> Any:
        """Add/Remove/UpdateRaftVoter (KIP-853): the core decides and answers (a pending add
        or remove answers when its VotersRecord commits, or after the request timeout).
        Add and Remove reaching a node that is not the leader are forwarded to it (see
        _forward_to_leader); UpdateRaftVoter comes from a voter to the leader it knows, and
        gets the core's answer."""
        if not isinstance(q, w.UpdateRaftVoterRequest) and not self.core.is_leader:
            leader, _ = self._leader()
            api_key = ADD_RAFT_VOTER if isinstance(q, w.AddRaftVoterRequest) else REMOVE_RAFT_VOTER
            forwarded = await self._forward_to_leader(leader, api_key, q, v) if leader >= 0 else None
            if forwarded is not None:
                log.info("%s for voter %d forwarded to leader %d: %s", type(q).__name__[:-7],
                         q.voter_id, leader, Errors(forwarded.error_code).name)
                return forwarded
        if isinstance(q, w.AddRaftVoterRequest):
            resp: Any = rw.add_voter_response_to_wire(
                await self.driver.call(rw.add_voter_request_from_wire(q)))  # type: ignore[arg-type]
        elif isinstance(q, w.RemoveRaftVoterRequest):
            resp = rw.remove_voter_response_to_wire(
                await self.driver.call(rw.remove_voter_request_from_wire(q)))  # type: ignore[arg-type]
        else:
            resp = rw.update_voter_response_to_wire(
                await self.driver.call(rw.update_voter_request_from_wire(q)))  # type: ignore[arg-type]
        log.info("%s for voter %d (directory %s): %s%s", type(q).__name__[:-7], q.voter_id,
                 q.voter_directory_id, Errors(resp.error_code).name,
                 f" ({resp.error_message})" if getattr(resp, "error_message", None) else "")
        return resp

    async def _init_producer_id(self, q: w.InitProducerIdRequest, v: int) -> w.InitProducerIdResponse:
        if q.transactional_id is not None:
            return w.InitProducerIdResponse(error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            producer_id=-1, producer_epoch=-1)
        pid, epoch = self.producers.allocate()
        return w.InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                        producer_epoch=epoch)

    async def _alter_scram(self, q: Any, v: int) -> Any:
        """The leader writes the records; a follower forwards the request to it, as a Kafka
        broker forwards it to the active controller (else NOT_CONTROLLER)."""
        from kraftnode.server.security import scram_admin
        if not self.core.is_leader:
            leader, _ = self._leader()
            forwarded = await self._forward_to_leader(
                leader, ALTER_USER_SCRAM_CREDENTIALS, q, v) if leader >= 0 else None
            if forwarded is not None:
                log.info("AlterUserScramCredentials forwarded to leader %d", leader)
                return forwarded
        return await scram_admin.alter(self.driver, self.duties, q)

    async def _describe_scram(self, q: Any, v: int) -> Any:
        from kraftnode.server.security import scram_admin
        return scram_admin.describe(self.duties, q)

    async def _describe_acls(self, q: Any, v: int) -> Any:
        return self.acl_admin.describe(q, v)

    async def _alter_acls(self, q: Any, v: int) -> Any:
        """CreateAcls / DeleteAcls: the leader writes the records; a follower forwards to it
        (as a Kafka broker forwards to the active controller), else NOT_CONTROLLER."""
        create = isinstance(q, w.CreateAclsRequest)
        if self.authz is not None and not self.core.is_leader:
            leader, _ = self._leader()
            api_key = CREATE_ACLS if create else DELETE_ACLS
            forwarded = await self._forward_to_leader(leader, api_key, q, v) if leader >= 0 else None
            if forwarded is not None:
                log.info("%s forwarded to leader %d", type(q).__name__[:-7], leader)
                return forwarded
        return await (self.acl_admin.create(q, v) if create else self.acl_admin.delete(q, v))

    async def _sasl_handshake(self, q: Any, v: int) -> w.SaslHandshakeResponse:
        return w.SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])

    async def _sasl_authenticate(self, q: Any, v: int) -> w.SaslAuthenticateResponse:
        return w.SaslAuthenticateResponse(
            error_code=Errors.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"")

    _handlers: dict[int, Any] = {
        VOTE: _vote, BEGIN_QUORUM_EPOCH: _begin, END_QUORUM_EPOCH: _end, FETCH: _fetch,
        FETCH_SNAPSHOT: _fetch_snapshot, LIST_OFFSETS: _list_offsets, PRODUCE: _produce,
        METADATA: _metadata, DESCRIBE_CLUSTER: _describe_cluster, DESCRIBE_QUORUM: _describe_quorum,
        DESCRIBE_CONFIGS: _describe_configs,
        UPDATE_FEATURES: _update_features, ADD_RAFT_VOTER: _voter_change,
        REMOVE_RAFT_VOTER: _voter_change, UPDATE_RAFT_VOTER: _voter_change,
        SASL_HANDSHAKE: _sasl_handshake, SASL_AUTHENTICATE: _sasl_authenticate,
        ALTER_USER_SCRAM_CREDENTIALS: _alter_scram, DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_scram,
        DESCRIBE_ACLS: _describe_acls, CREATE_ACLS: _alter_acls, DELETE_ACLS: _alter_acls,
        INIT_PRODUCER_ID: _init_producer_id,
        CONTROLLER_REGISTRATION: _controller_registration,
        **group_offsets.HANDLERS,
    }


# FeatureUpdate.UpgradeType codes (UpdateFeatures v1 UpgradeType)
_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3
_MV_NAMES = {level: name for name, level in METADATA_VERSIONS.items()}

# ConfigResource.Type ids (DescribeConfigs ResourceType)
_CONFIG_TOPIC = 2
_CONFIG_BROKER = 4
_CONFIG_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _invalid_topic_name(name: str) -> str | None:
    """Why Kafka's Topic.validate rejects ``name``, in its words; None if it is legal."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > 249:
        reason = f"the length of '{name}' is longer than the max allowed length 249"
    elif not set(name) <= _TOPIC_CHARS:
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


# Authorized-operations bit sets as Kafka 3.9 computes them without an authorizer
# (AuthHelper.authorizedOperations: every operation AclEntry.supportedOperations lists for
# the resource type, as bits of AclOperation codes, Utils.to32BitField). kraftnode has no
# authorizer, so everything is allowed, as on a Kafka node without authorizer.class.name.
_NOT_REQUESTED = -2147483648  # the schemas' default: the client did not ask
# CLUSTER: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
# TOPIC: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


# Kafka's Errors.message() texts, which Kafka puts in DescribeQuorum's ErrorMessage
_ERROR_MESSAGES = {
    Errors.NOT_LEADER_OR_FOLLOWER: (
        "For requests intended only for the leader, this error indicates that the broker is "
        "not the current leader. For requests intended for any replica, this error indicates "
        "that the broker is not a replica of the topic partition."),
}


def kraft_record_shape_error(batch: Any) -> str | None:
    """Why Kafka 3.9's raft client would refuse a data record of ``batch``, else None.

    Kafka's RecordsIterator.readRecord / decodeDataRecord throw unless each record has
    timestamp delta 0, no key (length -1), a value of at least one byte, and a last byte
    of 0 (read as the header count). Each record here must end with a header count of 0
    right after its value, which implies Kafka's last-byte test. Raw fields are read,
    since a decoded record's timestamp hides its delta in a LogAppendTime batch."""
    data = batch.records_data()
    pos = 0
    try:
        for i in range(batch.records_count):
            length, pos = read_varint(data, pos)
            end = pos + length
            if length <= 0 or end > len(data):
                return f"record {i} has an invalid size {length}"
            ts_delta, p = read_varlong(data, pos + 1)  # after the attributes byte
            if ts_delta != 0:
                return f"record {i} has timestamp delta {ts_delta}"
            _, p = read_varint(data, p)  # offset delta
            key_len, p = read_varint(data, p)
            if key_len >= 0:
                return f"record {i} has a key"
            value_len, p = read_varint(data, p)
            if value_len <= 0:
                return f"record {i} has {'no' if value_len < 0 else 'an empty'} value"
            headers, p = read_varint(data, p + value_len)
            if headers != 0 or p != end:
                return f"record {i} has headers"
            pos = end
    except (DecodeError, IndexError):
        return "a record is malformed"
    return None


def _validate_produce_records(records: Any) -> tuple[tuple[int, str] | None, int, list[Any]]:
    """Check a producer's batches before they touch the log; (error, record count, batches)."""
    if records is None or len(records) == 0:
        return (Errors.INVALID_RECORD, "no records"), 0, []
    count = 0
    views = []
    try:
        it = iter_batches(records)
        for b in it:
            b.validate()
            if b.is_control:
                return (Errors.INVALID_RECORD, "producers may not write control batches"), 0, []
            if b.size_in_bytes > MAX_BATCH_SIZE_BYTES:
                # the raft log takes no bigger batch (KafkaRaftClient.MAX_BATCH_SIZE_BYTES; a
                # Kafka follower's log refuses it too); Kafka answers a batch over
                # max.message.bytes with RecordTooLargeException (UnifiedLog
                # .analyzeAndValidateRecords)
                return (Errors.MESSAGE_TOO_LARGE,
                        f"record batch of {b.size_in_bytes} bytes is over the "
                        f"{MAX_BATCH_SIZE_BYTES}-byte limit of the raft log"), 0, []
            count += b.records_count
            views.append(b)
        if it.incomplete or it.position != len(records):
            return (Errors.CORRUPT_MESSAGE, "records end with a partial batch"), 0, []
    except CorruptBatchError as e:
        return (Errors.CORRUPT_MESSAGE, str(e)), 0, []
    if count == 0:
        return (Errors.INVALID_RECORD, "no records"), 0, []
    return None, count, views
