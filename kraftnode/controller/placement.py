"""Replica placement as Kafka's StripedReplicaPlacer does it.

Brokers are grouped by rack (no rack is a rack of its own). Partition after partition, the
first replica (the preferred leader) is an unfenced broker taken from the racks in turn; the
other replicas come from the following racks, one per rack, unfenced brokers before fenced
ones. Within a rack the brokers are walked round-robin from a random offset; once every
unfenced broker has led a partition (an "epoch"), racks and brokers are shuffled. So leaders
and replicas spread evenly over racks and brokers, fenced brokers are used only when the
replication factor needs them, and a broker in controlled shutdown, or with every log directory
cordoned (KIP-1066), is never used (the caller leaves them out of the usable brokers).

The randomness is the caller's (``random.Random``): the same seed places the same way.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from kraftnode.controller.errors import ApiError
from kraftnode.protocol.errors import Errors

__all__ = ["ALL_FENCED", "InvalidReplicationFactor", "UsableBroker", "place"]

#: StripedReplicaPlacer's message when no usable broker is unfenced (Kafka 4.4: a broker whose
#: every log directory is cordoned is not usable, KIP-1066)
ALL_FENCED = "All brokers are currently fenced, or have all their log directories cordoned."


class InvalidReplicationFactor(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(Errors.INVALID_REPLICATION_FACTOR, message)


@dataclass(frozen=True)
class UsableBroker:
    id: int
    rack: str | None
    fenced: bool


@dataclass
class _BrokerList:
    brokers: list[int] = field(default_factory=list)
    index: int = 0
    offset: int = 0
    epoch: int = 0

    def initialize(self, rng: random.Random) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


@dataclass
class _Rack:
    fenced: _BrokerList = field(default_factory=_BrokerList)
    unfenced: _BrokerList = field(default_factory=_BrokerList)

    def next(self, epoch: int) -> int:
        got = self.unfenced.next(epoch)
        return got if got >= 0 else self.fenced.next(epoch)


def _rack_key(name: str | None) -> tuple[int, str]:
    """OptionalStringComparator: no rack first, then by name."""
    return (0, "") if name is None else (1, name)


class _RackList:
    def __init__(self, rng: random.Random, brokers: Iterable[UsableBroker]) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.rack_names: list[str | None] = []
        self.total = self.unfenced = 0
        for b in brokers:
            rack = self.racks.get(b.rack)
            if rack is None:
                rack = self.racks[b.rack] = _Rack()
                self.rack_names.append(b.rack)
            if b.fenced:
                rack.fenced.brokers.append(b.id)
            else:
                self.unfenced += 1
                rack.unfenced.brokers.append(b.id)
            self.total += 1
        for rack in self.racks.values():
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng)
        self.rack_names.sort(key=_rack_key)
        self.epoch = 0
        self.offset = rng.randrange(len(self.rack_names)) if self.rack_names else 0

    def place(self, replication_factor: int) -> list[int]:
        _check(replication_factor, self.total, self.unfenced)
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.epoch = 0
        if self.offset == len(self.rack_names):
            self.offset = 0
        out: list[int] = []
        first = self.offset
        while True:
            got = self.racks[self.rack_names[first]].unfenced.next(self.epoch)
            if got >= 0:
                out.append(got)
                break
            first = (first + 1) % len(self.rack_names)
        index = self.offset
        for _ in range(1, replication_factor):
            got = -1
            while got < 0:
                if index == first:
                    first = -1
                else:
                    got = self.racks[self.rack_names[index]].next(self.epoch)
                index = (index + 1) % len(self.rack_names)
            out.append(got)
        self.epoch += 1
        self.offset += 1
        return out

    def _shuffle(self) -> None:
        self.rng.shuffle(self.rack_names)
        for rack in self.racks.values():
            self.rng.shuffle(rack.fenced.brokers)
            self.rng.shuffle(rack.unfenced.brokers)


def _check(replication_factor: int, total: int, unfenced: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactor(f"Invalid replication factor {replication_factor}: the "
                                       f"replication factor must be positive.")
    if unfenced == 0:
        raise InvalidReplicationFactor(ALL_FENCED)
    if replication_factor > total:
        raise InvalidReplicationFactor(f"The target replication factor of {replication_factor} cannot "
                                       f"be reached because only {total} broker(s) are registered.")


def place(rng: random.Random, brokers: Iterable[UsableBroker], start_partition: int,
          num_partitions: int, replication_factor: int) -> list[list[int]]:
    """StripedReplicaPlacer.place: the replicas of ``num_partitions`` new partitions.

    (``start_partition`` is part of Kafka's PlacementSpec; the striped placer ignores it.)"""
    del start_partition
    racks = _RackList(rng, brokers)
    if replication_factor <= 0:
        _check(replication_factor, racks.total, racks.unfenced)
    if racks.unfenced == 0:
        raise InvalidReplicationFactor(ALL_FENCED)
    _check(replication_factor, racks.total, racks.unfenced)
    return [racks.place(replication_factor) for _ in range(num_partitions)]
