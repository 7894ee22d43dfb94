"""`kraftnode quorum ... describe` prints what kafka-metadata-quorum.sh 3.9 prints."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kraftnode.commands.quorum import QuorumInfo, ReplicaInfo, format_replication, format_status
from tests.support.cluster import Cluster, wait_for_hw

D1 = uuid.UUID(int=0x1234)


def _info() -> QuorumInfo:
    return QuorumInfo(
        cluster_id="MkU3OEVBNTcwNTJENDM2Qg", leader_id=1, leader_epoch=7, high_watermark=42,
        voters=[ReplicaInfo(1, D1, 42, 1000, 1000), ReplicaInfo(2, uuid.UUID(int=0), 40, 990, 950),
                ReplicaInfo(3, uuid.UUID(int=0), 42, -1, -1)],
        observers=[ReplicaInfo(9, uuid.UUID(int=0), 12, 800, 700)],
        endpoints={1: ["CONTROLLER://h1:9093"], 2: ["CONTROLLER://h2:9093"]})


def test_status_layout() -> None:
    assert format_status(_info()) == (
        "ClusterId:              MkU3OEVBNTcwNTJENDM2Qg\n"
        "LeaderId:               1\n"
        "LeaderEpoch:            7\n"
        "HighWatermark:          42\n"
        "MaxFollowerLag:         2\n"
        "MaxFollowerLagTimeMs:   50\n"
        'CurrentVoters:          [{"id": 1, "directoryId": "AAAAAAAAAAAAAAAAAAASNA", '
        '"endpoints": ["CONTROLLER://h1:9093"]}, {"id": 2, "directoryId": null, '
        '"endpoints": ["CONTROLLER://h2:9093"]}, {"id": 3, "directoryId": null}]\n'
        'CurrentObservers:       [{"id": 9, "directoryId": null}]\n')


def test_replication_layout() -> None:
    out = format_replication(_info(), human_readable=False)
    lines = out.splitlines()
    assert lines[0].split() == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                                "LastCaughtUpTimestamp", "Status"]
    assert [ln.split() for ln in lines[1:]] == [
        ["1", "AAAAAAAAAAAAAAAAAAASNA", "42", "0", "1000", "1000", "Leader"],
        ["2", "AAAAAAAAAAAAAAAAAAAAAA", "40", "2", "990", "950", "Follower"],
        ["3", "AAAAAAAAAAAAAAAAAAAAAA", "42", "0", "-1", "-1", "Follower"],
        ["9", "AAAAAAAAAAAAAAAAAAAAAA", "12", "30", "800", "700", "Observer"],
    ]
    # Kafka's ToolsUtils.prettyPrintTable: padded cells, each followed by a tab
    assert all(ln.endswith("\t") for ln in lines)
    assert lines[0].startswith("NodeId\tDirectoryId           \t")
    human = format_replication(_info(), human_readable=True, now_ms=2000)
    assert "1000 ms ago" in human and "1050 ms ago" in human


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftnode", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.timeout(120)
def test_against_a_live_quorum(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 3)
    try:
        cl.start_all()
        info = wait_for_hw(cl, 1, 30)
        r = _cli("quorum", "--bootstrap-controller", f"127.0.0.1:{cl.port(1)}", "describe", "--status")
        assert r.returncode == 0, r.stderr
        assert f"LeaderId:               {info.leader_id}\n" in r.stdout
        assert "ClusterId:              MkU3OEVBNTcwNTJENDM2Qg" in r.stdout
        for i in cl.ids:
            assert f'{{"id": {i}, "directoryId": null, "endpoints": ["CONTROLLER://127.0.0.1:{cl.port(i)}"]}}' in r.stdout
        r = _cli("quorum", "--bootstrap-server", cl.bootstrap(), "describe", "--replication")
        assert r.returncode == 0, r.stderr
        rows = [ln.split() for ln in r.stdout.splitlines()[1:]]
        assert sorted(int(x[0]) for x in rows) == [1, 2, 3]
        assert [x[-1] for x in rows].count("Leader") == 1
    finally:
        cl.close()


@pytest.mark.timeout(120)
def test_a_describe_typed_as_the_leader_dies_waits_for_the_next_one(tmp_path: Path) -> None:
    """Right after a kill -9 of the leader the two others still follow it and answer that
    they are not the leader: the describe asks again until the election is over (Kafka's
    Admin client retries NOT_LEADER_OR_FOLLOWER), then names the new leader in a new epoch."""
    cl = Cluster(tmp_path, 3)
    try:
        cl.start_all()
        before = wait_for_hw(cl, 1, 30)
        cl.kill(before.leader_id)
        others = ",".join(f"127.0.0.1:{cl.port(i)}" for i in cl.ids if i != before.leader_id)
        r = _cli("quorum", "--bootstrap-controller", others, "describe", "--status")
        assert r.returncode == 0, r.stderr
        leader = int(r.stdout.split("LeaderId:")[1].split()[0])
        epoch = int(r.stdout.split("LeaderEpoch:")[1].split()[0])
        assert leader != before.leader_id and epoch > before.leader_epoch, r.stdout
    finally:
        cl.close()


@pytest.mark.parametrize(("args", "message"), [
    (["quorum", "--bootstrap-controller", "127.0.0.1:1", "describe"], "One of --status or --replication"),
    (["quorum", "--bootstrap-controller", "127.0.0.1:1", "describe", "--status", "--replication"],
     "Only one of --status or --replication"),
    (["quorum", "--bootstrap-controller", "nonsense", "describe", "--status"], "invalid bootstrap address"),
    (["quorum", "--bootstrap-controller", "127.0.0.1:1", "describe", "--status"], "Connection refused"),
])
def test_user_errors_are_one_line(args: list[str], message: str) -> None:
    r = _cli(*args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
