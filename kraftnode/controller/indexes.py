"""What the active controller asks of the whole cluster, kept up to date on replay.

Kafka's ReplicationControlManager answers "which partitions have broker B in their ISR" from
``BrokersToIsrs`` and "is any partition leaderless / not led by its preferred replica" from
sets it updates as records replay, never by walking every partition: at a million partitions a
scan per write is the difference between a controller and a stalled one (issue 39). These are
those indexes, for :class:`~kraftnode.controller.view.ControllerView`:

* ``isr_members`` -- broker id -> partitions whose ISR holds it (BrokersToIsrs);
* ``leaderless`` -- partitions with no leader (the offline-partitions set);
* ``imbalanced`` -- partitions not led by their first replica (``imbalancedPartitions``);
* ``leads`` -- broker id -> how many partitions it leads while in their ISR (a broker with
  leaderships cannot shut down at once);
* ``partition_count`` -- how many partitions the image holds (GlobalPartitionCount);
* ``dotted`` -- topic names with '.' or '_', by their unified form ('.' -> '_'), for the
  collision check of CreateTopics.

Partition sets answer in the image's own order (topics in creation order, partitions by id),
so the records a decision generates come out as they did when it walked the image.
:meth:`PartitionIndexes.differences` recomputes everything from an image: the simulation calls
it after every committed batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kraftnode.protocol.generated.metadata import PartitionRecord

__all__ = ["PartitionIndexes", "unified"]

NO_LEADER = -1
Key = tuple[uuid.UUID, int]


def unified(name: str) -> str:
    """Topic names that differ only by '.' and '_' collide in metric names (Topic.unifyName)."""
    return name.replace(".", "_")


def _preferred(p: PartitionRecord) -> bool:
    return p.leader == (p.replicas[0] if p.replicas else NO_LEADER)


class PartitionIndexes:
    def __init__(self) -> None:
        self.isr_members: dict[int, set[Key]] = {}
        self.leaderless: set[Key] = set()
        self.imbalanced: set[Key] = set()
        self.leads: dict[int, int] = {}
        self.partition_count = 0
        self.dotted: dict[str, list[str]] = {}
        #: topic id -> its position in the image's topic order (creation order)
        self.topic_order: dict[uuid.UUID, int] = {}
        self._next_topic = 0

    @classmethod
    def of(cls, topics: Iterable[tuple[uuid.UUID, str]],
           partitions: Iterable[tuple[uuid.UUID, int, PartitionRecord]]) -> PartitionIndexes:
        """Indexes of an image: its topics in order (id, name) and every partition."""
        ix = cls()
        for tid, name in topics:
            ix.add_topic(tid, name)
        for tid, pid, p in partitions:
            ix.add(tid, pid, p)
        return ix

    def add_partitions(self, tid: uuid.UUID, partitions: Iterable[tuple[int, PartitionRecord]]) -> None:
        """Index a topic's partitions (id, record): ISR members, leaderless, preferred-leader
        imbalance, leaderships per broker. One loop for many (a whole image is indexed this way:
        a call per partition cost a third more), written for speed (no set made to be thrown
        away, no call per check); what it keeps is what _preferred and the sets say."""
        members = self.isr_members
        leaderless, imbalanced, leads = self.leaderless, self.imbalanced, self.leads
        n = 0
        for pid, p in partitions:
            key = (tid, pid)
            n += 1
            isr = p.isr
            for b in isr:
                keys = members.get(b)
                if keys is None:
                    members[b] = {key}
                else:
                    keys.add(key)
            leader = p.leader
            if leader == NO_LEADER:
                leaderless.add(key)
            elif leader in isr:
                leads[leader] = leads.get(leader, 0) + 1
            replicas = p.replicas
            if leader != (replicas[0] if replicas else NO_LEADER):
                imbalanced.add(key)
        self.partition_count += n

    def copy(self) -> PartitionIndexes:
        c = PartitionIndexes()
        c.isr_members = {b: set(keys) for b, keys in self.isr_members.items()}
        c.leaderless = set(self.leaderless)
        c.imbalanced = set(self.imbalanced)
        c.leads = dict(self.leads)
        c.partition_count = self.partition_count
        c.dotted = {u: list(names) for u, names in self.dotted.items()}
        c.topic_order = dict(self.topic_order)
        c._next_topic = self._next_topic
        return c

    # ------------------------------------------------------------------ replay
    def add_topic(self, tid: uuid.UUID, name: str) -> None:
        if tid not in self.topic_order:
            self.topic_order[tid] = self._next_topic
            self._next_topic += 1
        if "." in name or "_" in name:
            names = self.dotted.setdefault(unified(name), [])
            if name not in names:
                names.append(name)

    def remove_topic(self, tid: uuid.UUID, name: str | None, partitions: Iterable[tuple[int, PartitionRecord]]) -> None:
        for pid, p in partitions:
            self.remove(tid, pid, p)
        self.topic_order.pop(tid, None)
        if name is not None and ("." in name or "_" in name):
            names = self.dotted.get(unified(name))
            if names is not None and name in names:
                names.remove(name)
                if not names:
                    del self.dotted[unified(name)]

    def add(self, tid: uuid.UUID, pid: int, p: PartitionRecord) -> None:
        """One partition replayed (on every controller): :meth:`add_partitions`, which holds the rules."""
        self.add_partitions(tid, ((pid, p),))

    def remove(self, tid: uuid.UUID, pid: int, p: PartitionRecord) -> None:
        key = (tid, pid)
        self.partition_count -= 1
        for b in p.isr:
            keys = self.isr_members.get(b)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.isr_members[b]
        self.leaderless.discard(key)
        self.imbalanced.discard(key)
        if p.leader != NO_LEADER and p.leader in p.isr:
            left = self.leads.get(p.leader, 0) - 1
            if left > 0:
                self.leads[p.leader] = left
            else:
                self.leads.pop(p.leader, None)

    def replace(self, tid: uuid.UUID, pid: int, old: PartitionRecord | None, new: PartitionRecord | None) -> None:
        if old is not None:
            self.remove(tid, pid, old)
        if new is not None:
            self.add(tid, pid, new)

    # ------------------------------------------------------------------ queries
    def in_order(self, keys: Iterable[Key]) -> list[Key]:
        """``keys`` in the image's order: topics by creation, partitions by id."""
        order = self.topic_order
        return sorted(keys, key=lambda k: (order.get(k[0], -1), k[1]))

    def with_isr_member(self, broker_id: int) -> list[Key]:
        return self.in_order(self.isr_members.get(broker_id, ()))

    def colliding_with(self, name: str) -> str | None:
        """The first existing topic whose name collides with ``name`` ('.' vs '_')."""
        names = self.dotted.get(unified(name))
        return names[0] if names else None

    # ------------------------------------------------------------------ checking
    def differences(self, topics: Iterable[tuple[uuid.UUID, str]],
                    partitions: Iterable[tuple[uuid.UUID, int, PartitionRecord]]) -> list[str]:
        """What differs from indexes recomputed from the image (empty when they agree)."""
        fresh = PartitionIndexes.of(topics, partitions)
        out: list[str] = []
        for what in ("isr_members", "leaderless", "imbalanced", "leads", "partition_count", "dotted"):
            mine, theirs = getattr(self, what), getattr(fresh, what)
            if mine != theirs:
                out.append(f"{what}: kept {_short(mine)}, recomputed {_short(theirs)}")
        if sorted(self.topic_order, key=self.topic_order.__getitem__) != list(fresh.topic_order):
            out.append("topic order differs from the image's")
        return out


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 300 else text[:300] + "..."
