"""The epoch states of KIP-595 (Kafka's EpochState classes, by Kafka's names), as plain data.

Transitions are checked by :mod:`kraftnode.raft.quorum_state`, rules live in
:mod:`kraftnode.raft.rules`; these classes only hold what each state remembers: its
epoch, who leads or was voted for, and its timers as absolute deadlines in the driver's
millisecond clock. :class:`LeaderState` also holds what only a leader owes (appends,
parked fetches, reads, voter changes, a transfer) and, as Kafka's ``LeaderState.close``,
fails all of it when leadership ends: nothing leader-only lives on the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftnode.raft import errors
from kraftnode.raft.actions import Action, AppendCompleted, ReadIndexCompleted, SendResponse
from kraftnode.raft.inflight import ParkedFetch
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.messages import (
    AddRaftVoterResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    RemoveRaftVoterResponse,
)
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
    """Leading ``epoch``; replication bookkeeping (and the pending voter change) is in
    ``tracker``, what the leader still owes its clients in the fields below."""

    epoch: int
    leader_id: int
    tracker: ReplicaTracker
    #: A leadership transfer in progress (appends are refused meanwhile).
    transfer: PendingTransfer | None = None
    #: Appends not committed yet: (last offset, handle), in offset order.
    pending_appends: list[tuple[int, int]] = field(default_factory=list)
    #: Fetches held until new data, a new high watermark or their deadline (long-poll).
    parked: list[ParkedFetch] = field(default_factory=list)
    #: Read index (linearizable reads): pending (handle, round) ...
    reads: list[tuple[int, int]] = field(default_factory=list)
    #: ... the latest round asked for ...
    read_round: int = 0
    #: ... and per voter the latest round it confirmed (answered our BeginQuorumEpoch).
    read_confirmed: dict[int, int] = field(default_factory=dict)
    name: str = "leader"

    def finish_add(self, code: int, message: str | None) -> list[Action]:
        """Kafka's resetAddVoterHandlerState: the answer to the pending AddRaftVoter, if any."""
        pending = self.tracker.pending_add
        if pending is None:
            return []
        self.tracker.pending_add = None
        if pending.answered:  # AckWhenCommitted false: answered at the append, as Kafka's
            return []         # future, completed then, ignores the later completion
        return [SendResponse(pending.request_id, AddRaftVoterResponse(code, message))]

    def finish_remove(self, code: int, message: str | None) -> list[Action]:
        """Kafka's resetRemoveVoterHandlerState: the answer to the pending RemoveRaftVoter, if any."""
        pending = self.tracker.pending_remove
        if pending is None:
            return []
        self.tracker.pending_remove = None
        return [SendResponse(pending.request_id, RemoveRaftVoterResponse(code, message))]

    def close(self, successor: EpochState, fetch_refusal: FetchResponse) -> list[Action]:
        """Kafka's LeaderState.close(): leadership ended (``successor`` is the new state);
        what the leader still owed fails with NOT_LEADER_OR_FOLLOWER -- voter changes,
        reads, a transfer, appends (they may still commit under a later leader), and
        parked fetches (answered ``fetch_refusal``). Returns those answers, in that order."""
        code = errors.NOT_LEADER_OR_FOLLOWER
        out = [*self.finish_add(code, None), *self.finish_remove(code, None)]
        out += [ReadIndexCompleted(handle, -1, code) for handle, _ in self.reads]
        self.reads.clear()
        self.read_confirmed.clear()
        if self.transfer is not None:
            out.append(SendResponse(self.transfer.request_id, EndQuorumEpochResponse(
                errors.NONE, code, successor.leader_id, successor.epoch, ())))
            self.transfer = None
        out += [AppendCompleted(handle, -1, code) for _, handle in self.pending_appends]
        self.pending_appends.clear()
        out += [SendResponse(p.request_id, fetch_refusal) for p in self.parked]
        self.parked.clear()
        return out


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
