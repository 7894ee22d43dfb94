"""Vote handling (KIP-595 / KIP-853): up-to-date rule, one vote per epoch, persist first."""

from __future__ import annotations

from kraftnode.raft import errors
from kraftnode.raft.actions import Action, PersistElectionState, SendResponse
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog
from kraftnode.raft.messages import VoteRequest, VoteResponse
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import ReplicaKey
from tests.kraftnode.raft.rafttest_helpers import (
    CLUSTER,
    dir_id,
    make_node,
    of_type,
    responses,
    vote_request,
)
from tests.simulation import plants


def _vote(node: RaftNode, request: VoteRequest, now: int = 5) -> tuple[VoteResponse, list[Action]]:
    node.take_actions()
    node.handle_request(99, request, now)
    actions = node.take_actions()
    (resp,) = [r for r in responses(actions) if isinstance(r, VoteResponse)]
    return resp, actions


def test_grants_up_to_date_candidate_and_persists_before_replying() -> None:
    node = make_node(1)
    resp, actions = _vote(node, vote_request(2, epoch=1))
    assert resp.vote_granted and resp.leader_epoch == 1 and resp.error_code == errors.NONE
    persist_at = max(i for i, a in enumerate(actions) if isinstance(a, PersistElectionState))
    reply_at = next(i for i, a in enumerate(actions) if isinstance(a, SendResponse))
    assert persist_at < reply_at
    assert actions[persist_at].state == ElectionState(1, -1, ReplicaKey(2, None))  # type: ignore[union-attr]
    assert node.state_name == "voted"


def test_rejects_candidate_with_older_log() -> None:
    log = MemoryRaftLog()
    log.append_as_leader(["a"], 1)
    log.append_as_leader(["b"], 2)
    node = make_node(1, log=log, election=ElectionState(2))
    # Older last epoch, even with a longer log.
    resp, _ = _vote(node, vote_request(2, epoch=3, last_epoch=1, last_offset=50))
    assert not resp.vote_granted
    # Same epoch, shorter log.
    resp, _ = _vote(node, vote_request(3, epoch=3, last_epoch=2, last_offset=1))
    assert not resp.vote_granted
    # Same epoch and length is up to date.
    resp, _ = _vote(node, vote_request(3, epoch=3, last_epoch=2, last_offset=2))
    assert resp.vote_granted


def test_one_vote_per_epoch_and_repeat_is_idempotent() -> None:
    node = make_node(1)
    assert _vote(node, vote_request(2, epoch=1))[0].vote_granted
    assert not _vote(node, vote_request(3, epoch=1))[0].vote_granted
    resp, actions = _vote(node, vote_request(2, epoch=1))
    assert resp.vote_granted
    assert not of_type(actions, PersistElectionState)  # nothing new to persist


def test_vote_is_bound_to_directory_id() -> None:
    node = make_node(1)
    assert _vote(node, vote_request(2, epoch=1, candidate_dir=dir_id(2)))[0].vote_granted
    other_disk = vote_request(2, epoch=1, candidate_dir=dir_id(77))
    assert not _vote(node, other_disk)[0].vote_granted


def test_stale_epoch_is_rejected_with_current_epoch() -> None:
    node = make_node(1, election=ElectionState(5))
    resp, actions = _vote(node, vote_request(2, epoch=4, last_epoch=0))
    assert not resp.vote_granted and resp.leader_epoch == 5
    assert not of_type(actions, PersistElectionState)


def test_cluster_id_mismatch_is_refused_without_state_change() -> None:
    node = make_node(1)
    resp, actions = _vote(node, vote_request(2, epoch=3, cluster="someone-else"))
    assert resp.error_code == errors.INCONSISTENT_CLUSTER_ID and not resp.vote_granted
    assert node.epoch == 0 and not of_type(actions, PersistElectionState)
    # A request without cluster id (old clients) is accepted.
    assert _vote(node, vote_request(2, epoch=3, cluster=None))[0].vote_granted


def test_request_aimed_at_another_voter_is_invalid_voter_key() -> None:
    node = make_node(1)
    resp, _ = _vote(node, vote_request(2, epoch=1, voter_id=3))
    assert resp.partition_error_code == errors.INVALID_VOTER_KEY and not resp.vote_granted
    # as Kafka 3.9 (testInvalidVoterReplicaVoteRequest): the higher epoch is adopted first,
    # then the key is checked, and the answer carries the new epoch
    assert node.epoch == 1 and resp.leader_epoch == 1


def test_vote_validation_order_matches_kafka() -> None:
    node = make_node(1)
    _vote(node, vote_request(2, epoch=3))
    # last epoch >= candidate epoch is an invalid request, checked before the epoch
    resp, _ = _vote(node, vote_request(2, epoch=1, last_epoch=1))
    assert resp.partition_error_code == errors.INVALID_REQUEST
    # a stale candidate epoch is fenced (Kafka's validateVoterOnlyRequest)
    resp, _ = _vote(node, vote_request(2, epoch=2))
    assert resp.partition_error_code == errors.FENCED_LEADER_EPOCH and resp.leader_epoch == 3


def test_restart_remembers_the_vote() -> None:
    node = make_node(1, election=ElectionState(4, -1, ReplicaKey(2, None)))
    assert node.state_name == "voted"
    assert not _vote(node, vote_request(3, epoch=4))[0].vote_granted
    assert _vote(node, vote_request(2, epoch=4))[0].vote_granted


def test_follower_and_leader_do_not_vote_in_their_epoch() -> None:
    node = make_node(1, election=ElectionState(4, 2, None))
    assert node.state_name == "follower"
    assert not _vote(node, vote_request(3, epoch=4))[0].vote_granted


def test_planted_reply_before_persist_breaks_the_order() -> None:
    node = make_node(1, plant=frozenset({plants.REPLY_BEFORE_PERSIST}))
    _, actions = _vote(node, vote_request(2, epoch=1))
    kinds = [type(a).__name__ for a in actions]
    assert kinds.index("SendResponse") < max(i for i, k in enumerate(kinds) if k == "PersistElectionState")
    assert CLUSTER


def test_nonsense_candidate_is_invalid_request() -> None:
    node = make_node(1)
    resp, actions = _vote(node, vote_request(-3, epoch=1))
    assert resp.partition_error_code == errors.INVALID_REQUEST and not resp.vote_granted
    assert node.epoch == 0 and not of_type(actions, PersistElectionState)
