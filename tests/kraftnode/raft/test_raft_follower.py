"""Follower/observer side: append then flush before fetching, divergence, HW, EndQuorumEpoch."""

from __future__ import annotations

from kraftnode.raft import errors
from kraftnode.raft.actions import FatalError, FlushLog, HighWatermarkAdvanced, SendRequest
from kraftnode.raft.batches import Batch
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog
from kraftnode.raft.messages import (
    BeginQuorumEpochRequest,
    CurrentLeader,
    DivergingEpoch,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
)
from kraftnode.raft.voters import ReplicaKey
from tests.kraftnode.raft.rafttest_helpers import (
    CONFIG,
    dir_id,
    make_node,
    of_type,
    requests_to,
    sent,
)
from tests.simulation import plants


def _follower(log: MemoryRaftLog | None = None, epoch: int = 3, plant: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
    node = make_node(2, log=log, election=ElectionState(epoch, 1, None), plant=plant)
    assert node.state_name == "follower"
    node.tick(0)
    (req,) = sent(node.take_actions(), FetchRequest)
    return node, req


def _ok(records: tuple[Batch, ...] = (), hw: int = 0, epoch: int = 3, diverging: DivergingEpoch | None = None) -> FetchResponse:
    return FetchResponse(0, 0, hw, CurrentLeader(1, epoch), 0, diverging, None, records)


def test_follower_appends_flushes_then_fetches_and_adopts_hw() -> None:
    node, req = _follower()
    assert req.destination == 1 and req.request.fetch_offset == 0  # type: ignore[union-attr]
    batches = (Batch(0, 1, 3, ("a", "b")), Batch(2, 2, 3, ("c",)))
    node.handle_response(1, req.correlation_id, _ok(batches, hw=2), 10)
    actions = node.take_actions()
    assert node.log.end_offset == 3
    kinds = [type(a) for a in actions]
    assert kinds.index(FlushLog) < kinds.index(SendRequest)  # durable before acknowledging by fetch
    assert HighWatermarkAdvanced(2) in actions and node.high_watermark == 2
    nxt = requests_to(actions, FetchRequest)[1]
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (3, 3)


def test_hw_is_capped_by_the_local_log() -> None:
    node, req = _follower()
    node.handle_response(1, req.correlation_id, _ok((Batch(0, 0, 3, ("a",)),), hw=10), 10)
    assert node.high_watermark == 1


def test_divergence_truncates_without_adopting_the_hw() -> None:
    log = MemoryRaftLog()
    log.append_as_leader(["a", "b"], 1)  # 0-1
    log.append_as_leader(["x", "y", "z"], 2)  # 2-4: never committed
    node, req = _follower(log)
    assert req.request.fetch_offset == 5 and req.request.last_fetched_epoch == 2  # type: ignore[union-attr]
    node.handle_response(1, req.correlation_id, _ok(hw=4, diverging=DivergingEpoch(1, 2)), 10)
    assert node.log.end_offset == 2
    assert node.high_watermark == 0
    nxt = requests_to(node.take_actions(), FetchRequest)[1]
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (2, 1)


def test_diverging_epoch_unknown_locally_truncates_to_our_epoch_end() -> None:
    log = MemoryRaftLog()
    log.append_as_leader(["a", "b"], 1)  # 0-1
    log.append_as_leader(["x"], 3)  # 2
    node, req = _follower(log, epoch=4)
    # Leader knows epoch 2 (which we lack) ending at 6: cut back to the end of our epoch 1.
    node.handle_response(1, req.correlation_id, _ok(epoch=4, diverging=DivergingEpoch(2, 6)), 10)
    assert node.log.end_offset == 2


def test_planted_skip_keeps_the_divergent_tail() -> None:
    log = MemoryRaftLog()
    log.append_as_leader(["a", "b"], 1)
    log.append_as_leader(["x", "y", "z"], 2)
    node, req = _follower(log, plant=frozenset({plants.SKIP_DIVERGENCE_TRUNCATION}))
    node.handle_response(1, req.correlation_id, _ok(hw=4, diverging=DivergingEpoch(1, 2)), 10)
    assert node.log.end_offset == 5 and node.high_watermark == 4


def test_truncation_below_the_hw_is_fatal() -> None:
    node, req = _follower()
    node.handle_response(1, req.correlation_id, _ok((Batch(0, 2, 3, ("a", "b", "c")),), hw=3), 10)
    req2 = sent(node.take_actions(), FetchRequest)[0]
    node.handle_response(1, req2.correlation_id, _ok(hw=3, diverging=DivergingEpoch(3, 1)), 20)
    assert of_type(node.take_actions(), FatalError) and node.failed
    assert node.log.end_offset == 3


def test_out_of_place_batches_are_dropped() -> None:
    node, req = _follower()
    node.handle_response(1, req.correlation_id, _ok((Batch(5, 5, 3, ("gap",)),), hw=6), 10)
    assert node.log.end_offset == 0 and node.high_watermark == 0
    node2, req2 = _follower()
    node2.handle_response(1, req2.correlation_id, _ok((Batch(0, 0, 9, ("future",)),), hw=1), 10)
    assert node2.log.end_offset == 0


def test_fetch_timeout_starts_an_election() -> None:
    node, _ = _follower()
    node.tick(CONFIG.fetch_timeout_ms - 1)
    assert node.state_name == "follower"
    node.tick(CONFIG.fetch_timeout_ms)
    assert node.state_name == "candidate" and node.epoch == 4


def test_response_from_a_newer_leader_is_followed() -> None:
    node, req = _follower()
    resp = FetchResponse(0, errors.FENCED_LEADER_EPOCH, 0, CurrentLeader(3, 5))
    node.handle_response(1, req.correlation_id, resp, 10)
    assert node.state_name == "follower" and node.leader_id == 3 and node.epoch == 5
    assert 3 in requests_to(node.take_actions(), FetchRequest)


def test_inconsistent_cluster_id_from_the_leader_is_fatal() -> None:
    node, req = _follower()
    resp = FetchResponse(errors.INCONSISTENT_CLUSTER_ID, 0, 0, CurrentLeader(-1, -1))
    node.handle_response(1, req.correlation_id, resp, 10)
    assert node.failed and of_type(node.take_actions(), FatalError)


def test_end_quorum_epoch_backoff_follows_successor_rank() -> None:
    """Kafka 3.9 KafkaRaftClient.endEpochElectionBackoff / strictExponentialElectionBackoffMs:
    rank 0 stands at once; rank p of n waits (election.backoff.max.ms >> (n-1)) << (p-1);
    a voter missing from a non-empty list waits election.backoff.max.ms (1000 ms)."""
    for rank, expected in ((0, 0), (1, 250), (2, 500), (3, 1000)):
        node, _ = _follower()
        order = [ReplicaKey(i) for i in (3, 4, 5)]
        if rank < 3:
            order[rank] = ReplicaKey(2)
        node.handle_request(1, EndQuorumEpochRequest(None, 1, 3, tuple(order)), 100)
        assert node.next_deadline_ms() == 100 + expected, rank
        node.tick(100 + expected)
        assert node.state_name == "candidate"
    node, _ = _follower()  # two successors (a three-voter quorum): the second waits 500 ms
    node.handle_request(1, EndQuorumEpochRequest(None, 1, 3, (ReplicaKey(3), ReplicaKey(2))), 100)
    assert node.next_deadline_ms() == 100 + 500


def test_end_quorum_epoch_with_no_successors_stands_at_once() -> None:
    """A leader restarted into Resigned sends EndQuorumEpoch with no preferred successors
    (Kafka's QuorumState.initialize); Kafka's follower then stands at once (position 0 of 0:
    strictExponentialElectionBackoffMs returns 0), as the genuine client did in the mixed
    quorum (tests/interop/test_mixed_quorum.py) while kraftnode waited a full backoff."""
    node, _ = _follower()
    node.handle_request(1, EndQuorumEpochRequest(None, 1, 3, ()), 100)
    assert node.next_deadline_ms() == 100
    node.tick(100)
    assert node.state_name == "candidate"


def test_begin_quorum_epoch_makes_a_follower() -> None:
    node = make_node(2)
    node.handle_request(1, BeginQuorumEpochRequest(None, 2, None, 3, 6), 5)
    assert node.state_name == "follower" and node.leader_id == 3 and node.epoch == 6
    assert node.election_state == ElectionState(6, 3, None)
    # A stale leader is fenced.
    node.handle_request(2, BeginQuorumEpochRequest(None, 2, None, 1, 5), 6)
    resp = [a for a in node.take_actions() if type(a).__name__ == "SendResponse"][-1]
    assert resp.response.partition_error_code == errors.FENCED_LEADER_EPOCH  # type: ignore[union-attr]


def test_begin_quorum_epoch_with_another_voter_key_still_elects_the_leader() -> None:
    """Kafka 3.9 (KafkaRaftClient.handleBeginQuorumEpochRequest, KafkaRaftClientTest.
    testInvalidVoterReplicaBeginQuorumEpochRequest): the leader is adopted before the voter
    key is checked; the answer is INVALID_VOTER_KEY naming the new leader and epoch."""
    node = make_node(2, election=ElectionState(4))
    node.take_actions()
    node.handle_request(1, BeginQuorumEpochRequest(None, 10, dir_id(10), 3, 5), 5)
    (resp,) = [a.response for a in node.take_actions() if type(a).__name__ == "SendResponse"]
    assert resp.partition_error_code == errors.INVALID_VOTER_KEY  # type: ignore[attr-defined]
    assert (resp.leader_id, resp.leader_epoch) == (3, 5)  # type: ignore[attr-defined]
    assert node.state_name == "follower" and node.leader_id == 3 and node.epoch == 5
    # the right id with another directory id: same answer, leader kept
    node.handle_request(2, BeginQuorumEpochRequest(None, 2, dir_id(77), 3, 5), 6)
    (resp,) = [a.response for a in node.take_actions() if type(a).__name__ == "SendResponse"]
    assert resp.partition_error_code == errors.INVALID_VOTER_KEY  # type: ignore[attr-defined]
    assert node.state_name == "follower" and node.leader_id == 3


def test_begin_quorum_epoch_from_a_stale_leader_is_fenced_whatever_the_voter_key() -> None:
    """validateVoterOnlyRequest comes first: a stale leader learns our epoch even when the
    key it sent does not match (it would otherwise only see INVALID_VOTER_KEY)."""
    node = make_node(2, election=ElectionState(6, 3, None))
    node.take_actions()
    node.handle_request(1, BeginQuorumEpochRequest(None, 10, dir_id(10), 1, 5), 5)
    (resp,) = [a.response for a in node.take_actions() if type(a).__name__ == "SendResponse"]
    assert resp.partition_error_code == errors.FENCED_LEADER_EPOCH  # type: ignore[attr-defined]
    assert (resp.leader_id, resp.leader_epoch) == (3, 6)  # type: ignore[attr-defined]
