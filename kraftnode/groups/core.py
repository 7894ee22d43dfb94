"""What every part of the group coordinator shares: its state (groups and committed offsets),
the replay of committed group records into it, its timers, and the :class:`Result` an
operation builds (records to append, answers to send). The protocols are mixins over this
(:mod:`kraftnode.groups.classic_protocol`, :mod:`kraftnode.groups.consumer_protocol`,
:mod:`kraftnode.groups.offsets`), composed by :class:`kraftnode.groups.coordinator.GroupCoordinator`;
see that module for how results reach the log and the clients.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftnode.errors import RemoteError
from kraftnode.groups import records as rec
from kraftnode.groups.classic import (
    ClassicGroup,
    ClassicMember,
    State,
    subscribed_topics,
)
from kraftnode.groups.config import GroupConfig
from kraftnode.groups.consumer import ConsumerGroup

__all__ = ["CoordinatorCore", "GroupError", "NO_GENERATION", "OffsetEntry", "Result", "Topics",
           "UNKNOWN_MEMBER_ID"]


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


class GroupError(RemoteError):
    """An operation refused with a Kafka error code (and maybe a message)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


class CoordinatorCore:
    """Groups and committed offsets of one coordinator, and the plumbing of its operations."""

    def __init__(self, config: GroupConfig, topics: Callable[[], Topics]) -> None:
        self.config = config
        self.topics = topics
        self.groups: dict[str, ClassicGroup | ConsumerGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        self._timers: dict[str, tuple[int, Callable[[], None]]] = {}
        self._now = 0
        self._records: list[rec.Record] = []
        self._replies: list[tuple[Any, Any]] = []

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

    # ================================================================== across the protocols
    def _validate_member(self, grp: ClassicGroup, member_id: str, instance_id: str | None) -> None:
        """A classic member is known and its instance id matches (classic_protocol)."""
        raise NotImplementedError

    def _reschedule_heartbeat(self, grp: ClassicGroup, m: ClassicMember, timeout_ms: int) -> None:
        """Restart a classic member's session timer (classic_protocol)."""
        raise NotImplementedError


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

