"""The epoch states of KIP-595 (Kafka's EpochState classes, by Kafka's names), as plain data.

Transitions are checked by :mod:`kraftnode.raft.quorum_state`, rules live in
:mod:`kraftnode.raft.rules`; these classes only
hold what each state remembers: its epoch, who leads or was voted for, and its
timers as absolute deadlines in the driver's millisecond clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.tracker import ReplicaTracker
from kraftnode.raft.transfer import PendingTransfer
from kraftnode.raft.voters import Endpoint, ReplicaKey


@dataclass(slots=True)
class UnattachedState:
    """No leader known and no vote cast in ``epoch``. Voters wait out ``election_deadline``."""

    epoch: int
    election_deadline: int | None  # None for observers
    name: str = "unattached"

    @property
    def leader_id(self) -> int:
        return -1


@dataclass(slots=True)
class VotedState:
    """Voted for ``voted_key`` in ``epoch``; no leader known yet."""

    epoch: int
    voted_key: ReplicaKey
    election_deadline: int
    name: str = "voted"

    @property
    def leader_id(self) -> int:
        return -1


@dataclass(slots=True)
class CandidateState:
    """Asking for votes in ``epoch`` (we voted for ourselves)."""

    epoch: int
    retries: int
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    #: Set once the election is lost or timed out: when the next election starts.
    backoff_until: int | None = None
    name: str = "candidate"

    @property
    def leader_id(self) -> int:
        return -1


@dataclass(slots=True)
class FollowerState:
    """Following ``leader_id`` in ``epoch``; an election starts at ``fetch_deadline`` (voters)."""

    epoch: int
    leader_id: int
    leader_endpoints: tuple[Endpoint, ...]
    fetch_deadline: int
    #: While downloading a snapshot: (snapshot id, next position).
    snapshot: tuple[OffsetAndEpoch, int] | None = None
    #: KIP-853: when a voter next checks whether to send UpdateRaftVoter (kraft.version >= 1).
    update_voter_deadline: int = 0
    #: KIP-996: a fetch from the leader succeeded in this state (Kafka 4.0's
    #: hasFetchedFromLeader); such a follower refuses pre-votes (leader stickiness).
    fetched: bool = False
    #: The leader sent EndQuorumEpoch: the election at ``fetch_deadline`` skips pre-vote.
    leader_resigned: bool = False
    #: kraft.version 0 (Kafka 4.1): this leader has our UpdateRaftVoter (asked once per leader).
    voter_updated: bool = False
    name: str = "follower"


@dataclass(slots=True)
class ProspectiveState:
    """KIP-996 (Kafka 4.0's ProspectiveState): asking for pre-votes in ``epoch``, unbumped.

    Keeps the leader it followed (``leader_id``, -1 if none) and the vote cast in this
    epoch; a won pre-vote leads to a real election (Candidate), a lost one back to
    following ``leader_id`` (or waiting, without one).
    """

    epoch: int
    leader_id: int
    leader_endpoints: tuple[Endpoint, ...]
    voted_key: ReplicaKey | None
    election_deadline: int
    retries: int = 0
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    name: str = "prospective"


@dataclass(slots=True)
class LeaderState:
    """Leading ``epoch``; replication bookkeeping is in ``tracker``."""

    epoch: int
    leader_id: int
    tracker: ReplicaTracker
    #: A leadership transfer in progress (appends are refused meanwhile).
    transfer: PendingTransfer | None = None
    name: str = "leader"


@dataclass(slots=True)
class ResignedState:
    """A former leader of ``epoch`` that has stepped down and asks others to elect.

    ``preferred`` is the EndQuorumEpoch successor list; ``unacked`` the voters that
    have not yet answered it.
    """

    epoch: int
    leader_id: int
    election_deadline: int
    preferred: tuple[ReplicaKey, ...]
    unacked: set[int]
    name: str = "resigned"


EpochState = (
    UnattachedState | VotedState | CandidateState | FollowerState | LeaderState | ResignedState | ProspectiveState
)

# The short names the server and older tests use (kept so they need not change at once).
Unattached = UnattachedState
Voted = VotedState
Candidate = CandidateState
Follower = FollowerState
Leader = LeaderState
Resigned = ResignedState
Prospective = ProspectiveState
