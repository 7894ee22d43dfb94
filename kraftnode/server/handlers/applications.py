"""Requests from applications: Produce, a consumer's Fetch, ListOffsets, Metadata,
InitProducerId, ControllerRegistration (the group APIs are in
kraftnode.server.handlers.groups). They read or append to the quorum's one partition
through the driver's read API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from kraftnode import vocabulary
from kraftnode.metadata.state import replay_fault
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.produce_request import (
    _ProduceRequest_PartitionProduceData as _PartitionData,
)
from kraftnode.protocol.generated.produce_request import (
    _ProduceRequest_TopicProduceData as _TopicData,
)
from kraftnode.protocol.generated.produce_response import (
    _ProduceResponse_PartitionProduceResponse as _PartitionResponse,
)
from kraftnode.protocol.generated.produce_response import (
    _ProduceResponse_TopicProduceResponse as _TopicResponse,
)
from kraftnode.protocol.registry import FETCH, LIST_OFFSETS, METADATA, PRODUCE
from kraftnode.raft.actions import AppendCompleted
from kraftnode.security import authorizer as az
from kraftnode.server.handlers import groups
from kraftnode.server.handlers.base import HandlerBase
from kraftnode.server.handlers.controller_apis import broker_replay_error
from kraftnode.server.handlers.kafka_compat import (
    _NOT_REQUESTED,
    CLUSTER_AUTHORIZED_OPERATIONS,
    TOPIC_AUTHORIZED_OPERATIONS,
    _invalid_topic_name,
    application_records_refusal,
    metadata_only_check,
    validate_produce_records,
)
from kraftnode.server.raft_io import wire as rw
from kraftnode.server.raft_io.disk_log import RawBatches
from kraftnode.server.raft_io.driver import Waiter
from recordbatch.wire import ZERO_UUID

#: ListOffsets: the first version that knows each special timestamp (-1 LATEST and -2
#: EARLIEST are known to all): MAX_TIMESTAMP (KIP-734), EARLIEST_LOCAL (KIP-405),
#: LATEST_TIERED (KIP-1005), EARLIEST_PENDING_UPLOAD (KIP-1023)
_SPECIAL_TIMESTAMP_VERSIONS = {-3: 7, -4: 8, -5: 9, -6: 11}


def _produce_topic(t: _TopicData, v: int) -> str:
    """The topic a Produce's entry names: by id from v13 (KIP-516), "" for an id this
    quorum does not have (UNKNOWN_TOPIC_ID, as KafkaApis answers it)."""
    if v < 13:
        return t.name
    return rw.METADATA_TOPIC if t.topic_id == rw.METADATA_TOPIC_ID else ""


@dataclass
class _PendingProduce:
    """A Produce's appends (answer, waiter, record count) and retries (answer, last offset)."""

    appends: list[tuple[_PartitionResponse, Waiter[AppendCompleted], int]] = field(default_factory=list)
    dups: list[tuple[_PartitionResponse, int]] = field(default_factory=list)


def _settle_appends(pending: _PendingProduce) -> None:
    """An acks=-1 Produce's answers from its appends' outcomes: the base offset committed,
    the error the append failed with, or REQUEST_TIMED_OUT for one not completed."""
    for pr, waiter, count in pending.appends:
        done = waiter.value
        if done is None:
            pr.error_code = Errors.REQUEST_TIMED_OUT
        elif done.error_code:
            pr.error_code = done.error_code
            pr.base_offset = -1
        else:
            pr.base_offset = done.last_offset - count + 1


class ApplicationHandlers(HandlerBase):
    async def _consumer_fetch(self, q: w.FetchRequest, v: int) -> w.FetchResponse:
        """A consumer (ReplicaId -1) reads committed records: up to the high watermark."""
        deadline = time.monotonic() + max(0, q.max_wait_ms) / 1000
        if self.driver.linearizable_reads and self.driver.is_leader:
            # Read index: a deposed leader that has not noticed yet finds out here (and answers
            # NOT_LEADER_OR_FOLLOWER below) instead of serving a stale high watermark.
            await self.driver.read_barrier()
        while True:
            resp, got = self._consumer_fetch_once(q, v)
            if got >= max(q.min_bytes, 1) or time.monotonic() >= deadline or not self.driver.is_leader:
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
            read_denied = (ours or v < 13) and self.denied(
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
                elif not self.driver.is_leader:
                    pd.error_code = Errors.NOT_LEADER_OR_FOLLOWER
                    if v >= 12:
                        pd.current_leader = w.FetchResponse.LeaderIdAndEpoch(leader_id=leader,
                                                                             leader_epoch=epoch)
                elif v >= 9 and p.current_leader_epoch >= 0 and p.current_leader_epoch != epoch:
                    pd.error_code = (Errors.FENCED_LEADER_EPOCH if p.current_leader_epoch < epoch
                                     else Errors.UNKNOWN_LEADER_EPOCH)
                else:
                    hw = self.driver.high_watermark
                    lso = self.driver.log_start_offset()
                    pd.high_watermark = hw
                    pd.last_stable_offset = hw
                    pd.log_start_offset = lso
                    # Out of range only below the log start or beyond the log END offset, as
                    # Kafka's LocalLog.read: an offset between the high watermark and the log
                    # end gets no records (and waits). After a leader change the new leader's
                    # high watermark can lag the one a consumer already read up to; the Java
                    # consumer answers OFFSET_OUT_OF_RANGE by resetting its position
                    # (FetchCollector.handleOffsetOutOfRange), re-reading or skipping records.
                    if not lso <= p.fetch_offset <= self.driver.log_end_offset():
                        pd.error_code = Errors.OFFSET_OUT_OF_RANGE
                    elif p.fetch_offset < hw and budget > 0:
                        limit = min(budget, p.partition_max_bytes) if p.partition_max_bytes > 0 else budget
                        records = self.driver.read(p.fetch_offset, limit, max_offset=hw,
                                                   min_one_batch=total == 0)
                        # the group coordinator's batches are empty batches to consumers
                        pd.records = groups.hide_group_batches(records)
                        total += len(records)
                        budget -= len(records)
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
        if self.driver.linearizable_reads and self.driver.is_leader and any(
                p.timestamp == -1 for t in q.topics for p in t.partitions):
            await self.driver.read_barrier()  # LATEST is linearizable (see _consumer_fetch)
        leader, epoch = self._leader()
        out = []
        for t in q.topics:
            parts = []
            describe_denied = self.denied(az.TOPIC, t.name, az.DESCRIBE, LIST_OFFSETS)
            for p in t.partitions:
                rp = w.ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
                if describe_denied:  # KafkaApis.handleListOffsetRequest: DESCRIBE on the topic
                    rp.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                elif t.name != rw.METADATA_TOPIC or p.partition_index != 0:
                    rp.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                elif not self.driver.is_leader:
                    rp.error_code = Errors.NOT_LEADER_OR_FOLLOWER
                elif v >= 4 and p.current_leader_epoch >= 0 and p.current_leader_epoch != epoch:
                    rp.error_code = (Errors.FENCED_LEADER_EPOCH if p.current_leader_epoch < epoch
                                     else Errors.UNKNOWN_LEADER_EPOCH)
                elif (need := _SPECIAL_TIMESTAMP_VERSIONS.get(p.timestamp, 0 if p.timestamp >= -2 else None)) \
                        is None or v < need:
                    # Kafka 4.4 (ReplicaManager.fetchOffset): a special timestamp the request's
                    # version does not know, or a negative one no version knows, is refused
                    rp.error_code = Errors.UNSUPPORTED_VERSION
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

    def _offset_for(self, ts: int) -> tuple[int, int]:
        hw = self.driver.high_watermark
        start = self.driver.log_start_offset()
        if ts in (-2, -4):  # EARLIEST, EARLIEST_LOCAL (nothing is tiered: the same offset)
            return start, -1
        if ts == -1:   # LATEST: the high watermark
            return hw, -1
        if ts in (-5, -6):  # LATEST_TIERED, EARLIEST_PENDING_UPLOAD (v11, KIP-1023): nothing is
            return -1, -1   # tiered or waiting for upload; Kafka 4.4 answers -1 without tiering
        if ts == -3:   # MAX_TIMESTAMP among committed records
            best = (-1, -1)
            for b in self.driver.batches(start, hw):
                if b.max_timestamp > best[1] and not b.is_control:
                    for r in b.records():
                        if r.timestamp == b.max_timestamp:
                            best = (r.offset, r.timestamp)
                            break
            return best
        # the first record with timestamp >= ts, control records included: Kafka's time-index
        # search (LogSegment.findOffsetByTimestamp) reads every batch, so asking for 0 on a
        # log whose offset 0 is the LeaderChange control record answers offset 0
        for b in self.driver.batches(start, hw):
            if b.max_timestamp >= ts:
                for r in b.records():
                    if r.timestamp >= ts and r.offset < hw:
                        return r.offset, r.timestamp
        return -1, -1

    # ---------------------------------------------------------------- produce
    async def _produce(self, q: w.ProduceRequest, v: int) -> w.ProduceResponse | None:
        leader, epoch = self._leader()
        pending = _PendingProduce()
        deadline = time.monotonic() + max(q.timeout_ms, 0) / 1000
        if q.acks not in (-1, 0, 1):
            code: int | None = Errors.INVALID_REQUIRED_ACKS
        elif q.transactional_id is not None:
            code = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            code = None
        if code is None and self.driver.is_leader:
            await self._await_activation(deadline)
        responses = []
        for t in q.topic_data:
            name = _produce_topic(t, v)
            # KafkaApis.handleProduceRequest: WRITE on each topic, before its existence (an
            # unknown topic id, v13+, is UNKNOWN_TOPIC_ID before any authorization)
            write_denied = code is None and bool(name) and self.denied(az.TOPIC, name, az.WRITE, PRODUCE)
            parts = [self._produce_partition(name, p, code, write_denied, v, pending)
                     for p in t.partition_data]
            responses.append(w.ProduceResponse.TopicProduceResponse(name=t.name, topic_id=t.topic_id,
                                                                    partition_responses=parts))
        await self._produce_acks(q.acks, pending, epoch, deadline)
        if q.acks == 0:
            return None
        return self._produce_response(responses, v, leader)

    def _produce_response(self, responses: list[_TopicResponse], v: int,
                          leader: int) -> w.ProduceResponse:
        """The answer, with the leader's endpoint (v10+) when a partition is not led here."""
        endpoints = []
        if v >= 10 and any(pr.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                           for t in responses for pr in t.partition_responses):
            ep = self._voter_endpoints().get(leader)
            if ep is not None:
                endpoints.append(w.ProduceResponse.NodeEndpoint(node_id=leader, host=ep[0], port=ep[1]))
        return w.ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=endpoints)

    def produce_nowait(self, q: w.ProduceRequest, v: int,
                       answer: Callable[[Callable[[], w.ProduceResponse]], None]) -> bool:
        """An acks=-1 Produce of one partition on an activated leader, served without the
        connection's task (the listener's fast path, as a raft replica's Fetch is):
        validated and appended here, and ``answer`` given the function that builds the
        answer -- at once for a refused write, else from the driver's action loop when the
        append commits or fails, or from a timer at the request's timeout. That saves the
        task's two wake-ups (the frame, the commit) on every acknowledged write.

        False, having done nothing: any other Produce (acks 0 or 1, several partitions, a
        transactional one, a retry of a batch already written, which waits on the high
        watermark, a follower, an authorizer on), which the task serves as before."""
        if (q.acks != -1 or q.transactional_id is not None or self.authz is not None
                or len(q.topic_data) != 1 or len(q.topic_data[0].partition_data) != 1
                or not self.driver.is_leader or not self._activated()):
            return False
        t = q.topic_data[0]
        pending = _PendingProduce()
        pr = self._produce_partition(_produce_topic(t, v), t.partition_data[0], None, False, v, pending)
        if pending.dups:
            return False
        responses = [w.ProduceResponse.TopicProduceResponse(name=t.name, topic_id=t.topic_id,
                                                            partition_responses=[pr])]
        leader = self._leader()[0]

        def build() -> w.ProduceResponse:
            _settle_appends(pending)
            return self._produce_response(responses, v, leader)

        waiter = pending.appends[0][1] if pending.appends else None
        if waiter is None or waiter.value is not None:
            answer(build)   # refused, or the core failed the append at once (MESSAGE_TOO_LARGE)
            return True

        def settled(_done: AppendCompleted | None) -> None:
            if waiter.on_done is None:
                return      # answered already (timed out)
            waiter.on_done = None
            timer.cancel()
            answer(build)

        waiter.on_done = settled
        timer = asyncio.get_running_loop().call_later(max(q.timeout_ms, 0) / 1000, settled, None)
        return True

    def _produce_partition(self, topic: str, p: _PartitionData,
                           code: int | None, write_denied: bool, v: int,
                           pending: _PendingProduce) -> _PartitionResponse:
        pr = w.ProduceResponse.PartitionProduceResponse(index=p.index, base_offset=-1,
                                                        log_append_time_ms=-1, log_start_offset=-1)
        if code is not None:
            pr.error_code = code
        elif not topic:     # v13+: a topic id this quorum does not have
            pr.error_code = Errors.UNKNOWN_TOPIC_ID
        elif write_denied:
            pr.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
        elif topic != rw.METADATA_TOPIC or p.index != 0:
            pr.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
        elif not self.driver.is_leader or not self._activated():
            pr.error_code = Errors.NOT_LEADER_OR_FOLLOWER
            if v >= 10:
                leader, epoch = self._leader()
                pr.current_leader = w.ProduceResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        else:
            self._produce_append(p.records, pr, pending)
        return pr

    def _produce_append(self, records: bytes | None, pr: _PartitionResponse,
                        pending: _PendingProduce) -> None:
        """Validate a leader's partition data and append it (or find it is a retry)."""
        if not self.application_records and rw.METADATA_TOPIC == vocabulary.METADATA_TOPIC:
            pr.error_code, pr.error_message = application_records_refusal(rw.METADATA_TOPIC)
            return
        err, count, views = validate_produce_records(records, self.message_max_bytes, rw.METADATA_TOPIC)
        if err is None:
            err = metadata_only_check(views, self.kafka_controllers(), self.duties is None,
                                      rw.METADATA_TOPIC)
        if err is None:
            err = broker_replay_error(views, self.registered_brokers())
        if err is None:  # a metadata record no controller could replay would stop them all
            err = next(((Errors.INVALID_RECORD, f"batch at offset {b.base_offset}, {why}; every controller would "
                         "stop replaying it") for b in views if (why := replay_fault(b)) is not None), None)
        if err is not None:
            pr.error_code, pr.error_message = err
            return
        dup_code, dup_base = self.producers.check(views[0], views[-1])
        if dup_code:
            pr.error_code = dup_code
            return
        if dup_base is not None:  # a retry of a batch we already have
            pr.base_offset = dup_base
            pr.log_start_offset = self.driver.log_start_offset()
            pending.dups.append((pr, dup_base + count - 1))
            return
        # the base offset the core's log assigned (the batch's base offset, as Kafka answers)
        base, waiter = self.driver.append([RawBatches(records or b"")])
        pr.base_offset = base
        pr.log_start_offset = self.driver.log_start_offset()
        pending.appends.append((pr, waiter, count))

    async def _produce_acks(self, acks: int, pending: _PendingProduce, epoch: int,
                            deadline: float) -> None:
        """acks=-1: wait (within the timeout) for the appends, and for retries' originals, to
        commit; acks=0/1: answer once the driver has seen the appends."""
        if acks == -1 and pending.appends:
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                for _, waiter, _ in pending.appends:
                    await waiter.done.wait()
            _settle_appends(pending)
        if acks == -1 and pending.dups:
            for pr, last in pending.dups:
                pr.error_code = await self._await_committed(last, epoch, deadline)
                if pr.error_code:
                    pr.base_offset = -1
        if acks != -1 and pending.appends:
            await anyio.sleep(0)  # let the driver see the append before we answer (acks=1)
            for pr, waiter, _ in pending.appends:
                done = waiter.value
                if done is not None and done.error_code:
                    pr.error_code = done.error_code
                    pr.base_offset = -1

    async def _await_committed(self, last_offset: int, epoch: int, deadline: float) -> int:
        """Error code for an acks=-1 retry whose batch ends at ``last_offset``: wait, as for
        the original append, until the high watermark passes it. A duplicate already in the
        log need not be committed yet -- the original's request may still be waiting, or a
        new leader may hold it uncommitted from the previous epoch -- and Kafka answers
        such a retry only once it is (ReplicaManager.appendRecords parks it in a
        DelayedProduce at the duplicate's offset)."""
        while True:
            if not self.driver.is_leader or self._leader()[1] != epoch:
                return int(Errors.NOT_LEADER_OR_FOLLOWER)
            if self.driver.high_watermark > last_offset:
                return int(Errors.NONE)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return int(Errors.REQUEST_TIMED_OUT)
            # short slices: leadership can be lost without the high watermark moving
            with anyio.move_on_after(min(remaining, 0.1)):
                await self.driver.hw_changed.wait()
    async def _await_activation(self, deadline: float) -> None:
        """Wait (within the request's timeout) for this new leader's activation."""
        while self.driver.is_leader and not self._activated() and time.monotonic() < deadline:
            await anyio.sleep(0.005)

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
        voter_ids = sorted(self.driver.voters.ids)
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
        hidden = self.denied(az.TOPIC, rw.METADATA_TOPIC, az.DESCRIBE, METADATA)
        if q.topics is None or (v == 0 and not q.topics):
            topics = [] if hidden else [ours]
        else:
            # KafkaApis.handleTopicMetadataRequest: a request (v12+) naming any topic id is
            # answered by its ids alone, once each; the names are not looked at (Java's clients
            # leave them "", the field's default, beside an id: KIP-848 consumers resolve
            # their assigned topic ids so)
            by_id = v >= 12 and any(t.topic_id != ZERO_UUID for t in q.topics)
            seen: set[object] = set()
            for t in q.topics:
                if by_id:
                    if t.topic_id == ZERO_UUID or t.topic_id in seen:
                        continue
                    seen.add(t.topic_id)
                name = None if by_id else t.name
                if name is not None and name != rw.METADATA_TOPIC and \
                        self.denied(az.TOPIC, name, az.DESCRIBE, METADATA):
                    topics.append(w.MetadataResponse.MetadataResponseTopic(
                        error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                        is_internal=False, partitions=[], topic_authorized_operations=-2147483648))
                elif name == rw.METADATA_TOPIC or (name is None and t.topic_id == rw.METADATA_TOPIC_ID):
                    if hidden:
                        topics.append(w.MetadataResponse.MetadataResponseTopic(
                            error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name,
                            topic_id=ZERO_UUID if name is not None else t.topic_id,
                            is_internal=False, partitions=[], topic_authorized_operations=-2147483648))
                        continue
                    topics.append(ours)
                else:
                    # KafkaApis.getTopicMetadata: a name Topic.validate refuses is
                    # INVALID_TOPIC_EXCEPTION (not retried by clients), any other unknown one
                    # UNKNOWN_TOPIC_OR_PARTITION
                    code = (Errors.UNKNOWN_TOPIC_ID if name is None
                            else Errors.INVALID_TOPIC_EXCEPTION if _invalid_topic_name(name)
                            else Errors.UNKNOWN_TOPIC_OR_PARTITION)
                    topics.append(w.MetadataResponse.MetadataResponseTopic(
                        error_code=code,
                        name=name, topic_id=t.topic_id if name is None else ZERO_UUID,
                        is_internal=False, partitions=[], topic_authorized_operations=-2147483648))
        cluster_ops = _NOT_REQUESTED
        if v >= 8:  # KafkaApis.handleTopicMetadataRequest
            if v <= 10 and q.include_cluster_authorized_operations:
                cluster_ops = self.authorized_operations(az.CLUSTER, az.CLUSTER_NAME,
                                                   CLUSTER_AUTHORIZED_OPERATIONS)
            if q.include_topic_authorized_operations:
                for found in topics:  # every topic looked up by name (not an unknown topic id)
                    if found.name is not None and found.error_code != Errors.TOPIC_AUTHORIZATION_FAILED:
                        found.topic_authorized_operations = self.authorized_operations(
                            az.TOPIC, found.name, TOPIC_AUTHORIZED_OPERATIONS)
        # v13 (KIP-1102): the top-level ErrorCode. Kafka 4.4 brokers answer 0 (REBOOTSTRAP_REQUIRED
        # is for a server that knows the client's bootstrap list is stale); so does kraftnode
        return w.MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=self.ident.cluster_id,
                                  controller_id=leader, topics=topics, cluster_authorized_operations=cluster_ops,
                                  error_code=0)

    async def _init_producer_id(self, q: w.InitProducerIdRequest, v: int) -> w.InitProducerIdResponse:
        if q.transactional_id is not None:
            return w.InitProducerIdResponse(error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            producer_id=-1, producer_epoch=-1)
        pid, epoch = self.producers.allocate()
        return w.InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                        producer_epoch=epoch)
