"""A classic-protocol group and its members (Kafka 3.9's ClassicGroup / ClassicGroupMember).

Pure data with the group's own bookkeeping (leader, protocol votes, members awaiting a
JoinGroup or SyncGroup answer); the protocol's rules are in
:mod:`kraftnode.groups.coordinator`.  A member awaiting an answer holds the caller's
opaque *token* for that request: completing it hands (token, response) back to the
shell, which answers the waiting request.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClassicGroup", "ClassicMember", "State", "CONSUMER_PROTOCOL_TYPE", "subscribed_topics"]

CONSUMER_PROTOCOL_TYPE = "consumer"
EMPTY_ASSIGNMENT = b""


class State(enum.Enum):
    """ClassicGroupState, with the names DescribeGroups and ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# ClassicGroupState.validPreviousStates
_VALID_PREVIOUS = {
    State.EMPTY: {State.PREPARING_REBALANCE},
    State.PREPARING_REBALANCE: {State.STABLE, State.COMPLETING_REBALANCE, State.EMPTY},
    State.COMPLETING_REBALANCE: {State.PREPARING_REBALANCE},
    State.STABLE: {State.COMPLETING_REBALANCE},
    State.DEAD: {State.STABLE, State.PREPARING_REBALANCE, State.COMPLETING_REBALANCE, State.EMPTY, State.DEAD},
}


@dataclass
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = EMPTY_ASSIGNMENT
    awaiting_join: Any = None      # the JoinGroup token waiting for the join phase to end
    awaiting_sync: Any = None      # the SyncGroup token waiting for the leader's assignment
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, md in self.protocols:
            if name == protocol:
                return md
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set[str]) -> str:
        """The member's preferred protocol among ``candidates`` (its first one there)."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of the candidates")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        """ClassicGroupMember.hasSatisfiedHeartbeat: a member waiting for a JoinGroup or
        SyncGroup answer counts as alive, unless it is new (a new member that never
        completed a join may be expired while it waits)."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass
class ClassicGroup:
    group_id: str
    state: State = State.EMPTY
    previous_state: State = State.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)   # instance id -> member id
    new_member_added: bool = False
    supported_protocols: dict[str, int] = field(default_factory=dict)
    subscribed: set[str] | None = None

    # ------------------------------------------------------------------ queries
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_join_members

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[State.PREPARING_REBALANCE]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def is_empty(self) -> bool:
        return self.state == State.EMPTY

    def candidate_protocols(self) -> set[str]:
        return {p for p, n in self.supported_protocols.items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {n for n, _ in protocols}
        if self.state == State.EMPTY:
            return bool(protocol_type) and bool(names)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols.get(n, 0) == len(self.members) for n in names))

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            p = m.vote(candidates)
            votes[p] = votes.get(p, 0) + 1
        return max(votes.items(), key=lambda kv: kv[1])[0]

    # ------------------------------------------------------------------ changes
    def transition(self, state: State, now: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise ValueError(f"group {self.group_id}: invalid transition {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = now

    def _count(self, m: ClassicMember, delta: int) -> None:
        for name, _ in m.protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def add(self, m: ClassicMember, token: Any = None) -> None:
        if m.group_instance_id is not None:
            self.static_members[m.group_instance_id] = m.member_id
        if not self.members:
            self.protocol_type = m.protocol_type
        if self.leader_id is None:
            self.leader_id = m.member_id
        self.members[m.member_id] = m
        self._count(m, 1)
        m.awaiting_join = token
        self.pending_join_members.discard(m.member_id)

    def remove(self, member_id: str) -> None:
        m = self.members.pop(member_id, None)
        if m is not None:
            self._count(m, -1)
            if m.group_instance_id is not None:
                self.static_members.pop(m.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, m: ClassicMember, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, token: Any) -> None:
        self._count(m, -1)
        m.protocols = protocols
        self._count(m, 1)
        m.rebalance_timeout_ms = rebalance_timeout_ms
        m.session_timeout_ms = session_timeout_ms
        m.awaiting_join = token

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for m in self.members.values():
            if m.awaiting_join is not None:
                self.leader_id = m.member_id
                return True
        return False

    def init_next_generation(self, now: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed = subscribed_topics(self)
            self.transition(State.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.subscribed = subscribed_topics(self)
            self.transition(State.EMPTY, now)
        self.pending_sync_members.clear()

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str,
                              complete: Callable[[Any, str, str], None]) -> ClassicMember:
        """The static member ``instance_id`` rejoins with a new member id; the old one's
        waiting requests are answered FENCED_INSTANCE_ID (``complete(token, kind, member)``)."""
        old = self.members.pop(old_member_id)
        if old.awaiting_join is not None:
            complete(old.awaiting_join, "join-fenced", old_member_id)
        if old.awaiting_sync is not None:
            complete(old.awaiting_sync, "sync-fenced", old_member_id)
        new = ClassicMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                            old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                            list(old.protocols), old.assignment)
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new


def subscribed_topics(group: ClassicGroup) -> set[str] | None:
    """The topics a ``consumer``-type group's members subscribe to (ConsumerProtocol
    subscription, any version: int16 version, then an array of topic names); None when
    not known (another protocol type, or unreadable metadata)."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    if not group.members:
        return set()
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    try:
        for m in group.members.values():
            md = m.metadata(group.protocol_name)
            count = int.from_bytes(md[2:6], "big", signed=True)
            pos = 6
            for _ in range(max(count, 0)):
                n = int.from_bytes(md[pos:pos + 2], "big", signed=True)
                pos += 2
                if n < 0 or pos + n > len(md):
                    return None
                topics.add(md[pos:pos + n].decode())
                pos += n
    except (ValueError, UnicodeDecodeError):
        return None
    return topics
