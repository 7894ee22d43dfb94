"""KIP-853 voter changes on the leader: the pending operation and the voter-set edits.

Kafka 3.9 (``AddVoterHandler``, ``RemoveVoterHandler``, ``UpdateVoterHandler``,
``VoterSet``) allows one add or remove at a time; each waits for its VotersRecord
to commit (the new set takes effect when appended, so the commit is counted by the
*new* majority) and expires after the request timeout. An update is answered as soon
as its record is appended. The rules that need the node's state (leadership, high
watermark, sending) live in :mod:`kraftnode.raft.rules.voter_changes`; this module holds the data
and the pure set operations, so they can be read and tested on their own.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass

from kraftnode.java_order import java_hashmap_order, replica_key_hash
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet

#: LeaderState.isReplicaCaughtUp: an observer that fetched within the last hour
#: and was caught up at least once may become a voter.
CAUGHT_UP_FETCH_WINDOW_MS = 3_600_000

#: FollowerState: a voter checks every 3 fetch timeouts whether the leader's
#: VotersRecord describes it correctly, and sends UpdateRaftVoter if not.
UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS = 3

#: The kraft.version range this implementation supports (0: static, 1: dynamic quorum).
SUPPORTED_KRAFT_VERSIONS = (0, 1)


@dataclass(slots=True)
class PendingAdd:
    """An AddRaftVoter in progress: probing the new voter, then waiting for the commit."""

    request_id: int
    key: ReplicaKey
    endpoints: tuple[Endpoint, ...]
    deadline: int
    #: Offset of the appended VotersRecord; None while the ApiVersions probe is out.
    last_offset: int | None = None
    #: AddRaftVoter v1's AckWhenCommitted: False answers at the append (Kafka's
    #: AddVoterHandler completes the future there); the change stays pending until it commits
    ack_when_committed: bool = True
    #: the client has had its answer (at the append); the commit or failure answers nothing
    answered: bool = False


@dataclass(slots=True)
class PendingRemove:
    """A RemoveRaftVoter whose VotersRecord at ``last_offset`` is not committed yet."""

    request_id: int
    key: ReplicaKey
    last_offset: int
    deadline: int


def key_text(key: ReplicaKey) -> str:
    """A replica key as Kafka prints it in error messages (directory ids in Kafka's base64)."""
    if key.directory_id is None:
        return f"ReplicaKey(id={key.id}, directoryId=Optional.empty)"
    b64 = base64.urlsafe_b64encode(key.directory_id.bytes).decode().rstrip("=")
    return f"ReplicaKey(id={key.id}, directoryId=Optional[{b64}])"


def keys_text(keys: Iterable[ReplicaKey]) -> str:
    """A voter set's keys as Kafka prints ``VoterSet.voterKeys()``: its HashMap<Integer,
    VoterNode>'s keys collected into a HashSet<ReplicaKey>, so in that set's order."""
    by_id = java_hashmap_order(keys, lambda k: k.id)
    ordered = java_hashmap_order(by_id, lambda k: replica_key_hash(k.id, k.directory_id))
    return "[" + ", ".join(key_text(k) for k in ordered) + "]"


def supports(version_range: tuple[int, int] | None, kraft_version: int) -> bool:
    """True when ``[min, max]`` includes the finalized kraft.version (no range: no)."""
    return version_range is not None and version_range[0] <= kraft_version <= version_range[1]


def same_endpoints(a: tuple[Endpoint, ...], b: tuple[Endpoint, ...]) -> bool:
    """Endpoints are a map from listener name to address in Kafka: order does not matter."""
    return sorted(a, key=lambda e: (e.name, e.host, e.port)) == sorted(b, key=lambda e: (e.name, e.host, e.port))


def has_listener(endpoints: tuple[Endpoint, ...], listener: str) -> bool:
    return any(e.name == listener for e in endpoints)


def add_voter(voters: VoterSet, node: VoterNode) -> VoterSet | None:
    """VoterSet.addVoter: a new id only (None if the id is already a voter)."""
    if node.key.id in voters.ids:
        return None
    return VoterSet.of([*voters, node])


def remove_voter(voters: VoterSet, key: ReplicaKey) -> VoterSet | None:
    """VoterSet.removeVoter: the exact key must be a voter, and the set may not become empty."""
    node = voters.node(key.id)
    if node is None or node.key != key or len(voters) == 1:
        return None
    return VoterSet.of(n for n in voters if n.key.id != key.id)


def update_voter(voters: VoterSet, node: VoterNode) -> VoterSet | None:
    """VoterSet.updateVoter: replace a voter matching ``node.key`` (a voter without a
    directory id matches any); None if there is none."""
    old = voters.node(node.key.id)
    if old is None or not _node_is_voter(old, node.key):
        return None
    return VoterSet.of(node if n.key.id == node.key.id else n for n in voters)


def update_voter_ignoring_directory_id(voters: VoterSet, node: VoterNode) -> VoterSet | None:
    """VoterSet.updateVoterIgnoringDirectoryId (Kafka 4.1): replace the voter with
    ``node.key.id`` whatever its directory id; None if the id is not a voter."""
    if node.key.id not in voters.ids:
        return None
    return VoterSet.of(node if n.key.id == node.key.id else n for n in voters)


def kraft_version_text(version: int) -> str:
    """A kraft.version as Kafka's KRaftVersion enum prints itself (no toString override)."""
    return f"KRAFT_VERSION_{version}"


def voters_text(voters: VoterSet) -> str:
    """A voter set in refusal messages: each voter's key, endpoints and kraft.version range."""
    parts = []
    for n in sorted(voters, key=lambda n: n.key.id):
        eps = ", ".join(f"{e.name}={e.host}:{e.port}" for e in n.endpoints)
        parts.append(f"{key_text(n.key)} [{eps}] {n.min_kraft_version}-{n.max_kraft_version}")
    return "VoterSet(voters={" + "; ".join(parts) + "})"


def kraft_upgrade_refusal(persisted: int, new: int, pending: int | None,
                          volatile: VoterSet | None) -> str | None:
    """Why LeaderState.maybeAppendUpgradedKRaftVersion (Kafka 4.1) refuses to move the
    kraft.version from ``persisted`` to ``new`` (None: it appends, or it is a no-op, which the
    caller tells apart by ``persisted == new`` / ``pending == new``). ``pending`` is an upgrade
    appended in this epoch; ``volatile`` the leader's in-memory voters of a static quorum (the
    static set with what UpdateRaftVoter and Fetch taught the leader)."""
    if pending is not None:
        if pending == new:
            return None
        # KRaftVersionUpgrade.Version is a Java record: printed as the record prints itself.
        return (f"Invalid concurrent upgrade of kraft.version from version "
                f"Version[kraftVersion={kraft_version_text(pending)}] to {kraft_version_text(new)}")
    if persisted == new:
        return None
    if persisted > new:
        return (f"Invalid upgrade of kraft.version from version {kraft_version_text(persisted)} to "
                f"{kraft_version_text(new)} because the new version is a downgrade")
    if volatile is None:
        return (f"Invalid upgrade of kraft.version from version {kraft_version_text(persisted)} to "
                f"{kraft_version_text(new)}")
    if not all(n.min_kraft_version <= new <= n.max_kraft_version for n in volatile):
        return f"Invalid upgrade of kraft.version to {kraft_version_text(new)} because not all of the voters support it"
    if any(n.key.directory_id is None for n in volatile):
        # Kafka throws IllegalStateException here (a voter that answered UpdateRaftVoter has a
        # directory id, so only a Fetch-learned range could reach it): see docs/raft.md.
        return f"Directory id must be known for all of the voters: {voters_text(volatile)}"
    return None


def voter_node_needs_update(voters: VoterSet, node: VoterNode) -> bool:
    """VoterSet.voterNodeNeedsUpdate: ``node`` is a voter and differs from its entry."""
    old = voters.node(node.key.id)
    if old is None or not _node_is_voter(old, node.key):
        return False
    return not (
        old.key == node.key and same_endpoints(old.endpoints, node.endpoints)
        and (old.min_kraft_version, old.max_kraft_version) == (node.min_kraft_version, node.max_kraft_version)
    )


def _node_is_voter(node: VoterNode, key: ReplicaKey) -> bool:
    """VoterNode.isVoter: ids equal, and directory ids equal when the voter has one."""
    if node.key.id != key.id:
        return False
    return node.key.directory_id is None or node.key.directory_id == key.directory_id
