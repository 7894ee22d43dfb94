"""FetchSnapshot (KIP-630): a follower behind the leader's log start downloads and installs a snapshot."""

from __future__ import annotations

import random

from kraftnode.raft import errors
from kraftnode.raft.actions import SendRequest, SendResponse
from kraftnode.raft.batches import KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
)
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.raft_node import RaftNode
from tests.kraftnode.raft.harness_log import HarnessLog
from tests.kraftnode.raft.rafttest_helpers import CLUSTER, dir_id, elect, voters

CONFIG = RaftConfig(cluster_id=CLUSTER, fetch_max_bytes=300)


def _node(node_id: int, log: HarnessLog, election: ElectionState) -> RaftNode:
    return RaftNode(node_id, dir_id(node_id), CONFIG, log, election, voters(), random.Random(1), 0, snapshots=log)


def _pump(leader: RaftNode, follower: RaftNode, now: int, rounds: int = 200) -> None:
    """Deliver follower requests to the leader and the answers back, until quiet."""
    for _ in range(rounds):
        reqs = [a for a in follower.take_actions() if isinstance(a, SendRequest) and a.destination == 1]
        if not reqs:
            return
        for req in reqs:
            leader.handle_request(req.correlation_id, req.request, now)
            for a in leader.take_actions():
                if isinstance(a, SendResponse) and a.request_id == req.correlation_id:
                    follower.handle_response(1, req.correlation_id, a.response, now)
        now += 1


def test_lagging_follower_installs_the_leaders_snapshot() -> None:
    dynamic = voters(1, 2, 3, directory_ids=True)
    leader_log = HarnessLog()
    leader_log.append_as_leader([KRaftVersionControlRecord(1), VotersControlRecord(dynamic)], 0, is_control=True)
    leader_log.flush()
    leader = _node(1, leader_log, ElectionState(0))
    now = elect(leader, 0)
    leader.take_actions()
    for i in range(40):
        leader.append([f"record-{i}" * 5], now)
    # Followers 2 and 3 catch up (in the leader's books), so everything commits.
    end = leader_log.end_offset
    leader.handle_request(1, FetchRequest(CLUSTER, 2, dir_id(2), 0, 1, end, 1), now)
    leader.take_actions()
    assert leader.high_watermark == end
    leader_log.flush()  # the driver would have executed the FlushLog actions
    snap = leader_log.compact(end - 5)  # one record per batch: any offset is a boundary
    assert leader_log.start_offset == snap.offset

    follower_log = HarnessLog()
    follower_log.append_as_follower(list(leader_log.snapshot_batches[:1]))  # only the bootstrap batch
    follower_log.flush()
    follower = _node(3, follower_log, ElectionState(1, 1, None))
    follower.tick(now)
    _pump(leader, follower, now)
    assert follower_log.snapshot_id == snap and follower_log.start_offset == snap.offset
    assert follower.high_watermark >= snap.offset
    assert follower_log.end_offset == leader_log.end_offset  # fetched the tail after the snapshot
    assert follower.voters == dynamic  # voter set came back from the snapshot


def test_leader_refuses_unknown_snapshots_and_bad_positions() -> None:
    log = HarnessLog()
    log.append_as_leader(["a"], 0)
    log.flush()
    leader = RaftNode(1, dir_id(1), CONFIG, log, ElectionState(0), voters(1), random.Random(1), 0, snapshots=log)
    leader.tick(leader.next_deadline_ms() or 0)
    assert leader.is_leader
    log.flush()
    snap = log.compact(log.end_offset)
    leader.take_actions()

    def ask(snapshot: OffsetAndEpoch, position: int, epoch: int = 1) -> FetchSnapshotResponse:
        leader.handle_request(5, FetchSnapshotRequest(CLUSTER, 2, None, epoch, SnapshotId(snapshot.offset, snapshot.epoch), position), 10)
        (resp,) = [a.response for a in leader.take_actions() if isinstance(a, SendResponse)]
        assert isinstance(resp, FetchSnapshotResponse)
        return resp

    ok = ask(snap, 0)
    assert ok.partition_error_code == errors.NONE and ok.size > 0 and ok.unaligned_records
    assert ask(OffsetAndEpoch(snap.epoch, snap.offset + 7), 0).partition_error_code == errors.SNAPSHOT_NOT_FOUND
    assert ask(snap, -1).partition_error_code == errors.POSITION_OUT_OF_RANGE
    assert ask(snap, ok.size + 1).partition_error_code == errors.POSITION_OUT_OF_RANGE
    assert ask(snap, 0, epoch=0).partition_error_code == errors.FENCED_LEADER_EPOCH


def test_an_empty_replica_is_sent_to_the_latest_snapshot_while_the_log_still_starts_at_0() -> None:
    """KAFKA-15078 (Kafka 3.6 on, KafkaRaftClient.tryCompleteFetchRequest): a Fetch at offset 0
    is answered with the latest snapshot's id even though the log still holds offset 0 -- a new
    broker loads one snapshot instead of replaying the whole log. Not the bootstrap snapshot
    (0, 0), and not a replica that has records."""
    log = HarnessLog()
    leader = RaftNode(1, dir_id(1), CONFIG, log, ElectionState(0), voters(1), random.Random(1), 0, snapshots=log)
    leader.tick(leader.next_deadline_ms() or 0)
    assert leader.is_leader

    def fetch(offset: int, last_epoch: int) -> FetchResponse:
        leader.handle_request(9, FetchRequest(CLUSTER, 1000, dir_id(1000), 0, 1, offset, last_epoch), 10)
        (resp,) = [a.response for a in leader.take_actions() if isinstance(a, SendResponse)]
        assert isinstance(resp, FetchResponse)
        return resp

    for value in ("a", "b", "c"):
        leader.append([value], 5)
        log.flush()
    leader.take_actions()
    # no snapshot yet: an empty replica reads the log from 0
    first = fetch(0, 0)
    assert first.snapshot_id is None and first.records
    snap = log.compact(log.end_offset, delete=False)
    assert log.start_offset == 0
    sent = fetch(0, 0)
    assert sent.snapshot_id == SnapshotId(snap.offset, snap.epoch) and not sent.records
    # a replica that holds records is answered from the log, as before
    after = fetch(1, 1)
    assert after.snapshot_id is None and after.diverging_epoch is None and after.records
