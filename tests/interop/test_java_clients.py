"""Kafka 3.9's own Java producer and consumer tools against a real 3-node kraftnode quorum.

``kafka-verifiable-producer.sh`` (acks=all, idempotent: ``enable.idempotence=true`` with
retries, since the tool's own default ``retries=0`` turns idempotence off) writes while the
leader is killed with ``kill -9`` and restarted; ``kafka-console-consumer.sh --partition 0
--offset earliest`` then reads back every acknowledged record exactly once, at the offset the
producer was told, in order. The log's first records are the controllers' metadata records
(docs/server.md); the producer's values carry a prefix that tells them apart.

``kafka-producer-perf-test.sh`` and ``kafka-e2e-latency.sh`` run to the end; their figures
are printed (``-s``) for docs/bench.md, not asserted.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, serving, wait_for_hw
from tests.support.kafka import KafkaHome, java_env
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TOPIC = "__cluster_metadata"
PREFIX = 42  # VerifiableProducer --value-prefix: values are "42.<n>"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cl = StaticCluster(tmp_path_factory.mktemp("java-clients"), 3)
    yield from serving(cl)


def console_consume(kafka: KafkaHome, bootstrap: str) -> list[tuple[int, int]]:
    """(offset, n) of every "42.<n>" record in the log, as kafka-console-consumer.sh prints it."""
    r = subprocess.run([str(kafka.script("kafka-console-consumer")), "--bootstrap-server", bootstrap,
                        "--topic", TOPIC, "--partition", "0", "--offset", "earliest", "--timeout-ms", "4000",
                        "--property", "print.offset=true"], capture_output=True, env=java_env(), timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    # metadata records are binary and may hold newlines; ours are whole lines
    return [(int(o), int(n)) for o, n in re.findall(rb"(?m)^Offset:(\d+)\t" + str(PREFIX).encode()
                                                     + rb"\.(\d+)$", r.stdout)]


def test_verifiable_producer_across_a_leader_kill(cluster: Cluster, kafka_home: KafkaHome, tmp_path: Path) -> None:
    conf = tmp_path / "producer.properties"
    conf.write_text("enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\n"
                    "request.timeout.ms=5000\ndelivery.timeout.ms=60000\nretry.backoff.ms=50\n"
                    "reconnect.backoff.max.ms=200\n")
    producer = subprocess.Popen(
        [str(kafka_home.script("kafka-verifiable-producer")), "--bootstrap-server", cluster.bootstrap(),
         "--topic", TOPIC, "--max-messages", "1500", "--throughput", "250", "--value-prefix", str(PREFIX),
         "--producer.config", str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=java_env())
    try:
        time.sleep(2.0)  # ~500 records in
        info = cluster.wait_for_leader()
        cluster.kill(info.leader_id)
        cluster.wait_for_leader(20, exclude=info.leader_id, min_epoch=info.leader_epoch + 1)
        cluster.start(info.leader_id)
        out, err = producer.communicate(timeout=120)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    assert producer.returncode == 0, err[-3000:]
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    acked = {int(e["value"].split(".")[1]): e["offset"] for e in events if e["name"] == "producer_send_success"}
    errors = [e for e in events if e["name"] == "producer_send_error"]
    summary = next(e for e in events if e["name"] == "tool_data")
    assert not errors and summary["acked"] == summary["sent"] == 1500 == len(acked), (errors[:5], summary)

    wait_for_hw(cluster, max(acked.values()) + 1)
    read = console_consume(kafka_home, cluster.bootstrap())
    values = [n for _, n in read]
    assert len(values) == len(set(values)), "a record was written twice"
    assert values == sorted(values), "records out of order"
    assert {n: o for o, n in read if n in acked} == acked  # every ack, at the offset it named
    assert set(values) == set(acked)  # acks=all with retries: nothing left unacknowledged


def test_producer_perf_test_and_e2e_latency(cluster: Cluster, kafka_home: KafkaHome) -> None:
    wait_for_hw(cluster, 1)
    perf = kafka_home.tool("kafka-producer-perf-test", "--topic", TOPIC, "--num-records", "20000",
                           "--record-size", "100", "--throughput", "-1", "--producer-props",
                           f"bootstrap.servers={cluster.bootstrap()}", "acks=all", timeout=120)
    assert perf.returncode == 0, perf.stderr
    last = perf.stdout.strip().splitlines()[-1]
    assert re.match(r"20000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", last), last
    print(f"\nkafka-producer-perf-test (20000 x 100 B, acks=all): {last}")

    e2e = kafka_home.tool("kafka-e2e-latency", cluster.bootstrap(), TOPIC, "500", "all", "100", timeout=120)
    # every round trip measured and reported ...
    assert re.search(r"^Avg latency: [\d.]+ ms$", e2e.stdout, re.M), e2e.stdout + e2e.stderr
    assert re.search(r"^Percentiles: 50th = \d+, 99th = \d+, 99\.9th = \d+$", e2e.stdout, re.M)
    # ... then the tool commits its simple group's offsets (commitSync with assign()): the
    # leader coordinates the group and the commit is appended to the raft log
    assert e2e.returncode == 0, e2e.stderr
    print("kafka-e2e-latency (500 x 100 B, acks=all): " + " | ".join(e2e.stdout.strip().splitlines()[-2:]))


def test_metadata_quorum_tool_right_after_a_leader_kill(cluster: Cluster, kafka_home: KafkaHome) -> None:
    """The genuine tool, started the moment the leader dies, reports the next leader: the
    Admin's retries (the old leader unreachable, NOT_LEADER_OR_FOLLOWER from followers that
    do not know a leader yet) end at the new one."""
    info = wait_for_hw(cluster, 1)
    cluster.kill(info.leader_id)
    try:
        r = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", cluster.bootstrap(),
                            "describe", "--status", timeout=90)
        assert r.returncode == 0, r.stderr[-3000:]
        fields = dict(line.split(":", 1) for line in r.stdout.splitlines())
        leader, epoch = int(fields["LeaderId"]), int(fields["LeaderEpoch"])
        assert leader != info.leader_id and epoch > info.leader_epoch, r.stdout
        now = cluster.wait_for_leader(20)
        assert (leader, epoch) == (now.leader_id, now.leader_epoch)
    finally:
        cluster.start(info.leader_id)
    cluster.wait_for_leader(20)
