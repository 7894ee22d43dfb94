"""Static to dynamic upgrade (kraft.version 0 -> 1, Kafka 4.1) and controller auto-join
(Kafka 4.x controller.quorum.auto.join.enable) in the core."""

from __future__ import annotations

import dataclasses
import random

from rafttest_helpers import CLUSTER, CONFIG, dir_id, elect, fetch_request, make_node, voters
from test_raft_voter_changes import answers, dynamic_log, ep

from kraftnode.raft import errors
from kraftnode.raft.actions import AppendCompleted, SendRequest
from kraftnode.raft.batches import KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    BeginQuorumEpochRequest,
    CurrentLeader,
    FetchRequest,
    FetchResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
)
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import ReplicaKey, VoterSet

NOT_ALL = "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it"


def static_leader() -> tuple[RaftNode, int]:
    """Node 1 leading the static quorum {1, 2, 3} (endpoints h1..h3), its epoch committed."""
    node = RaftNode(1, dir_id(1), CONFIG, make_node(1).log, make_node(1).election_state, voters(1, 2, 3),
                    random.Random(3), 0, local_endpoints=ep(1))
    now = elect(node, 0)
    node.take_actions()
    node.handle_request(1, fetch_request(2, node.epoch, node.log.end_offset, node.epoch), now)
    assert node.high_watermark == node.log.end_offset
    node.take_actions()
    return node, now


def update(i: int, epoch: int, lo: int = 0, hi: int = 1, host: str | None = None) -> UpdateRaftVoterRequest:
    return UpdateRaftVoterRequest(CLUSTER, epoch, i, dir_id(i), ep(i, host), lo, hi)


def test_upgrade_refused_until_every_voter_told_the_leader() -> None:
    node, now = static_leader()
    assert node.history.kraft_version() == 0
    # Nobody but the leader has described itself: Kafka 4.1's refusal, nothing appended.
    end = node.log.end_offset
    assert node.upgrade_kraft_version(1, False, now) == (errors.INVALID_UPDATE_VERSION, NOT_ALL, -1)
    node.handle_request(2, update(2, node.epoch), now)
    (resp,) = answers(node.take_actions(), UpdateRaftVoterResponse)
    assert resp.error_code == errors.NONE  # kept in memory (Kafka 4.1), not UNSUPPORTED_VERSION
    assert node.upgrade_kraft_version(1, True, now)[1] == NOT_ALL  # voter 3 still unknown
    # Voter 3 fetched (its directory id is learned) but never said it supports kraft.version 1.
    node.handle_request(3, fetch_request(3, node.epoch, node.log.end_offset, node.epoch), now)
    assert node.upgrade_kraft_version(1, False, now)[1] == NOT_ALL
    assert node.log.end_offset == end


def test_upgrade_writes_kraft_version_and_every_voters_identity() -> None:
    node, now = static_leader()
    for i in (2, 3):
        node.handle_request(i, update(i, node.epoch, host=f"new{i}"), now)
    node.take_actions()
    end = node.log.end_offset
    assert node.upgrade_kraft_version(1, True, now) == (errors.NONE, None, -1)  # validate only
    assert node.log.end_offset == end
    code, message, handle = node.upgrade_kraft_version(1, False, now)
    assert (code, message) == (errors.NONE, None) and handle > 0
    batch = node.log.batches[-1]
    kinds = batch.control_records()
    assert isinstance(kinds[0], KRaftVersionControlRecord) and kinds[0].kraft_version == 1
    assert isinstance(kinds[1], VotersControlRecord)
    vs = kinds[1].voters
    assert [n.key for n in vs] == [ReplicaKey(i, dir_id(i)) for i in (1, 2, 3)]
    assert vs.endpoints_of(2) == ep(2, "new2") and vs.endpoints_of(1) == ep(1)
    assert node.history.kraft_version() == 1 and node.voters == vs
    # The answer waits for the commit, counted by the new set.
    assert not [a for a in node.take_actions() if isinstance(a, AppendCompleted)]
    node.handle_request(9, fetch_request(2, node.epoch, node.log.end_offset, node.epoch), now)
    done = [a for a in node.take_actions() if isinstance(a, AppendCompleted)]
    assert [(a.handle, a.error_code) for a in done] == [(handle, errors.NONE)]
    # Afterwards: a second upgrade is a no-op; a downgrade is refused as Kafka refuses it.
    assert node.upgrade_kraft_version(1, False, now) == (errors.NONE, None, -1)
    assert node.upgrade_kraft_version(0, False, now)[1] == (
        "Invalid concurrent upgrade of kraft.version from version Version[kraftVersion=KRAFT_VERSION_1] "
        "to KRAFT_VERSION_0")
    # Dynamic now: a re-formatted voter 3 (new directory id) is an observer, not voter 3.
    node.handle_request(10, dataclasses.replace(
        fetch_request(3, node.epoch, node.log.end_offset, node.epoch), replica_directory_id=dir_id(33)), now)
    assert node.state.tracker.voters[3].key == ReplicaKey(3, dir_id(3))  # type: ignore[union-attr]
    assert ReplicaKey(3, dir_id(33)) in node.state.tracker.observers  # type: ignore[union-attr]


def test_followers_tell_a_static_leader_once() -> None:
    node = RaftNode(2, dir_id(2), CONFIG, make_node(2).log, make_node(2).election_state, voters(1, 2, 3),
                    random.Random(3), 0, local_endpoints=ep(2, "me"))
    node.handle_request(1, BeginQuorumEpochRequest(CLUSTER, 2, None, 1, 1, ep(1)), 0)
    updates = run_follower(node, 0, node.config.fetch_timeout_ms * 10)
    assert len(updates) == 1  # answered NONE: told once per leader
    req = updates[0]
    assert isinstance(req, UpdateRaftVoterRequest)
    assert (req.voter_directory_id, req.listeners, req.max_supported_version) == (dir_id(2), ep(2, "me"), 1)


def run_follower(node: RaftNode, start: int, end: int) -> list[object]:
    """Play leader 1 for ``node`` from ``start`` to ``end``: answer every Fetch (empty) and
    every UpdateRaftVoter (NONE); returns the non-Fetch requests the node sent."""
    other: list[object] = []
    t = start
    while t < end:
        for a in node.take_actions():
            if isinstance(a, SendRequest) and a.destination == 1:
                if isinstance(a.request, FetchRequest):
                    resp: object = FetchResponse(errors.NONE, errors.NONE, node.log.end_offset,
                                                 CurrentLeader(*node.leader_and_epoch()), 0)
                elif isinstance(a.request, UpdateRaftVoterRequest):
                    resp = UpdateRaftVoterResponse(errors.NONE, CurrentLeader(*node.leader_and_epoch()))
                    other.append(a.request)
                elif isinstance(a.request, AddRaftVoterRequest):
                    resp = AddRaftVoterResponse(errors.REQUEST_TIMED_OUT, "lagging behind")
                    other.append(a.request)
                elif isinstance(a.request, RemoveRaftVoterRequest):
                    resp = RemoveRaftVoterResponse(errors.REQUEST_TIMED_OUT, None)
                    other.append(a.request)
                else:
                    other.append(a.request)
                    continue
                node.handle_response(1, a.correlation_id, resp, t)  # type: ignore[arg-type]
        t += 100
        node.tick(t)
    assert node.leader_id == 1
    return other


def observer(local_id: int, directory: int, auto_join: bool = True) -> RaftNode:
    cfg = dataclasses.replace(CONFIG, auto_join=auto_join)
    return RaftNode(local_id, dir_id(directory), cfg, dynamic_log(1, 2, 3), make_node(local_id).election_state,
                    VoterSet(), random.Random(3), 0, local_endpoints=ep(local_id))


def observer_requests(node: RaftNode, until: int) -> list[object]:
    """``node`` follows leader 1 in epoch 1, caught up (HW = its end), until ``until``."""
    node.handle_request(1, BeginQuorumEpochRequest(CLUSTER, node.local_key.id, None, 1, 1, ep(1)), 0)
    return run_follower(node, 0, until)


def test_observer_auto_joins_once_caught_up() -> None:
    node = observer(4, 4)
    reqs = observer_requests(node, node.config.fetch_timeout_ms + 500)
    assert not node.is_voter
    # At once when caught up, then (refused) once per update-voter period (a fetch timeout, as Kafka 4.4).
    assert len(reqs) == 2
    req = reqs[0]
    assert isinstance(req, AddRaftVoterRequest) and reqs[1] == req
    assert (req.voter_id, req.voter_directory_id, req.listeners) == (4, dir_id(4), ep(4))
    # answered at the append, as Kafka 4.4's auto-join asks: the joiner does not fetch while
    # its request is out, so it cannot wait for a commit its own fetch may be needed for
    assert req.ack_when_committed is False


def test_observer_with_a_stale_entry_removes_it_first() -> None:
    node = observer(3, 33)  # voter 3's disk was lost: new directory id 33
    req = observer_requests(node, node.config.fetch_timeout_ms * 3 + 500)[0]
    assert isinstance(req, RemoveRaftVoterRequest)
    assert (req.voter_id, req.voter_directory_id) == (3, dir_id(3))


def test_no_auto_join_when_disabled() -> None:
    node = observer(4, 4, auto_join=False)
    assert observer_requests(node, node.config.fetch_timeout_ms * 10) == []


def test_dynamic_quorum_upgrade_is_a_no_op_and_downgrade_refused() -> None:
    node = make_node(1, VoterSet(), dynamic_log(1, 2, 3))
    elect(node, 0)
    assert node.state.tracker.volatile_voters is None  # type: ignore[union-attr]
    assert node.upgrade_kraft_version(1, False, 0) == (errors.NONE, None, -1)
    assert node.upgrade_kraft_version(0, False, 0)[1] == (
        "Invalid upgrade of kraft.version from version KRAFT_VERSION_1 to KRAFT_VERSION_0 "
        "because the new version is a downgrade")

