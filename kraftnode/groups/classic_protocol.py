"""The classic rebalance protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): Kafka 3.9's
GroupMetadataManager for classic groups, sans-IO, a mixin of the group coordinator.
"""

from __future__ import annotations

import logging
from typing import Any

from kraftnode.groups import records as rec
from kraftnode.groups.classic import (
    EMPTY_ASSIGNMENT,
    ClassicGroup,
    ClassicMember,
    State,
)
from kraftnode.groups.consumer import ConsumerGroup
from kraftnode.groups.core import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    CoordinatorCore,
    GroupError,
    Result,
)
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated import groups as g

__all__ = ["ClassicProtocol"]

log = logging.getLogger("kraftnode.groups")


class ClassicProtocol(CoordinatorCore):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic groups, with their timers."""

    def join_group(self, token: Any, q: w.JoinGroupRequest, version: int, client_id: str, client_host: str,
                   new_member_id: str, now: int) -> Result:
        """``new_member_id``: the id a new member gets (Kafka: client id or group instance
        id, "-", a random UUID; the shell makes it, we stay deterministic)."""
        self._begin(now)
        protocols = [(p.name, bytes(p.metadata)) for p in q.protocols]
        rebalance_timeout = q.session_timeout_ms if version == 0 else q.rebalance_timeout_ms
        if not q.group_id:
            self._reply(token, join_error(Errors.INVALID_GROUP_ID, q.member_id))
            return self._end()
        if not self.config.min_session_timeout_ms <= q.session_timeout_ms <= self.config.max_session_timeout_ms:
            self._reply(token, join_error(Errors.INVALID_SESSION_TIMEOUT, q.member_id))
            return self._end()
        existing = self.groups.get(q.group_id)
        if isinstance(existing, ConsumerGroup):
            if existing.members:
                # a classic member cannot join a group of KIP-848 members
                # (group.consumer.migration.policy is Kafka's default, disabled)
                self._reply(token, join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, q.member_id))
                return self._end()
            self._delete_consumer_group_records(existing)
        is_unknown = q.member_id == UNKNOWN_MEMBER_ID
        grp = self.groups.get(q.group_id)
        is_new_group = grp is None
        if grp is None:
            if not is_unknown:
                self._reply(token, join_error(Errors.UNKNOWN_MEMBER_ID, q.member_id))
                return self._end()
            grp = ClassicGroup(q.group_id, current_state_timestamp=now)
            self.groups[q.group_id] = grp
        assert isinstance(grp, ClassicGroup)
        if not self._accept_joining_member(grp, q.member_id):
            grp.remove(q.member_id)
            self._reply(token, join_error(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
        elif is_unknown:
            self._join_new_member(token, q, version, grp, protocols, rebalance_timeout, client_id,
                                  client_host, new_member_id)
        else:
            self._join_existing_member(token, q, version, grp, protocols, rebalance_timeout, client_id,
                                       client_host)
        if is_new_group and not self._records:
            # a new group is written at once, empty (Kafka's newEmptyGroupMetadataRecord)
            self._records.append(rec.group_metadata(grp.group_id, g.GroupMetadataValue(
                protocol_type="", generation=0, protocol=None, leader=None,
                current_state_timestamp=grp.current_state_timestamp or -1, members=[])))
        return self._end()

    def _accept_joining_member(self, grp: ClassicGroup, member_id: str) -> bool:
        if grp.state in (State.EMPTY, State.DEAD):
            return True
        if grp.state == State.PREPARING_REBALANCE:
            m = grp.members.get(member_id)
            return (m is not None and m.awaiting_join is not None) or grp.num_awaiting_join() < self.config.max_size
        return member_id in grp.members or len(grp.members) < self.config.max_size

    def _join_new_member(self, token: Any, q: w.JoinGroupRequest, version: int, grp: ClassicGroup,
                         protocols: list[tuple[str, bytes]], rebalance_timeout: int, client_id: str,
                         client_host: str, new_member_id: str) -> None:
        if grp.state == State.DEAD:
            self._reply(token, join_error(Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not grp.supports_protocols(q.protocol_type, protocols):
            self._reply(token, join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return
        if q.group_instance_id is not None:
            old = grp.static_members.get(q.group_instance_id)
            if old is not None:
                self._update_static_member(token, q, version, grp, protocols, rebalance_timeout, old,
                                           new_member_id)
            else:
                self._add_member(token, q, grp, new_member_id, protocols, rebalance_timeout, client_id,
                                 client_host)
            return
        if version >= 4:
            # KIP-394: a new member first gets its id, and joins with it
            grp.pending_join_members.add(new_member_id)
            self._schedule(_hb_key(grp.group_id, new_member_id), q.session_timeout_ms,
                           lambda: self._expire_heartbeat(grp.group_id, new_member_id))
            self._reply(token, join_error(Errors.MEMBER_ID_REQUIRED, new_member_id))
            return
        self._add_member(token, q, grp, new_member_id, protocols, rebalance_timeout, client_id, client_host)

    def _join_existing_member(self, token: Any, q: w.JoinGroupRequest, version: int, grp: ClassicGroup,
                              protocols: list[tuple[str, bytes]], rebalance_timeout: int, client_id: str,
                              client_host: str) -> None:
        member_id = q.member_id
        if grp.state == State.DEAD:
            self._reply(token, join_error(Errors.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not grp.supports_protocols(q.protocol_type, protocols):
            self._reply(token, join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in grp.pending_join_members:
            # the second JoinGroup of a new member (KIP-394), with the id it was given
            self._add_member(token, q, grp, member_id, protocols, rebalance_timeout, client_id, client_host)
            return
        try:
            self._validate_member(grp, member_id, q.group_instance_id)
        except GroupError as e:
            self._reply(token, join_error(e.code, member_id))
            return
        m = grp.members[member_id]
        if grp.state == State.PREPARING_REBALANCE:
            self._update_member_then_rebalance(token, q, grp, m, protocols, rebalance_timeout)
        elif grp.state == State.COMPLETING_REBALANCE:
            if m.matches(protocols):
                # the member lost its JoinGroup answer: the same again
                self._reply(token, self._join_response(grp, member_id, grp.is_leader(member_id), False))
            else:
                self._update_member_then_rebalance(token, q, grp, m, protocols, rebalance_timeout)
        elif grp.state == State.STABLE:
            if grp.is_leader(member_id) or not m.matches(protocols):
                self._update_member_then_rebalance(token, q, grp, m, protocols, rebalance_timeout)
            else:
                self._reply(token, self._join_response(grp, member_id, False, False))
        else:
            self._reply(token, join_error(Errors.UNKNOWN_MEMBER_ID, member_id))

    def _add_member(self, token: Any, q: w.JoinGroupRequest, grp: ClassicGroup, member_id: str,
                    protocols: list[tuple[str, bytes]], rebalance_timeout: int, client_id: str,
                    client_host: str) -> None:
        m = ClassicMember(member_id, q.group_instance_id, client_id, client_host, rebalance_timeout,
                          q.session_timeout_ms, q.protocol_type, protocols, is_new=True)
        if grp.state == State.PREPARING_REBALANCE and grp.previous_state == State.EMPTY:
            grp.new_member_added = True
        grp.add(m, token)
        self._reschedule_heartbeat(grp, m, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(grp)

    def _update_member_then_rebalance(self, token: Any, q: w.JoinGroupRequest, grp: ClassicGroup,
                                      m: ClassicMember, protocols: list[tuple[str, bytes]],
                                      rebalance_timeout: int) -> None:
        grp.update_member(m, protocols, rebalance_timeout, q.session_timeout_ms, token)
        self._maybe_prepare_rebalance_or_complete_join(grp)

    def _update_static_member(self, token: Any, q: w.JoinGroupRequest, version: int, grp: ClassicGroup,
                              protocols: list[tuple[str, bytes]], rebalance_timeout: int, old_member_id: str,
                              new_member_id: str) -> None:
        instance_id = q.group_instance_id
        assert instance_id is not None
        current_leader = grp.leader_id

        def fenced(tok: Any, kind: str, mid: str) -> None:
            self._reply(tok, join_error(Errors.FENCED_INSTANCE_ID, mid) if kind == "join-fenced"
                        else sync_error(Errors.FENCED_INSTANCE_ID))

        self._cancel(_hb_key(grp.group_id, old_member_id))
        new = grp.replace_static_member(instance_id, old_member_id, new_member_id, fenced)
        self._reschedule_heartbeat(grp, new, new.session_timeout_ms)
        grp.update_member(new, protocols, rebalance_timeout, q.session_timeout_ms, token)
        if grp.state == State.STABLE:
            if grp.protocol_name == grp.select_protocol():
                # same protocol: no rebalance; the new member id is stored with the old assignment
                assignment = {mid: m.assignment for mid, m in grp.members.items()}
                self._records.append(rec.group_metadata(grp.group_id, self._group_value(grp, assignment)))
                new.awaiting_join = None
                if version >= 9:
                    leader = grp.is_leader(new_member_id)
                    self._reply(token, self._join_response(grp, new_member_id, leader, leader))
                else:
                    resp = self._join_response(grp, new_member_id, False, False)
                    resp.leader = current_leader or ""
                    self._reply(token, resp)
            else:
                self._maybe_prepare_rebalance_or_complete_join(grp)
        elif grp.state == State.COMPLETING_REBALANCE:
            self._prepare_rebalance(grp)
        else:
            self._maybe_complete_join_phase(grp)

    def _join_response(self, grp: ClassicGroup, member_id: str, with_members: bool, skip: bool) -> Any:
        R = w.JoinGroupResponse
        members = []
        if with_members:
            members = [R.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                                 metadata=m.metadata(grp.protocol_name))
                       for m in grp.members.values()]
        return R(throttle_time_ms=0, error_code=0, generation_id=grp.generation_id,
                 protocol_type=grp.protocol_type, protocol_name=grp.protocol_name,
                 leader=grp.leader_id or "", skip_assignment=skip, member_id=member_id, members=members)

    def _maybe_prepare_rebalance_or_complete_join(self, grp: ClassicGroup) -> None:
        if grp.can_rebalance():
            self._prepare_rebalance(grp)
        else:
            self._maybe_complete_join_phase(grp)

    def _maybe_complete_join_phase(self, grp: ClassicGroup) -> None:
        if (grp.state == State.PREPARING_REBALANCE and grp.has_all_members_joined()
                and grp.previous_state != State.EMPTY):
            self._complete_join(grp)

    def _prepare_rebalance(self, grp: ClassicGroup) -> None:
        if grp.state == State.COMPLETING_REBALANCE:
            for m in grp.members.values():
                m.assignment = EMPTY_ASSIGNMENT
            self._propagate_assignment(grp, Errors.REBALANCE_IN_PROGRESS)
        grp.pending_sync_members.clear()
        self._cancel(_sync_key(grp.group_id))
        initial = grp.state == State.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(grp.rebalance_timeout_ms() - delay, 0)
            gid = grp.group_id
            self._schedule(_join_key(gid), delay,
                           lambda: self._try_complete_initial_rebalance(gid, delay, remaining))
        grp.transition(State.PREPARING_REBALANCE, self._now)
        log.info("preparing to rebalance group %s in state %s with old generation %d", grp.group_id,
                 grp.state.value, grp.generation_id)
        if not initial:
            self._maybe_complete_join_else_schedule(grp)

    def _maybe_complete_join_else_schedule(self, grp: ClassicGroup) -> None:
        if grp.has_all_members_joined():
            self._complete_join(grp)
        else:
            gid = grp.group_id
            self._schedule(_join_key(gid), grp.rebalance_timeout_ms(), lambda: self._complete_join_of(gid))

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        grp = self.groups.get(group_id)
        if not isinstance(grp, ClassicGroup):
            return
        if grp.new_member_added and remaining != 0:
            grp.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self._schedule(_join_key(group_id), new_delay,
                           lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining))
        else:
            self._complete_join(grp)

    def _complete_join_of(self, group_id: str) -> None:
        grp = self.groups.get(group_id)
        if isinstance(grp, ClassicGroup):
            self._complete_join(grp)

    def _complete_join(self, grp: ClassicGroup) -> None:
        self._cancel(_join_key(grp.group_id))
        for m in [m for m in grp.members.values() if m.awaiting_join is None and m.group_instance_id is None]:
            grp.remove(m.member_id)
            self._cancel(_hb_key(grp.group_id, m.member_id))
        if grp.state == State.DEAD:
            return
        if not grp.maybe_elect_new_joined_leader() and grp.members:
            gid = grp.group_id
            self._schedule(_join_key(gid), grp.rebalance_timeout_ms(), lambda: self._complete_join_of(gid))
            return
        grp.init_next_generation(self._now)
        if grp.state == State.EMPTY:
            log.info("group %s with generation %d is now empty", grp.group_id, grp.generation_id)
            self._records.append(rec.group_metadata(grp.group_id, self._group_value(grp, {})))
            return
        log.info("stabilized group %s generation %d with %d members", grp.group_id, grp.generation_id,
                 len(grp.members))
        for m in grp.members.values():
            leader = grp.is_leader(m.member_id)
            if m.awaiting_join is not None:
                self._reply(m.awaiting_join, self._join_response(grp, m.member_id, leader, False))
                m.awaiting_join = None
            self._reschedule_heartbeat(grp, m, m.session_timeout_ms)
            m.is_new = False
            grp.pending_sync_members.add(m.member_id)
        gid, gen = grp.group_id, grp.generation_id
        self._schedule(_sync_key(gid), grp.rebalance_timeout_ms(), lambda: self._expire_pending_sync(gid, gen))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        grp = self.groups.get(group_id)
        if not isinstance(grp, ClassicGroup) or grp.generation_id != generation:
            return
        if grp.state in (State.COMPLETING_REBALANCE, State.STABLE) and grp.pending_sync_members:
            pending = set(grp.pending_sync_members)
            for mid in pending:
                grp.remove(mid)
                self._cancel(_hb_key(group_id, mid))
            log.info("group %s: members %s did not sync in time", group_id, sorted(pending))
            self._prepare_rebalance(grp)

    def _reschedule_heartbeat(self, grp: ClassicGroup, m: ClassicMember, timeout_ms: int) -> None:
        gid, mid = grp.group_id, m.member_id
        self._schedule(_hb_key(gid, mid), timeout_ms, lambda: self._expire_heartbeat(gid, mid))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        grp = self.groups.get(group_id)
        if not isinstance(grp, ClassicGroup) or grp.state == State.DEAD:
            return
        if member_id in grp.pending_join_members:
            grp.remove(member_id)
            if grp.state == State.PREPARING_REBALANCE and grp.has_all_members_joined():
                self._complete_join(grp)
            return
        m = grp.members.get(member_id)
        if m is None or m.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s: session expired", member_id, group_id)
        self._remove_member_and_update(grp, m)

    def _remove_member_and_update(self, grp: ClassicGroup, m: ClassicMember) -> None:
        if m.awaiting_join is not None:
            self._reply(m.awaiting_join, join_error(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
            m.awaiting_join = None
        grp.remove(m.member_id)
        if grp.state in (State.STABLE, State.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(grp)
        elif grp.state == State.PREPARING_REBALANCE and grp.has_all_members_joined():
            self._complete_join(grp)

    def _validate_member(self, grp: ClassicGroup, member_id: str, instance_id: str | None) -> None:
        if instance_id is not None:
            existing = grp.static_members.get(instance_id)
            if existing is None:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise GroupError(Errors.FENCED_INSTANCE_ID)
        if member_id not in grp.members:
            raise GroupError(Errors.UNKNOWN_MEMBER_ID)

    def _group_value(self, grp: ClassicGroup, assignment: dict[str, bytes]) -> Any:
        V = g.GroupMetadataValue
        return V(protocol_type=grp.protocol_type or "", generation=grp.generation_id,
                 protocol=grp.protocol_name, leader=grp.leader_id,
                 current_state_timestamp=grp.current_state_timestamp if grp.current_state_timestamp is not None else -1,
                 members=[V.MemberMetadata(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                           client_id=m.client_id, client_host=m.client_host,
                                           rebalance_timeout=m.rebalance_timeout_ms,
                                           session_timeout=m.session_timeout_ms,
                                           subscription=m.metadata(grp.protocol_name),
                                           assignment=assignment.get(m.member_id, EMPTY_ASSIGNMENT))
                          for m in grp.members.values()])

    def sync_group(self, token: Any, q: w.SyncGroupRequest, version: int, now: int) -> Result:
        self._begin(now)
        if not q.group_id:
            self._reply(token, sync_error(Errors.INVALID_GROUP_ID))
            return self._end()
        grp = self.groups.get(q.group_id)
        if grp is None or (isinstance(grp, ClassicGroup) and grp.is_empty()) or \
                (isinstance(grp, ConsumerGroup) and not grp.members):
            self._reply(token, sync_error(Errors.UNKNOWN_MEMBER_ID))
            return self._end()
        if isinstance(grp, ConsumerGroup):
            self._reply(token, sync_error(Errors.UNKNOWN_MEMBER_ID))
            return self._end()
        err = self._validate_sync(grp, q)
        if err:
            self._reply(token, sync_error(err))
        elif grp.state == State.PREPARING_REBALANCE:
            self._reply(token, sync_error(Errors.REBALANCE_IN_PROGRESS))
        elif grp.state == State.COMPLETING_REBALANCE:
            grp.members[q.member_id].awaiting_sync = token
            self._remove_pending_sync(grp, q.member_id)
            if grp.is_leader(q.member_id):
                log.info("assignment received from leader %s for group %s generation %d", q.member_id,
                         q.group_id, grp.generation_id)
                assignment = {a.member_id: bytes(a.assignment) for a in q.assignments}
                for mid in grp.members:
                    assignment.setdefault(mid, EMPTY_ASSIGNMENT)
                self._records.append(rec.group_metadata(grp.group_id, self._group_value(grp, assignment)))
                # Kafka propagates the assignment and moves to Stable once the record is
                # committed; the answers of this result are sent only then, so doing it now
                # is the same to every client (a failed append drops this coordinator).
                for m in grp.members.values():
                    m.assignment = assignment.get(m.member_id, EMPTY_ASSIGNMENT)
                self._propagate_assignment(grp, Errors.NONE)
                grp.transition(State.STABLE, self._now)
        elif grp.state == State.STABLE:
            self._remove_pending_sync(grp, q.member_id)
            m = grp.members[q.member_id]
            self._reply(token, w.SyncGroupResponse(throttle_time_ms=0, error_code=0,
                                                   protocol_type=grp.protocol_type,
                                                   protocol_name=grp.protocol_name, assignment=m.assignment))
        return self._end()

    def _validate_sync(self, grp: ClassicGroup, q: w.SyncGroupRequest) -> int:
        if grp.state == State.DEAD:
            return int(Errors.COORDINATOR_NOT_AVAILABLE)
        try:
            self._validate_member(grp, q.member_id, q.group_instance_id)
        except GroupError as e:
            return e.code
        if q.generation_id != grp.generation_id:
            return int(Errors.ILLEGAL_GENERATION)
        if (q.protocol_type is not None and q.protocol_type != grp.protocol_type) or \
                (q.protocol_name is not None and q.protocol_name != grp.protocol_name):
            return int(Errors.INCONSISTENT_GROUP_PROTOCOL)
        return 0

    def _remove_pending_sync(self, grp: ClassicGroup, member_id: str) -> None:
        grp.pending_sync_members.discard(member_id)
        if grp.state not in (State.COMPLETING_REBALANCE, State.STABLE) or not grp.pending_sync_members:
            self._cancel(_sync_key(grp.group_id))

    def _propagate_assignment(self, grp: ClassicGroup, error: int) -> None:
        ok = error == Errors.NONE
        for m in grp.members.values():
            if m.awaiting_sync is not None:
                self._reply(m.awaiting_sync, w.SyncGroupResponse(
                    throttle_time_ms=0, error_code=int(error),
                    protocol_type=grp.protocol_type if ok else None,
                    protocol_name=grp.protocol_name if ok else None, assignment=m.assignment))
                m.awaiting_sync = None
                self._reschedule_heartbeat(grp, m, m.session_timeout_ms)

    def heartbeat(self, token: Any, q: w.HeartbeatRequest, version: int, now: int) -> Result:
        self._begin(now)
        R = w.HeartbeatResponse
        grp = self.groups.get(q.group_id)
        if not q.group_id:
            code = int(Errors.INVALID_GROUP_ID)
        elif grp is None or isinstance(grp, ConsumerGroup):
            code = int(Errors.UNKNOWN_MEMBER_ID)
        elif grp.state == State.DEAD:
            code = int(Errors.COORDINATOR_NOT_AVAILABLE)
        else:
            try:
                self._validate_member(grp, q.member_id, q.group_instance_id)
                code = int(Errors.ILLEGAL_GENERATION) if q.generation_id != grp.generation_id else 0
            except GroupError as e:
                code = e.code
            if not code:
                if grp.state == State.EMPTY:
                    code = int(Errors.UNKNOWN_MEMBER_ID)
                else:
                    self._reschedule_heartbeat(grp, grp.members[q.member_id],
                                               grp.members[q.member_id].session_timeout_ms)
                    if grp.state == State.PREPARING_REBALANCE:
                        code = int(Errors.REBALANCE_IN_PROGRESS)
        self._reply(token, R(throttle_time_ms=0, error_code=code))
        return self._end()

    def leave_group(self, token: Any, q: w.LeaveGroupRequest, version: int, now: int) -> Result:
        self._begin(now)
        R = w.LeaveGroupResponse
        identities = [(x.member_id, x.group_instance_id, x.reason) for x in q.members] if version >= 3 \
            else [(q.member_id, None, None)]
        grp = self.groups.get(q.group_id)
        if not q.group_id:
            self._reply(token, R(throttle_time_ms=0, error_code=Errors.INVALID_GROUP_ID, members=[]))
            return self._end()
        if grp is None or isinstance(grp, ConsumerGroup):
            # Kafka: an unknown group is UNKNOWN_MEMBER_ID for the whole request
            self._reply(token, R(throttle_time_ms=0, error_code=Errors.UNKNOWN_MEMBER_ID, members=[]))
            return self._end()
        if grp.state == State.DEAD:
            self._reply(token, R(throttle_time_ms=0, error_code=Errors.COORDINATOR_NOT_AVAILABLE, members=[]))
            return self._end()
        responses = []
        for member_id, instance_id, _reason in identities:
            code = 0
            if member_id == UNKNOWN_MEMBER_ID:
                if instance_id is not None and instance_id in grp.static_members:
                    self._remove_current_member(grp, grp.static_members[instance_id])
                else:
                    code = int(Errors.UNKNOWN_MEMBER_ID)
            elif member_id in grp.pending_join_members:
                grp.remove(member_id)
                self._cancel(_hb_key(grp.group_id, member_id))
            else:
                try:
                    self._validate_member(grp, member_id, instance_id)
                    self._remove_current_member(grp, member_id)
                except GroupError as e:
                    code = e.code
            responses.append(R.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code))
        if any(r.error_code == 0 for r in responses):
            if grp.state in (State.STABLE, State.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(grp)
            elif grp.state == State.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(grp)
        if version >= 3:
            self._reply(token, R(throttle_time_ms=0, error_code=0, members=responses))
        else:
            self._reply(token, R(throttle_time_ms=0, error_code=responses[0].error_code, members=[]))
        return self._end()

    def _remove_current_member(self, grp: ClassicGroup, member_id: str) -> None:
        m = grp.members[member_id]
        self._cancel(_hb_key(grp.group_id, member_id))
        log.info("member %s has left group %s through explicit LeaveGroup", member_id, grp.group_id)
        if m.awaiting_join is not None:
            self._reply(m.awaiting_join, join_error(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
            m.awaiting_join = None
        grp.remove(member_id)


def _hb_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def _join_key(group_id: str) -> str:
    return f"join-{group_id}"


def _sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def join_error(code: int, member_id: str) -> Any:
    return w.JoinGroupResponse(throttle_time_ms=0, error_code=int(code), generation_id=NO_GENERATION,
                               protocol_type=None, protocol_name=None, leader="", skip_assignment=False,
                               member_id=member_id, members=[])


def sync_error(code: int) -> Any:
    return w.SyncGroupResponse(throttle_time_ms=0, error_code=int(code), protocol_type=None, protocol_name=None,
                               assignment=b"")

