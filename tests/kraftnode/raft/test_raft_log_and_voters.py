"""The in-memory log's epoch cache and crash model, and the voter set history (KIP-853)."""

from __future__ import annotations

import uuid

from kraftnode.raft.batches import Batch, KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.election import ElectionState
from kraftnode.raft.history import VoterSetHistory
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.messages import (
    BeginQuorumEpochRequest,
    CurrentLeader,
    DivergingEpoch,
    FetchRequest,
    FetchResponse,
)
from tests.kraftnode.raft.harness_log import HarnessLog
from tests.kraftnode.raft.rafttest_helpers import fetch_request, make_node, sent, voters


def _log() -> HarnessLog:
    log = HarnessLog()
    log.append_as_leader(["a", "b"], 1)  # 0-1
    log.append_as_leader(["c"], 3)  # 2
    log.append_as_leader(["d"], 3)  # 3
    log.append_as_leader(["e"], 5)  # 4
    return log


def test_end_offset_for_epoch_follows_kafka_epoch_cache() -> None:
    log = _log()
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(5, 5)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(5, 5)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(3, 4)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(3, 4)  # largest epoch <= 4
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(1, 2)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)  # older than all: the first start


def test_truncation_drops_epochs_and_whole_batches() -> None:
    log = _log()
    log.truncate_to(1)  # inside batch 0-1: the whole batch goes
    assert log.end_offset == 0 and log.last_fetched_epoch == 0
    log = _log()
    log.truncate_to(3)
    assert log.end_offset == 3 and log.end_offset_for_epoch(5) == OffsetAndEpoch(3, 3)


def test_read_respects_max_bytes_but_returns_one_batch() -> None:
    log = _log()
    assert len(log.read(0, 1)) == 1
    assert [b.base_offset for b in log.read(2, 1 << 20)] == [2, 3, 4]
    assert [b.base_offset for b in log.read(1, 1 << 20)][0] == 0  # the batch containing offset 1


def test_crash_loses_only_the_unflushed_tail() -> None:
    log = _log()
    log.flushed_offset = 0
    log.flush()
    log.append_as_leader(["f"], 5)
    log.append_as_leader(["g"], 5)
    log.crash(keep_unflushed_batches=1)
    assert log.end_offset == 6
    log.append_as_leader(["h"], 5)
    log.crash()
    assert log.end_offset == 6


def _voters_batch(offset: int, *ids: int) -> Batch:
    return Batch(offset, offset, 1, (VotersControlRecord(voters(*ids, directory_ids=True)),), True)


def test_voter_history_includes_uncommitted_and_reverts_on_truncation() -> None:
    history = VoterSetHistory(voters(1, 2, 3))
    assert history.latest().ids == {1, 2, 3} and history.kraft_version() == 0
    history.observe([Batch(0, 1, 1, (KRaftVersionControlRecord(1), VotersControlRecord(voters(1, 2, 3, directory_ids=True))), True)])
    history.observe([_voters_batch(10, 1, 2, 3, 4)])
    assert history.latest().ids == {1, 2, 3, 4} and history.kraft_version() == 1
    assert history.voters_at(5).ids == {1, 2, 3}
    assert history.truncate_new_entries(10)
    assert history.latest().ids == {1, 2, 3}


def test_dynamic_voter_set_from_the_log_decides_who_may_vote() -> None:
    log = HarnessLog()
    dynamic = voters(1, 2, 3, directory_ids=True)
    log.append_as_leader([KRaftVersionControlRecord(1), VotersControlRecord(dynamic)], 0, is_control=True)
    node = make_node(1, log=log, voter_set=voters())  # no static voters at all
    assert node.is_voter and node.voters == dynamic
    stranger = make_node(4, log=_copy(log), voter_set=voters())
    assert not stranger.is_voter
    # Same id, other directory: not that voter (KIP-853 replica key).
    import random

    from kraftnode.raft.quorum_config import RaftConfig
    from kraftnode.raft.raft_node import RaftNode

    impostor = RaftNode(1, uuid.UUID(int=5), RaftConfig(), _copy(log), ElectionState(0), voters(), random.Random(1), 0)
    assert not impostor.is_voter


def _copy(log: HarnessLog) -> HarnessLog:
    out = HarnessLog()
    out.append_as_follower(log.batches)
    return out


def test_follower_adopts_then_reverts_an_uncommitted_voter_set() -> None:
    node = make_node(2, election=ElectionState(3, 1, None))
    node.tick(0)
    (req,) = sent(node.take_actions(), FetchRequest)
    batches = (Batch(0, 0, 3, ("a",)), Batch(1, 1, 3, _voters_batch(1, 1, 2).records, True))
    node.handle_response(1, req.correlation_id, FetchResponse(0, 0, 1, CurrentLeader(1, 3), 0, None, None, batches), 5)
    assert node.voters.ids == {1, 2}  # effective as soon as appended, before commit
    node.take_actions()
    # A new leader (epoch 4) never had offset 1: the follower truncates and the set reverts.
    node.handle_request(1, BeginQuorumEpochRequest(None, 2, None, 3, 4), 6)
    (req,) = sent(node.take_actions(), FetchRequest)
    assert req.destination == 3
    diverging = FetchResponse(0, 0, 1, CurrentLeader(3, 4), 0, DivergingEpoch(3, 1))
    node.handle_response(3, req.correlation_id, diverging, 7)
    assert node.log.end_offset == 1
    assert node.voters.ids == {1, 2, 3}
    assert fetch_request(2, 4, 1, 3).fetch_offset == 1
