"""The KIP-848 consumer group protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe): Kafka
4.x's GroupMetadataManager for consumer groups, sans-IO, a mixin of the group coordinator.

ConsumerGroupHeartbeat v1 (Kafka 4.0) brings two things, both honoured at every version
where they can occur:
- ``SubscribedTopicRegex`` (KIP-848): a member subscribes to the topics an RE2/J pattern
  matches as a whole (:mod:`kraftnode.groups.regex`), alone or with topic names; a pattern
  that does not compile is INVALID_REGULAR_EXPRESSION with Kafka's message, checked when a
  member's regex changes, before any record is written.  Kafka resolves a group's regexes
  off the request path and records the result (ConsumerGroupRegularExpression records,
  refreshed at most every 10 s when topics appear); the topics here are the quorum's one
  partition, so we resolve them at each heartbeat of a group that has regexes, from the
  member's recorded regex -- the same topics, with no record of their own, and a new
  matching topic bumps the group epoch at the next heartbeat.
- member ids made by the consumer (KIP-1082): from v1 an empty MemberId is INVALID_REQUEST
  at every epoch, as Kafka answers; v0 joiners may still leave it to the coordinator.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kraftnode.groups import records as rec
from kraftnode.groups.classic import ClassicGroup
from kraftnode.groups.consumer import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    assign,
    next_assignment,
)
from kraftnode.groups.core import (
    CoordinatorCore,
    GroupError,
    Result,
)
from kraftnode.groups.regex import InvalidRegex, compile_regex
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated import groups as g

__all__ = ["ConsumerProtocol", "CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION"]

#: ConsumerGroupHeartbeatRequest.CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION (KIP-1082)
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
#: ConsumerGroupDescribe v1's MemberType (KIP-1099): every member here speaks the consumer
#: protocol (a classic member joins a classic group), so none is 0 (classic)
CONSUMER_MEMBER_TYPE = 1

log = logging.getLogger("kraftnode.groups")


class ConsumerProtocol(CoordinatorCore):
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe, member epochs, assignments and timers."""

    def consumer_group_heartbeat(self, token: Any, q: w.ConsumerGroupHeartbeatRequest, client_id: str,
                                 client_host: str, new_member_id: str, now: int,
                                 api_version: int = 0) -> Result:
        self._begin(now)
        R = w.ConsumerGroupHeartbeatResponse
        try:
            self._validate_heartbeat(q, api_version)
            if q.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                resp = self._consumer_leave(q)
            else:
                resp = self._consumer_heartbeat(q, client_id, client_host, new_member_id)
        except GroupError as e:
            self._records = []
            resp = R(throttle_time_ms=0, error_code=e.code, error_message=e.message, member_id=None,
                     member_epoch=0, heartbeat_interval_ms=0, assignment=None)
        self._reply(token, resp)
        return self._end()

    def _validate_heartbeat(self, q: w.ConsumerGroupHeartbeatRequest, api_version: int) -> None:
        """Kafka 4.4's throwIfConsumerGroupHeartbeatRequestIsInvalid (GroupCoordinatorService;
        checked against the 4.4 jar's bytecode), in its order: the first failed check is the
        answer. The regex itself is checked later, when a member's regex changes."""
        def not_empty(v: str | None, msg: str) -> None:
            if v is not None and not v.strip():
                raise GroupError(Errors.INVALID_REQUEST, msg)
        if (api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or q.member_epoch > 0
                or q.member_epoch == LEAVE_GROUP_MEMBER_EPOCH):
            not_empty(q.member_id, "MemberId can't be empty.")
        not_empty(q.group_id, "GroupId can't be empty.")
        not_empty(q.instance_id, "InstanceId can't be empty.")
        not_empty(q.rack_id, "RackId can't be empty.")
        if q.member_epoch == 0:
            if q.rebalance_timeout_ms == -1:
                raise GroupError(Errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if q.topic_partitions is None or q.topic_partitions:
                raise GroupError(Errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            # an empty list of names, or an empty regex, joins without subscribing to anything
            if q.subscribed_topic_names is None and q.subscribed_topic_regex is None:
                raise GroupError(Errors.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex "
                                                         "must be non-null when (re-)joining.")
        elif q.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if q.instance_id is None:
                raise GroupError(Errors.INVALID_REQUEST, "InstanceId can't be null.")
        elif q.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise GroupError(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
        if q.server_assignor is not None and q.server_assignor not in self.config.consumer_assignors:
            raise GroupError(Errors.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {q.server_assignor} is not supported. Supported assignors: "
                         f"{', '.join(self.config.consumer_assignors)}.")

    def _consumer_group(self, group_id: str, create: bool) -> ConsumerGroup:
        grp = self.groups.get(group_id)
        if grp is None:
            if not create:
                raise GroupError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            grp = ConsumerGroup(group_id)
            self.groups[group_id] = grp
            return grp
        if isinstance(grp, ClassicGroup):
            if create and grp.is_empty() and not grp.members:
                # an empty classic group (or one with only offsets) becomes a consumer group
                if grp.generation_id > 0 or grp.protocol_type:
                    self._write([rec.group_metadata(group_id, None)], replay=False)
                cg = ConsumerGroup(group_id)
                self.groups[group_id] = cg
                return cg
            raise GroupError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return grp

    def _consumer_heartbeat(self, q: w.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str,
                            new_member_id: str) -> Any:
        R = w.ConsumerGroupHeartbeatResponse
        create = q.member_epoch == 0
        grp = self._consumer_group(q.group_id, create)
        member_id = q.member_id or new_member_id
        if member_id not in grp.members and len(grp.members) >= self.config.consumer_max_size:
            raise GroupError(Errors.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                                        f"capacity of {self.config.consumer_max_size} members.")
        owned = None if q.topic_partitions is None else [(t.topic_id, list(t.partitions)) for t in q.topic_partitions]
        member = self._subscribing_member(grp, member_id, q, owned, create)
        updated = _updated_member(member, q, client_id, client_host)
        bump = False
        records: list[rec.Record] = []
        if member_id not in grp.members or updated.subscription_key() != member.subscription_key():
            records.append(rec.consumer_member_subscription(grp.group_id, member_id, _member_value(updated)))
            bump = (member_id not in grp.members
                    or updated.subscribed_topic_names != member.subscribed_topic_names
                    or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        group_epoch = grp.group_epoch
        topics = self.topics()
        subscribed = grp.subscribed_topic_names(updated, topics=topics)
        # a group with regexes looks again at every heartbeat: a topic that appeared may match
        if bump or (not grp.subscription_metadata and subscribed) or grp.has_regex_subscriptions() \
                or updated.subscribed_topic_regex:
            metadata = self._subscription_metadata(subscribed)
            if metadata != grp.subscription_metadata:
                bump = True
                records.append(rec.consumer_group_subscription_metadata(grp.group_id, _metadata_value(metadata)))
            if bump:
                group_epoch += 1
                records.append(rec.consumer_group_epoch(grp.group_id, group_epoch))
        self._write(records, replay=True)
        records = []
        if group_epoch > grp.assignment_epoch:
            self._update_target_assignment(grp, group_epoch, updated)
        target_epoch = grp.assignment_epoch
        target = grp.target_assignment.get(member_id, {})
        current = grp.members[member_id]
        cur_snapshot = current.copy()
        if not current.is_reconciled_to(target_epoch):
            try:
                nxt = next_assignment(current, target_epoch, target,
                                      lambda tid, p: grp.partition_owner_epoch(tid, p, member_id), owned)
            except ValueError:
                raise GroupError(Errors.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                                                          "The member must abandon all its partitions and rejoin.") from None
            if nxt.assignment_key() != current.assignment_key():
                self._write([rec.current_assignment(grp.group_id, member_id, _assignment_value(nxt))], replay=True)
                if nxt.state == MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(grp.group_id, grp.members[member_id])
                else:
                    self._cancel(_rebalance_key(grp.group_id, member_id))
        self._schedule_session_timeout(grp.group_id, member_id)
        final = grp.members[member_id]
        resp = R(throttle_time_ms=0, error_code=0, error_message=None, member_id=member_id,
                 member_epoch=final.member_epoch, heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
                 assignment=None)
        # Kafka 4.4's isFullRequest: a regex counts as a subscription (checked in the 4.4 jar)
        full = q.member_epoch == 0 or (q.rebalance_timeout_ms != -1 and q.topic_partitions is not None and (
            q.subscribed_topic_names is not None or q.subscribed_topic_regex is not None))
        if full or _frozen_assign(final.assigned_partitions) != _frozen_assign(cur_snapshot.assigned_partitions):
            resp.assignment = R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=tid, partitions=sorted(ps))
                for tid, ps in sorted(final.assigned_partitions.items(), key=lambda kv: str(kv[0])) if ps])
        return resp

    def _subscribing_member(self, grp: ConsumerGroup, member_id: str, q: w.ConsumerGroupHeartbeatRequest,
                            owned: list[tuple[uuid.UUID, list[int]]] | None, create: bool) -> ConsumerMember:
        if q.instance_id is not None:
            existing = grp.static_member(q.instance_id)
            if create:
                if existing is None:
                    return grp.members.get(member_id) or ConsumerMember(member_id)
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise GroupError(Errors.UNRELEASED_INSTANCE_ID,
                                 f"Static member {existing.member_id} with instance id {q.instance_id} "
                                 "is not released yet.")
                # the static member rejoins with a new member id: it takes the old one's place
                self._replace_static_consumer_member(grp, existing, member_id)
                return grp.members[member_id]
            if existing is None:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {q.instance_id} is unknown.")
            if existing.member_id != member_id:
                raise GroupError(Errors.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                        f"{q.instance_id} is fenced by {existing.member_id}.")
        m = grp.members.get(member_id)
        if m is None:
            if not create:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {grp.group_id}.")
            return ConsumerMember(member_id)
        if q.member_epoch > m.member_epoch:
            raise GroupError(Errors.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({q.member_epoch}) than the one "
                         f"known by the group coordinator ({m.member_epoch}). The member must abandon all its "
                         "partitions and rejoin.")
        if q.member_epoch < m.member_epoch:
            if q.member_epoch != m.previous_member_epoch or not _is_subset(owned, m.assigned_partitions):
                raise GroupError(Errors.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({q.member_epoch}) than the one "
                             f"known by the group coordinator ({m.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        return m

    def _replace_static_consumer_member(self, grp: ConsumerGroup, old: ConsumerMember, new_id: str) -> None:
        gid = grp.group_id
        new = old.copy()
        new.member_id = new_id
        target = grp.target_assignment.get(old.member_id, {})
        self._write([rec.current_assignment(gid, old.member_id, None),
                     rec.target_assignment_member(gid, old.member_id, None),
                     rec.consumer_member_subscription(gid, old.member_id, None),
                     rec.consumer_member_subscription(gid, new_id, _member_value(new)),
                     rec.target_assignment_member(gid, new_id, _target_value(target)),
                     rec.current_assignment(gid, new_id, _assignment_value(new))], replay=True)
        self._cancel_consumer_timers(gid, old.member_id)

    def _subscription_metadata(self, names: set[str]) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self.topics()
        return {n: topics[n] for n in sorted(names) if n in topics}

    def _update_target_assignment(self, grp: ConsumerGroup, epoch: int, updated: ConsumerMember | None) -> None:
        topics = self.topics()
        subs = {mid: m.subscribed_topics(topics) for mid, m in grp.members.items()}
        if updated is not None:
            subs[updated.member_id] = updated.subscribed_topics(topics)
        names = [m.server_assignor for m in grp.members.values() if m.server_assignor]
        assignor = max(set(names), key=names.count) if names else self.config.consumer_assignors[0]
        new = assign(assignor, subs, grp.subscription_metadata, grp.target_assignment)
        records = [rec.target_assignment_member(grp.group_id, mid, _target_value(a))
                   for mid, a in new.items() if _frozen_assign(a) != _frozen_assign(grp.target_assignment.get(mid, {}))
                   or mid not in grp.target_assignment]
        records.append(rec.target_assignment_epoch(grp.group_id, epoch))
        self._write(records, replay=True)

    def _consumer_leave(self, q: w.ConsumerGroupHeartbeatRequest) -> Any:
        R = w.ConsumerGroupHeartbeatResponse
        grp = self._consumer_group(q.group_id, False)
        if q.instance_id is None:
            m = grp.members.get(q.member_id)
            if m is None:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID, f"Member {q.member_id} is not a member of group {q.group_id}.")
            self._fence_consumer_member(grp, m)
            return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=q.member_id,
                     member_epoch=q.member_epoch, heartbeat_interval_ms=0, assignment=None)
        sm = grp.static_member(q.instance_id)
        if sm is None:
            raise GroupError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {q.instance_id} is unknown.")
        if sm.member_id != q.member_id:
            raise GroupError(Errors.FENCED_INSTANCE_ID, f"Static member {q.member_id} with instance id "
                                                    f"{q.instance_id} is fenced by {sm.member_id}.")
        if q.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            leaving = sm.copy()
            leaving.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            leaving.partitions_pending_revocation = {}
            self._write([rec.current_assignment(grp.group_id, sm.member_id, _assignment_value(leaving))], replay=True)
            return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=sm.member_id,
                     member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, heartbeat_interval_ms=0, assignment=None)
        self._fence_consumer_member(grp, sm)
        return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=q.member_id,
                 member_epoch=q.member_epoch, heartbeat_interval_ms=0, assignment=None)

    def _fence_consumer_member(self, grp: ConsumerGroup, m: ConsumerMember) -> None:
        gid = grp.group_id
        records = [rec.current_assignment(gid, m.member_id, None), rec.target_assignment_member(gid, m.member_id, None),
                   rec.consumer_member_subscription(gid, m.member_id, None)]
        metadata = self._subscription_metadata(grp.subscribed_topic_names(removing=m.member_id,
                                                                          topics=self.topics()))
        if metadata != grp.subscription_metadata:
            records.append(rec.consumer_group_subscription_metadata(gid, _metadata_value(metadata)))
        records.append(rec.consumer_group_epoch(gid, grp.group_epoch + 1))
        self._write(records, replay=True)
        self._cancel_consumer_timers(gid, m.member_id)
        log.info("member %s left consumer group %s (epoch %d)", m.member_id, gid, grp.group_epoch)

    def _cancel_consumer_timers(self, group_id: str, member_id: str) -> None:
        self._cancel(_session_key(group_id, member_id))
        self._cancel(_rebalance_key(group_id, member_id))

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self._schedule(_session_key(group_id, member_id), self.config.consumer_session_timeout_ms,
                       lambda: self._fence_by_timer(group_id, member_id, "the member session expired"))

    def _schedule_rebalance_timeout(self, group_id: str, m: ConsumerMember) -> None:
        member_id, epoch = m.member_id, m.member_epoch

        def expire() -> None:
            grp = self.groups.get(group_id)
            cur = grp.members.get(member_id) if isinstance(grp, ConsumerGroup) else None
            if cur is not None and cur.member_epoch == epoch and cur.state == MemberState.UNREVOKED_PARTITIONS:
                self._fence_by_timer(group_id, member_id, "the member failed to revoke partitions in time")
        self._schedule(_rebalance_key(group_id, member_id), max(m.rebalance_timeout_ms, 0), expire)

    def _fence_by_timer(self, group_id: str, member_id: str, why: str) -> None:
        grp = self.groups.get(group_id)
        if not isinstance(grp, ConsumerGroup):
            return
        m = grp.members.get(member_id)
        if m is None:
            return
        log.info("fencing member %s of consumer group %s: %s", member_id, group_id, why)
        self._fence_consumer_member(grp, m)

    def consumer_group_describe(self, group_ids: list[str], topic_names: dict[uuid.UUID, str]) -> list[Any]:
        D = w.ConsumerGroupDescribeResponse
        out = []

        def parts(a: Assignment) -> Any:
            return D.Assignment(topic_partitions=[
                D.TopicPartitions(topic_id=tid, topic_name=topic_names.get(tid, ""), partitions=sorted(ps))
                for tid, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps])
        for gid in group_ids:
            grp = self.groups.get(gid)
            if not isinstance(grp, ConsumerGroup):
                out.append(D.DescribedGroup(error_code=Errors.GROUP_ID_NOT_FOUND,
                                            error_message=f"Group {gid} not found." if grp is None
                                            else f"Group {gid} is not a consumer group.",
                                            group_id=gid, group_state="", group_epoch=0, assignment_epoch=0,
                                            assignor_name="", members=[], authorized_operations=-2147483648))
                continue
            names = [m.server_assignor for m in grp.members.values() if m.server_assignor]
            assignor = max(set(names), key=names.count) if names else self.config.consumer_assignors[0]
            members = [D.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                                member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                                subscribed_topic_names=list(m.subscribed_topic_names),
                                subscribed_topic_regex=m.subscribed_topic_regex,
                                assignment=parts(m.assigned_partitions),
                                target_assignment=parts(grp.target_assignment.get(m.member_id, {})),
                                member_type=CONSUMER_MEMBER_TYPE)
                       for m in grp.members.values()]
            out.append(D.DescribedGroup(error_code=0, error_message=None, group_id=gid,
                                        group_state=grp.state(), group_epoch=grp.group_epoch,
                                        assignment_epoch=grp.assignment_epoch, assignor_name=assignor,
                                        members=members, authorized_operations=-2147483648))
        return out


def _session_key(group_id: str, member_id: str) -> str:
    return f"session-timeout-{group_id}-{member_id}"


def _rebalance_key(group_id: str, member_id: str) -> str:
    return f"rebalance-timeout-{group_id}-{member_id}"


def _is_subset(owned: list[tuple[uuid.UUID, list[int]]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(p in assigned.get(tid, ()) for tid, ps in owned for p in ps)


def _frozen_assign(a: Assignment) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((t, p) for t, ps in a.items() for p in ps)


def _topic_partitions(cls: Any, a: Assignment) -> list[Any]:
    return [cls(topic_id=tid, partitions=sorted(ps)) for tid, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps]


def _updated_member(member: ConsumerMember, q: w.ConsumerGroupHeartbeatRequest, client_id: str,
                    client_host: str) -> ConsumerMember:
    """A copy of ``member`` with what the heartbeat sets (a field it leaves null or -1 keeps its
    value); a new regex must compile (INVALID_REGULAR_EXPRESSION with RE2's message)."""
    updated = member.copy()
    if q.instance_id is not None:
        updated.instance_id = q.instance_id
    if q.rack_id is not None:
        updated.rack_id = q.rack_id
    if q.rebalance_timeout_ms != -1:
        updated.rebalance_timeout_ms = q.rebalance_timeout_ms
    if q.server_assignor is not None:
        updated.server_assignor = q.server_assignor
    if q.subscribed_topic_names is not None:
        updated.subscribed_topic_names = list(q.subscribed_topic_names)
    if q.subscribed_topic_regex is not None:
        updated.subscribed_topic_regex = q.subscribed_topic_regex
        if updated.subscribed_topic_regex != member.subscribed_topic_regex and updated.subscribed_topic_regex:
            try:
                compile_regex(updated.subscribed_topic_regex)
            except InvalidRegex as e:
                raise GroupError(Errors.INVALID_REGULAR_EXPRESSION, e.kafka_message) from None
    updated.client_id, updated.client_host = client_id, client_host
    return updated


def _member_value(m: ConsumerMember) -> Any:
    return g.ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=None)


def _assignment_value(m: ConsumerMember) -> Any:
    V = g.ConsumerGroupCurrentMemberAssignmentValue
    return V(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
             assigned_partitions=_topic_partitions(V.TopicPartitions, m.assigned_partitions),
             partitions_pending_revocation=_topic_partitions(V.TopicPartitions, m.partitions_pending_revocation))


def _target_value(a: Assignment) -> Any:
    V = g.ConsumerGroupTargetAssignmentMemberValue
    return V(topic_partitions=_topic_partitions(V.TopicPartition, a))


def _metadata_value(metadata: dict[str, tuple[uuid.UUID, int]]) -> Any:
    V = g.ConsumerGroupPartitionMetadataValue
    return V(topics=[V.TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
                     for name, (tid, n) in sorted(metadata.items())])

