"""The voter set data model of KIP-853.

A voter is identified by a :class:`ReplicaKey` (replica id plus directory id) and
reachable through named listener endpoints. The set is either *static* (from
``controller.quorum.voters``, kraft.version 0, directory ids unknown) or *dynamic*
(kraft.version 1, the latest VotersRecord in the snapshot or log). Nothing in the
core assumes the set is fixed: majorities are always computed from the set in
force at the moment of the decision.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from kraftnode.raft.quorum import majority

#: Kafka's Uuid.ZERO_UUID: "no directory id" on the wire.
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """A replica's identity: its node id and (when known) its log directory id.

    ``directory_id`` is None when unknown (kraft.version 0 or an old peer), which
    KIP-853's relaxed rules treat as matching any directory id.
    """

    id: int
    directory_id: uuid.UUID | None = None

    @staticmethod
    def of(replica_id: int, directory_id: uuid.UUID | None) -> ReplicaKey:
        """Build a key, mapping the wire's ZERO_UUID to "unknown"."""
        if directory_id == ZERO_UUID:
            directory_id = None
        return ReplicaKey(replica_id, directory_id)

    def wire_directory_id(self) -> uuid.UUID:
        """The directory id as sent on the wire (ZERO_UUID when unknown)."""
        return self.directory_id if self.directory_id is not None else ZERO_UUID

    def matches(self, other: ReplicaKey) -> bool:
        """Same id and no contradicting directory ids (unknown matches anything)."""
        if self.id != other.id:
            return False
        if self.directory_id is None or other.directory_id is None:
            return True
        return self.directory_id == other.directory_id


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener endpoint: listener name, host and port."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterNode:
    """One voter: its key, its endpoints by listener and its supported kraft.version range."""

    key: ReplicaKey
    endpoints: tuple[Endpoint, ...] = ()
    min_kraft_version: int = 0
    max_kraft_version: int = 0

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of ``listener`` (the first one when no listener is given)."""
        for ep in self.endpoints:
            if listener is None or ep.name == listener:
                return ep
        return None


@dataclass(frozen=True)
class VoterSet:
    """An immutable set of voters keyed by replica id."""

    voters: Mapping[int, VoterNode] = field(default_factory=dict)

    @staticmethod
    def of(nodes: Iterable[VoterNode]) -> VoterSet:
        """Build a set; duplicate ids are a configuration error."""
        result: dict[int, VoterNode] = {}
        for node in nodes:
            if node.key.id in result:
                raise ValueError(f"duplicate voter id {node.key.id}")
            result[node.key.id] = node
        return VoterSet(result)

    @staticmethod
    def static(ids_and_endpoints: Mapping[int, Iterable[Endpoint]]) -> VoterSet:
        """The kraft.version 0 set from ``controller.quorum.voters`` (no directory ids)."""
        return VoterSet.of(
            VoterNode(ReplicaKey(i), tuple(eps)) for i, eps in sorted(ids_and_endpoints.items())
        )

    def __len__(self) -> int:
        return len(self.voters)

    def __iter__(self) -> Iterator[VoterNode]:
        return iter(self.voters.values())

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(self.voters)

    def keys(self) -> list[ReplicaKey]:
        return [node.key for node in self.voters.values()]

    def majority_size(self) -> int:
        """How many voters make a majority of this set."""
        return majority(len(self.voters))

    def is_voter(self, key: ReplicaKey) -> bool:
        """True when ``key`` is a voter: same id, and same directory id when both are known."""
        node = self.voters.get(key.id)
        return node is not None and node.key.matches(key)

    def node(self, replica_id: int) -> VoterNode | None:
        return self.voters.get(replica_id)

    def endpoints_of(self, replica_id: int) -> tuple[Endpoint, ...]:
        node = self.voters.get(replica_id)
        return node.endpoints if node is not None else ()
