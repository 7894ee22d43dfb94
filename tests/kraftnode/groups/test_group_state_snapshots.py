"""Group state is carried by snapshots (real processes, small thresholds): after the log
that held the group records (OffsetCommit, and a classic group's GroupMetadata with its
member and assignment) was cleaned, they survive a restart of every node, and a replica
wiped and caught up through FetchSnapshot serves the same OffsetFetch and DescribeGroups
answers once it leads."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import (
    DESCRIBE_GROUPS,
    JOIN_GROUP,
    LIST_OFFSETS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, Cluster, wait_for_hw
from tests.support.node import call

pytestmark = pytest.mark.timeout(240)

TOPIC = "__cluster_metadata"
EXTRA = ("group.initial.rebalance.delay.ms=0\nmetadata.log.max.record.bytes.between.snapshots=4000\n"
         "metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=8192\n"
         "metadata.max.retention.bytes=20000\n")
GROUPS = {f"group-{g}": 100 + 7 * g for g in range(5)}


def wait_until(what: str, check: Callable[[], Any], timeout: float, logs: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{logs()[-4000:]}")


def commit(port: int, group: str, offset: int) -> int:
    R = w.OffsetCommitRequest
    _, resp = call(port, OFFSET_COMMIT, 8, R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                            topics=[R.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                                R.OffsetCommitRequestPartition(partition_index=0,
                                                                               committed_offset=offset,
                                                                               committed_metadata=f"m{offset}")])]))
    return int(resp.topics[0].partitions[0].error_code)  # type: ignore[attr-defined]


def fetch_offsets(port: int) -> dict[str, tuple[int, str]] | None:
    """OffsetFetch v8 of every group: group -> (offset, metadata); None on an error."""
    Q = w.OffsetFetchRequest
    _, resp = call(port, OFFSET_FETCH, 8, Q(require_stable=False, groups=[
        Q.OffsetFetchRequestGroup(group_id=g, topics=[Q.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])])
        for g in GROUPS]))
    out = {}
    for g in resp.groups:  # type: ignore[attr-defined]
        if g.error_code:
            return None
        p = g.topics[0].partitions[0]
        out[g.group_id] = (p.committed_offset, p.metadata)
    return out


def join_stable(port: int) -> str:
    """One classic member joins ``g-classic`` (KIP-394: twice) and syncs its assignment; a
    long session (5 min) keeps it a member across the restarts below."""
    J = w.JoinGroupRequest
    member = ""
    for _ in range(2):
        _, resp = call(port, JOIN_GROUP, 9, J(group_id="g-classic", session_timeout_ms=300_000,
                                             rebalance_timeout_ms=10_000, member_id=member, group_instance_id=None,
                                             protocol_type="consumer", reason=None,
                                             protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"sub")]))
        member = resp.member_id  # type: ignore[attr-defined]
    assert resp.error_code == 0 and resp.generation_id == 1, resp  # type: ignore[attr-defined]
    S = w.SyncGroupRequest
    _, sync = call(port, SYNC_GROUP, 5, S(group_id="g-classic", generation_id=1, member_id=member,
                                          group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                          assignments=[S.SyncGroupRequestAssignment(member_id=member,
                                                                                    assignment=b"assigned")]))
    assert sync.error_code == 0 and sync.assignment == b"assigned", sync  # type: ignore[attr-defined]
    return member


def describe(port: int) -> tuple[object, ...] | None:
    _, resp = call(port, DESCRIBE_GROUPS, 5, w.DescribeGroupsRequest(groups=["g-classic"],
                                                                      include_authorized_operations=False))
    g = resp.groups[0]  # type: ignore[attr-defined]
    if g.error_code:
        return None
    return (g.group_state, g.protocol_type, g.protocol_data,
            [(m.member_id, m.member_metadata, m.member_assignment) for m in g.members])


def earliest(port: int) -> int:
    L = w.ListOffsetsRequest
    _, resp = call(port, LIST_OFFSETS, 7, L(replica_id=-1, isolation_level=0, topics=[
        L.ListOffsetsTopic(name=TOPIC, partitions=[L.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-2)])]))
    p = resp.topics[0].partitions[0]  # type: ignore[attr-defined]
    return int(p.offset) if p.error_code == 0 else -1


def produce_keyed(port: int, start: int, n: int) -> None:
    """Keyed application records (Produce, acks=all) to push the log past the threshold."""
    from recordbatch import Record, build_batch
    P = w.ProduceRequest
    for i in range(start, start + n, 20):
        batch = build_batch([Record(f"k{j % 40}".encode(), f"v{j}".encode() * 10) for j in range(i, i + 20)])
        _, resp = call(port, 0, 9, P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
        assert resp.responses[0].partition_responses[0].error_code == 0  # type: ignore[attr-defined]


def test_offsets_survive_cleaning_restart_and_fetch_snapshot(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 3, extra=EXTRA)
    try:
        cl.start_all()
        lead = cl.wait_for_leader(30).leader_id
        wait_for_hw(cl, 1, 30)
        want = {g: (off, f"m{off}") for g, off in GROUPS.items()}
        for g, off in GROUPS.items():
            assert wait_until("an accepted commit", lambda g=g, off=off: commit(cl.port(lead), g, off) == 0 or None,
                              20) is True
        member = join_stable(cl.port(lead))
        group = ("Stable", "consumer", "range", [(member, b"sub", b"assigned")])
        assert describe(cl.port(lead)) == group
        committed_at = cl.quorum().high_watermark  # type: ignore[union-attr]
        assert fetch_offsets(cl.port(lead)) == want
        # bury the commits: snapshots, then retention cleans the log far past them
        produce_keyed(cl.port(lead), 0, 2000)
        wait_until("the log cleaned past the OffsetCommit records",
                   lambda: earliest(cl.port(lead)) > committed_at, 60, lambda: cl.log(lead))
        # every node restarts: no node has the OffsetCommit records in its log any more
        for i in cl.ids:
            cl.stop(i)
        for i in cl.ids:
            first = min(int(p.name.split(".")[0]) for p in
                        (tmp_path / f"node{i}" / "metadata" / "__cluster_metadata-0").glob("*.log"))
            assert first > committed_at, (i, first, committed_at)
        cl.start_all()
        lead = cl.wait_for_leader(30).leader_id
        got = wait_until("OffsetFetch after the restart", lambda: fetch_offsets(cl.port(lead)), 30,
                         lambda: cl.log(lead))
        assert got == want
        assert describe(cl.port(lead)) == group

        # a replica wiped and re-formatted catches up through FetchSnapshot ...
        wiped = next(i for i in cl.ids if i != lead)
        cl.stop(wiped)
        shutil.rmtree(tmp_path / f"node{wiped}" / "metadata")
        subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config",
                        str(tmp_path / f"node{wiped}" / "server.properties"), "--cluster-id", CLUSTER_ID],
                       check=True, capture_output=True)
        cl.start(wiped)
        wait_until(f"node {wiped} to install a snapshot", lambda: "installed snapshot" in cl.log(wiped), 30,
                   lambda: cl.log(wiped))
        # ... and, once it leads, answers OffsetFetch as the old leader did
        for _attempt in range(8):
            info = wait_until("a leader", lambda: cl.quorum(), 30)
            if info.leader_id == wiped:
                break
            hw = info.high_watermark
            wait_until(f"node {wiped} to catch up",
                       lambda hw=hw: (q := cl.quorum()) is not None
                       and any(v.replica_id == wiped and v.log_end_offset >= hw for v in q.voters),
                       30, lambda: cl.log(wiped))
            old = info.leader_id
            cl.kill(old)
            cl.wait_for_leader(30, exclude=old, min_epoch=info.leader_epoch + 1)
            cl.start(old)
        else:
            pytest.fail(f"node {wiped} never led")
        got = wait_until("OffsetFetch from the wiped replica", lambda: fetch_offsets(cl.port(wiped)), 30,
                         lambda: cl.log(wiped))
        assert got == want
        assert describe(cl.port(wiped)) == group   # the member, its generation's assignment
        # and a new commit on it is served next to the ones from the snapshot
        assert commit(cl.port(wiped), "group-0", 999) == 0
        assert fetch_offsets(cl.port(wiped)) == {**want, "group-0": (999, "m999")}
    finally:
        cl.close()
