"""The group coordinator's I/O shell: the group APIs on the raft leader.

The rules are the sans-IO coordinator's (:mod:`kraftnode.groups`); this module feeds it
requests, the time and new member ids, appends the records it returns to the raft log
(one batch per operation, no producer id), and answers each request once those records
are committed -- a JoinGroup or SyncGroup may wait, parked, for another member's request
or a timer (:meth:`GroupService.run` polls the coordinator's timers).

Who coordinates: the raft leader, once its epoch's first entry is committed, its
controller activation records are written, and its state machine has replayed every
committed record; it then builds its coordinator from the committed group records (the
state machine's keyed records, which snapshots carry) and keeps it for its epoch.  Other
nodes answer NOT_COORDINATOR (ListGroups: NONE and no groups, as a Kafka broker that
coordinates nothing); a leader not ready yet COORDINATOR_LOAD_IN_PROGRESS.  A
leader that loses its leadership drops its coordinator: parked requests get
NOT_COORDINATOR, the clients find the new leader with FindCoordinator, and it serves
the same groups and offsets from the log.

Metadata-only mode: while a Kafka (Java) node votes, or genuine Kafka brokers are
registered, every committed record must be a KRaft metadata record, so nothing is
written: FindCoordinator for a group answers INVALID_REQUEST naming the reason (clients
fail at once instead of retrying), the writing APIs answer COORDINATOR_NOT_AVAILABLE, and
reads (OffsetFetch, DescribeGroups, ListGroups, ConsumerGroupDescribe) are still served.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextvars
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio

from kraftnode.groups import GroupConfig, GroupCoordinator, Result
from kraftnode.groups.records import RECORD_KEY_PREFIX
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from kraftnode.security import authorizer as az
from kraftnode.server.handlers.base import HandlerBase
from kraftnode.server.raft_io import wire as rw
from kraftnode.server.raft_io.disk_log import RawBatches
from recordbatch import Record, build_batch
from recordbatch.wire import ZERO_UUID

log = logging.getLogger("kraftnode.groups")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2   # FindCoordinator v6 (KIP-932): "groupId:topicId:partition"
#: (client id, client host as Kafka prints it: "/127.0.0.1") of the request being handled
CLIENT: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("kraftnode_group_client",
                                                                          default=("", "/"))
TRANSACTIONS_UNSUPPORTED = ("Transactions are not supported: kraftnode has no transaction coordinator "
                            "(use a producer without transactional.id)")
UNAUTHORIZED_OPS = -2147483648
# how long a parked JoinGroup/SyncGroup may wait beyond its rebalance timeout
PARK_MARGIN_S = 5.0
#: the response type of the request a coordinator call answers
Resp = TypeVar("Resp")


def now_ms() -> int:
    return int(time.time() * 1000)


class _Pending(Generic[Resp]):
    """A request waiting for its answer: the coordinator's opaque token. The coordinator
    answers it with the response type of the request it was handed (``Resp``)."""

    __slots__ = ("future", "error")

    def __init__(self, error: Callable[[int], Resp]) -> None:
        self.future: asyncio.Future[Resp] = asyncio.get_running_loop().create_future()
        self.error = error

    def answer(self, response: Resp) -> None:
        if not self.future.done():
            self.future.set_result(response)

    def fail(self, code: int) -> None:
        self.answer(self.error(code))


class GroupService:
    """The leader's coordinator for its epoch, the timers, and the log writes."""

    def __init__(self, h: HandlerBase, config: GroupConfig) -> None:
        self.h = h
        self.config = config
        self.coordinator: GroupCoordinator | None = None
        self.epoch = -1
        self._wake = anyio.Event()
        #: (epoch, log end) when this node last dropped its coordinator: in that epoch a new
        #: one is built only from a state that has replayed everything appended until then
        self._reload_after = (-1, 0)

    # ------------------------------------------------------------------ who coordinates
    def metadata_only_reason(self) -> str | None:
        """Why no group record may be written now (None: they may)."""
        h = self.h
        if h.duties is None:
            return ("this quorum's log is not a KRaft metadata log with kraftnode's state machine "
                    "(kraftnode.raft.topic or an embedded state machine): groups are not served")
        if not h.application_records:
            return ("group records (offsets, members) are not KRaft metadata records, and this quorum "
                    "takes none: consumer groups are served with kraftnode.application.records.enable=true "
                    "(docs/server.md)")
        java = h.kafka_controllers()
        if java:
            return (f"a Kafka controller votes in this quorum ({', '.join(map(str, sorted(java)))}): every "
                    "record must be a KRaft metadata record, so consumer groups are not served "
                    "(metadata-only mode)")
        if h.duties.state.image.brokers:
            return ("genuine Kafka brokers are registered with this quorum: every record must be a KRaft "
                    "metadata record, so consumer groups are not served (metadata-only mode)")
        return None

    def coordinator_error(self) -> int:
        """NOT_COORDINATOR off the leader; COORDINATOR_LOAD_IN_PROGRESS on a leader that has
        not yet committed its epoch's first entry or replayed what was committed before."""
        h = self.h
        if not h.driver.is_leader:
            self._drop()
            return int(Errors.NOT_COORDINATOR)
        epoch = h.driver.leader_and_epoch()[1]
        if self.coordinator is not None and self.epoch == epoch:
            return 0
        self._drop()
        hw = h.driver.high_watermark
        if hw <= h._epoch_start_offset():
            return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        if h.duties is None:
            self._load(epoch, {})
            return 0
        if not h.duties.is_active:
            return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        state = h.duties.state
        for _ in range(50):
            if state.next_offset >= hw or not h.duties.catch_up():
                break
        drop_epoch, drop_end = self._reload_after
        if state.next_offset < hw or (drop_epoch == epoch and hw < drop_end):
            # a coordinator this leader dropped (an append that did not commit in time) may
            # have records in flight: the new one starts once they are committed and replayed
            return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        self._load(epoch, state.app)
        return 0

    def _load(self, epoch: int, app: dict[bytes, bytes]) -> None:
        c = GroupCoordinator(self.config, _topics)
        c.replay_all((k, v) for k, v in app.items() if k.startswith(RECORD_KEY_PREFIX))
        c.on_loaded(now_ms())
        self.coordinator, self.epoch = c, epoch
        log.info("coordinating %d group(s) in epoch %d", len(c.groups), epoch)
        self._wake.set()

    def _drop(self) -> None:
        c, self.coordinator = self.coordinator, None
        if c is not None:
            self._reload_after = (self.epoch, self.h.driver.log_end_offset())
            log.info("no longer coordinating groups (epoch %d)", self.epoch)
            for token, resp in c.unload().replies:
                token.answer(resp)

    # ------------------------------------------------------------------ executing results
    async def execute(self, result: Result) -> None:
        """Append the result's records; answer once they are committed (or fail them all)."""
        if not result.records:
            for token, resp in result.replies:
                token.answer(resp)
            return
        now = now_ms()
        batch = build_batch([Record(key=k, value=v) for k, v in result.records], now_ms=now)
        _, waiter = self.h.driver.append_nowait([RawBatches(batch)])
        with anyio.move_on_after(self.h.driver.request_timeout_s):
            await waiter.done.wait()
        done = waiter.value
        if done is None or done.error_code:
            why = "timed out" if done is None else Errors(done.error_code).name
            log.info("group records not committed (%s): the coordinator starts over from the log", why)
            self._drop()
            for token, _resp in result.replies:
                token.fail(Errors.NOT_COORDINATOR)
            return
        for token, resp in result.replies:
            token.answer(resp)

    async def call(self, error: Callable[[int], Resp], op: Callable[[GroupCoordinator, _Pending[Resp]], Result],
                   wait_s: float = 0.0) -> Resp:
        """Run ``op`` on the coordinator and return the answer to this request (waiting for
        it up to ``wait_s`` beyond the commit, for a parked JoinGroup/SyncGroup)."""
        code = self.coordinator_error()
        if code:
            return error(code)
        assert self.coordinator is not None
        token = _Pending(error)
        try:
            result = op(self.coordinator, token)
        except Exception:
            # a coordinator bug: its state may be half changed, start over from the log
            log.exception("the group coordinator failed; it starts over from the log")
            self._drop()
            raise
        self._wake.set()
        await self.execute(result)
        if wait_s > 0:
            with anyio.move_on_after(wait_s):
                return await token.future
            return error(Errors.REBALANCE_IN_PROGRESS)
        if not token.future.done():
            return error(Errors.UNKNOWN_SERVER_ERROR)
        return token.future.result()

    async def run(self) -> None:
        """Fire the coordinator's timers; drop it when this node stops leading."""
        while True:
            c = self.coordinator
            delay = 0.2
            if c is not None:
                if not self.h.driver.is_leader or self.h.driver.leader_and_epoch()[1] != self.epoch:
                    self._drop()
                    continue
                deadline = c.next_deadline()
                if deadline is not None:
                    delay = min(delay, max(0.0, (deadline - now_ms()) / 1000))
            self._wake = anyio.Event()
            with anyio.move_on_after(delay):
                await self._wake.wait()
            c = self.coordinator
            if c is not None and self.h.driver.is_leader:
                try:
                    result = c.poll(now_ms())
                except Exception:
                    log.exception("the group coordinator's timers failed; it starts over from the log")
                    self._drop()
                    continue
                if result.records or result.replies:
                    asyncio.get_running_loop().create_task(self.execute(result))


def _topics() -> dict[str, tuple[uuid.UUID, int]]:
    """The topics a consumer group may subscribe to: the quorum's one partition."""
    return {rw.METADATA_TOPIC: (rw.METADATA_TOPIC_ID, 1)}


def _topic_name(topic_id: uuid.UUID) -> str:
    """The name of a topic asked for by id (OffsetCommit/OffsetFetch v10), "" for an id
    this quorum does not have."""
    return next((name for name, (tid, _n) in _topics().items() if tid == topic_id), "")


def _topic_id(name: str) -> uuid.UUID:
    """The id of a topic by name (the zero uuid for one this quorum does not have)."""
    known = _topics().get(name)
    return known[0] if known is not None else ZERO_UUID


def _service(h: HandlerBase) -> GroupService:
    svc: GroupService = h.groups
    return svc


def _write_refusal(h: HandlerBase) -> int:
    """The error of a write while group records may not be written (metadata-only mode)."""
    svc = _service(h)
    code = svc.coordinator_error()
    if code:
        return code
    reason = svc.metadata_only_reason()
    if reason is not None:
        log.info("group write refused: %s", reason)
        return int(Errors.COORDINATOR_NOT_AVAILABLE)
    return 0


# ====================================================================== FindCoordinator
async def find_coordinator(h: HandlerBase, q: w.FindCoordinatorRequest, v: int) -> w.FindCoordinatorResponse:
    R = w.FindCoordinatorResponse
    leader, _ = h.driver.leader_and_epoch()
    if q.key_type == GROUP_KEY_TYPE and not h.driver.is_leader and leader >= 0 and h.authz is None:
        # Only the leader knows whether a Kafka node votes (it sees their fetches), so a
        # follower asks it, as a Kafka broker forwards controller requests; it answers
        # itself (the leader's endpoint) when the leader cannot be asked.
        forwarded = await h._forward_to_leader(leader, FIND_COORDINATOR, q, v)
        if isinstance(forwarded, R):
            return forwarded
    ep = h._voter_endpoints().get(leader) if leader >= 0 else None
    reason = _service(h).metadata_only_reason() if q.key_type == GROUP_KEY_TYPE else None

    def answer(key: str) -> Any:
        c = R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=0, error_message=None)
        if q.key_type == GROUP_KEY_TYPE and v >= 4 and h.denied(az.GROUP, key, az.DESCRIBE, FIND_COORDINATOR):
            # KafkaApis.getCoordinator (v0-3 are refused whole, security.api_checks)
            c.error_code = Errors.GROUP_AUTHORIZATION_FAILED
            c.error_message = "Group authorization failed."
        elif q.key_type == GROUP_KEY_TYPE and reason is not None:
            # not retriable: the clients stop at once and report it (their logs show the message)
            c.error_code = Errors.INVALID_REQUEST
            c.error_message = reason
        elif q.key_type == GROUP_KEY_TYPE:
            if ep is None:
                c.error_code = Errors.COORDINATOR_NOT_AVAILABLE
            else:
                c.node_id, c.host, c.port = leader, ep[0], ep[1]
        elif q.key_type == SHARE_KEY_TYPE:
            # No share coordinator (KIP-932 share groups are not served). Kafka 4.4's answers
            # where none is available, asked of a genuine broker: below v6 the type is
            # INVALID_REQUEST; from v6 a well-formed key COORDINATOR_NOT_AVAILABLE, a malformed
            # one INVALID_REQUEST; always with an empty message
            c.error_code = Errors.COORDINATOR_NOT_AVAILABLE if v >= 6 and _share_key_valid(key) \
                else Errors.INVALID_REQUEST
            c.error_message = ""
        elif q.key_type == TRANSACTION_KEY_TYPE:
            # No transaction coordinator (docs/server.md "Transactions"). The error is one each
            # client treats as fatal, so a transactional producer fails at once: the Java
            # producer (v4+) reports the message of any other error; librdkafka and
            # kafka-python (v0-3 here) stop only on an authorization error.
            c.error_code = Errors.INVALID_REQUEST if v >= 4 else Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            c.error_message = TRANSACTIONS_UNSUPPORTED
        else:
            c.error_code = Errors.INVALID_REQUEST
            c.error_message = f"Unknown coordinator type: {q.key_type}"
        return c

    if v >= 4:
        return R(throttle_time_ms=0, coordinators=[answer(k) for k in q.coordinator_keys])
    c = answer(q.key)
    return R(throttle_time_ms=0, error_code=c.error_code, error_message=c.error_message,
             node_id=c.node_id, host=c.host, port=c.port)


_INT32 = re.compile(r"[+-]?[0-9]+")


def _share_key_valid(key: str) -> bool:
    """A share coordinator key as Kafka parses it (SharePartitionKey): "groupId:topicId:partition",
    the group id non-empty (it may hold colons), the topic id a base64 Uuid, the partition an int32."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not _INT32.fullmatch(parts[2]) \
            or not -(1 << 31) <= int(parts[2]) < 1 << 31:
        return False
    try:
        return len(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))) == 16
    except (ValueError, binascii.Error):
        return False


# ====================================================================== classic protocol
def _join_error(member_id: str) -> Callable[[int], w.JoinGroupResponse]:
    return lambda code: w.JoinGroupResponse(throttle_time_ms=0, error_code=int(code), generation_id=-1,
                                            protocol_type=None, protocol_name=None, leader="",
                                            skip_assignment=False, member_id=member_id, members=[])


def _sync_error(code: int) -> w.SyncGroupResponse:
    return w.SyncGroupResponse(throttle_time_ms=0, error_code=int(code), protocol_type=None, protocol_name=None,
                               assignment=b"")


def _client() -> tuple[str, str]:
    return CLIENT.get()


def _new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


async def join_group(h: HandlerBase, q: w.JoinGroupRequest, v: int) -> w.JoinGroupResponse:
    err = _join_error(q.member_id)
    if h.denied(az.GROUP, q.group_id, az.READ, JOIN_GROUP):
        return err(Errors.GROUP_AUTHORIZATION_FAILED)
    code = _write_refusal(h)
    if code:
        return err(code)
    client_id, host = _client()
    new_id = _new_member_id(q.group_instance_id or client_id)
    now = now_ms()
    wait = max(q.rebalance_timeout_ms, q.session_timeout_ms) / 1000 + PARK_MARGIN_S
    resp = await _service(h).call(err, lambda c, t: c.join_group(t, q, v, client_id, host, new_id, now), wait)
    if v < 7 and resp.protocol_name is None:
        resp.protocol_name = ""   # JoinGroupResponse: a null protocol name is "" before v7, as Kafka sends it
    return resp


async def sync_group(h: HandlerBase, q: w.SyncGroupRequest, v: int) -> w.SyncGroupResponse:
    if h.denied(az.GROUP, q.group_id, az.READ, SYNC_GROUP):
        return _sync_error(Errors.GROUP_AUTHORIZATION_FAILED)
    code = _write_refusal(h)
    if code:
        return _sync_error(code)
    now = now_ms()
    c = _service(h).coordinator
    grp = c.groups.get(q.group_id) if c is not None else None
    rebalance_s = max((m.rebalance_timeout_ms for m in getattr(grp, "members", {}).values()
                       if hasattr(m, "rebalance_timeout_ms")), default=60_000) / 1000
    return await _service(h).call(
        _sync_error, lambda c, t: c.sync_group(t, q, v, now), rebalance_s + PARK_MARGIN_S)


async def heartbeat(h: HandlerBase, q: w.HeartbeatRequest, v: int) -> w.HeartbeatResponse:
    def err(code: int) -> w.HeartbeatResponse:
        return w.HeartbeatResponse(throttle_time_ms=0, error_code=int(code))
    if h.denied(az.GROUP, q.group_id, az.READ, HEARTBEAT):
        return err(Errors.GROUP_AUTHORIZATION_FAILED)
    now = now_ms()
    return await _service(h).call(err, lambda c, t: c.heartbeat(t, q, v, now))


async def leave_group(h: HandlerBase, q: w.LeaveGroupRequest, v: int) -> w.LeaveGroupResponse:
    def err(code: int) -> w.LeaveGroupResponse:
        return w.LeaveGroupResponse(throttle_time_ms=0, error_code=int(code), members=[])
    if h.denied(az.GROUP, q.group_id, az.READ, LEAVE_GROUP):
        return err(Errors.GROUP_AUTHORIZATION_FAILED)
    code = _write_refusal(h)
    if code:
        return err(code)
    now = now_ms()
    return await _service(h).call(err, lambda c, t: c.leave_group(t, q, v, now))


# ====================================================================== offsets
async def offset_commit(h: HandlerBase, q: w.OffsetCommitRequest, v: int) -> w.OffsetCommitResponse:
    R = w.OffsetCommitResponse

    def err(code: int) -> w.OffsetCommitResponse:
        return R(throttle_time_ms=0, topics=[R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code))
            for p in t.partitions]) for t in q.topics])
    code = _write_refusal(h)
    if code:
        return err(code)
    if v >= 10:
        # KafkaApis.handleOffsetCommitRequest: v10 names topics by id; a known id gets its
        # name, an unknown one stays nameless and is UNKNOWN_TOPIC_ID before any other check
        for t in q.topics:
            t.name = _topic_name(t.topic_id)
    refused: dict[tuple[str, int], int] = {}
    for t in q.topics:
        for p in t.partitions:
            if v >= 10 and not t.name:
                refused[(t.name, p.partition_index)] = int(Errors.UNKNOWN_TOPIC_ID)
            elif h.denied(az.TOPIC, t.name, az.READ, OFFSET_COMMIT):   # KafkaApis: READ per topic
                refused[(t.name, p.partition_index)] = int(Errors.TOPIC_AUTHORIZATION_FAILED)
            elif t.name != rw.METADATA_TOPIC or p.partition_index != 0:
                refused[(t.name, p.partition_index)] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    now = now_ms()
    return await _service(h).call(
        err, lambda c, t: c.offset_commit(t, q, v, now, refused))


async def offset_fetch(h: HandlerBase, q: w.OffsetFetchRequest, v: int) -> w.OffsetFetchResponse:
    R = w.OffsetFetchResponse
    svc = _service(h)
    code = svc.coordinator_error()
    c = svc.coordinator

    def rows_of(group: str, wanted: list[tuple[str, list[int]]] | None, member: str | None,
                epoch: int) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str, int]]]]]:
        assert c is not None
        if wanted is None:
            err, rows = c.offset_fetch(group, None, member, epoch)
            rows = [(t, ps) for t, ps in rows if not h.denied(az.TOPIC, t, az.DESCRIBE, OFFSET_FETCH)]
        else:
            err, rows = c.offset_fetch(group, wanted, member, epoch)
        out = []
        for topic, ps in rows:
            denied = h.denied(az.TOPIC, topic, az.DESCRIBE, OFFSET_FETCH)
            out.append((topic, [(p, -1, -1, "", int(Errors.TOPIC_AUTHORIZATION_FAILED)) if denied
                                else (p, o, e, md, 0) for p, o, e, md in ps]))
        return err, out

    if v >= 8:
        groups = []
        for gq in q.groups:
            if v >= 10:   # topics by id (KIP-848); an unknown id is answered UNKNOWN_TOPIC_ID below
                for t in gq.topics or []:
                    t.name = _topic_name(t.topic_id)
            wanted = None if gq.topics is None else [(t.name, list(t.partition_indexes)) for t in gq.topics
                                                     if t.name or v < 10]
            group_code = code
            topics = []
            if not code and h.denied(az.GROUP, gq.group_id, az.DESCRIBE, OFFSET_FETCH):
                group_code = int(Errors.GROUP_AUTHORIZATION_FAILED)
            if not group_code:
                member = getattr(gq, "member_id", None)
                epoch = getattr(gq, "member_epoch", -1)
                group_code, rows = rows_of(gq.group_id, wanted, member, epoch)
                for topic, prs in rows:
                    topics.append(R.OffsetFetchResponseTopics(name=topic, topic_id=_topic_id(topic), partitions=[
                        R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=o,
                                                        committed_leader_epoch=e, metadata=md, error_code=er)
                        for p, o, e, md, er in prs]))
                if v >= 10 and not group_code:
                    # KafkaApis.handleOffsetFetchRequest: each unknown topic id, every partition
                    # asked for, UNKNOWN_TOPIC_ID (as a Kafka 4.4 broker answers it)
                    topics += [R.OffsetFetchResponseTopics(name="", topic_id=t.topic_id, partitions=[
                        R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1,
                                                        committed_leader_epoch=-1, metadata="",
                                                        error_code=Errors.UNKNOWN_TOPIC_ID)
                        for p in t.partition_indexes]) for t in gq.topics or [] if not t.name]
            groups.append(R.OffsetFetchResponseGroup(group_id=gq.group_id, topics=topics, error_code=group_code))
        return R(throttle_time_ms=0, groups=groups)
    wanted = None if q.topics is None else [(t.name, list(t.partition_indexes)) for t in q.topics]
    out = []
    if code and v < 2:
        # no top-level error before v2: every partition asked for carries it
        for topic, parts in wanted or []:
            out.append(R.OffsetFetchResponseTopic(name=topic, partitions=[
                R.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1,
                                               committed_leader_epoch=-1, metadata="", error_code=code)
                for p in parts]))
        return R(throttle_time_ms=0, topics=out)
    if not code:
        code, rows = rows_of(q.group_id, wanted, None, -1)
        for topic, prs in rows:
            out.append(R.OffsetFetchResponseTopic(name=topic, partitions=[
                R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o,
                                               committed_leader_epoch=e, metadata=md, error_code=er)
                for p, o, e, md, er in prs]))
    return R(throttle_time_ms=0, topics=out, error_code=code)


async def offset_delete(h: HandlerBase, q: w.OffsetDeleteRequest, v: int) -> w.OffsetDeleteResponse:
    def err(code: int) -> w.OffsetDeleteResponse:
        return w.OffsetDeleteResponse(error_code=int(code), throttle_time_ms=0, topics=[])
    if h.denied(az.GROUP, q.group_id, az.DELETE, OFFSET_DELETE):
        return err(Errors.GROUP_AUTHORIZATION_FAILED)
    code = _write_refusal(h)
    if code:
        return err(code)
    now = now_ms()
    return await _service(h).call(err, lambda c, t: c.offset_delete(t, q, now))


# ====================================================================== describe, list, delete
async def describe_groups(h: HandlerBase, q: w.DescribeGroupsRequest, v: int) -> w.DescribeGroupsResponse:
    D = w.DescribeGroupsResponse
    code = _service(h).coordinator_error()
    c = _service(h).coordinator
    out = []
    described = {d.group_id: d for d in c.describe_groups(list(q.groups), v)} if c is not None and not code else {}
    for gid in q.groups:
        if h.denied(az.GROUP, gid, az.DESCRIBE, DESCRIBE_GROUPS):
            out.append(D.DescribedGroup(error_code=Errors.GROUP_AUTHORIZATION_FAILED, group_id=gid, group_state="",
                                        protocol_type="", protocol_data="", members=[],
                                        authorized_operations=UNAUTHORIZED_OPS))
        elif code:
            out.append(D.DescribedGroup(error_code=code, group_id=gid, group_state="", protocol_type="",
                                        protocol_data="", members=[], authorized_operations=UNAUTHORIZED_OPS))
        else:
            d = described[gid]
            d.authorized_operations = (h.authorized_operations(az.GROUP, gid, 1 << az.READ | 1 << az.DESCRIBE
                                                         | 1 << az.DELETE)
                                       if getattr(q, "include_authorized_operations", False) else UNAUTHORIZED_OPS)
            out.append(d)
    return D(throttle_time_ms=0, groups=out)


async def list_groups(h: HandlerBase, q: w.ListGroupsRequest, v: int) -> w.ListGroupsResponse:
    """The groups this node coordinates. ListGroups is the one group API the Admin sends to
    every broker (and merges the answers): a Kafka broker that coordinates no
    ``__consumer_offsets`` partition answers NONE with an empty list (GroupCoordinator
    .handleListGroups; GroupCoordinatorService.listGroups maps NotCoordinator to no groups),
    never NOT_COORDINATOR, so a follower does the same -- else the Admin's ``all()`` fails
    (issue 43). A leader still loading answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka's
    ``groupManager.isLoading``."""
    L = w.ListGroupsResponse
    code = _service(h).coordinator_error()  # (also drops a coordinator of a lost leadership)
    c = _service(h).coordinator
    if code == Errors.NOT_COORDINATOR:  # a follower, or a leader that just lost leadership
        return L(throttle_time_ms=0, error_code=0, groups=[])
    if code or c is None:
        return L(throttle_time_ms=0, error_code=code or Errors.COORDINATOR_NOT_AVAILABLE, groups=[])
    groups = c.list_groups(list(getattr(q, "states_filter", []) or []), list(getattr(q, "types_filter", []) or []))
    if h.authz is not None and h.denied(4, az.CLUSTER_NAME, az.DESCRIBE, LIST_GROUPS):
        groups = [g for g in groups if not h.denied(az.GROUP, g.group_id, az.DESCRIBE, LIST_GROUPS)]
    return L(throttle_time_ms=0, error_code=0, groups=groups)


async def delete_groups(h: HandlerBase, q: w.DeleteGroupsRequest, v: int) -> w.DeleteGroupsResponse:
    D = w.DeleteGroupsResponse

    def err(code: int) -> w.DeleteGroupsResponse:
        return D(throttle_time_ms=0, results=[D.DeletableGroupResult(group_id=g, error_code=int(code))
                                              for g in q.groups_names])
    code = _write_refusal(h)
    if code:
        return err(code)
    refused = {g: int(Errors.GROUP_AUTHORIZATION_FAILED) for g in q.groups_names
               if h.denied(az.GROUP, g, az.DELETE, DELETE_GROUPS)}
    now = now_ms()
    return await _service(h).call(
        err, lambda c, t: c.delete_groups(t, list(q.groups_names), now, refused))


# ====================================================================== KIP-848
async def consumer_group_heartbeat(h: HandlerBase, q: w.ConsumerGroupHeartbeatRequest,
                                   v: int) -> w.ConsumerGroupHeartbeatResponse:
    def err(code: int, message: str | None = None) -> w.ConsumerGroupHeartbeatResponse:
        return w.ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                                                member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                                                assignment=None)
    if not _service(h).config.consumer_protocol_enabled:
        # KafkaApis.handleConsumerGroupHeartbeat while the consumer protocol is not enabled
        return err(Errors.UNSUPPORTED_VERSION,
                   "The new group coordinator is not enabled (group.coordinator.rebalance.protocols "
                   "does not list consumer)")
    if h.denied(az.GROUP, q.group_id, az.READ, CONSUMER_GROUP_HEARTBEAT):
        return err(Errors.GROUP_AUTHORIZATION_FAILED)
    # Kafka 4.4's KafkaApis: every named topic needs DESCRIBE, else the whole heartbeat is
    # TOPIC_AUTHORIZATION_FAILED (no message), so a client learns nothing of topics it may
    # not see. (Kafka also leaves out of a regex's topics those the member may not
    # describe; that is not done here: see docs/server.md.)
    if q.subscribed_topic_names and any(h.denied(az.TOPIC, t, az.DESCRIBE, CONSUMER_GROUP_HEARTBEAT)
                                        for t in set(q.subscribed_topic_names)):
        return err(Errors.TOPIC_AUTHORIZATION_FAILED)
    code = _write_refusal(h)
    if code:
        return err(code)
    client_id, host = _client()
    new_id = str(uuid.UUID(bytes=uuid.uuid4().bytes))
    now = now_ms()
    return await _service(h).call(
        err, lambda c, t: c.consumer_group_heartbeat(t, q, client_id, host, _uuid_b64(new_id), now, v))


def _uuid_b64(text: str) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding (the member id Kafka makes)."""
    import base64

    return base64.urlsafe_b64encode(uuid.UUID(text).bytes).decode().rstrip("=")


async def consumer_group_describe(h: HandlerBase, q: w.ConsumerGroupDescribeRequest,
                                  v: int) -> w.ConsumerGroupDescribeResponse:
    D = w.ConsumerGroupDescribeResponse
    code = _service(h).coordinator_error()
    c = _service(h).coordinator
    names = {tid: name for name, (tid, _n) in _topics().items()}
    described = {d.group_id: d for d in c.consumer_group_describe(list(q.group_ids), names)} \
        if c is not None and not code else {}
    out = []
    for gid in q.group_ids:
        if h.denied(az.GROUP, gid, az.DESCRIBE, CONSUMER_GROUP_DESCRIBE):
            code_g: int = int(Errors.GROUP_AUTHORIZATION_FAILED)
        else:
            code_g = code
        if code_g:
            out.append(D.DescribedGroup(error_code=code_g, error_message=None, group_id=gid, group_state="",
                                        group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                                        authorized_operations=UNAUTHORIZED_OPS))
        else:
            d = described[gid]
            if q.include_authorized_operations:
                d.authorized_operations = h.authorized_operations(az.GROUP, gid, 1 << az.READ | 1 << az.DESCRIBE
                                                            | 1 << az.DELETE)
            out.append(d)
    return D(throttle_time_ms=0, groups=out)


HANDLERS: dict[int, Any] = {
    FIND_COORDINATOR: find_coordinator, OFFSET_COMMIT: offset_commit, OFFSET_FETCH: offset_fetch,
    JOIN_GROUP: join_group, SYNC_GROUP: sync_group, HEARTBEAT: heartbeat, LEAVE_GROUP: leave_group,
    DESCRIBE_GROUPS: describe_groups, LIST_GROUPS: list_groups, DELETE_GROUPS: delete_groups,
    OFFSET_DELETE: offset_delete, CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
}


# ====================================================================== consumer fetches
def hide_group_batches(records: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """A consumer's view of the log without the coordinator's batches: each batch of group
    records becomes an empty batch over the same offsets (the header alone, no records,
    as a compacted Kafka log keeps one), so consumers step over it as over compacted-away
    records. Without this a client that commits after every batch it receives (KafkaJS,
    the verifiable consumer) would consume its own OffsetCommit record, commit again, and
    so on, for ever. Raft replicas and raw readers see the log as it is."""
    import struct as _struct

    from crc32c import crc32c

    from recordbatch import CorruptBatchError, iter_batches
    from recordbatch import layout as L

    view = memoryview(records) if not isinstance(records, memoryview) else records
    if len(view) < L.RECORDS_OFFSET:
        return records
    out: bytearray | None = None
    kept = 0
    it = iter_batches(view)
    try:
        for b in it:
            start = it.position - b.size_in_bytes
            if not _is_group_batch(b):
                continue
            if out is None:
                out = bytearray()
            out += view[kept:start]
            header = bytearray(view[start:start + L.RECORDS_OFFSET])
            _struct.pack_into(">i", header, L.LENGTH_OFFSET, L.RECORDS_OFFSET - L.LENGTH_OFFSET - 4)
            _struct.pack_into(">i", header, L.RECORDS_COUNT_OFFSET, 0)
            _struct.pack_into(">I", header, L.CRC_OFFSET, crc32c(bytes(header[L.ATTRIBUTES_OFFSET:])))
            out += header
            kept = it.position
    except CorruptBatchError:
        return records
    if out is None:
        return records
    out += view[kept:]
    return out


def _is_group_batch(b: Any) -> bool:
    """A batch the coordinator wrote: no producer id, not control, uncompressed, its first
    record keyed with the reserved prefix (the coordinator writes only such batches)."""
    from recordbatch.layout import RECORDS_OFFSET
    from recordbatch.wire import read_varint, read_varlong

    if b.is_control or b.producer_id >= 0 or b.compression_id != 0 or b.records_count <= 0:
        return False
    try:
        data = b.buffer[RECORDS_OFFSET:]
        _length, pos = read_varint(data, 0)
        pos += 1  # attributes
        _ts, pos = read_varlong(data, pos)
        _od, pos = read_varint(data, pos)
        klen, pos = read_varint(data, pos)
        return klen >= len(RECORD_KEY_PREFIX) and bytes(data[pos:pos + len(RECORD_KEY_PREFIX)]) == RECORD_KEY_PREFIX
    except (ValueError, IndexError):
        return False
