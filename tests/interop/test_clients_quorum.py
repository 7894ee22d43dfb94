"""Genuine Kafka clients against a real 3-node kraftnode quorum.

kafka-python's admin client reads the quorum and the cluster; kafka-python,
confluent-kafka (librdkafka) and kcat produce with acks=all and consume the
partition back -- including across a kill -9 of the leader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, wait_for_hw

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TOPIC = "__cluster_metadata"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cl = Cluster(tmp_path_factory.mktemp("clients"), 3)
    cl.start_all()
    wait_for_hw(cl, 1, 30)
    yield cl
    cl.close()


def _leader_from_logs(cl: Cluster) -> tuple[int, int]:
    """The truth, independent of any DescribeQuorum decoding: the newest 'became leader' line."""
    best = (-1, -1)
    for i in cl.running():
        for m in re.finditer(r"became leader in epoch (\d+)", cl.log(i)):
            best = max(best, (int(m.group(1)), i))
    return best[1], best[0]


def test_kafka_python_admin_sees_the_true_quorum(cluster: Cluster) -> None:
    from kafka.admin import KafkaAdminClient

    leader, epoch = _leader_from_logs(cluster)
    # kafka-python sends DescribeQuorum to its least-loaded node; followers forward it to
    # the leader, as Kafka brokers forward it to the active controller.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=10000)
    try:
        # a voter the leader has not yet seen fetch in this epoch shows log end offset -1 (as in
        # Kafka's DescribeQuorum); on a loaded host the cluster may be that young: ask again
        deadline = time.monotonic() + 60
        while True:
            q = admin.describe_metadata_quorum()
            part = q["topics"][0]["partitions"][0]
            if all(v["log_end_offset"] >= 0 for v in part["current_voters"]) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        c = admin.describe_cluster()
    finally:
        admin.close()
    assert q["topics"][0]["topic_name"] == TOPIC
    assert (part["leader_id"], part["leader_epoch"]) == (leader, epoch)
    assert part["high_watermark"] >= 1
    voters = {v["replica_id"]: v for v in part["current_voters"]}
    assert set(voters) == {1, 2, 3}
    for v in voters.values():
        assert v["log_end_offset"] >= part["high_watermark"] - 1
        assert v["last_fetch_timestamp"] > 0 and v["last_caught_up_timestamp"] > 0
    assert {n["node_id"] for n in q["nodes"]} == {1, 2, 3}
    assert c["controller_id"] == leader
    assert {(b["broker_id"], b["port"]) for b in c["brokers"]} == {
        (i, cluster.port(i)) for i in (1, 2, 3)}


def _kafka_python_roundtrip(bootstrap: str, values: list[bytes]) -> list[int]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    prod = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10,
                         request_timeout_ms=10000)
    futures = [prod.send(TOPIC, value=v, partition=0) for v in values]
    offsets = [f.get(timeout=30).offset for f in futures]
    prod.close()
    cons = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                         consumer_timeout_ms=5000)
    tp = TopicPartition(TOPIC, 0)
    cons.assign([tp])
    cons.seek(tp, offsets[0])
    got = {m.offset: m.value for m in cons if m.offset <= offsets[-1]}
    cons.close()
    assert [got.get(o) for o in offsets] == values
    return offsets


def _confluent_roundtrip(bootstrap: str, values: list[bytes]) -> list[int]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    offsets: list[int] = []
    errors: list[object] = []
    for v in values:
        p.produce(TOPIC, value=v, partition=0,
                  on_delivery=lambda e, m: errors.append(e) if e else offsets.append(m.offset()))
    p.flush(30)
    assert not errors and len(offsets) == len(values)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, min(offsets))])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not set(offsets) <= set(got):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got[m.offset()] = m.value()
    c.close()
    assert [got.get(o) for o in offsets] == values
    return offsets


def _kcat_roundtrip(bootstrap: str, values: list[bytes], tmp: Path) -> list[int]:
    kcat = shutil.which("kcat")
    if kcat is None:
        if os.environ.get("CI"):
            pytest.fail("kcat is required in CI")
        pytest.skip("kcat is not installed")
    src = tmp / "in.txt"
    src.write_bytes(b"\n".join(values) + b"\n")
    r = subprocess.run([kcat, "-b", bootstrap, "-t", TOPIC, "-p", "0", "-P", "-X", "acks=all",
                        "-l", str(src)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # bytes, not text: the log also holds the controllers' binary metadata records
    r2 = subprocess.run([kcat, "-b", bootstrap, "-t", TOPIC, "-p", "0", "-C", "-o", "beginning",
                         "-e", "-f", "%o %s\\n"], capture_output=True, timeout=60)
    assert r2.returncode == 0, r2.stderr
    out = r2.stdout.decode(errors="replace")
    pairs = [ln.split(" ", 1) for ln in out.splitlines() if " " in ln]
    wanted = {v.decode() for v in values}
    found = [(int(o), s) for o, s in pairs if s in wanted]
    assert sorted(s for _, s in found) == sorted(wanted), out[-2000:]
    return [o for o, _ in found]


def test_produce_and_consume_with_every_client(cluster: Cluster, tmp_path: Path) -> None:
    a = _kafka_python_roundtrip(cluster.bootstrap(), [b"kp-1", b"kp-2", b"kp-3"])
    b = _confluent_roundtrip(cluster.bootstrap(), [b"ck-1", b"ck-2", b"ck-3"])
    c = _kcat_roundtrip(cluster.bootstrap(), [b"kcat-1", b"kcat-2", b"kcat-3"], tmp_path)
    assert max(a) < min(b) and max(b) < min(c)  # one log, in order


def test_clients_across_a_leader_kill(cluster: Cluster, tmp_path: Path) -> None:
    info = cluster.wait_for_leader()
    cluster.kill(info.leader_id)
    try:
        cluster.wait_for_leader(20, exclude=info.leader_id, min_epoch=info.leader_epoch + 1)
        wait_for_hw(cluster, 1)
        _kafka_python_roundtrip(cluster.bootstrap(), [b"after-kill-kp"])
        _confluent_roundtrip(cluster.bootstrap(), [b"after-kill-ck"])
        _kcat_roundtrip(cluster.bootstrap(), [b"after-kill-kcat"], tmp_path)
    finally:
        cluster.start(info.leader_id)
    cluster.wait_for_leader(20)
