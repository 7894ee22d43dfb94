"""The quorum state (Kafka's ``QuorumState``): the current epoch state, its queries,
the transitions it may make, and the election state each one must persist.

Every move between epoch states goes through :meth:`QuorumState.transition`, which
refuses a move the table below does not allow (a bug in the rules, never an input
error: the caller validated the request first). The table is the whole state machine
on one screen, in the style of h11's ``_state.py``: for each pair of states, which
epoch changes the move may make -- ``SAME`` (the epoch is kept) and/or ``HIGHER`` (a
newer epoch is adopted). The epoch never goes down, and moves a row does not list
are illegal.

Why each edge exists (KIP-595, KIP-996 pre-vote, as Kafka's ``QuorumState.transitionTo*``):
- any state adopts a higher epoch as unattached (no leader known) or follower (leader
  known); a candidacy (candidate) always bumps the epoch;
- unattached grants a vote (voted) in its epoch; a leader found in the same epoch is
  followed from any leaderless state;
- an election timer starts a pre-vote (prospective) in the same epoch; its loss goes
  back to the leader it knew (follower), to the vote it had cast (voted) or to waiting
  (unattached); an observer that loses its leader waits unattached in the same epoch;
- a candidate that wins leads its epoch; a leader resigns in its epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.errors import LocalError
from kraftnode.raft.election import ElectionState
from kraftnode.raft.states import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from kraftnode.raft.voters import ReplicaKey

SAME = "same"
HIGHER = "higher"
_S = frozenset({SAME})
_H = frozenset({HIGHER})
_SH = frozenset({SAME, HIGHER})

STATES = ("unattached", "voted", "candidate", "prospective", "follower", "leader", "resigned")

#: from-state -> to-state -> the epoch changes allowed on that edge.
TRANSITIONS: dict[str, dict[str, frozenset[str]]] = {
    #               unattached   voted      candidate  prospective  follower   leader  resigned
    "unattached":  {"unattached": _H, "voted": _S, "candidate": _H, "prospective": _S, "follower": _SH},
    "voted":       {"unattached": _H, "candidate": _H, "prospective": _S, "follower": _SH},
    "candidate":   {"unattached": _H, "candidate": _H, "prospective": _S, "follower": _SH, "leader": _S},
    "prospective": {"unattached": _SH, "voted": _S, "candidate": _H, "follower": _SH},
    "follower":    {"unattached": _SH, "candidate": _H, "prospective": _S, "follower": _H},
    "leader":      {"unattached": _H, "follower": _H, "resigned": _S},
    "resigned":    {"unattached": _H, "candidate": _H, "follower": _H},
}


class IllegalTransition(LocalError):
    """A move the transition table does not allow: a bug in the core's rules."""


def allowed(old: str, old_epoch: int, new: str, new_epoch: int) -> bool:
    """Whether the table allows moving from ``old`` in ``old_epoch`` to ``new`` in ``new_epoch``."""
    if new_epoch < old_epoch:
        return False
    return (SAME if new_epoch == old_epoch else HIGHER) in TRANSITIONS.get(old, {}).get(new, frozenset())


def check(old: EpochState, new: EpochState) -> None:
    """Raise :class:`IllegalTransition` unless the table allows ``old`` -> ``new``."""
    if not allowed(old.name, old.epoch, new.name, new.epoch):
        raise IllegalTransition(f"illegal transition {old.name} (epoch {old.epoch}) -> {new.name} (epoch {new.epoch})")


@dataclass(slots=True)
class QuorumState:
    """The current epoch state and the election state on record for it.

    ``election`` is what was last persisted (or loaded); :meth:`transition` returns the
    election state the caller must persist (a ``PersistElectionState`` action, emitted
    before any send that depends on it), or None when nothing durable changed.
    """

    local_key: ReplicaKey
    election: ElectionState
    state: EpochState

    @property
    def voted_key(self) -> ReplicaKey | None:
        """The vote cast in the current epoch (ours when we are or were a candidate)."""
        return self.election.voted_key if self.election.epoch == self.state.epoch else None

    def election_of(self, st: EpochState) -> ElectionState:
        """What must be durable in ``st``: its epoch, leader, and the vote cast in it."""
        if isinstance(st, UnattachedState):
            # Same epoch (an observer losing its leader): a vote cast in it stays on record.
            voted_before = self.election.voted_key if self.election.epoch == st.epoch else None
            return ElectionState(st.epoch, -1, voted_before)
        if isinstance(st, VotedState):
            return ElectionState(st.epoch, -1, st.voted_key)
        if isinstance(st, CandidateState):
            return ElectionState(st.epoch, -1, self.local_key)
        if isinstance(st, ProspectiveState):
            return ElectionState(st.epoch, st.leader_id, st.voted_key)
        if isinstance(st, LeaderState | ResignedState):
            return ElectionState(st.epoch, st.leader_id, self.local_key)
        # Follower: keep the vote cast in this epoch, so a restart cannot vote twice.
        voted = self.election.voted_key if self.election.epoch == st.epoch else None
        assert isinstance(st, FollowerState)
        return ElectionState(st.epoch, st.leader_id, voted)

    def record(self, election: ElectionState) -> ElectionState | None:
        """Take ``election`` as the one on record; returns it when it differs (persist it)."""
        if election == self.election:
            return None
        self.election = election
        return election

    def transition(self, new_state: EpochState) -> tuple[EpochState, ElectionState | None]:
        """Move to ``new_state`` (checked against the table); returns the old state and the
        election state to persist, if it changed."""
        old = self.state
        check(old, new_state)
        self.state = new_state
        return old, self.record(self.election_of(new_state))
