"""The metrics in-process: Kafka's windowed stats, error counting, the collector over a
real driver and log, readiness, and the HTTP endpoint's answers to good and bad input."""

from __future__ import annotations

import asyncio
import math
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from kraftnode.protocol import generated as w
from kraftnode.protocol.framing import Request
from kraftnode.protocol.registry import SERVED
from kraftnode.server.metrics.collector import Health, NodeCollector, readiness
from kraftnode.server.metrics.http import MetricsServer
from kraftnode.server.metrics.recording import (
    WINDOW_MS,
    AvgMax,
    RaftMetrics,
    Rate,
    RequestMetrics,
    error_counts,
)
from kraftnode.server.net.listener import KafkaListener, Reply
from tests.kraftnode.server.raft_io.test_driver import _driver, _formatted

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------ Kafka's stats
def test_avg_max_are_nan_until_recorded_and_forget_after_two_windows() -> None:
    s = AvgMax()
    assert math.isnan(s.avg.measure(0)) and math.isnan(s.max.measure(0))
    s.record(4.0, 1000)
    s.record(2.0, 2000)
    assert s.avg.measure(3000) == 3.0 and s.max.measure(3000) == 4.0
    # a new sample window starts after 30 s; the old one still counts
    s.record(10.0, 1000 + WINDOW_MS)
    assert s.avg.measure(1000 + WINDOW_MS) == pytest.approx(16 / 3) and s.max.measure(40_000) == 10.0
    # 2 x 30 s without events: everything expired (Kafka's purgeObsoleteSamples)
    later = 1000 + WINDOW_MS + 2 * WINDOW_MS
    assert math.isnan(s.avg.measure(later)) and math.isnan(s.max.measure(later))


def test_rate_counts_at_least_one_full_window_as_kafka_does() -> None:
    r = Rate()
    assert r.measure(0) == 0.0
    r.record(300, 0)
    # 1 s elapsed, but Kafka's Rate treats the window as (samples - 1) = 1 full window more
    assert r.measure(1000) == pytest.approx(300 / 31.0)
    r.record(300, 45_000)
    assert r.measure(45_000) == pytest.approx(600 / 45.0)
    # a clock that steps back: Java's (int) cast truncates the negative window count
    # toward zero (found by tests/interop/test_metric_stats_vs_kafka.py)
    r = Rate()
    r.record(100, 0)
    r.measure(61_000)             # purges: the sample restarts at 61 s
    r.record(251, 10_000)
    assert r.measure(40_000) == pytest.approx(251 / 9.0)


def test_election_latency_starts_at_candidacy_unless_won_at_once() -> None:
    m = RaftMetrics()
    m.on_state_changed("candidate", 2, False, 1000)
    m.on_state_changed("candidate", 3, False, 1500)    # a new candidacy restarts the clock
    m.on_state_changed("leader", 3, False, 1800)
    assert m.election_latency.max.measure(1800) == 300.0
    m.on_state_changed("candidate", 4, True, 5000)     # single voter: no latency recorded
    m.on_state_changed("leader", 4, False, 5000)
    assert m.election_latency.avg.measure(5000) == 300.0
    m.on_commit(100, 4, 300)                            # per record, as Kafka measures it
    assert m.commit_latency.avg.measure(300) == 50.0


# ------------------------------------------------------------------ error counting
def test_error_counts_walk_every_error_code_field_like_kafka() -> None:
    P = w.FetchResponse.PartitionData
    resp = w.FetchResponse(error_code=0, responses=[w.FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[P(partition_index=0, error_code=6), P(partition_index=1, error_code=0)])])
    assert error_counts(resp, 12) == {0: 2, 6: 1}   # top-level NONE + each partition
    assert error_counts(w.ApiVersionsResponse(error_code=35), 3) == {35: 1}


def test_compiled_error_counting_matches_the_generic_walk_for_every_served_response() -> None:
    from kraftnode.server.metrics.recording import _count_errors, _error_plan

    P = w.DescribeQuorumResponse.PartitionData
    samples = [w.DescribeQuorumResponse(error_code=0, topics=[w.DescribeQuorumResponse.TopicData(
        partitions=[P(error_code=6), P(error_code=0)])])]
    for spec in SERVED.values():
        samples.append(spec.response())
    for body in samples:
        lo, hi = type(body).VALID_VERSIONS
        for v in range(lo, hi + 1):
            plan = _error_plan(type(body), v)
            expected: dict[int, int] = {}
            if plan is not None:
                _count_errors(body, plan, expected)
            assert error_counts(body, v) == expected, (type(body).__name__, v)
    assert error_counts(samples[0], 2) == {0: 2, 6: 1}


def _request(api: int, version: int, body: Any) -> Request:
    hdr = w.RequestHeader(request_api_key=api, request_api_version=version, correlation_id=1,
                          client_id="t")
    return Request(hdr, SERVED[api], body)


def test_request_metrics_count_fetch_twice_and_errors_by_name() -> None:
    rm = RequestMetrics()
    follower = w.FetchRequest(replica_id=-1, replica_state=w.FetchRequest.ReplicaState(replica_id=2))
    consumer = w.FetchRequest(replica_id=-1)
    ok = Reply(w.FetchResponse(error_code=0), 16)
    bad = Reply(w.FetchResponse(error_code=0, responses=[w.FetchResponse.FetchableTopicResponse(
        partitions=[w.FetchResponse.PartitionData(error_code=6)])]), 16)
    rm.record(_request(1, 16, follower), ok, 0.0004)
    rm.record(_request(1, 16, consumer), bad, 0.2)
    rm.record(_request(0, 9, w.ProduceRequest(acks=0)), None, 0.001)   # acks=0: no response
    assert rm.requests == {("Fetch", 16): 2, ("FetchFollower", 16): 1, ("FetchConsumer", 16): 1,
                           ("Produce", 9): 1}
    assert rm.errors == {"Fetch": {0: 2, 6: 1}}   # two top-level NONEs
    buckets, total = rm.times["Fetch"]
    assert sum(buckets) == 2 and total[0] == pytest.approx(200.4)


# ------------------------------------------------------------------ collector over a real driver
def _families(registry: CollectorRegistry) -> dict[str, Any]:
    text = generate_latest(registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(fams: dict[str, Any], name: str, **labels: str) -> float:
    for s in fams[name].samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    raise KeyError((name, labels))


def test_collector_reads_the_core_at_scrape_time(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, voters=1)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            driver, mlog = _driver(cfg, tg)
            rm = RaftMetrics()
            driver.metrics = rm
            driver.log.metrics = rm
            listener = KafkaListener("127.0.0.1", 0, lambda r, p: None)  # type: ignore[arg-type,return-value]
            reqs = RequestMetrics()
            reg = CollectorRegistry(auto_describe=False)
            reg.register(NodeCollector(driver, rm, reqs, [("CONTROLLER", listener)], 1,
                                       "MkU3OEVBNTcwNTJENDM2Qg", cfg.raft.fetch_timeout_ms))
            before = _families(reg)
            # a lone voter leads as it starts (Kafka's initialize), before the driver runs: the
            # collector shows the core's state as it is at scrape time
            assert _value(before, "kafka_server_raft_metrics_current_leader") == 1
            assert _value(before, "kafka_server_raft_metrics_current_state", state="leader") == 1
            assert _value(before, "kafka_server_raft_metrics_append_records_rate") == 0
            tg.start_soon(driver.run, tg)
            with anyio.fail_after(10):
                while not driver.node.is_leader or driver.high_watermark < 1:
                    await anyio.sleep(0.02)
            for _ in range(3):
                _, waiter = driver.append_nowait([b"a", b"b"])
                with anyio.fail_after(5):
                    await waiter.done.wait()
            fams = _families(reg)
            node = driver.node
            assert _value(fams, "kafka_server_raft_metrics_current_leader") == 1
            assert _value(fams, "kafka_server_raft_metrics_current_vote") == 1
            assert _value(fams, "kafka_server_raft_metrics_current_epoch") == node.epoch
            assert _value(fams, "kafka_server_raft_metrics_current_state", state="leader") == 1
            assert sum(s.value for s in fams["kafka_server_raft_metrics_current_state"].samples) == 1
            assert _value(fams, "kafka_server_raft_metrics_high_watermark") == driver.high_watermark
            assert _value(fams, "kafka_server_raft_metrics_log_end_offset") == driver.log.end_offset
            assert _value(fams, "kafka_server_raft_metrics_log_end_epoch") == node.epoch
            assert _value(fams, "kafka_server_raft_metrics_number_of_voters") == 1
            assert _value(fams, "kafka_server_raft_metrics_number_of_observers") == 0
            assert _value(fams, "kafka_server_raft_metrics_uncommitted_voter_change") == 0
            assert _value(fams, "kafka_server_raft_metrics_number_unknown_voter_connections") == 0
            assert _value(fams, "kafka_server_raft_metrics_append_records_rate") > 0
            assert _value(fams, "kafka_server_raft_metrics_commit_latency_avg") >= 0
            assert _value(fams, "kraftnode_raft_replica_lag", replica="1", role="voter") == 0
            assert _value(fams, "kraftnode_raft_replica_log_end_offset", replica="1") == \
                driver.log.end_offset
            assert _value(fams, "kraftnode_ready") == 1
            assert _value(fams, "kafka_server_snapshotemitter_latestsnapshotgeneratedbytes") == 0
            assert _value(fams, "kafka_server_socket_server_metrics_connection_count",
                          listener="CONTROLLER") == 0
            assert readiness(driver, cfg.raft.fetch_timeout_ms, rm).ok
            # docs/metrics.md lists every metric the node exports
            docs = (Path(__file__).resolve().parents[4] / "docs" / "metrics.md").read_text()
            missing = [n for n in fams if f"`{n}" not in docs]
            assert missing == [], f"not in docs/metrics.md: {missing}"
            driver.stop()
            tg.cancel_scope.cancel()
        mlog.close()  # type: ignore[attr-defined]

    anyio.run(main)


def test_a_follower_is_ready_only_while_caught_up_within_the_fetch_timeout(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, voters=3)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            driver, mlog = _driver(cfg, tg)
            rm = RaftMetrics()
            driver.metrics = rm
            assert not readiness(driver, 2000, rm).ok      # unattached: no leader known
            from kraftnode.raft import messages as m
            from kraftnode.raft.states import FollowerState

            tg.start_soon(driver.run, tg)
            # node 2 becomes leader of epoch 5 and tells us
            await driver.call(m.BeginQuorumEpochRequest(
                "MkU3OEVBNTcwNTJENDM2Qg", 1, None, 2, 5))
            st = driver.node.state
            assert isinstance(st, FollowerState) and st.leader_id == 2
            h = readiness(driver, 2000, rm)
            assert not h.ok and "not caught up" in h.reason
            from kraftnode.server.metrics.collector import high_watermark_metric

            assert high_watermark_metric(driver) == -1   # nothing learnt since start-up
            hw = driver.log.end_offset
            resp = m.FetchResponse(0, 0, hw, m.CurrentLeader(2, 5))
            t = 1_000_000
            driver._note_caught_up(2, resp, t)
            assert readiness(driver, 2000, rm, now=t + 2000).ok
            late = readiness(driver, 2000, rm, now=t + 2001)
            assert not late.ok and "fetch.timeout" in late.reason
            # a high watermark beyond our log end: not caught up, not refreshed
            driver._note_caught_up(2, m.FetchResponse(0, 0, hw + 5, m.CurrentLeader(2, 5)), t + 3000)
            assert not readiness(driver, 2000, rm, now=t + 3000).ok
            driver.stop()
            tg.cancel_scope.cancel()
        mlog.close()  # type: ignore[attr-defined]

    anyio.run(main)


# ------------------------------------------------------------------ HTTP
async def _exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    out = b""
    try:
        async with asyncio.timeout(5):
            while chunk := await reader.read(65536):
                out += chunk
                if b"Connection: keep-alive" in out and out.count(b"\r\n\r\n") >= 1:
                    head, _, body = out.partition(b"\r\n\r\n")
                    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                    if len(body) >= length:
                        break
    finally:
        writer.close()
    return out


def test_http_endpoint_answers_and_refuses_bad_input() -> None:
    reg = CollectorRegistry(auto_describe=False)
    srv = MetricsServer("127.0.0.1", 0, reg, lambda: Health(True, "ok"),
                        lambda: Health(False, "candidate in epoch 3, no leader known"))

    async def main() -> None:
        port = await srv.bind()
        async with anyio.create_task_group() as tg:
            tg.start_soon(srv.serve)
            r = await _exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert r.startswith(b"HTTP/1.1 200 OK") and b"text/plain; version=0.0.4" in r
            r = await _exchange(port, b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text"
                                      b"; version=1.0.0\r\n\r\n")
            assert b"application/openmetrics-text" in r and r.rstrip().endswith(b"# EOF")
            r = await _exchange(port, b"GET /readyz HTTP/1.0\r\n\r\n")
            assert r.startswith(b"HTTP/1.1 503") and b"not ready: candidate in epoch 3" in r
            assert (await _exchange(port, b"GET /healthz HTTP/1.0\r\n\r\n")).endswith(b"ok: ok\n")
            assert (await _exchange(port, b"GET /nope HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 404")
            assert (await _exchange(port, b"POST /metrics HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 405")
            assert (await _exchange(port, b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
                                    )).startswith(b"HTTP/1.1 413")
            assert (await _exchange(port, b"garbage\r\n\r\n")).startswith(b"HTTP/1.1 400")
            big = b"GET / HTTP/1.1\r\nX: " + b"a" * 10000
            assert (await _exchange(port, big)).startswith(b"HTTP/1.1 431")
            # keep-alive: two requests on one connection
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
            data = await asyncio.wait_for(reader.read(-1), 5)
            writer.close()
            assert data.count(b"HTTP/1.1 200 OK") == 2
            tg.cancel_scope.cancel()

    anyio.run(main, backend="asyncio")


def test_port_in_use_is_a_startup_error(tmp_path: Path) -> None:
    from kraftnode.config.node_config import NodeConfig
    from kraftnode.server.node import StartupError, _bind_metrics

    cfg = _formatted(tmp_path, voters=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        busy = NodeConfig(**{**cfg.__dict__, "metrics_listener": ("127.0.0.1", port)})

        async def main() -> None:
            with pytest.raises(StartupError, match=f"kraftnode.metrics.listener=127.0.0.1:{port}: "
                                                   "Address already in use$"):
                await _bind_metrics(busy)
            nohost = NodeConfig(**{**cfg.__dict__, "metrics_listener": ("nosuchhost.invalid", 1)})
            with pytest.raises(StartupError, match="nosuchhost.invalid:1: (?!Unknown error)"):
                await _bind_metrics(nohost)

        anyio.run(main, backend="asyncio")


def test_grafana_dashboard_uses_documented_metrics_only() -> None:
    """Every metric a dashboard panel queries is one docs/metrics.md lists (the real
    Prometheus test also evaluates each query against a live quorum)."""
    import json
    import re

    root = Path(__file__).resolve().parents[4]
    dash = json.loads((root / "tools" / "grafana" / "kraftnode-quorum.json").read_text())
    docs = (root / "docs" / "metrics.md").read_text()
    names = set()
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            names |= set(re.findall(r"\b((?:kafka|kraftnode|process)_[a-z_]+)", t["expr"]))
    assert {"kafka_server_raft_metrics_current_leader", "kraftnode_raft_replica_lag",
            "kafka_server_raft_metrics_commit_latency_avg",
            "kafka_network_requestmetrics_requests_total"} <= names
    for n in names:
        base = re.sub(r"_(total|bucket|count|sum)$", "", n)
        assert f"`{n}" in docs or f"`{base}" in docs or n.startswith("process_"), n
    assert {"datasource", "job"} <= {v["name"] for v in dash["templating"]["list"]}
