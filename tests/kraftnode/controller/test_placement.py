"""StripedReplicaPlacer's rules (kraftnode.controller.placement)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kraftnode.controller.placement import InvalidReplicationFactor, UsableBroker, place


def brokers(n: int, racks: int = 0, fenced: tuple[int, ...] = ()) -> list[UsableBroker]:
    return [UsableBroker(b, f"r{b % racks}" if racks else None, b in fenced) for b in range(1, n + 1)]


@pytest.mark.parametrize("seed", range(5))
def test_leaders_and_replicas_spread_evenly(seed: int) -> None:
    got = place(random.Random(seed), brokers(3), 0, 12, 3)
    assert all(sorted(r) == [1, 2, 3] for r in got)
    assert sorted(Counter(r[0] for r in got).values()) == [4, 4, 4]


@pytest.mark.parametrize("seed", range(5))
def test_replicas_of_a_partition_are_on_different_racks(seed: int) -> None:
    got = place(random.Random(seed), brokers(6, racks=3), 0, 30, 3)
    racks = {b: f"r{b % 3}" for b in range(1, 7)}
    assert all(len({racks[b] for b in r}) == 3 for r in got)
    assert sorted(Counter(r[0] for r in got).values()) == [5] * 6


def test_fenced_brokers_are_used_only_when_needed_and_never_lead() -> None:
    got = place(random.Random(1), brokers(3, fenced=(3,)), 0, 6, 2)
    assert all(3 not in r for r in got)
    got = place(random.Random(1), brokers(3, fenced=(3,)), 0, 6, 3)
    assert all(sorted(r) == [1, 2, 3] and r[0] != 3 for r in got)


def test_the_same_seed_places_the_same_way() -> None:
    assert place(random.Random(9), brokers(5), 0, 20, 3) == place(random.Random(9), brokers(5), 0, 20, 3)


@pytest.mark.parametrize("available, rf, message", [
    (brokers(3), 4, "The target replication factor of 4 cannot be reached because only 3 broker(s) are registered."),
    (brokers(3, fenced=(1, 2, 3)), 1, "All brokers are currently fenced, or have all their log directories cordoned."),
    (brokers(3), 0, "Invalid replication factor 0: the replication factor must be positive."),
])
def test_placement_kafka_refuses(available: list[UsableBroker], rf: int, message: str) -> None:
    with pytest.raises(InvalidReplicationFactor) as e:
        place(random.Random(0), available, 0, 1, rf)
    assert e.value.message == message
