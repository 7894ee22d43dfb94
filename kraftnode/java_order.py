"""The iteration order of Java's HashMap / HashSet, for texts and lists Kafka 3.9 builds
from them (DescribeQuorum's replica lists, the voter sets in KIP-853 error messages).

Pure functions; the raft core and the server both use them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["java_hashmap_order", "java_string_hash", "replica_key_hash"]

T = TypeVar("T")


def java_hashmap_order(items: Iterable[T], java_hash: Callable[[T], int]) -> list[T]:
    """``items`` (in insertion order) in the order a java.util.HashMap (or HashSet) keyed
    by ``java_hash(item)`` iterates them.

    Kafka 3.9's LeaderState keeps voters in a HashMap<Integer, ReplicaState> and observers in
    a HashMap<ReplicaKey, ReplicaState>, and DescribeQuorum lists their values() as they
    iterate, so kafka-metadata-quorum.sh prints voters and observers in that order (e.g.
    voters 1, 2 even when 1 was re-added after 2); VoterSet.voterKeys() collects into a
    HashSet<ReplicaKey>. A HashMap iterates by bucket ``(h ^ h >>> 16) & (capacity - 1)``,
    insertion order within a bucket; the capacity starts at 16 and doubles while the size
    exceeds 3/4 of it. (Kafka's observer map never shrinks within a term; we size it by the
    observers present now.)"""
    ordered = list(items)
    capacity = 16
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2

    def bucket(item: T) -> int:
        h = java_hash(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(ordered, key=bucket)  # stable: insertion order within a bucket


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode (UTF-16 code units, int arithmetic): the key hash of the
    HashMap<String, ...> Kafka iterates feature updates in."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def replica_key_hash(replica_id: int, directory_id: uuid.UUID | None) -> int:
    """Kafka's ReplicaKey.hashCode(): Objects.hash(id, Optional<Uuid> directoryId), where an
    absent or zero directory id hashes to 0 and Uuid.hashCode() folds msb ^ lsb to 32 bits."""
    d = 0
    if directory_id is not None and directory_id.int != 0:
        v = directory_id.int
        x = (v >> 64) ^ (v & 0xFFFFFFFFFFFFFFFF)
        d = ((x >> 32) ^ x) & 0xFFFFFFFF
    return (31 * (31 + replica_id) + d) & 0xFFFFFFFF
