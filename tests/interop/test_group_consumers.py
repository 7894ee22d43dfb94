"""Group consumers of five independent implementations read the replicated log through
consumer groups (``subscribe()``, JoinGroup/SyncGroup/Heartbeat, OffsetCommit) on a real
3-node quorum: KafkaJS (``consumer.run`` with ``eachMessage``), the Java
``kafka-console-consumer.sh --group`` and ``kafka-verifiable-consumer.sh``,
confluent-kafka (librdkafka), aiokafka and kafka-python. Each reads every record exactly
once and commits; a second run of the same group resumes from the committed offset (it
sees the records produced after, and none before).

The log also holds KRaft metadata records, and the groups' own records (keyed
``kraftnode.offsets\\0``): the consumers see those too, so each test looks only at the
values it produced (a unique prefix per test)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import CONSUMER_GROUP_DESCRIBE
from tests.support.cluster import Cluster, serving
from tests.support.kafka import KafkaHome, java_env
from tests.support.node import frame_call
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
TOPIC = "__cluster_metadata"
JS_DIR = Path(__file__).parent / "js"
# small timeouts so that rebalances take a fraction of a second (docs/server.md)
GROUP_CONFIG = ("group.initial.rebalance.delay.ms=100\ngroup.min.session.timeout.ms=1000\n"
                "group.coordinator.rebalance.protocols=classic,consumer\n"
                "group.consumer.session.timeout.ms=6000\ngroup.consumer.min.session.timeout.ms=1000\n"
                "group.consumer.heartbeat.interval.ms=500\ngroup.consumer.min.heartbeat.interval.ms=100\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cl = StaticCluster(tmp_path_factory.mktemp("groupconsumers"), 3, extra=GROUP_CONFIG)
    yield from serving(cl)


def produce(cluster: Cluster, values: list[str]) -> list[int]:
    """Write ``values`` (acks=all); their offsets."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all")
    try:
        return [p.send(TOPIC, value=v.encode()).get(timeout=30).offset for v in values]
    finally:
        p.close()


def check_runs(first: list[str], second: list[str], a: list[str], b: list[str]) -> None:
    """The first run saw each of ``a`` exactly once; the second (same group) each of ``b``
    exactly once and nothing of ``a``: it resumed at the committed offset."""
    assert Counter(first) == Counter(a), first
    assert Counter(second) == Counter(b), second


def values(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


# ---------------------------------------------------------------------- kafka-python
def test_kafka_python_group_consumer(cluster: Cluster) -> None:
    from kafka import KafkaConsumer

    def run(group: str, prefix: str, want: int) -> list[str]:
        c = KafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap(), group_id=group,
                          auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                          heartbeat_interval_ms=500, consumer_timeout_ms=20000)
        got: list[str] = []
        try:
            for m in c:
                v = m.value.decode("latin1")
                if v.startswith(prefix):
                    got.append(v)
                    if len(got) >= want:
                        break
            c.commit()
        finally:
            c.close()
        return got

    a, b = values("py-a", 10), values("py-b", 5)
    produce(cluster, a)
    first = run("g-kafka-python", "py-", 10)
    produce(cluster, b)
    check_runs(first, run("g-kafka-python", "py-", 5), a, b)


# ---------------------------------------------------------------------- confluent-kafka
def test_confluent_kafka_subscribe(cluster: Cluster) -> None:
    from confluent_kafka import Consumer

    def run(group: str, prefix: str, want: int) -> list[str]:
        c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        got: list[str] = []
        try:
            c.subscribe([TOPIC])
            deadline = time.monotonic() + 30
            while len(got) < want and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None or m.error() is not None:
                    continue
                v = (m.value() or b"").decode("latin1")
                if v.startswith(prefix):
                    got.append(v)
            c.commit(asynchronous=False)
        finally:
            c.close()
        return got

    a, b = values("rd-a", 10), values("rd-b", 5)
    produce(cluster, a)
    first = run("g-confluent", "rd-", 10)
    produce(cluster, b)
    check_runs(first, run("g-confluent", "rd-", 5), a, b)


# ---------------------------------------------------------------------- aiokafka
def test_aiokafka_group_id(cluster: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer

    async def run(group: str, prefix: str, want: int) -> list[str]:
        c = AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap(), group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
        await c.start()
        got: list[str] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < want and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=500)
                for msgs in batches.values():
                    for m in msgs:
                        v = (m.value or b"").decode("latin1")
                        if v.startswith(prefix):
                            got.append(v)
            await c.commit()
        finally:
            await c.stop()
        return got

    a, b = values("aio-a", 10), values("aio-b", 5)
    produce(cluster, a)
    first = asyncio.run(run("g-aiokafka", "aio-", 10))
    produce(cluster, b)
    check_runs(first, asyncio.run(run("g-aiokafka", "aio-", 5)), a, b)


# ---------------------------------------------------------------------- KafkaJS
def test_kafkajs_consumer_run(cluster: Cluster) -> None:
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        if os.environ.get("KRAFTNODE_REQUIRE_KAFKA") == "1" and node is not None:
            pytest.fail("KafkaJS is not installed in tests/interop/js (tools/test.sh runs npm ci)")
        pytest.skip("node or KafkaJS (tests/interop/js: npm ci) is not installed")

    def run(group: str, prefix: str, want: int) -> list[str]:
        r = subprocess.run([node, str(JS_DIR / "consume.js"), cluster.bootstrap(), group, prefix, str(want),
                            "30000"], capture_output=True, text=True, timeout=90, cwd=JS_DIR)
        assert r.returncode == 0, r.stderr[-3000:]
        return [json.loads(line)["value"] for line in r.stdout.splitlines() if line.startswith("{")]

    a, b = values("js-a", 10), values("js-b", 5)
    produce(cluster, a)
    first = run("g-kafkajs", "js-", 10)
    produce(cluster, b)
    check_runs(first, run("g-kafkajs", "js-", 5), a, b)


# ---------------------------------------------------------------------- Java tools
def test_kafka_console_consumer_group(cluster: Cluster, kafka_home: KafkaHome) -> None:
    def run(group: str, prefix: str) -> list[str]:
        # --timeout-ms: exits once no record came for that long; closing commits (auto commit)
        # (the log's metadata records are binary: read the output as latin-1)
        r = subprocess.run([str(kafka_home.script("kafka-console-consumer")), "--bootstrap-server",
                            cluster.bootstrap(), "--topic", TOPIC, "--group", group, "--from-beginning",
                            "--timeout-ms", "4000", "--consumer-property", "session.timeout.ms=6000",
                            "--consumer-property", "heartbeat.interval.ms=500"],
                           capture_output=True, encoding="latin-1", timeout=90, env=java_env())
        assert "Processed a total of" in r.stderr, r.stderr[-3000:]
        return [line for line in r.stdout.splitlines() if line.startswith(prefix)]

    a, b = values("cc-a", 10), values("cc-b", 5)
    produce(cluster, a)
    first = run("g-console", "cc-")
    produce(cluster, b)
    check_runs(first, run("g-console", "cc-"), a, b)


def _verifiable(kafka_home: KafkaHome, cluster: Cluster, group: str, stop_at: int, out: Path,
                extra: tuple[str, ...] = ()) -> list[dict[str, object]]:
    """Run kafka-verifiable-consumer.sh until it has consumed every offset below
    ``stop_at``, stop it gracefully (SIGTERM: it commits and leaves), return its events."""
    with out.open("w") as f:
        p = subprocess.Popen([str(kafka_home.script("kafka-verifiable-consumer")), "--bootstrap-server",
                              cluster.bootstrap(), "--topic", TOPIC, "--group-id", group, "--reset-policy",
                              "earliest", "--session-timeout", "6000", *extra],
                             stdout=f, stderr=subprocess.DEVNULL, env=java_env(), start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                done = [e for e in _events(out) if e["name"] == "offsets_committed" and e.get("success")
                        and any(o["offset"] >= stop_at for o in e["offsets"])]  # type: ignore[index, attr-defined]
                if done:
                    break
                time.sleep(0.2)
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
    return _events(out)


def _events(path: Path) -> list[dict[str, object]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _consumed_ranges(events: list[dict[str, object]]) -> list[tuple[int, int]]:
    return [(int(p["minOffset"]), int(p["maxOffset"]))  # type: ignore[index]
            for e in events if e["name"] == "records_consumed" for p in e["partitions"]]  # type: ignore[attr-defined]


def _end_offset(cluster: Cluster) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap())
    try:
        tp = TopicPartition(TOPIC, 0)
        return int(c.end_offsets([tp])[tp])
    finally:
        c.close()


def test_kafka_verifiable_consumer(cluster: Cluster, kafka_home: KafkaHome, tmp_path: Path) -> None:
    """The verifiable consumer reports what it consumed as offset ranges: the first run
    covers each record produced before it exactly once, commits in order, and the second
    starts at or after its committed offset (the group's own records in between are empty
    batches to consumers) and covers each record produced since, and nothing before."""
    def covered(ranges: list[tuple[int, int]], offsets: list[int]) -> list[int]:
        return [sum(lo <= o <= hi for lo, hi in ranges) for o in offsets]

    a = produce(cluster, values("vc-a", 10))
    end1 = _end_offset(cluster)
    ev1 = _verifiable(kafka_home, cluster, "g-verifiable", end1 - 1, tmp_path / "run1.jsonl")
    r1 = _consumed_ranges(ev1)
    assert r1 and all(x[1] < y[0] for x, y in zip(r1, r1[1:], strict=False)), r1   # no overlap
    assert covered(r1, a) == [1] * len(a), (r1, a)
    commits = [o["offset"] for e in ev1 if e["name"] == "offsets_committed" and e.get("success")  # type: ignore[attr-defined]
               for o in e["offsets"]]  # type: ignore[attr-defined]
    assert commits == sorted(commits) and commits[-1] >= end1
    b = produce(cluster, values("vc-b", 5))
    end2 = _end_offset(cluster)
    ev2 = _verifiable(kafka_home, cluster, "g-verifiable", end2 - 1, tmp_path / "run2.jsonl")
    r2 = _consumed_ranges(ev2)
    assert r2 and r2[0][0] >= commits[-1], (r2, commits[-1])   # resumed at the committed offset
    assert covered(r2, b) == [1] * len(b) and covered(r2, a) == [0] * len(a), (r2, a, b)


# ---------------------------------------------------------------------- KIP-848
def test_java_consumer_protocol_kip848(cluster: Cluster, kafka_home: KafkaHome, tmp_path: Path) -> None:
    """A Java consumer with ``group.protocol=consumer`` (ConsumerGroupHeartbeat) joins,
    consumes and commits; ``kafka-consumer-groups.sh --describe`` (ConsumerGroupDescribe)
    shows it as a member with the partition assigned, and a second run resumes."""
    a, b = values("k848-a", 10), values("k848-b", 5)
    produce(cluster, a)
    out = tmp_path / "consumer.out"

    def start() -> subprocess.Popen[bytes]:
        with out.open("wb") as f:
            return subprocess.Popen(
                [str(kafka_home.script("kafka-console-consumer")), "--bootstrap-server", cluster.bootstrap(),
                 "--topic", TOPIC, "--group", "g-kip848", "--from-beginning", "--timeout-ms", "15000",
                 "--consumer-property", "group.protocol=consumer", "--consumer-property", "client.id=kip848-client"],
                stdout=f, stderr=subprocess.DEVNULL, env=java_env(), start_new_session=True)

    def seen(prefix: str) -> list[str]:
        return [ln for ln in out.read_bytes().decode("latin-1").splitlines() if ln.startswith(prefix)]

    def stop(p: subprocess.Popen[bytes]) -> None:
        os.killpg(p.pid, signal.SIGTERM)   # the console consumer commits and leaves on shutdown
        p.wait(30)

    p = start()
    try:
        deadline = time.monotonic() + 60
        while len(seen("k848-")) < len(a) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert Counter(seen("k848-")) == Counter(a)
        # ConsumerGroupDescribe (API 69) on the coordinator (this Kafka build has no
        # kafka-consumer-groups.sh): the member, its epoch and the partition it holds
        leader = cluster.wait_for_leader().leader_id
        with socket.create_connection(("127.0.0.1", cluster.port(leader)), timeout=10) as sock:
            resp: Any = frame_call(sock, CONSUMER_GROUP_DESCRIBE, 0, w.ConsumerGroupDescribeRequest(
                group_ids=["g-kip848"], include_authorized_operations=False), 1, client_id="describe")
        g = resp.groups[0]
        assert (g.error_code, g.group_state, g.assignor_name) == (0, "Stable", "uniform"), g
        assert len(g.members) == 1 and g.members[0].client_id == "kip848-client", g
        m = g.members[0]
        assert m.member_epoch == g.group_epoch >= 1 and m.subscribed_topic_names == [TOPIC]
        assert [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [(TOPIC, [0])]
    finally:
        stop(p)
    produce(cluster, b)
    p = start()
    try:
        deadline = time.monotonic() + 60
        while len(seen("k848-")) < len(b) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert Counter(seen("k848-")) == Counter(b)   # resumed at the committed offset
    finally:
        stop(p)
