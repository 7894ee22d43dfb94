"""A real Prometheus server (Debian's ``prometheus``) scrapes a real 3-node quorum.

Issue 16, must show 1: ``up`` is 1 for every node, and
``kafka_server_raft_metrics_current_leader`` as Prometheus stored it agrees with
DescribeQuorum -- before and after the leader is killed with SIGKILL.  Every query in
the Grafana dashboard (tools/grafana/) is evaluated by that Prometheus too, so a
renamed metric cannot leave the dashboard silently empty.

Prometheus is started by this test on a free loopback port with its own data
directory, and stopped by PID.  Without the binary the test skips with the reason
(``tools/test.sh`` installs it with apt-get); under ``CI=true`` it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster, free_ports, wait_for_hw

DASHBOARD = Path(__file__).resolve().parents[4] / "tools" / "grafana" / "kraftnode-quorum.json"


def _prometheus_binary() -> str:
    exe = shutil.which("prometheus")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is required in CI (tools/test.sh installs Debian's package)")
        pytest.skip("prometheus is not installed (apt-get install prometheus; tools/test.sh does)")
    return exe


class Prometheus:
    def __init__(self, exe: str, root: Path, targets: dict[int, int], interval: str = "2s") -> None:
        self.port = free_ports(1)[0]
        root.mkdir(parents=True, exist_ok=True)
        static = "\n".join(
            f"      - targets: ['127.0.0.1:{port}']\n        labels: {{node: '{node}'}}"
            for node, port in sorted(targets.items()))
        cfg = root / "prometheus.yml"
        cfg.write_text(
            f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n"
            f"  evaluation_interval: {interval}\n"
            "scrape_configs:\n  - job_name: kraftnode\n    static_configs:\n" + static + "\n")
        self.log = (root / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [exe, f"--config.file={cfg}", f"--storage.tsdb.path={root / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self.root = root

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]["result"]  # type: ignore[no-any-return]

    def by_node(self, expr: str) -> dict[int, float]:
        return {int(s["metric"]["node"]): float(s["value"][1]) for s in self.query(expr)
                if "node" in s["metric"]}

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("prometheus exited:\n" + self.tail())
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus not ready:\n" + self.tail())

    def targets(self) -> list[tuple[str, str, str, float]]:
        """Each scrape target's (node, health, last error, last scrape seconds): the reason
        a node reads ``up == 0``, for a failure's message."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=5) as r:
            active = json.loads(r.read())["data"]["activeTargets"]
        return [(t["labels"].get("node", "?"), t["health"], t.get("lastError", ""),
                 float(t.get("lastScrapeDuration", 0.0))) for t in active]

    def tail(self) -> str:
        return (self.root / "prometheus.log").read_text(errors="replace")[-3000:]


def wait_until(what: str, get: Any, ok: Any = bool, timeout: float = 30,
               interval: float = 0.3) -> Any:
    """Poll ``get()`` (bounded) until ``ok(value)``; the value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = get()
        if ok(last):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.fixture
def quorum_with_prometheus(tmp_path: Path) -> Iterator[tuple[Cluster, Prometheus, dict[int, int]]]:
    exe = _prometheus_binary()
    mports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    cl = Cluster(tmp_path / "quorum", 3, node_extra={
        i: f"kraftnode.metrics.listener=127.0.0.1:{p}" for i, p in mports.items()})
    prom: Prometheus | None = None
    try:
        cl.start_all()
        prom = Prometheus(exe, tmp_path / "prometheus", mports)
        prom.wait_ready()
        yield cl, prom, mports
    finally:
        if prom is not None:
            prom.stop()
        cl.close()


def _http(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.mark.timeout(180)
def test_prometheus_scrapes_quorum_and_leader_agrees_with_describe_quorum(
        quorum_with_prometheus: tuple[Cluster, Prometheus, dict[int, int]]) -> None:
    cl, prom, mports = quorum_with_prometheus
    info = wait_for_hw(cl, 1, timeout=30)
    leader = info.leader_id

    # every node is scraped successfully
    try:
        wait_until("up == 1 on all three nodes", lambda: prom.by_node("up"),
                   lambda u: u == {1: 1.0, 2: 1.0, 3: 1.0}, timeout=60)
    except AssertionError as e:
        raise AssertionError(f"{e}; targets: {prom.targets()}") from None

    # the stored current-leader of every node is DescribeQuorum's leader, and the epochs agree
    def leaders() -> dict[int, float]:
        return prom.by_node("kafka_server_raft_metrics_current_leader")

    def epochs() -> dict[int, float]:
        return prom.by_node("kafka_server_raft_metrics_current_epoch")

    wait_until(f"current_leader == {leader} on every node", leaders,
               lambda got: got == {n: float(leader) for n in (1, 2, 3)})
    wait_until("current_epoch == DescribeQuorum's epoch on every node", epochs,
               lambda e: e == {n: float(info.leader_epoch) for n in (1, 2, 3)})
    states = prom.by_node('kafka_server_raft_metrics_current_state{state="leader"}')
    assert states == {n: (1.0 if n == leader else 0.0) for n in (1, 2, 3)}
    # the leader's view of each replica: three voters, none lagging far behind once idle
    lag = wait_until("per-replica lag from the leader",
                     lambda: prom.query("kraftnode_raft_replica_lag"), lambda r: len(r) == 3)
    assert {s["metric"]["replica"] for s in lag} == {"1", "2", "3"}
    assert all(s["metric"]["node"] == str(leader) for s in lag)
    for n, port in mports.items():
        assert _http(port, "/readyz")[0] == 200, (n, _http(port, "/readyz"))
        assert _http(port, "/healthz") == (200, "ok: ok\n")

    # kill -9 the leader: a new one is elected; Prometheus sees the old node down and the
    # survivors report the new leader, as DescribeQuorum does
    cl.kill(leader)
    new = cl.wait_for_leader(30, exclude=leader, min_epoch=info.leader_epoch + 1)
    assert new.leader_id != leader
    survivors = {1, 2, 3} - {leader}
    wait_until("up == 0 for the killed node", lambda: prom.by_node("up"),
               lambda u: u.get(leader) == 0.0 and all(u.get(n) == 1.0 for n in survivors))
    # (the killed node's series go stale: only the survivors answer)
    wait_until(f"current_leader == {new.leader_id} on the survivors", leaders,
               lambda got: got == {n: float(new.leader_id) for n in survivors})
    after = cl.quorum()
    assert after is not None and after.leader_id == new.leader_id
    wait_until("survivors' epoch == DescribeQuorum's", epochs,
               lambda e: e == {n: float(after.leader_epoch) for n in survivors})
    # the survivors measured the election (election-latency-avg is a number, not NaN,
    # on whichever survivor moved from candidate to leader or follower)
    lat = prom.by_node("kafka_server_raft_metrics_election_latency_max")
    assert any(v == v and v >= 0 for v in lat.values()), lat
    for n in survivors:
        wait_until(f"node {n} ready again", lambda n=n: _http(mports[n], "/readyz"),
                   lambda r: r[0] == 200, timeout=20)

    # every query of the Grafana dashboard evaluates on this Prometheus, and the quorum
    # panels return data
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs
    empty = []
    for e in exprs:
        q = e.replace("$__rate_interval", "1m").replace("$job", "kraftnode")
        if not prom.query(q):
            empty.append(q)
    # error panels may legitimately be empty (no errors); every other panel has data
    assert [q for q in empty if 'error!="NONE"' not in q] == []
