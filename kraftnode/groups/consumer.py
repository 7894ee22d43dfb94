"""KIP-848 consumer groups: the group, its members, the server-side assignors and the
reconciliation of a member's assignment towards the group's target assignment (Kafka
3.9's ConsumerGroup, ConsumerGroupMember, UniformAssignor/RangeAssignor and
CurrentAssignmentBuilder).

A consumer group's state is exactly what its records say (Kafka replays them, and so do
we: :meth:`ConsumerGroup.replay`); an operation writes records and the coordinator
replays them at once, as Kafka's runtime does for these groups.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftnode.groups.regex import matching_topics

__all__ = ["Assignment", "ConsumerGroup", "ConsumerMember", "MemberState", "assign", "next_assignment"]

# topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # current assignment
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def copy(self) -> ConsumerMember:
        return ConsumerMember(
            self.member_id, self.instance_id, self.rack_id, self.client_id, self.client_host,
            list(self.subscribed_topic_names), self.subscribed_topic_regex, self.rebalance_timeout_ms,
            self.server_assignor, self.member_epoch, self.previous_member_epoch, self.state,
            _copy(self.assigned_partitions), _copy(self.partitions_pending_revocation))

    def subscription_key(self) -> tuple[Any, ...]:
        """What ConsumerGroupMemberMetadataValue holds (a change writes that record)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                tuple(self.subscribed_topic_names), self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor)

    def assignment_key(self) -> tuple[Any, ...]:
        return (self.member_epoch, self.previous_member_epoch, int(self.state),
                _frozen(self.assigned_partitions), _frozen(self.partitions_pending_revocation))

    def subscribed_topics(self, topics: Iterable[str]) -> list[str]:
        """Its topic names, then those of ``topics`` its regex matches (KIP-848: a member
        may subscribe with both; an empty regex subscribes to nothing, as in Kafka)."""
        if not self.subscribed_topic_regex:
            return self.subscribed_topic_names
        matched = matching_topics(self.subscribed_topic_regex, topics)
        return self.subscribed_topic_names + sorted(matched - set(self.subscribed_topic_names))

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch


def _copy(a: Assignment) -> Assignment:
    return {t: set(p) for t, p in a.items()}


def _frozen(a: Assignment) -> frozenset[tuple[uuid.UUID, frozenset[int]]]:
    return frozenset((t, frozenset(p)) for t, p in a.items() if p)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = -1
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    # topic name -> (topic id, number of partitions): ConsumerGroupPartitionMetadataValue
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    # ------------------------------------------------------------------ queries
    def state(self) -> str:
        """ConsumerGroup.ConsumerGroupState as DescribeGroups/ListGroups name it."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def partition_owner_epoch(self, topic_id: uuid.UUID, partition: int, exclude: str) -> int:
        """The epoch of the member (other than ``exclude``) that holds the partition,
        assigned or pending revocation; -1 when it is free (ConsumerGroup.currentPartitionEpoch)."""
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            if partition in m.assigned_partitions.get(topic_id, ()) or \
                    partition in m.partitions_pending_revocation.get(topic_id, ()):
                return m.member_epoch
        return -1

    def subscribed_topic_names(self, replacing: ConsumerMember | None = None,
                               removing: str | None = None, topics: Iterable[str] = ()) -> set[str]:
        """The topics the group subscribes to: its members' names, and of ``topics`` those
        their regexes match (Kafka's ConsumerGroup.computeSubscribedTopicNames with the
        resolved regular expressions), ``replacing`` standing in for its old self."""
        names: set[str] = set()
        topics = list(topics)
        for mid, m in self.members.items():
            if mid == removing or (replacing is not None and mid == replacing.member_id):
                continue
            names.update(m.subscribed_topics(topics))
        if replacing is not None:
            names.update(replacing.subscribed_topics(topics))
        return names

    def has_regex_subscriptions(self) -> bool:
        return any(m.subscribed_topic_regex for m in self.members.values())

    # ------------------------------------------------------------------ replay
    def replay(self, key_version: int, key: Any, value: Any | None) -> None:
        if key_version == 3:
            if value is not None:
                self.group_epoch = value.epoch
        elif key_version == 4:
            self.subscription_metadata = {} if value is None else {
                t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics}
        elif key_version == 5:
            if value is None:
                self.members.pop(key.member_id, None)
                return
            m = self.members.setdefault(key.member_id, ConsumerMember(key.member_id))
            m.instance_id = value.instance_id
            m.rack_id = value.rack_id
            m.client_id = value.client_id
            m.client_host = value.client_host
            m.subscribed_topic_names = list(value.subscribed_topic_names)
            m.subscribed_topic_regex = value.subscribed_topic_regex
            m.rebalance_timeout_ms = value.rebalance_timeout_ms
            m.server_assignor = value.server_assignor
        elif key_version == 6:
            self.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif key_version == 7:
            if value is None:
                self.target_assignment.pop(key.member_id, None)
            else:
                self.target_assignment[key.member_id] = {
                    t.topic_id: set(t.partitions) for t in value.topic_partitions}
        elif key_version == 8:
            m2 = self.members.get(key.member_id)
            if value is None:
                if m2 is not None:
                    m2.member_epoch = m2.previous_member_epoch = 0
                    m2.state = MemberState.STABLE
                    m2.assigned_partitions = {}
                    m2.partitions_pending_revocation = {}
                return
            if m2 is None:
                m2 = self.members.setdefault(key.member_id, ConsumerMember(key.member_id))
            m2.member_epoch = value.member_epoch
            m2.previous_member_epoch = value.previous_member_epoch
            try:
                m2.state = MemberState(value.state)
            except ValueError:
                m2.state = MemberState.UNKNOWN
            m2.assigned_partitions = {t.topic_id: set(t.partitions) for t in value.assigned_partitions}
            m2.partitions_pending_revocation = {
                t.topic_id: set(t.partitions) for t in value.partitions_pending_revocation}


# ---------------------------------------------------------------------- assignors
def assign(assignor: str, members: dict[str, list[str]], topics: dict[str, tuple[uuid.UUID, int]],
           previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """The target assignment: member id -> partitions, from each member's subscribed topic
    names, the subscribed topics' ids and partition counts, and the previous target.

    ``range``: per topic, the members subscribed to it in member-id order get contiguous
    ranges, the first ``partitions % members`` one more (Kafka's RangeAssignor).
    ``uniform``: balanced and sticky: every member keeps what it had while it is within
    its fair share, and the rest goes to the eligible member with the fewest partitions
    (the intent of Kafka's UniformAssignor; the placement of moved partitions may differ
    from Kafka's own builders)."""
    out: dict[str, Assignment] = {m: {} for m in members}
    subscribers: dict[str, list[str]] = {}
    for mid in sorted(members):
        for t in members[mid]:
            if t in topics:
                subscribers.setdefault(t, []).append(mid)
    if assignor == "range":
        for t in sorted(subscribers):
            tid, n = topics[t]
            subs = subscribers[t]
            per, extra = divmod(n, len(subs))
            start = 0
            for i, mid in enumerate(subs):
                count = per + (1 if i < extra else 0)
                if count:
                    out[mid][tid] = set(range(start, start + count))
                start += count
        return out
    partitions = [(topics[t][0], p, t) for t in sorted(subscribers) for p in range(topics[t][1])]
    eligible = {mid: {t for t in members[mid] if t in subscribers} for mid in members}
    total = len(partitions)
    active = [m for m in sorted(members) if eligible[m]]
    quota = {m: -(-total // len(active)) for m in active} if active else {}
    counts = {m: 0 for m in members}
    unassigned = []
    for tid, p, tname in partitions:
        owner = next((m for m in sorted(previous) if m in members and tname in eligible[m]
                      and p in previous[m].get(tid, ()) and counts[m] < quota.get(m, 0)), None)
        if owner is None:
            unassigned.append((tid, p, tname))
        else:
            out[owner].setdefault(tid, set()).add(p)
            counts[owner] += 1
    for tid, p, tname in unassigned:
        cands = [m for m in active if tname in eligible[m]]
        if not cands:
            continue
        owner = min(cands, key=lambda m: (counts[m], m))
        out[owner].setdefault(tid, set()).add(p)
        counts[owner] += 1
    return out


# ---------------------------------------------------------------------- reconciliation
def next_assignment(member: ConsumerMember, target_epoch: int, target: Assignment,
                    owner_epoch: Any, owned: list[tuple[uuid.UUID, list[int]]] | None) -> ConsumerMember:
    """Kafka's CurrentAssignmentBuilder.build: the member's next state towards the target.

    ``owner_epoch(topic id, partition)`` -> the epoch of another member holding the
    partition (-1 if free); ``owned``: the partitions the member says it owns (None when
    the heartbeat did not say).  Raises ValueError("fenced") for a member in an unknown
    state that still owns partitions."""

    def owns_revoked(revoke: Assignment) -> bool:
        if owned is None:
            return True
        return any(p in revoke.get(tid, ()) for tid, parts in owned for p in parts)

    def compute(epoch: int, current: Assignment) -> ConsumerMember:
        unreleased = False
        assigned: Assignment = {}
        revoking: Assignment = {}
        pending: Assignment = {}
        for tid in set(target) | set(current):
            tgt = target.get(tid, set())
            cur = current.get(tid, set())
            keep = cur & tgt
            rev = cur - keep
            add = tgt - keep
            free = {p for p in add if owner_epoch(tid, p) == -1}
            if free != add:
                unreleased = True
            if keep:
                assigned[tid] = keep
            if rev:
                revoking[tid] = rev
            if free:
                pending[tid] = free
        n = member.copy()
        if revoking and owns_revoked(revoking):
            n.state = MemberState.UNREVOKED_PARTITIONS
            n.previous_member_epoch, n.member_epoch = member.member_epoch, epoch
            n.assigned_partitions = assigned
            n.partitions_pending_revocation = revoking
            return n
        for tid, parts in pending.items():
            assigned.setdefault(tid, set()).update(parts)
        n.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        n.previous_member_epoch, n.member_epoch = member.member_epoch, target_epoch
        n.assigned_partitions = assigned
        n.partitions_pending_revocation = {}
        return n

    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return compute(member.member_epoch, member.assigned_partitions)
        return member
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked(member.partitions_pending_revocation):
            return member
        return compute(member.member_epoch + 1, member.assigned_partitions)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return compute(member.member_epoch, member.assigned_partitions)
    if owned is None or owned:
        raise ValueError("fenced")
    return compute(target_epoch, member.assigned_partitions)
