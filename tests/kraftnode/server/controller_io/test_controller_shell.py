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
from typing import Any

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


def start_with_brokers(cl: Cluster, brokers: list[Any]) -> int:
    """Start the quorum, wait for its active controller, register brokers 11-13 with it (appended
    to ``brokers``, for the caller to close); the active controller's id."""
    from tests.support.sim_brokers import SimBroker

    cl.start_all()
    leader = wait_for_hw(cl).leader_id
    deadline = time.monotonic() + 60
    while "active controller in epoch" not in cl.log(leader):
        assert time.monotonic() < deadline, cl.log(leader)[-3000:]
        time.sleep(0.1)
    brokers.extend(SimBroker(cl.port(leader), b, "MkU3OEVBNTcwNTJENDM2Qg") for b in (11, 12, 13))
    for b in brokers:
        b.join()
    return int(leader)


def test_a_standby_becomes_active_on_the_view_it_kept_ready(tmp_path: Path) -> None:
    """A standby follows the committed log in its controller view, so the node that takes over
    after a kill -9 of the active controller starts from that view (no copy of the image) and
    sees every broker and topic the old one wrote: a broker keeps heartbeating without
    registering again, and the existing topic is refused as a duplicate."""
    from tests.support.sim_brokers import SimBroker

    cl = Cluster(tmp_path, 3, application_records=False)  # brokers register: no application records
    brokers: list[SimBroker] = []
    try:
        leader = start_with_brokers(cl, brokers)
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


def test_a_restarted_standby_builds_its_view_in_steps_and_catches_up(tmp_path: Path) -> None:
    """A standby that starts again with more partitions than one step indexes builds its view in
    the duty loop step by step (the event loop serves fetches between steps), once it has caught
    up with the leader: it logs the build, at an offset past the high watermark at its kill, with
    more partitions than a step, and the leader sees it fetch up to its end."""
    from kraftnode.protocol.registry import DESCRIBE_QUORUM
    from kraftnode.server.controller_io.controller_shell import VIEW_BUILD_STEP
    from tests.support.sim_brokers import SimBroker

    # snapshots every 64 KiB of records: the standby starts again from one holding the partitions
    cl = Cluster(tmp_path, 3, application_records=False,
                 extra="metadata.log.max.record.bytes.between.snapshots=65536\n")
    brokers: list[SimBroker] = []
    try:
        leader = start_with_brokers(cl, brokers)
        C = w.CreateTopicsRequest
        topics = VIEW_BUILD_STEP // 10 + 600   # past one step: 10 partitions each
        for first in range(0, topics, 50):
            _, r = call(cl.port(leader), CREATE_TOPICS, 7, C(timeout_ms=30000, validate_only=False, topics=[
                C.CreatableTopic(name=f"t{i}", num_partitions=10, replication_factor=3, assignments=[], configs=[])
                for i in range(first, min(first + 50, topics))]), timeout=60)
            assert all(t.error_code == 0 for t in r.topics), r  # type: ignore[attr-defined]
        standby = next(i for i in cl.ids if i != leader)
        # a TopicRecord and 10 PartitionRecords a topic: a snapshot past offset 1.2 steps holds
        # more partitions than one step indexes
        pdir = tmp_path / f"node{standby}" / "metadata" / "__cluster_metadata-0"
        deadline = time.monotonic() + 60
        while max((int(f.name[:20]) for f in pdir.glob("*.checkpoint")), default=0) < VIEW_BUILD_STEP * 1.2:
            assert time.monotonic() < deadline, cl.log(standby)[-3000:]
            time.sleep(0.1)
        cl.kill(standby)
        Q = w.DescribeQuorumRequest
        _, d = call(cl.port(leader), DESCRIBE_QUORUM, 1, Q(topics=[Q.TopicData(
            topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]), timeout=20)
        hw_at_kill = d.topics[0].partitions[0].high_watermark  # type: ignore[attr-defined]
        (tmp_path / f"node{standby}" / "node.log").write_text("")
        cl.start(standby)
        deadline = time.monotonic() + 90
        while True:
            built = re.findall(r"standby controller view built at offset (\d+): (\d+) partition\(s\) indexed in "
                               r"(\d+) step\(s\)", cl.log(standby))
            _, d = call(cl.port(leader), DESCRIBE_QUORUM, 1, Q(topics=[Q.TopicData(
                topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]), timeout=20)
            p = d.topics[0].partitions[0]  # type: ignore[attr-defined]
            leo = {v.replica_id: v.log_end_offset for v in p.current_voters}
            if built and leo[standby] >= p.high_watermark > 0:
                break
            assert time.monotonic() < deadline, cl.log(standby)[-3000:]
            time.sleep(0.2)
        offset, partitions, steps = map(int, built[0])
        assert "state loaded from snapshot" in cl.log(standby)
        assert partitions > VIEW_BUILD_STEP and steps >= 2, built
        assert offset >= hw_at_kill, (built, hw_at_kill)   # built once caught up, not before
    finally:
        for b in brokers:
            b.close()
        cl.close()
