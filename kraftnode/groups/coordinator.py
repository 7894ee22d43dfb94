"""The group coordinator: sans-IO and deterministic (Kafka 3.9's GroupMetadataManager and
OffsetMetadataManager, for one coordinator "partition": the whole raft log).

Everything comes in as arguments -- the request (the generated wire message and its
version), the time, a new member id the shell generated -- and goes out as a
:class:`Result`: the records to append to the log and the answers to give, each to the
*token* of the request it answers (a JoinGroup or SyncGroup may be answered by a later
call, or by :meth:`GroupCoordinator.poll` when a timer fires).  When a result holds
records, its answers are sent only once those records are committed (as Kafka completes
a write's response when its records are committed); an answer of a result without
records is sent at once.

State: every committed group record is replayed into a coordinator on the leader when it
takes over (:meth:`replay`, then :meth:`on_loaded`, which starts the members' session
timers from "now", as Kafka's ``onLoaded`` does).  From then on the leader's operations
change the state directly (classic groups, whose records are written but not replayed,
as in Kafka) or by replaying the records they write (offsets, KIP-848 consumer groups,
deletions).  A leader that loses its leadership throws its coordinator away
(:meth:`unload` answers the waiting requests NOT_COORDINATOR) and the next leader
starts from the committed records -- what Kafka does when a ``__consumer_offsets``
partition moves.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftnode.errors import RemoteError
from kraftnode.groups import records as rec
from kraftnode.groups.classic import (
    CONSUMER_PROTOCOL_TYPE,
    EMPTY_ASSIGNMENT,
    ClassicGroup,
    ClassicMember,
    State,
    subscribed_topics,
)
from kraftnode.groups.config import GroupConfig
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
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated import groups as g

__all__ = ["GroupCoordinator", "Result", "OffsetEntry"]

log = logging.getLogger("kraftnode.groups")

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
OffsetEntry = tuple[int, int, str, int]   # offset, leader epoch, metadata, commit timestamp
Topics = dict[str, tuple[uuid.UUID, int]]


@dataclass
class Result:
    """What an operation asks of the shell: append ``records`` (all or nothing), then --
    once they are committed, or at once when there are none -- send each ``(token,
    response)`` of ``replies``."""

    records: list[rec.Record] = field(default_factory=list)
    replies: list[tuple[Any, Any]] = field(default_factory=list)


class _Error(RemoteError):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


class GroupCoordinator:
    """Groups and committed offsets of one coordinator (see the module doc)."""

    def __init__(self, config: GroupConfig, topics: Callable[[], Topics]) -> None:
        self.config = config
        self.topics = topics
        self.groups: dict[str, ClassicGroup | ConsumerGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        self._timers: dict[str, tuple[int, Callable[[], None]]] = {}
        self._now = 0
        self._records: list[rec.Record] = []
        self._replies: list[tuple[Any, Any]] = []

    # ================================================================== loading
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one committed group record (other keys are ignored)."""
        decoded = rec.decode(key, value)
        if decoded is None:
            return
        kv, k, v = decoded
        if kv in (0, 1):
            offsets = self.offsets.setdefault(k.group, {})
            if v is None:
                offsets.pop((k.topic, k.partition), None)
                if not offsets:
                    del self.offsets[k.group]
            else:
                if k.group not in self.groups:
                    self.groups[k.group] = ClassicGroup(k.group)
                offsets[(k.topic, k.partition)] = (v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp)
        elif kv == 2:
            if v is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = _classic_from_record(k.group, v)
        else:
            group_id = k.group_id
            grp = self.groups.get(group_id)
            if not isinstance(grp, ConsumerGroup):
                if v is None:
                    return
                grp = ConsumerGroup(group_id)
                self.groups[group_id] = grp
            grp.replay(kv, k, v)
            if kv == 3 and v is None:
                del self.groups[group_id]

    def replay_all(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        for k, v in items:
            self.replay(k, v)

    def on_loaded(self, now: int) -> None:
        """Start every member's session timer from ``now`` (Kafka's onLoaded)."""
        self._now = now
        for grp in self.groups.values():
            if isinstance(grp, ClassicGroup):
                for m in grp.members.values():
                    self._reschedule_heartbeat(grp, m, m.session_timeout_ms)
            else:
                for cm in grp.members.values():
                    self._schedule_session_timeout(grp.group_id, cm.member_id)
                    if cm.state == MemberState.UNREVOKED_PARTITIONS:
                        self._schedule_rebalance_timeout(grp.group_id, cm)

    def unload(self) -> Result:
        """The node stops coordinating: waiting JoinGroup/SyncGroup requests are answered
        NOT_COORDINATOR (Kafka's onUnloaded); the coordinator is not used afterwards."""
        self._begin(self._now)
        for grp in self.groups.values():
            if not isinstance(grp, ClassicGroup):
                continue
            for m in grp.members.values():
                if m.awaiting_join is not None:
                    self._reply(m.awaiting_join, _join_error(Errors.NOT_COORDINATOR, m.member_id))
                    m.awaiting_join = None
                if m.awaiting_sync is not None:
                    self._reply(m.awaiting_sync, _sync_error(Errors.NOT_COORDINATOR))
                    m.awaiting_sync = None
        self._timers.clear()
        return self._end()

    # ================================================================== timers
    def next_deadline(self) -> int | None:
        return min((d for d, _ in self._timers.values()), default=None)

    def poll(self, now: int) -> Result:
        """Run every timer due at ``now``, earliest first."""
        self._begin(now)
        while True:
            due = [(d, k) for k, (d, _) in self._timers.items() if d <= now]
            if not due:
                break
            _, key = min(due)
            _, fn = self._timers.pop(key)
            fn()
        return self._end()

    def _schedule(self, key: str, delay_ms: int, fn: Callable[[], None]) -> None:
        self._timers[key] = (self._now + max(delay_ms, 0), fn)

    def _cancel(self, key: str) -> None:
        self._timers.pop(key, None)

    # ================================================================== plumbing
    def _begin(self, now: int) -> None:
        self._now = now
        self._records = []
        self._replies = []

    def _end(self) -> Result:
        r = Result(self._records, self._replies)
        self._records, self._replies = [], []
        return r

    def _reply(self, token: Any, response: Any) -> None:
        self._replies.append((token, response))

    def _write(self, records: list[rec.Record], replay: bool) -> None:
        self._records.extend(records)
        if replay:
            for k, v in records:
                self.replay(k, v)

    def _classic(self, group_id: str) -> ClassicGroup:
        grp = self.groups.get(group_id)
        if not isinstance(grp, ClassicGroup):
            raise _Error(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return grp

    # ================================================================== JoinGroup
    def join_group(self, token: Any, q: w.JoinGroupRequest, version: int, client_id: str, client_host: str,
                   new_member_id: str, now: int) -> Result:
        """``new_member_id``: the id a new member gets (Kafka: client id or group instance
        id, "-", a random UUID; the shell makes it, we stay deterministic)."""
        self._begin(now)
        protocols = [(p.name, bytes(p.metadata)) for p in q.protocols]
        rebalance_timeout = q.session_timeout_ms if version == 0 else q.rebalance_timeout_ms
        if not q.group_id:
            self._reply(token, _join_error(Errors.INVALID_GROUP_ID, q.member_id))
            return self._end()
        if not self.config.min_session_timeout_ms <= q.session_timeout_ms <= self.config.max_session_timeout_ms:
            self._reply(token, _join_error(Errors.INVALID_SESSION_TIMEOUT, q.member_id))
            return self._end()
        existing = self.groups.get(q.group_id)
        if isinstance(existing, ConsumerGroup):
            if existing.members:
                # a classic member cannot join a group of KIP-848 members
                # (group.consumer.migration.policy is Kafka's default, disabled)
                self._reply(token, _join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, q.member_id))
                return self._end()
            self._delete_consumer_group_records(existing)
        is_unknown = q.member_id == UNKNOWN_MEMBER_ID
        grp = self.groups.get(q.group_id)
        is_new_group = grp is None
        if grp is None:
            if not is_unknown:
                self._reply(token, _join_error(Errors.UNKNOWN_MEMBER_ID, q.member_id))
                return self._end()
            grp = ClassicGroup(q.group_id, current_state_timestamp=now)
            self.groups[q.group_id] = grp
        assert isinstance(grp, ClassicGroup)
        if not self._accept_joining_member(grp, q.member_id):
            grp.remove(q.member_id)
            self._reply(token, _join_error(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
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
            self._reply(token, _join_error(Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not grp.supports_protocols(q.protocol_type, protocols):
            self._reply(token, _join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
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
            self._reply(token, _join_error(Errors.MEMBER_ID_REQUIRED, new_member_id))
            return
        self._add_member(token, q, grp, new_member_id, protocols, rebalance_timeout, client_id, client_host)

    def _join_existing_member(self, token: Any, q: w.JoinGroupRequest, version: int, grp: ClassicGroup,
                              protocols: list[tuple[str, bytes]], rebalance_timeout: int, client_id: str,
                              client_host: str) -> None:
        member_id = q.member_id
        if grp.state == State.DEAD:
            self._reply(token, _join_error(Errors.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not grp.supports_protocols(q.protocol_type, protocols):
            self._reply(token, _join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in grp.pending_join_members:
            # the second JoinGroup of a new member (KIP-394), with the id it was given
            self._add_member(token, q, grp, member_id, protocols, rebalance_timeout, client_id, client_host)
            return
        try:
            self._validate_member(grp, member_id, q.group_instance_id)
        except _Error as e:
            self._reply(token, _join_error(e.code, member_id))
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
            self._reply(token, _join_error(Errors.UNKNOWN_MEMBER_ID, member_id))

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
            self._reply(tok, _join_error(Errors.FENCED_INSTANCE_ID, mid) if kind == "join-fenced"
                        else _sync_error(Errors.FENCED_INSTANCE_ID))

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
            self._reply(m.awaiting_join, _join_error(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
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
                raise _Error(Errors.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise _Error(Errors.FENCED_INSTANCE_ID)
        if member_id not in grp.members:
            raise _Error(Errors.UNKNOWN_MEMBER_ID)

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

    # ================================================================== SyncGroup
    def sync_group(self, token: Any, q: w.SyncGroupRequest, version: int, now: int) -> Result:
        self._begin(now)
        if not q.group_id:
            self._reply(token, _sync_error(Errors.INVALID_GROUP_ID))
            return self._end()
        grp = self.groups.get(q.group_id)
        if grp is None or (isinstance(grp, ClassicGroup) and grp.is_empty()) or \
                (isinstance(grp, ConsumerGroup) and not grp.members):
            self._reply(token, _sync_error(Errors.UNKNOWN_MEMBER_ID))
            return self._end()
        if isinstance(grp, ConsumerGroup):
            self._reply(token, _sync_error(Errors.UNKNOWN_MEMBER_ID))
            return self._end()
        err = self._validate_sync(grp, q)
        if err:
            self._reply(token, _sync_error(err))
        elif grp.state == State.PREPARING_REBALANCE:
            self._reply(token, _sync_error(Errors.REBALANCE_IN_PROGRESS))
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
        except _Error as e:
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

    # ================================================================== Heartbeat
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
            except _Error as e:
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

    # ================================================================== LeaveGroup
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
                except _Error as e:
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
            self._reply(m.awaiting_join, _join_error(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
            m.awaiting_join = None
        grp.remove(member_id)

    # ================================================================== offsets
    def offset_commit(self, token: Any, q: w.OffsetCommitRequest, version: int, now: int,
                      partition_errors: dict[tuple[str, int], int] | None = None) -> Result:
        """``partition_errors``: what the shell already refused per (topic, partition)
        (an unknown topic, an authorization failure): answered as given, not committed."""
        self._begin(now)
        R = w.OffsetCommitResponse
        refused = partition_errors or {}
        code = 0
        try:
            if not q.group_id:
                raise _Error(Errors.INVALID_GROUP_ID)
            self._validate_offset_commit(q, version)
        except _Error as e:
            code = e.code
        topics = []
        for t in q.topics:
            parts = []
            for p in t.partitions:
                err = code or refused.get((t.name, p.partition_index), 0)
                if not err and p.committed_metadata is not None and \
                        len(p.committed_metadata) > self.config.offset_metadata_max_bytes:
                    err = int(Errors.OFFSET_METADATA_TOO_LARGE)
                parts.append(R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=err))
                if not err:
                    ts = p.commit_timestamp if version == 1 and p.commit_timestamp >= 0 else now
                    self._write([rec.offset_commit(q.group_id, t.name, p.partition_index, p.committed_offset,
                                                   p.committed_leader_epoch, p.committed_metadata or "", ts)],
                                replay=True)
            topics.append(R.OffsetCommitResponseTopic(name=t.name, partitions=parts))
        self._reply(token, R(throttle_time_ms=0, topics=topics))
        return self._end()

    def _validate_offset_commit(self, q: w.OffsetCommitRequest, version: int) -> None:
        grp = self.groups.get(q.group_id)
        gen = q.generation_id_or_member_epoch
        instance_id = getattr(q, "group_instance_id", None)
        if grp is None:
            if gen < 0:
                grp = ClassicGroup(q.group_id)
                self.groups[q.group_id] = grp
            elif version >= 9:
                raise _Error(Errors.GROUP_ID_NOT_FOUND)
            else:
                raise _Error(Errors.ILLEGAL_GENERATION)
        if isinstance(grp, ConsumerGroup):
            if gen < 0 and not grp.members:
                return
            m = grp.members.get(q.member_id)
            if m is None:
                raise _Error(Errors.UNKNOWN_MEMBER_ID)
            if version < 9:
                raise _Error(Errors.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by "
                                                         "members using the modern group protocol")
            if gen != m.member_epoch:
                raise _Error(Errors.STALE_MEMBER_EPOCH)
            return
        if grp.state == State.DEAD:
            raise _Error(Errors.COORDINATOR_NOT_AVAILABLE)
        if gen < 0 and grp.state == State.EMPTY:
            return
        if gen >= 0 or q.member_id or instance_id is not None:
            self._validate_member(grp, q.member_id, instance_id)
            if gen != grp.generation_id:
                raise _Error(Errors.ILLEGAL_GENERATION)
        elif grp.state != State.EMPTY:
            raise _Error(Errors.UNKNOWN_MEMBER_ID)
        if grp.state == State.COMPLETING_REBALANCE:
            raise _Error(Errors.REBALANCE_IN_PROGRESS)
        if grp.state in (State.STABLE, State.PREPARING_REBALANCE):
            cm = grp.members[q.member_id]
            self._reschedule_heartbeat(grp, cm, cm.session_timeout_ms)

    def offset_fetch(self, group_id: str, wanted: list[tuple[str, list[int]]] | None,
                     member_id: str | None = None, member_epoch: int = -1) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str]]]]]:
        """(group error, [(topic, [(partition, offset, leader epoch, metadata)])]): the
        partitions asked for (-1 where nothing is committed), or every committed one when
        ``wanted`` is None; a KIP-848 member is checked as Kafka does (UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH)."""
        grp = self.groups.get(group_id)
        if isinstance(grp, ConsumerGroup) and not (member_id is None and member_epoch < 0):
            m = grp.members.get(member_id or "")
            if m is None:
                return int(Errors.UNKNOWN_MEMBER_ID), []
            if member_epoch != m.member_epoch:
                return int(Errors.STALE_MEMBER_EPOCH), []
        offsets = self.offsets.get(group_id, {})
        if wanted is None:
            by_topic: dict[str, list[int]] = {}
            for (t, p) in sorted(offsets):
                by_topic.setdefault(t, []).append(p)
            wanted = list(by_topic.items())
        out = []
        for topic, parts in wanted:
            rows = []
            for p in parts:
                o = offsets.get((topic, p))
                rows.append((p, -1, -1, "") if o is None else (p, o[0], o[1], o[2]))
            out.append((topic, rows))
        return 0, out

    def offset_delete(self, token: Any, q: w.OffsetDeleteRequest, now: int) -> Result:
        self._begin(now)
        R = w.OffsetDeleteResponse
        grp = self.groups.get(q.group_id)
        code = 0
        if not q.group_id:
            code = int(Errors.INVALID_GROUP_ID)
        elif grp is None or (isinstance(grp, ClassicGroup) and grp.state == State.DEAD):
            code = int(Errors.GROUP_ID_NOT_FOUND)
        elif isinstance(grp, ClassicGroup) and grp.state != State.EMPTY and grp.protocol_type != CONSUMER_PROTOCOL_TYPE:
            code = int(Errors.NON_EMPTY_GROUP)
        if code:
            self._reply(token, R(error_code=code, throttle_time_ms=0, topics=[]))
            return self._end()
        assert grp is not None
        topics = []
        records = []
        for t in q.topics:
            subscribed = self._is_subscribed(grp, t.name)
            parts = []
            for p in t.partitions:
                if subscribed:
                    parts.append(R.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                                                 error_code=Errors.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                parts.append(R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=0))
                if (t.name, p.partition_index) in self.offsets.get(q.group_id, {}):
                    records.append(rec.offset_tombstone(q.group_id, t.name, p.partition_index))
            topics.append(R.OffsetDeleteResponseTopic(name=t.name, partitions=parts))
        self._write(records, replay=True)
        self._reply(token, R(error_code=0, throttle_time_ms=0, topics=topics))
        return self._end()

    def _is_subscribed(self, grp: ClassicGroup | ConsumerGroup, topic: str) -> bool:
        if isinstance(grp, ConsumerGroup):
            return topic in grp.subscribed_topic_names()
        if grp.subscribed is not None:
            return topic in grp.subscribed
        return grp.protocol_type == CONSUMER_PROTOCOL_TYPE and grp.state != State.EMPTY

    # ================================================================== describe / list / delete
    def describe_groups(self, group_ids: list[str]) -> list[Any]:
        D = w.DescribeGroupsResponse
        out = []
        for gid in group_ids:
            grp = self.groups.get(gid)
            if not isinstance(grp, ClassicGroup):
                out.append(D.DescribedGroup(error_code=0, group_id=gid, group_state=State.DEAD.value,
                                            protocol_type="", protocol_data="", members=[]))
                continue
            stable = grp.state == State.STABLE
            members = [D.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(grp.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"") for m in grp.members.values()]
            out.append(D.DescribedGroup(error_code=0, group_id=gid, group_state=grp.state.value,
                                        protocol_type=grp.protocol_type or "",
                                        protocol_data=(grp.protocol_name or "") if stable else "",
                                        members=members))
        return out

    def list_groups(self, states: list[str], types: list[str]) -> list[Any]:
        L = w.ListGroupsResponse
        want_states = {s.strip().lower() for s in states}
        want_types = {t.strip().lower() for t in types}
        out = []
        for gid, grp in self.groups.items():
            if isinstance(grp, ClassicGroup):
                state, kind, ptype = grp.state.value, "classic", grp.protocol_type or ""
            else:
                state, kind, ptype = grp.state(), "consumer", CONSUMER_PROTOCOL_TYPE
            if want_states and state.lower() not in want_states:
                continue
            if want_types and kind not in want_types:
                continue
            out.append(L.ListedGroup(group_id=gid, protocol_type=ptype, group_state=state, group_type=kind))
        return out

    def delete_groups(self, token: Any, group_ids: list[str], now: int,
                      refused: dict[str, int] | None = None) -> Result:
        self._begin(now)
        D = w.DeleteGroupsResponse
        results = []
        records: list[rec.Record] = []
        for gid in group_ids:
            code = (refused or {}).get(gid, 0)
            grp = self.groups.get(gid)
            if not code:
                if grp is None or (isinstance(grp, ClassicGroup) and grp.state == State.DEAD):
                    code = int(Errors.GROUP_ID_NOT_FOUND)
                elif isinstance(grp, ClassicGroup) and grp.state != State.EMPTY:
                    code = int(Errors.NON_EMPTY_GROUP)
                elif isinstance(grp, ConsumerGroup) and grp.members:
                    code = int(Errors.NON_EMPTY_GROUP)
            if not code:
                assert grp is not None
                for (t, p) in sorted(self.offsets.get(gid, {})):
                    records.append(rec.offset_tombstone(gid, t, p))
                if isinstance(grp, ClassicGroup):
                    records.append(rec.group_metadata(gid, None))
                else:
                    records.extend(self._consumer_group_tombstones(grp))
            results.append(D.DeletableGroupResult(group_id=gid, error_code=code))
        self._write(records, replay=True)
        for gid in group_ids:
            # an empty classic group with no GroupMetadata record (a simple group) goes too
            if any(r.group_id == gid and r.error_code == 0 for r in results):
                self.groups.pop(gid, None)
        self._reply(token, D(throttle_time_ms=0, results=results))
        return self._end()

    def _consumer_group_tombstones(self, grp: ConsumerGroup) -> list[rec.Record]:
        gid = grp.group_id
        out = [rec.current_assignment(gid, m, None) for m in grp.members]
        out += [rec.target_assignment_member(gid, m, None) for m in grp.members]
        out.append(rec.target_assignment_epoch(gid, None))
        out += [rec.consumer_member_subscription(gid, m, None) for m in grp.members]
        out.append(rec.consumer_group_subscription_metadata(gid, None))
        out.append(rec.consumer_group_epoch(gid, None))
        return out

    def _delete_consumer_group_records(self, grp: ConsumerGroup) -> None:
        """An empty consumer group a classic member joins becomes a classic group."""
        self._write(self._consumer_group_tombstones(grp), replay=True)
        self.groups.pop(grp.group_id, None)

    # ================================================================== KIP-848
    def consumer_group_heartbeat(self, token: Any, q: w.ConsumerGroupHeartbeatRequest, client_id: str,
                                 client_host: str, new_member_id: str, now: int) -> Result:
        self._begin(now)
        R = w.ConsumerGroupHeartbeatResponse
        try:
            self._validate_heartbeat(q)
            if q.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                resp = self._consumer_leave(q)
            else:
                resp = self._consumer_heartbeat(q, client_id, client_host, new_member_id)
        except _Error as e:
            self._records = []
            resp = R(throttle_time_ms=0, error_code=e.code, error_message=e.message, member_id=None,
                     member_epoch=0, heartbeat_interval_ms=0, assignment=None)
        self._reply(token, resp)
        return self._end()

    def _validate_heartbeat(self, q: w.ConsumerGroupHeartbeatRequest) -> None:
        def not_empty(v: str | None, msg: str) -> None:
            if v is not None and not v.strip():
                raise _Error(Errors.INVALID_REQUEST, msg)
        if not q.group_id or not q.group_id.strip():
            raise _Error(Errors.INVALID_REQUEST, "GroupId can't be empty.")
        not_empty(q.instance_id, "InstanceId can't be empty.")
        not_empty(q.rack_id, "RackId can't be empty.")
        if q.member_epoch > 0 or q.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not q.member_id or not q.member_id.strip():
                raise _Error(Errors.INVALID_REQUEST, "MemberId can't be empty.")
        elif q.member_epoch == 0:
            if q.rebalance_timeout_ms == -1:
                raise _Error(Errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if q.topic_partitions is None or q.topic_partitions:
                raise _Error(Errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if not q.subscribed_topic_names:
                raise _Error(Errors.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        elif q.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not q.member_id or not q.member_id.strip():
                raise _Error(Errors.INVALID_REQUEST, "MemberId can't be empty.")
            if q.instance_id is None:
                raise _Error(Errors.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise _Error(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
        if q.server_assignor is not None and q.server_assignor not in self.config.consumer_assignors:
            raise _Error(Errors.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {q.server_assignor} is not supported. Supported assignors: "
                         f"{', '.join(self.config.consumer_assignors)}.")

    def _consumer_group(self, group_id: str, create: bool) -> ConsumerGroup:
        grp = self.groups.get(group_id)
        if grp is None:
            if not create:
                raise _Error(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
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
            raise _Error(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return grp

    def _consumer_heartbeat(self, q: w.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str,
                            new_member_id: str) -> Any:
        R = w.ConsumerGroupHeartbeatResponse
        create = q.member_epoch == 0
        grp = self._consumer_group(q.group_id, create)
        member_id = q.member_id or new_member_id
        if member_id not in grp.members and len(grp.members) >= self.config.consumer_max_size:
            raise _Error(Errors.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                                        f"capacity of {self.config.consumer_max_size} members.")
        owned = None if q.topic_partitions is None else [(t.topic_id, list(t.partitions)) for t in q.topic_partitions]
        member = self._subscribing_member(grp, member_id, q, owned, create)
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
        updated.client_id, updated.client_host = client_id, client_host
        bump = False
        records: list[rec.Record] = []
        if member_id not in grp.members or updated.subscription_key() != member.subscription_key():
            records.append(rec.consumer_member_subscription(grp.group_id, member_id, _member_value(updated)))
            bump = (member_id not in grp.members
                    or updated.subscribed_topic_names != member.subscribed_topic_names
                    or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        group_epoch = grp.group_epoch
        if bump or not grp.subscription_metadata and grp.subscribed_topic_names(updated):
            metadata = self._subscription_metadata(grp.subscribed_topic_names(updated))
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
                raise _Error(Errors.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
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
        full = q.member_epoch == 0 or (q.rebalance_timeout_ms != -1 and q.subscribed_topic_names is not None
                                       and q.topic_partitions is not None)
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
                    raise _Error(Errors.UNRELEASED_INSTANCE_ID,
                                 f"Static member {existing.member_id} with instance id {q.instance_id} "
                                 "is not released yet.")
                # the static member rejoins with a new member id: it takes the old one's place
                self._replace_static_consumer_member(grp, existing, member_id)
                return grp.members[member_id]
            if existing is None:
                raise _Error(Errors.UNKNOWN_MEMBER_ID, f"Instance id {q.instance_id} is unknown.")
            if existing.member_id != member_id:
                raise _Error(Errors.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                        f"{q.instance_id} is fenced by {existing.member_id}.")
        m = grp.members.get(member_id)
        if m is None:
            if not create:
                raise _Error(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {grp.group_id}.")
            return ConsumerMember(member_id)
        if q.member_epoch > m.member_epoch:
            raise _Error(Errors.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({q.member_epoch}) than the one "
                         f"known by the group coordinator ({m.member_epoch}). The member must abandon all its "
                         "partitions and rejoin.")
        if q.member_epoch < m.member_epoch:
            if q.member_epoch != m.previous_member_epoch or not _is_subset(owned, m.assigned_partitions):
                raise _Error(Errors.FENCED_MEMBER_EPOCH,
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
        subs = {mid: m.subscribed_topic_names for mid, m in grp.members.items()}
        if updated is not None:
            subs[updated.member_id] = updated.subscribed_topic_names
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
                raise _Error(Errors.UNKNOWN_MEMBER_ID, f"Member {q.member_id} is not a member of group {q.group_id}.")
            self._fence_consumer_member(grp, m)
            return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=q.member_id,
                     member_epoch=q.member_epoch, heartbeat_interval_ms=0, assignment=None)
        sm = grp.static_member(q.instance_id)
        if sm is None:
            raise _Error(Errors.UNKNOWN_MEMBER_ID, f"Instance id {q.instance_id} is unknown.")
        if sm.member_id != q.member_id:
            raise _Error(Errors.FENCED_INSTANCE_ID, f"Static member {q.member_id} with instance id "
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
        metadata = self._subscription_metadata(grp.subscribed_topic_names(removing=m.member_id))
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
                                target_assignment=parts(grp.target_assignment.get(m.member_id, {})))
                       for m in grp.members.values()]
            out.append(D.DescribedGroup(error_code=0, error_message=None, group_id=gid,
                                        group_state=grp.state(), group_epoch=grp.group_epoch,
                                        assignment_epoch=grp.assignment_epoch, assignor_name=assignor,
                                        members=members, authorized_operations=-2147483648))
        return out


# ---------------------------------------------------------------------- helpers
def _hb_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def _join_key(group_id: str) -> str:
    return f"join-{group_id}"


def _sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def _session_key(group_id: str, member_id: str) -> str:
    return f"session-timeout-{group_id}-{member_id}"


def _rebalance_key(group_id: str, member_id: str) -> str:
    return f"rebalance-timeout-{group_id}-{member_id}"


def _join_error(code: int, member_id: str) -> Any:
    return w.JoinGroupResponse(throttle_time_ms=0, error_code=int(code), generation_id=NO_GENERATION,
                               protocol_type=None, protocol_name=None, leader="", skip_assignment=False,
                               member_id=member_id, members=[])


def _sync_error(code: int) -> Any:
    return w.SyncGroupResponse(throttle_time_ms=0, error_code=int(code), protocol_type=None, protocol_name=None,
                               assignment=b"")


def _classic_from_record(group_id: str, v: Any) -> ClassicGroup:
    members = [ClassicMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                             m.session_timeout, v.protocol_type, [(v.protocol, bytes(m.subscription))],
                             bytes(m.assignment))
               for m in v.members]
    grp = ClassicGroup(group_id, state=State.STABLE if members else State.EMPTY, generation_id=v.generation,
                       protocol_type=v.protocol_type or None, protocol_name=v.protocol, leader_id=v.leader,
                       current_state_timestamp=None if v.current_state_timestamp == -1 else v.current_state_timestamp)
    leader = grp.leader_id
    for m in members:
        grp.add(m)
    grp.leader_id = leader if leader in grp.members else next(iter(grp.members), None)
    grp.subscribed = subscribed_topics(grp)
    return grp


def _is_subset(owned: list[tuple[uuid.UUID, list[int]]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(p in assigned.get(tid, ()) for tid, ps in owned for p in ps)


def _frozen_assign(a: Assignment) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((t, p) for t, ps in a.items() for p in ps)


def _topic_partitions(cls: Any, a: Assignment) -> list[Any]:
    return [cls(topic_id=tid, partitions=sorted(ps)) for tid, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps]


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
