"""The core's timers: when a follower gives up on its leader, when an election times
out, and how long to back off before the next one (Kafka's FollowerState fetch timer,
KafkaRaftClient.randomElectionTimeoutMs, binaryExponentialElectionBackoffMs and
strictExponentialElectionBackoffMs). Every random draw of the core is here, from the
node's injected ``rng``.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftnode.raft import reconfig
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.voters import ReplicaKey

#: Base of the binary exponential election backoff (Kafka's RETRY_BACKOFF_BASE_MS).
ELECTION_BACKOFF_BASE_MS = 100


def fetch_deadline(node: RaftCore, now_ms: int) -> int:
    """A follower that has not heard from its leader by then starts an election."""
    return now_ms + node.config.fetch_timeout_ms


def election_deadline(node: RaftCore, now_ms: int) -> int:
    timeout = node.config.election_timeout_ms
    return now_ms + timeout + node.rng.randrange(timeout)


def election_deadline_or_none(node: RaftCore, now_ms: int) -> int | None:
    return election_deadline(node, now_ms) if node.is_voter else None


def binary_backoff(node: RaftCore, retries: int) -> int:
    bound = 2 << min(20, max(0, retries - 1))
    return min(ELECTION_BACKOFF_BASE_MS * node.rng.randrange(bound), node.config.election_backoff_max_ms)


def end_epoch_backoff(node: RaftCore, preferred: Sequence[ReplicaKey]) -> int:
    """Successor-rank backoff, as Kafka's endEpochElectionBackoff and
    strictExponentialElectionBackoffMs: our position in the list (its length when we are
    not in it); position 0 stands at once -- also for an empty list, which a leader
    restarted into Resigned sends; a voter missing from a non-empty list waits
    election.backoff.max.ms; rank p of n waits (max >> (n - 1)) << (p - 1), capped."""
    n = len(preferred)
    position = next((i for i, key in enumerate(preferred) if key.matches(node.local_key)), n)
    most = node.config.election_backoff_max_ms
    if position == 0:
        return 0
    if position >= n:
        return most
    return min(most, (most >> (n - 1)) << (position - 1))


def update_voter_period_ms(node: RaftCore) -> int:
    """How often a follower checks whether to send UpdateRaftVoter (or, auto-joining, AddRaftVoter)."""
    return node.config.fetch_timeout_ms * reconfig.UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS
