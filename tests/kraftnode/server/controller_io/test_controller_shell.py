"""The active controller's view when the log is cleaned past it (issue 26: a kraftnode voter that
took over from a Kafka controller answered NOT_CONTROLLER for good after removing it).

The controller shell replays the log into its view lazily (on an operation or a periodic duty).
Records of other writers -- the VotersRecord of a RemoveRaftVoter, a Produce -- can commit, be
snapshotted and, under a small metadata.max.retention.bytes, be cleaned from the log before
the view replays them. The view must then be rebuilt from the committed state; before, every
operation and duty answered NOT_CONTROLLER while the node stayed the raft leader.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import NoOpRecord
from kraftnode.protocol.registry import CREATE_TOPICS, PRODUCE
from recordbatch import Record, build_batch
from tests.support.cluster import Cluster, wait_for_hw
from tests.support.node import call

pytestmark = pytest.mark.timeout(120)

SMALL_LOG = ("metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=2048\n"
             "metadata.log.max.record.bytes.between.snapshots=2048\nmetadata.max.retention.bytes=1000\n")


def produce_noops(port: int, n: int) -> int:
    P = w.ProduceRequest
    records = [Record(None, encode_metadata_record(NoOpRecord(), 0)) for _ in range(n)]
    _, resp = call(port, PRODUCE, 9, P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name="__cluster_metadata", partition_data=[
            P.PartitionProduceData(index=0, records=build_batch(records))])]))
    return int(resp.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]


def create_topic_error(port: int) -> tuple[int, str | None]:
    C = w.CreateTopicsRequest
    _, r = call(port, CREATE_TOPICS, 7, C(timeout_ms=5000, validate_only=True, topics=[
        C.CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
    t = r.topics[0]  # type: ignore[attr-defined]
    return int(t.error_code), t.error_message


def test_the_view_is_rebuilt_when_the_log_is_cleaned_past_it(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 1, extra=SMALL_LOG)
    try:
        cl.start_all()
        wait_for_hw(cl)
        port = cl.port(1)
        deadline = time.monotonic() + 20
        while "active controller in epoch" not in cl.log(1):
            assert time.monotonic() < deadline, cl.log(1)[-3000:]
            time.sleep(0.1)
        part = cl.root / "node1" / "metadata" / "__cluster_metadata-0"
        # bursts of records appended beside the controller, each committed, snapshotted and
        # cleaned within the second the idle controller's duty timer sleeps (no brokers: no NoOps)
        for _ in range(6):
            for _ in range(4):
                assert produce_noops(port, 150) == 0
            time.sleep(1.5)
            code, message = create_topic_error(port)
            assert code != Errors.NOT_CONTROLLER, (message, cl.log(1)[-3000:])
        assert not (part / "00000000000000000000.log").exists(), sorted(part.iterdir())
        # no brokers: Kafka's refusal, from a controller that serves
        assert code == Errors.INVALID_REPLICATION_FACTOR, (code, message)
        text = cl.log(1)
        assert "controller duty failed" not in text, text[-3000:]
        assert re.search(r"the metadata log now starts at \d+, past the controller's view", text), text[-3000:]
    finally:
        cl.close()


def test_a_standby_becomes_active_on_the_view_it_kept_ready(tmp_path: Path) -> None:
    """A standby follows the committed log in its controller view, so the node that takes over
    after a kill -9 of the active controller starts from that view (no copy of the image) and
    sees every broker and topic the old one wrote: a broker keeps heartbeating without
    registering again, and the existing topic is refused as a duplicate."""
    from tests.support.sim_brokers import SimBroker

    cl = Cluster(tmp_path, 3, application_records=False)  # brokers register: no application records
    brokers: list[SimBroker] = []
    try:
        cl.start_all()
        leader = wait_for_hw(cl).leader_id
        deadline = time.monotonic() + 60
        while "active controller in epoch" not in cl.log(leader):
            assert time.monotonic() < deadline, cl.log(leader)[-3000:]
            time.sleep(0.1)
        brokers = [SimBroker(cl.port(leader), b, "MkU3OEVBNTcwNTJENDM2Qg") for b in (11, 12, 13)]
        for b in brokers:
            b.join()
        C = w.CreateTopicsRequest

        def create(port: int) -> int:
            _, r = call(port, CREATE_TOPICS, 7, C(timeout_ms=10000, validate_only=False, topics=[
                C.CreatableTopic(name="kept", num_partitions=6, replication_factor=3, assignments=[],
                                 configs=[])]), timeout=30)
            return int(r.topics[0].error_code)  # type: ignore[attr-defined]
        assert create(cl.port(leader)) == 0
        time.sleep(1)  # the standbys' views follow the commit (they poll every 100 ms)
        cl.kill(leader)
        new = cl.wait_for_leader(timeout=60, exclude=leader).leader_id
        deadline = time.monotonic() + 60
        while True:
            got = [ln for ln in cl.log(new).splitlines() if "active controller in epoch" in ln]
            if got:
                break
            assert time.monotonic() < deadline, cl.log(new)[-3000:]
            time.sleep(0.1)
        assert "the standby's view kept ready" in got[-1], got
        assert "3 broker(s), 1 topic(s)" in got[-1], got
        assert create(cl.port(new)) == Errors.TOPIC_ALREADY_EXISTS
        for b in brokers:
            b.close()
            b.port = cl.port(new)
            r = b.heartbeat(b.epoch)
            assert r.error_code == 0 and not r.is_fenced, r
    finally:
        for b in brokers:
            b.close()
        cl.close()
