"""The quorum state's transition table: every listed edge is accepted, every other move refused."""

from __future__ import annotations

import pytest

from kraftnode.raft import quorum_state
from kraftnode.raft.election import ElectionState
from kraftnode.raft.quorum_state import (
    HIGHER,
    SAME,
    STATES,
    TRANSITIONS,
    IllegalTransition,
    QuorumState,
)
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
from kraftnode.raft.tracker import ReplicaTracker
from kraftnode.raft.voters import ReplicaKey
from tests.kraftnode.raft.rafttest_helpers import voters

ME = ReplicaKey(1, None)


def make_state(name: str, epoch: int) -> EpochState:
    """An epoch state of each kind (the transition check looks only at kind and epoch)."""
    if name == "unattached":
        return UnattachedState(epoch, 0)
    if name == "voted":
        return VotedState(epoch, ReplicaKey(2, None), 0)
    if name == "candidate":
        return CandidateState(epoch, 1, 0, {1})
    if name == "prospective":
        return ProspectiveState(epoch, -1, (), None, 0)
    if name == "follower":
        return FollowerState(epoch, 2, (), 0)
    if name == "leader":
        return LeaderState(epoch, 1, ReplicaTracker(ME, epoch, 0, voters(1, 2, 3), 0, 3000))
    assert name == "resigned"
    return ResignedState(epoch, 1, 0, (), set())


EDGES = [(old, new, change) for old in STATES for new in STATES for change in (SAME, HIGHER)]


@pytest.mark.parametrize(("old", "new", "change"), EDGES)
def test_transition_table_is_enforced(old: str, new: str, change: str) -> None:
    quorum = QuorumState(ME, ElectionState(5), make_state(old, 5))
    target = make_state(new, 5 if change == SAME else 6)
    if change in TRANSITIONS[old].get(new, frozenset()):
        before, _ = quorum.transition(target)
        assert before.name == old and quorum.state is target
    else:
        with pytest.raises(IllegalTransition):
            quorum.transition(target)
        assert quorum.state.name == old


@pytest.mark.parametrize(("old", "new"), [(old, new) for old in STATES for new in STATES])
def test_epoch_never_goes_down(old: str, new: str) -> None:
    assert not quorum_state.allowed(old, 5, new, 4)
    quorum = QuorumState(ME, ElectionState(5), make_state(old, 5))
    with pytest.raises(IllegalTransition):
        quorum.transition(make_state(new, 4))


def test_table_names_only_known_states() -> None:
    assert set(TRANSITIONS) == set(STATES)
    for row in TRANSITIONS.values():
        assert set(row) <= set(STATES)
        assert all(changes and changes <= {SAME, HIGHER} for changes in row.values())


def test_transition_persists_only_a_changed_election_state() -> None:
    quorum = QuorumState(ME, ElectionState(5), make_state("unattached", 5))
    _, persisted = quorum.transition(VotedState(5, ReplicaKey(2, None), 0))
    assert persisted == ElectionState(5, -1, ReplicaKey(2, None))
    _, persisted = quorum.transition(FollowerState(5, 2, (), 0))
    assert persisted == ElectionState(5, 2, ReplicaKey(2, None))  # the vote of epoch 5 stays on record
    _, persisted = quorum.transition(ProspectiveState(5, 2, (), ReplicaKey(2, None), 0))
    assert persisted is None
