"""Simple (standalone) consumer groups against a real 3-node kraftnode quorum: a genuine
Java KafkaConsumer with ``assign()`` commits offsets, is restarted and resumes from them,
also after ``kill -9`` of the leader (the offsets are in the raft log and every replica
replays them); kafka-python and confluent-kafka commit and read back with ``committed()``;
the coordinator's error answers, checked with raw frames. (``kafka-console-consumer.sh``
3.9 refuses ``--group`` with ``--partition``: "Options group and partition cannot be
specified together", so the Java consumer is tests/interop/java/groups/AssignCommit.java.)"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH
from tests.support.cluster import Cluster, serving, wait_for_hw, wait_serving
from tests.support.kafka import KafkaHome, java_env
from tests.support.node import frame_call
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
TOPIC = "__cluster_metadata"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cl = StaticCluster(tmp_path_factory.mktemp("groups"), 3)
    yield from serving(cl)


def _run(kafka: KafkaHome, classes: object, bootstrap: str, group: str, n: int) -> tuple[int, int]:
    r = subprocess.run(kafka.java(classes, "AssignCommit", bootstrap, group, str(n), TOPIC),  # type: ignore[arg-type]
                       capture_output=True, text=True, env=java_env(), timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.startswith(("start ", "committed ")))
    return int(lines["start"]), int(lines["committed"])


def test_java_consumer_resumes_after_restart_and_leader_kill(cluster: Cluster, kafka_home: KafkaHome) -> None:
    classes = kafka_home.compile("groups")
    boot = cluster.bootstrap()
    start1, c1 = _run(kafka_home, classes, boot, "g-java", 3)
    # no committed offset: auto.offset.reset=earliest; the log's first batch (offset 0, the
    # LeaderChange control record) is not a record the consumer returns
    assert start1 == 0 and c1 > 3
    start2, c2 = _run(kafka_home, classes, boot, "g-java", 2)
    assert start2 == c1 and c2 >= c1 + 2     # resumed at the committed offset
    old = cluster.wait_for_leader()
    cluster.kill(old.leader_id)
    new = cluster.wait_for_leader(30, exclude=old.leader_id)
    wait_for_hw(cluster, 1, 30)
    live = ",".join(f"127.0.0.1:{cluster.port(i)}" for i in cluster.running())
    start3, c3 = _run(kafka_home, classes, live, "g-java", 1)
    assert start3 == c2 and c3 > c2, f"new leader {new.leader_id}"
    cluster.start(old.leader_id)
    wait_serving(cluster, old.leader_id)     # the next tests bootstrap from every node


def test_kafka_python_commit_and_committed(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    tp = TopicPartition(TOPIC, 0)
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), group_id="g-py", enable_auto_commit=False)
    try:
        c.assign([tp])
        assert c.committed(tp) is None       # unknown group: offset -1
        c.commit({tp: OffsetAndMetadata(2, "meta-py", -1)})
        assert c.committed(tp) == 2
    finally:
        c.close()
    c2 = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), group_id="g-py", enable_auto_commit=False)
    try:
        c2.assign([tp])
        assert c2.committed(tp) == 2 and c2.position(tp) == 2
    finally:
        c2.close()


def test_confluent_commit_and_committed(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "g-rd", "enable.auto.commit": False})
    try:
        assert c.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset < 0
        c.assign([TopicPartition(TOPIC, 0)])
        c.commit(offsets=[TopicPartition(TOPIC, 0, 4)], asynchronous=False)
        got = c.committed([TopicPartition(TOPIC, 0)], timeout=30)
        assert got[0].offset == 4 and got[0].error is None
    finally:
        c.close()


def _sock(cluster: Cluster, i: int) -> socket.socket:
    """A connection to node i, waiting (up to 30 s) for a node restarted by an earlier test
    to listen again."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection(("127.0.0.1", cluster.port(i)), timeout=10)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _commit(group: str, gen: int, member: str, topic: str = TOPIC, part: int = 0) -> w.OffsetCommitRequest:
    R = w.OffsetCommitRequest
    return R(group_id=group, generation_id_or_member_epoch=gen, member_id=member, topics=[
        R.OffsetCommitRequestTopic(name=topic, partitions=[
            R.OffsetCommitRequestPartition(partition_index=part, committed_offset=7)])])


def _codes(resp: w.OffsetCommitResponse) -> list[int]:
    return [p.error_code for t in resp.topics for p in t.partitions]


def test_coordinator_errors_with_raw_frames(cluster: Cluster) -> None:
    info = wait_for_hw(cluster, 1, 30)
    leader = info.leader_id
    follower = next(i for i in cluster.running() if i != leader)
    with _sock(cluster, follower) as s:
        fc = frame_call(s, FIND_COORDINATOR, 4, w.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 1)
        assert [(c.key, c.node_id, c.port, c.error_code) for c in fc.coordinators] == \
            [("a", leader, cluster.port(leader), 0), ("b", leader, cluster.port(leader), 0)]
        fc0 = frame_call(s, FIND_COORDINATOR, 0, w.FindCoordinatorRequest(key="a"), 2)
        assert (fc0.error_code, fc0.node_id, fc0.port) == (0, leader, cluster.port(leader))
        tx = frame_call(s, FIND_COORDINATOR, 4, w.FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]), 3)
        # no transaction coordinator: an error the Java producer treats as fatal, with the reason
        assert tx.coordinators[0].error_code == Errors.INVALID_REQUEST
        assert "Transactions are not supported" in tx.coordinators[0].error_message
        r = frame_call(s, OFFSET_COMMIT, 8, _commit("g-raw", -1, ""), 4)
        assert _codes(r) == [Errors.NOT_COORDINATOR]
        f = frame_call(s, OFFSET_FETCH, 7, w.OffsetFetchRequest(group_id="g-raw", topics=None), 5)
        assert f.error_code == Errors.NOT_COORDINATOR
    with _sock(cluster, leader) as s:
        assert _codes(frame_call(s, OFFSET_COMMIT, 8, _commit("g-raw", -1, "", "other"), 1)) == \
            [Errors.UNKNOWN_TOPIC_OR_PARTITION]
        assert _codes(frame_call(s, OFFSET_COMMIT, 8, _commit("g-raw", -1, "", TOPIC, 1), 2)) == \
            [Errors.UNKNOWN_TOPIC_OR_PARTITION]
        # a generation of a group that does not exist / a member the group does not have
        assert _codes(frame_call(s, OFFSET_COMMIT, 8, _commit("g-none", 3, "m-1"), 3)) == [Errors.ILLEGAL_GENERATION]
        assert _codes(frame_call(s, OFFSET_COMMIT, 9, _commit("g-none", 3, "m-1"), 4)) == [Errors.GROUP_ID_NOT_FOUND]
        assert _codes(frame_call(s, OFFSET_COMMIT, 8, _commit("g-raw", -1, ""), 5)) == [0]
        assert _codes(frame_call(s, OFFSET_COMMIT, 8, _commit("g-raw", 1, "m-1"), 6)) == [Errors.UNKNOWN_MEMBER_ID]
        Q = w.OffsetFetchRequest
        f = frame_call(s, OFFSET_FETCH, 8, Q(groups=[
            Q.OffsetFetchRequestGroup(group_id="g-raw", topics=None),
            Q.OffsetFetchRequestGroup(group_id="g-unknown", topics=[
                Q.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])])]), 7)
        got = {g.group_id: [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]
               for g in f.groups}
        assert got == {"g-raw": [(TOPIC, 0, 7)], "g-unknown": [(TOPIC, 0, -1)]}
