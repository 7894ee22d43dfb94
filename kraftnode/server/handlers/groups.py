"""The group APIs of the classic protocol on the raft leader: FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups,
ListGroups and DeleteGroups, answered through the group coordinator's I/O shell
(:class:`~kraftnode.server.handlers.group_service.GroupService`: who coordinates, the
metadata-only mode, the log writes). KIP-848's consumer protocol is in
kraftnode.server.handlers.consumer_groups; a consumer's view of the coordinator's batches
in kraftnode.server.handlers.group_fetch_view.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import (
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
from kraftnode.server.handlers.base import ClientSoftware, HandlerBase, HandlerServices
from kraftnode.server.handlers.group_service import (
    GROUP_KEY_TYPE,
    PARK_MARGIN_S,
    SHARE_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    TRANSACTIONS_UNSUPPORTED,
    UNAUTHORIZED_OPS,
    GroupService,
    current_client,
    now_ms,
    topic_id_of,
    topic_name_of,
)
from kraftnode.server.raft_io import wire as rw

log = logging.getLogger("kraftnode.groups")


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


def _join_error(member_id: str) -> Callable[[int], w.JoinGroupResponse]:
    return lambda code: w.JoinGroupResponse(throttle_time_ms=0, error_code=int(code), generation_id=-1,
                                            protocol_type=None, protocol_name=None, leader="",
                                            skip_assignment=False, member_id=member_id, members=[])


def _sync_error(code: int) -> w.SyncGroupResponse:
    return w.SyncGroupResponse(throttle_time_ms=0, error_code=int(code), protocol_type=None, protocol_name=None,
                               assignment=b"")


def _new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class GroupHandlers(HandlerBase):
    """The classic protocol's group APIs: the services' driver and authorizer, and the group
    coordinator's shell (made here from the group configuration and
    kraftnode.application.records.enable; shared with the consumer protocol's handlers)."""

    def __init__(self, services: HandlerServices, clients: ClientSoftware) -> None:
        super().__init__(services, clients)
        self.service = GroupService(self, services.group_config, services.application_records)

    async def find_coordinator(self, q: w.FindCoordinatorRequest, v: int) -> w.FindCoordinatorResponse:
        R = w.FindCoordinatorResponse
        leader, _ = self.driver.leader_and_epoch()
        if q.key_type == GROUP_KEY_TYPE and not self.driver.is_leader and leader >= 0 and self.authz is None:
            # Only the leader knows whether a Kafka node votes (it sees their fetches), so a
            # follower asks it, as a Kafka broker forwards controller requests; it answers
            # itself (the leader's endpoint) when the leader cannot be asked.
            forwarded = await self._forward_to_leader(leader, FIND_COORDINATOR, q, v)
            if isinstance(forwarded, R):
                return forwarded
        ep = self._voter_endpoints().get(leader) if leader >= 0 else None
        reason = self.service.metadata_only_reason() if q.key_type == GROUP_KEY_TYPE else None

        def answer(key: str) -> Any:
            c = R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=0, error_message=None)
            if q.key_type == GROUP_KEY_TYPE and v >= 4 and self.denied(az.GROUP, key, az.DESCRIBE, FIND_COORDINATOR):
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

    async def join_group(self, q: w.JoinGroupRequest, v: int) -> w.JoinGroupResponse:
        err = _join_error(q.member_id)
        if self.denied(az.GROUP, q.group_id, az.READ, JOIN_GROUP):
            return err(Errors.GROUP_AUTHORIZATION_FAILED)
        code = self.service.write_refusal()
        if code:
            return err(code)
        client_id, host = current_client()
        new_id = _new_member_id(q.group_instance_id or client_id)
        now = now_ms()
        wait = max(q.rebalance_timeout_ms, q.session_timeout_ms) / 1000 + PARK_MARGIN_S
        resp = await self.service.call(err, lambda c, t: c.join_group(t, q, v, client_id, host, new_id, now), wait)
        if v < 7 and resp.protocol_name is None:
            resp.protocol_name = ""   # JoinGroupResponse: a null protocol name is "" before v7, as Kafka sends it
        return resp

    async def sync_group(self, q: w.SyncGroupRequest, v: int) -> w.SyncGroupResponse:
        if self.denied(az.GROUP, q.group_id, az.READ, SYNC_GROUP):
            return _sync_error(Errors.GROUP_AUTHORIZATION_FAILED)
        code = self.service.write_refusal()
        if code:
            return _sync_error(code)
        now = now_ms()
        c = self.service.coordinator
        grp = c.groups.get(q.group_id) if c is not None else None
        rebalance_s = max((m.rebalance_timeout_ms for m in getattr(grp, "members", {}).values()
                           if hasattr(m, "rebalance_timeout_ms")), default=60_000) / 1000
        return await self.service.call(
            _sync_error, lambda c, t: c.sync_group(t, q, v, now), rebalance_s + PARK_MARGIN_S)

    async def heartbeat(self, q: w.HeartbeatRequest, v: int) -> w.HeartbeatResponse:
        def err(code: int) -> w.HeartbeatResponse:
            return w.HeartbeatResponse(throttle_time_ms=0, error_code=int(code))
        if self.denied(az.GROUP, q.group_id, az.READ, HEARTBEAT):
            return err(Errors.GROUP_AUTHORIZATION_FAILED)
        now = now_ms()
        return await self.service.call(err, lambda c, t: c.heartbeat(t, q, v, now))

    async def leave_group(self, q: w.LeaveGroupRequest, v: int) -> w.LeaveGroupResponse:
        def err(code: int) -> w.LeaveGroupResponse:
            return w.LeaveGroupResponse(throttle_time_ms=0, error_code=int(code), members=[])
        if self.denied(az.GROUP, q.group_id, az.READ, LEAVE_GROUP):
            return err(Errors.GROUP_AUTHORIZATION_FAILED)
        code = self.service.write_refusal()
        if code:
            return err(code)
        now = now_ms()
        return await self.service.call(err, lambda c, t: c.leave_group(t, q, v, now))

    async def offset_commit(self, q: w.OffsetCommitRequest, v: int) -> w.OffsetCommitResponse:
        R = w.OffsetCommitResponse

        def err(code: int) -> w.OffsetCommitResponse:
            return R(throttle_time_ms=0, topics=[R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
                R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code))
                for p in t.partitions]) for t in q.topics])
        code = self.service.write_refusal()
        if code:
            return err(code)
        if v >= 10:
            # KafkaApis.handleOffsetCommitRequest: v10 names topics by id; a known id gets its
            # name, an unknown one stays nameless and is UNKNOWN_TOPIC_ID before any other check
            for t in q.topics:
                t.name = topic_name_of(t.topic_id)
        refused: dict[tuple[str, int], int] = {}
        for t in q.topics:
            for p in t.partitions:
                if v >= 10 and not t.name:
                    refused[(t.name, p.partition_index)] = int(Errors.UNKNOWN_TOPIC_ID)
                elif self.denied(az.TOPIC, t.name, az.READ, OFFSET_COMMIT):   # KafkaApis: READ per topic
                    refused[(t.name, p.partition_index)] = int(Errors.TOPIC_AUTHORIZATION_FAILED)
                elif t.name != rw.METADATA_TOPIC or p.partition_index != 0:
                    refused[(t.name, p.partition_index)] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        now = now_ms()
        return await self.service.call(
            err, lambda c, t: c.offset_commit(t, q, v, now, refused))

    async def offset_fetch(self, q: w.OffsetFetchRequest, v: int) -> w.OffsetFetchResponse:
        R = w.OffsetFetchResponse
        svc = self.service
        code = svc.coordinator_error()
        c = svc.coordinator

        def rows_of(group: str, wanted: list[tuple[str, list[int]]] | None, member: str | None,
                    epoch: int) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str, int]]]]]:
            assert c is not None
            if wanted is None:
                err, rows = c.offset_fetch(group, None, member, epoch)
                rows = [(t, ps) for t, ps in rows if not self.denied(az.TOPIC, t, az.DESCRIBE, OFFSET_FETCH)]
            else:
                err, rows = c.offset_fetch(group, wanted, member, epoch)
            out = []
            for topic, ps in rows:
                denied = self.denied(az.TOPIC, topic, az.DESCRIBE, OFFSET_FETCH)
                out.append((topic, [(p, -1, -1, "", int(Errors.TOPIC_AUTHORIZATION_FAILED)) if denied
                                    else (p, o, e, md, 0) for p, o, e, md in ps]))
            return err, out

        if v >= 8:
            groups = []
            for gq in q.groups:
                if v >= 10:   # topics by id (KIP-848); an unknown id is answered UNKNOWN_TOPIC_ID below
                    for t in gq.topics or []:
                        t.name = topic_name_of(t.topic_id)
                wanted = None if gq.topics is None else [(t.name, list(t.partition_indexes)) for t in gq.topics
                                                         if t.name or v < 10]
                group_code = code
                topics = []
                if not code and self.denied(az.GROUP, gq.group_id, az.DESCRIBE, OFFSET_FETCH):
                    group_code = int(Errors.GROUP_AUTHORIZATION_FAILED)
                if not group_code:
                    member = getattr(gq, "member_id", None)
                    epoch = getattr(gq, "member_epoch", -1)
                    group_code, rows = rows_of(gq.group_id, wanted, member, epoch)
                    for topic, prs in rows:
                        topics.append(R.OffsetFetchResponseTopics(name=topic, topic_id=topic_id_of(topic), partitions=[
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

    async def offset_delete(self, q: w.OffsetDeleteRequest, v: int) -> w.OffsetDeleteResponse:
        def err(code: int) -> w.OffsetDeleteResponse:
            return w.OffsetDeleteResponse(error_code=int(code), throttle_time_ms=0, topics=[])
        if self.denied(az.GROUP, q.group_id, az.DELETE, OFFSET_DELETE):
            return err(Errors.GROUP_AUTHORIZATION_FAILED)
        code = self.service.write_refusal()
        if code:
            return err(code)
        now = now_ms()
        return await self.service.call(err, lambda c, t: c.offset_delete(t, q, now))

    async def describe_groups(self, q: w.DescribeGroupsRequest, v: int) -> w.DescribeGroupsResponse:
        D = w.DescribeGroupsResponse
        code = self.service.coordinator_error()
        c = self.service.coordinator
        out = []
        described = {d.group_id: d for d in c.describe_groups(list(q.groups), v)} if c is not None and not code else {}
        for gid in q.groups:
            if self.denied(az.GROUP, gid, az.DESCRIBE, DESCRIBE_GROUPS):
                out.append(D.DescribedGroup(error_code=Errors.GROUP_AUTHORIZATION_FAILED, group_id=gid, group_state="",
                                            protocol_type="", protocol_data="", members=[],
                                            authorized_operations=UNAUTHORIZED_OPS))
            elif code:
                out.append(D.DescribedGroup(error_code=code, group_id=gid, group_state="", protocol_type="",
                                            protocol_data="", members=[], authorized_operations=UNAUTHORIZED_OPS))
            else:
                d = described[gid]
                d.authorized_operations = (self.authorized_operations(az.GROUP, gid, 1 << az.READ | 1 << az.DESCRIBE
                                                             | 1 << az.DELETE)
                                           if getattr(q, "include_authorized_operations", False) else UNAUTHORIZED_OPS)
                out.append(d)
        return D(throttle_time_ms=0, groups=out)

    async def list_groups(self, q: w.ListGroupsRequest, v: int) -> w.ListGroupsResponse:
        """The groups this node coordinates. ListGroups is the one group API the Admin sends to
        every broker (and merges the answers): a Kafka broker that coordinates no
        ``__consumer_offsets`` partition answers NONE with an empty list (GroupCoordinator
        .handleListGroups; GroupCoordinatorService.listGroups maps NotCoordinator to no groups),
        never NOT_COORDINATOR, so a follower does the same -- else the Admin's ``all()`` fails
        (issue 43). A leader still loading answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka's
        ``groupManager.isLoading``."""
        L = w.ListGroupsResponse
        code = self.service.coordinator_error()  # (also drops a coordinator of a lost leadership)
        c = self.service.coordinator
        if code == Errors.NOT_COORDINATOR:  # a follower, or a leader that just lost leadership
            return L(throttle_time_ms=0, error_code=0, groups=[])
        if code or c is None:
            return L(throttle_time_ms=0, error_code=code or Errors.COORDINATOR_NOT_AVAILABLE, groups=[])
        groups = c.list_groups(list(getattr(q, "states_filter", []) or []), list(getattr(q, "types_filter", []) or []))
        if self.authz is not None and self.denied(az.CLUSTER, az.CLUSTER_NAME, az.DESCRIBE, LIST_GROUPS):
            groups = [g for g in groups if not self.denied(az.GROUP, g.group_id, az.DESCRIBE, LIST_GROUPS)]
        return L(throttle_time_ms=0, error_code=0, groups=groups)

    async def delete_groups(self, q: w.DeleteGroupsRequest, v: int) -> w.DeleteGroupsResponse:
        D = w.DeleteGroupsResponse

        def err(code: int) -> w.DeleteGroupsResponse:
            return D(throttle_time_ms=0, results=[D.DeletableGroupResult(group_id=g, error_code=int(code))
                                                  for g in q.groups_names])
        code = self.service.write_refusal()
        if code:
            return err(code)
        refused = {g: int(Errors.GROUP_AUTHORIZATION_FAILED) for g in q.groups_names
                   if self.denied(az.GROUP, g, az.DELETE, DELETE_GROUPS)}
        now = now_ms()
        return await self.service.call(
            err, lambda c, t: c.delete_groups(t, list(q.groups_names), now, refused))
