"""Genuine ``kafka-metadata-quorum.sh`` (Kafka 3.9, and 4.4 for ``describe``) against real kraftnode quorums.

``describe --status``, ``--replication`` and ``--replication --human-readable`` against
static (``controller.quorum.voters``) and dynamic (``format --initial-controllers``, one
``--no-initial-controllers`` observer) quorums of 3 and 5 nodes, through
``--bootstrap-controller`` and ``--bootstrap-server``. Every field is parsed and compared
with the quorum's true state (the nodes' logs for leader and epoch, DescribeQuorum through
our client for offsets, the formatted directory ids and ports) and with
``kraftnode quorum describe`` for the same quorum.

Each quorum starts once per module (pytest groups tests by the fixture's parameter).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kraftnode import cli
from kraftnode.commands.quorum import QuorumInfo
from kraftnode.quorum_client import describe_cluster
from recordbatch.wire import uuid_to_base64
from tests.support.cluster import CLUSTER_ID, Cluster, wait_for_hw
from tests.support.kafka import KafkaHome
from tests.support.quorums import DynamicCluster, StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SHAPES = [("static", 3), ("dynamic", 3), ("static", 5), ("dynamic", 5)]


def settle(cl: Cluster, timeout: float = 60) -> QuorumInfo:
    """Wait until the quorum is idle: every controller registered (DescribeCluster lists all),
    every replica at the leader's log end, and the high watermark unchanged for 0.6 s."""
    deadline = time.monotonic() + timeout
    last: QuorumInfo | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        info = wait_for_hw(cl, 1, timeout)
        ends = {r.log_end_offset for r in info.voters + info.observers}
        key = (info.leader_id, info.leader_epoch, info.high_watermark)
        registered = len(describe_cluster("127.0.0.1", cl.port(info.leader_id), 2).brokers)
        if last is None or key != (last.leader_id, last.leader_epoch, last.high_watermark) or len(ends) != 1 \
                or len(info.observers) != getattr(cl, "observers", 0) or registered != cl.n:
            last, since = info, time.monotonic()
        elif time.monotonic() - since > 0.6:
            return info
        time.sleep(0.1)
    raise AssertionError(f"quorum did not settle: {last}")


def leader_from_logs(cl: Cluster) -> tuple[int, int]:
    """(leader id, epoch) from the nodes' own 'became leader in epoch N' lines."""
    best = (-1, -1)
    for i in cl.ids:
        for m in re.finditer(r"became leader in epoch (\d+)", cl.log(i)):
            best = max(best, (int(m.group(1)), i))
    return best[1], best[0]


@pytest.fixture(scope="module", params=SHAPES, ids=[f"{k}{n}" for k, n in SHAPES])
def quorum(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    kind, n = request.param
    root = tmp_path_factory.mktemp(f"mq-{kind}{n}")
    cl: Cluster = DynamicCluster(root, n, observers=1) if kind == "dynamic" else StaticCluster(root, n)
    cl.start_all()
    try:
        settle(cl)
        yield cl
    finally:
        cl.close()


def tool(kafka: KafkaHome, *args: str) -> str:
    r = kafka.tool("kafka-metadata-quorum", *args, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def ours(*args: str) -> str:
    """``kraftnode quorum ARGS``, run in-process (its CLI entry point, no interpreter start-up)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["quorum", *args])
    assert rc == 0, err.getvalue()
    return out.getvalue()


def parse_status(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        out[key] = json.loads(value) if value.startswith("[") else value
    return out


def parse_table(text: str) -> list[dict[str, str]]:
    rows = [[c.strip() for c in line.rstrip("\t").split("\t")] for line in text.splitlines() if line.strip()]
    header = rows[0]
    assert header == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                      "LastCaughtUpTimestamp", "Status"]
    return [dict(zip(header, r, strict=True)) for r in rows[1:]]


def dir_text(cl: Cluster, i: int) -> str | None:
    return uuid_to_base64(cl.dir_ids[i]) if isinstance(cl, DynamicCluster) else None


def connections(cl: Cluster) -> list[tuple[str, str]]:
    """--bootstrap-controller with one follower, --bootstrap-server with every node."""
    return [("--bootstrap-controller", f"127.0.0.1:{cl.port(cl.ids[0])}"),
            ("--bootstrap-server", cl.bootstrap())]


def test_describe_status_is_the_true_quorum(quorum: Cluster, kafka_release: KafkaHome) -> None:
    kafka_home = kafka_release
    truth = settle(quorum)
    leader, epoch = leader_from_logs(quorum)
    assert (truth.leader_id, truth.leader_epoch) == (leader, epoch)
    voters = getattr(quorum, "voter_ids", quorum.ids)
    observers = [i for i in quorum.ids if i not in voters]
    for flag, servers in connections(quorum):
        got = parse_status(tool(kafka_home, flag, servers, "describe", "--status"))
        mine = parse_status(ours(flag, servers, "describe", "--status"))
        assert list(got) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                             "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]
        assert got["ClusterId"] == CLUSTER_ID
        assert (int(got["LeaderId"]), int(got["LeaderEpoch"])) == (leader, epoch)
        assert int(got["HighWatermark"]) == truth.high_watermark
        assert int(got["MaxFollowerLag"]) == 0  # idle quorum: every voter at the log end
        assert 0 <= int(got["MaxFollowerLagTimeMs"]) < 5000
        assert got["CurrentVoters"] == [
            without_null_dirs({"id": i, "directoryId": dir_text(quorum, i),
                               "endpoints": [f"CONTROLLER://127.0.0.1:{quorum.port(i)}"]}, kafka_home)
            for i in voters]
        # an observer is not in DescribeQuorum's Nodes, so it has no endpoints
        assert got["CurrentObservers"] == [without_null_dirs({"id": i, "directoryId": dir_text(quorum, i)}, kafka_home)
                                           for i in observers]
        # kraftnode's own command prints what Kafka 3.9's prints; only the lag time is a moment's reading
        for k in got:
            if k != "MaxFollowerLagTimeMs":
                mine_k = mine[k]
                if k in ("CurrentVoters", "CurrentObservers"):
                    mine_k = [without_null_dirs(e, kafka_home) for e in mine_k]
                assert mine_k == got[k], k


def without_null_dirs(entry: dict[str, Any], kafka: KafkaHome) -> dict[str, Any]:
    """Kafka 4.x's tool leaves a voter's ``directoryId`` out where it has none (a static quorum);
    3.9's prints ``null``. The answer the tools format is the same."""
    if kafka.major >= 4 and entry.get("directoryId") is None:
        return {k: v for k, v in entry.items() if k != "directoryId"}
    return entry


def _check_rows(quorum: Cluster, truth: QuorumInfo, rows: list[dict[str, str]], human: bool) -> None:
    voters = getattr(quorum, "voter_ids", quorum.ids)
    leader = truth.leader_id
    assert [(int(r["NodeId"]), r["Status"]) for r in rows] == (
        [(leader, "Leader")] + [(i, "Follower") for i in voters if i != leader]
        + [(i, "Observer") for i in quorum.ids if i not in voters])
    now = int(time.time() * 1000)
    for r in rows:
        i = int(r["NodeId"])
        assert r["DirectoryId"] == (dir_text(quorum, i) or "AAAAAAAAAAAAAAAAAAAAAA")
        assert int(r["LogEndOffset"]) == truth.high_watermark  # idle: every log ends at the HW
        assert int(r["Lag"]) == 0
        for col in ("LastFetchTimestamp", "LastCaughtUpTimestamp"):
            if human:
                m = re.fullmatch(r"(\d+) ms ago", r[col])
                assert m and int(m.group(1)) < 10_000, r
            else:
                assert now - 30_000 < int(r[col]) <= now + 1000, r


def test_describe_replication_is_the_true_quorum(quorum: Cluster, kafka_release: KafkaHome) -> None:
    kafka_home = kafka_release
    truth = settle(quorum)
    for (flag, servers), human in [(c, h) for c in connections(quorum) for h in (False, True)]:
        extra = ["--human-readable"] if human else []
        got = parse_table(tool(kafka_home, flag, servers, "describe", "--replication", *extra))
        _check_rows(quorum, truth, got, human)
        mine = parse_table(ours(flag, servers, "describe", "--replication", *extra))
        _check_rows(quorum, truth, mine, human)
        moment = ("LastFetchTimestamp", "LastCaughtUpTimestamp")
        assert [{k: v for k, v in r.items() if k not in moment} for r in mine] == \
            [{k: v for k, v in r.items() if k not in moment} for r in got]


@pytest.mark.parametrize("quorum", [("static", 3)], indirect=True, ids=["static3"])
def test_describe_is_refused_as_kafka_refuses_it(quorum: Cluster, kafka_home: KafkaHome) -> None:
    """Usage errors: the same message from both tools (Kafka exits 1, kraftnode 2); one
    quorum shape is enough (the static 3-node one, reused from the module's fixture)."""
    servers = f"127.0.0.1:{quorum.port(1)}"
    for args, msg in ((["--status", "--replication"],
                       "Only one of --status or --replication should be specified with describe sub-command"),
                      (["--status", "--human-readable"],
                       "The option --human-readable is only supported along with --replication"),
                      ([], "One of --status or --replication must be specified with describe sub-command")):
        k = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", servers, "describe", *args)
        assert (k.returncode, k.stderr.strip()) == (1, msg)
        r = subprocess.run([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller", servers,
                            "describe", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr
