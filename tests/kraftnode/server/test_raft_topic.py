"""A kraftnode quorum formatted with TestRaftServer's all-zero cluster id speaks raft on
``__raft_performance_test`` (topic id AAAAAAAAAAAAAAAAAAAAAg), as Kafka's standalone raft
server does, so Kafka's own Java Raft nodes can share the quorum."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import FETCH
from tests.support.cluster import Cluster, free_ports, wait_for_hw
from tests.support.node import call

pytestmark = pytest.mark.timeout(90)

ZERO = "AAAAAAAAAAAAAAAAAAAAAA"


def raft_fetch(port: int, topic_id: uuid.UUID, epoch: int) -> w.FetchResponse:
    F = w.FetchRequest
    req = F(cluster_id=ZERO, replica_state=F.ReplicaState(replica_id=3, replica_epoch=-1), max_wait_ms=0,
            min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(
                partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=0,
                log_start_offset=-1, partition_max_bytes=1 << 20, replica_directory_id=uuid.UUID(int=0))])],
            forgotten_topics_data=[], rack_id="")
    _, resp = call(port, FETCH, 17, req)
    return resp  # type: ignore[return-value]


def _reformat(cl: Cluster, cluster_id: str) -> None:
    for i in cl.ids:
        d = cl.root / f"node{i}"
        subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config", str(d / "server.properties"),
                        "--cluster-id", cluster_id, "--ignore-formatted"], check=True, capture_output=True)


def test_zero_cluster_id_selects_the_test_raft_server_topic(tmp_path: Path) -> None:
    cl = Cluster(tmp_path / "a", 3)
    for i in cl.ids:  # re-create the node dirs under the all-zero cluster id
        subprocess.run(["rm", "-rf", str(cl.root / f"node{i}" / "metadata")], check=True)
    _reformat(cl, ZERO)
    try:
        cl.start(1)
        cl.start(2)
        info = wait_for_hw(cl)  # the nodes elected a leader over __raft_performance_test
        port = cl.port(info.leader_id)
        ok = raft_fetch(port, uuid.UUID(int=2), info.leader_epoch)
        assert ok.error_code == 0 and ok.responses[0].partitions[0].error_code == 0
        assert raft_fetch(port, uuid.UUID(int=1), info.leader_epoch).error_code == Errors.INVALID_REQUEST
        assert "quorum on __raft_performance_test" in cl.log(info.leader_id)
        # no controller records: the log carries only what is appended to it
        assert "controller activation" not in cl.log(info.leader_id)
    finally:
        cl.close()


def test_default_topic_is_cluster_metadata(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 3)
    try:
        cl.start(1)
        cl.start(2)
        info = wait_for_hw(cl)
        port = cl.port(info.leader_id)
        assert raft_fetch(port, uuid.UUID(int=2), info.leader_epoch).error_code == Errors.INVALID_REQUEST
    finally:
        cl.close()


def test_bad_raft_topic_setting_stops_start_up(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    d = tmp_path / "n"
    d.mkdir()
    (d / "server.properties").write_text(
        f"node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
        f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
        f"log.dirs={d / 'metadata'}\nkraftnode.raft.topic=orders\n")
    r = subprocess.run([sys.executable, "-m", "kraftnode", "start", str(d / "server.properties")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "kraftnode.raft.topic" in r.stderr and "Traceback" not in r.stderr
