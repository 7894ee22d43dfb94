"""What the Java consumer and idempotent producer rely on while the leader holds records
it has appended but not yet committed (its log end offset above its high watermark), as
a new leader does right after an election: a real 3-node quorum whose followers are
stopped (SIGSTOP) so that the leader's acks=1 appends stay uncommitted.

- Fetch at an offset between the high watermark and the log end is not out of range
  (Kafka's LocalLog.read): the Java consumer resets its position on OFFSET_OUT_OF_RANGE
  (FetchCollector.handleOffsetOutOfRange), so that answer would make it re-read or skip
  records after a leader change.
- An acks=all retry of a batch the leader already has is answered only once that batch
  is committed (Kafka parks it in a DelayedProduce), not at once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import FETCH, INIT_PRODUCER_ID, LIST_OFFSETS, PRODUCE
from kraftnode.server.raft_io.wire import METADATA_TOPIC, METADATA_TOPIC_ID
from recordbatch import Record, build_batch
from tests.support.cluster import Cluster, wait_for_hw
from tests.support.node import call

pytestmark = pytest.mark.timeout(120)


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # a long fetch timeout: the leader must not resign while its followers are stopped
    cl = Cluster(tmp_path, 3, extra="controller.quorum.fetch.timeout.ms=60000\n")
    cl.start_all()
    wait_for_hw(cl, 1, 30)
    yield cl
    for p in cl.procs.values():
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
    cl.close()


def _produce(port: int, batch: bytes, acks: int, timeout_ms: int) -> w.ProduceResponse:
    req = w.ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
        w.ProduceRequest.TopicProduceData(name=METADATA_TOPIC, partition_data=[
            w.ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    _, resp = call(port, PRODUCE, 11, req)
    assert isinstance(resp, w.ProduceResponse)
    return resp


def _fetch(port: int, offset: int) -> w.FetchResponse.PartitionData:
    req = w.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                         replica_state=w.FetchRequest.ReplicaState(replica_id=-1), topics=[
        w.FetchRequest.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[
            w.FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                          partition_max_bytes=1 << 20)])])
    _, resp = call(port, FETCH, 16, req)
    assert isinstance(resp, w.FetchResponse)
    return resp.responses[0].partitions[0]


def _latest(port: int, timestamp: int = -1) -> w.ListOffsetsResponse.ListOffsetsPartitionResponse:
    req = w.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        w.ListOffsetsRequest.ListOffsetsTopic(name=METADATA_TOPIC, partitions=[
            w.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    _, resp = call(port, LIST_OFFSETS, 9, req)
    assert isinstance(resp, w.ListOffsetsResponse)
    return resp.topics[0].partitions[0]


def test_uncommitted_tail_fetch_and_duplicate_retry(cluster: Cluster) -> None:
    info = wait_for_hw(cluster, 1, 30)
    leader = info.leader_id
    port = cluster.port(leader)
    followers = [i for i in cluster.ids if i != leader]
    _, ipid = call(port, INIT_PRODUCER_ID, 5, w.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert isinstance(ipid, w.InitProducerIdResponse) and ipid.error_code == 0
    batch = build_batch([Record(None, b"r0", (), None), Record(None, b"r1", (), None)],
                        producer_id=ipid.producer_id, producer_epoch=ipid.producer_epoch,
                        base_sequence=0)

    for i in followers:
        p = cluster.procs[i]
        assert p is not None
        os.kill(p.pid, signal.SIGSTOP)
    try:
        first = _produce(port, batch, acks=1, timeout_ms=5000).responses[0].partition_responses[0]
        assert first.error_code == 0
        base = first.base_offset
        leo = base + 2

        # between the high watermark and the log end: no records, no error
        pd = _fetch(port, leo)
        assert pd.error_code == Errors.NONE, Errors(pd.error_code).name
        assert pd.high_watermark <= base
        assert not pd.records
        pd = _fetch(port, base + 1)
        assert pd.error_code == Errors.NONE and not pd.records
        # beyond the log end: out of range, as Kafka
        assert _fetch(port, leo + 1).error_code == Errors.OFFSET_OUT_OF_RANGE
        # LATEST is the high watermark, not the log end
        assert _latest(port).offset <= base

        # the acks=all retry of the uncommitted batch waits for its commit: here it cannot
        t0 = time.monotonic()
        retry = _produce(port, batch, acks=-1, timeout_ms=500).responses[0].partition_responses[0]
        assert retry.error_code == Errors.REQUEST_TIMED_OUT, Errors(retry.error_code).name
        assert time.monotonic() - t0 >= 0.45
    finally:
        for i in followers:
            p = cluster.procs[i]
            assert p is not None
            os.kill(p.pid, signal.SIGCONT)

    # once the followers are back the same retry is acknowledged at the original offset
    retry = _produce(port, batch, acks=-1, timeout_ms=20000).responses[0].partition_responses[0]
    assert (retry.error_code, retry.base_offset) == (Errors.NONE, base)
    pd = _fetch(port, base)
    assert pd.error_code == Errors.NONE and pd.high_watermark >= leo
    assert _latest(port).offset >= leo
    # EARLIEST_LOCAL (-4) is the log start offset, LATEST_TIERED (-5) is -1 with nothing
    # tiered (Kafka's UnifiedLog.fetchOffsetByTimestamp); neither is the high watermark
    assert _latest(port, -4).offset == _latest(port, -2).offset == 0
    tiered = _latest(port, -5)
    assert (tiered.error_code, tiered.offset, tiered.leader_epoch) == (0, -1, -1)


def test_latest_offset_never_goes_back_across_a_restart(cluster: Cluster) -> None:
    """A restarted node's high watermark starts at 0 and, once elected, stays below its
    epoch's start offset until an entry of its epoch commits. LATEST must then answer
    OFFSET_NOT_AVAILABLE (KIP-207; the Java consumer retries), not an offset below one
    the previous leader gave out: seekToEnd would land at the start of the log."""
    for i in range(3):
        batch = build_batch([Record(None, f"v{i}".encode(), (), None)])
        assert _produce(cluster.port(wait_for_hw(cluster).leader_id), batch, -1,
                        10000).responses[0].partition_responses[0].error_code == 0
    before = wait_for_hw(cluster, 1, 30).high_watermark
    for i in cluster.ids:
        cluster.kill(i)
    cluster.start_all()
    seen_not_available = False
    deadline = time.monotonic() + 30
    answered = None
    while answered is None and time.monotonic() < deadline:
        for i in cluster.ids:
            try:
                rp = _latest(cluster.port(i))
            except OSError:
                continue
            if rp.error_code == Errors.OFFSET_NOT_AVAILABLE:
                seen_not_available = True
            elif rp.error_code == Errors.NONE:
                answered = rp.offset
                break
    assert answered is not None
    assert answered >= before, (answered, before, seen_not_available)
