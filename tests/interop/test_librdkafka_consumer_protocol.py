"""librdkafka's new consumer (``group.protocol=consumer``, KIP-848) reads the replicated log
of a real 3-node quorum through a consumer group (issue 36).

librdkafka -- what confluent-kafka (Python), confluent-kafka-go, the .NET client and
node-rdkafka run on -- sends ConsumerGroupHeartbeat v1 only (Kafka 4.0's
SubscribedTopicRegex); against a coordinator that advertised v0 it logged
``ConsumerGroupHeartbeatRequest not supported by broker``, marked the coordinator dead and
read nothing. Here it reads 300 values once each, commits, closes, and a second consumer
of the group reads exactly the 100 produced after; a regex subscription (``^__cluster.*``)
is resolved by the coordinator with RE2/J semantics, and a pattern RE2/J refuses gets
Kafka's INVALID_REGULAR_EXPRESSION on the wire.

The log also holds KRaft metadata records and the groups' own records: each test counts
only the values it produced (a unique prefix)."""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT
from tests.support.cluster import Cluster, serving
from tests.support.node import frame_call
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
TOPIC = "__cluster_metadata"
# the consumer protocol is on by default (group.coordinator.rebalance.protocols, as Kafka 4.x):
# the user ran a dev cluster with its defaults; only the timeouts are shortened here
GROUP_CONFIG = ("group.consumer.session.timeout.ms=6000\ngroup.consumer.min.session.timeout.ms=1000\n"
                "group.consumer.heartbeat.interval.ms=500\ngroup.consumer.min.heartbeat.interval.ms=100\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cl = StaticCluster(tmp_path_factory.mktemp("rdkafka848"), 3, extra=GROUP_CONFIG)
    yield from serving(cl)


def produce(cluster: Cluster, values: list[str]) -> None:
    """librdkafka's producer, acks=all: each value committed by the quorum when it returns."""
    from confluent_kafka import KafkaError, Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 5})
    failed: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed.append(err)
    for v in values:
        p.produce(TOPIC, value=v.encode(), on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0 and not failed, failed


def consume(cluster: Cluster, group: str, subscription: str, prefix: str, want: int,
            during: Any = None) -> list[str]:
    """One run of a ``group.protocol=consumer`` consumer: poll until ``want`` values with
    ``prefix`` arrived (then 2 s more, to see any extra), commit, close. ``during(consumer)``
    runs if the values came in, while the member is still in the group."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[str] = []
    try:
        c.subscribe([subscription])
        deadline = time.monotonic() + 60
        settle: float | None = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                v = (m.value() or b"").decode("latin1")
                if v.startswith(prefix):
                    got.append(v)
            if settle is None and len(got) >= want:
                settle = time.monotonic() + 2
        if during is not None and len(got) >= want:
            during(c)
        if got:   # nothing read: nothing to commit (librdkafka raises _NO_OFFSET)
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def values(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def describe(cluster: Cluster, group: str, version: int = 1) -> Any:
    """ConsumerGroupDescribe on the coordinator (the raft leader)."""
    leader = cluster.wait_for_leader().leader_id
    with socket.create_connection(("127.0.0.1", cluster.port(leader)), timeout=10) as sock:
        resp: Any = frame_call(sock, CONSUMER_GROUP_DESCRIBE, version, w.ConsumerGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False), 1, client_id="describe")
    return resp.groups[0]


def test_librdkafka_consumer_protocol_reads_once_commits_and_resumes(cluster: Cluster) -> None:
    """The must-show of issue 36: 300 values read once each and committed; the group's
    second consumer reads exactly the 100 produced after."""
    a, b = values("rd848-a", 300), values("rd848-b", 100)
    produce(cluster, a)
    seen_member: list[Any] = []
    first = consume(cluster, "g-rd848", TOPIC, "rd848-", 300,
                    during=lambda _c: seen_member.append(describe(cluster, "g-rd848")))
    assert len(first) == 300 and Counter(first) == Counter(a), Counter(first) - Counter(a)
    g = seen_member[0]
    assert (g.error_code, g.group_state) == (0, "Stable"), g
    (m,) = g.members
    assert m.subscribed_topic_names == [TOPIC] and m.member_type == 1   # v1: a consumer-protocol member
    assert [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [(TOPIC, [0])]
    produce(cluster, b)
    second = consume(cluster, "g-rd848", TOPIC, "rd848-", 100)
    assert len(second) == 100 and Counter(second) == Counter(b), (len(second), Counter(second) - Counter(b))


def test_librdkafka_regex_subscription(cluster: Cluster) -> None:
    """``subscribe(["^__cluster.*"])``: librdkafka sends the pattern as SubscribedTopicRegex
    and the coordinator assigns the topic it matches; a second run resumes."""
    a, b = values("rdre-a", 50), values("rdre-b", 20)
    produce(cluster, a)
    seen: list[Any] = []
    first = consume(cluster, "g-rdre", "^__cluster.*", "rdre-", 50,
                    during=lambda _c: seen.append(describe(cluster, "g-rdre")))
    assert Counter(first) == Counter(a)
    (m,) = seen[0].members
    # librdkafka sends the union of its patterns, each in parentheses: "(p1)|(p2)"
    assert m.subscribed_topic_regex == "(^__cluster.*)" and m.subscribed_topic_names == [], m
    assert [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [(TOPIC, [0])]
    produce(cluster, b)
    assert Counter(consume(cluster, "g-rdre", "^__cluster.*", "rdre-", 20)) == Counter(b)


def test_invalid_regex_is_kafkas_invalid_regular_expression(cluster: Cluster) -> None:
    """A heartbeat v1 whose regex RE2/J refuses (Python's ``re`` would take this
    lookahead) is INVALID_REGULAR_EXPRESSION with Kafka's message; an empty member id at
    v1 is INVALID_REQUEST (KIP-1082)."""
    R = w.ConsumerGroupHeartbeatRequest

    def heartbeat(member_id: str, regex: str | None) -> Any:
        leader = cluster.wait_for_leader().leader_id
        with socket.create_connection(("127.0.0.1", cluster.port(leader)), timeout=10) as sock:
            return frame_call(sock, CONSUMER_GROUP_HEARTBEAT, 1, R(
                group_id="g-bad-regex", member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
                rebalance_timeout_ms=30000, subscribed_topic_names=None, subscribed_topic_regex=regex,
                server_assignor=None, topic_partitions=[]), 1, client_id="regex-check")

    r: Any = heartbeat("m-bad", "(?=__)__cluster.*")
    assert (r.error_code, r.error_message) == (
        Errors.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `(?=__)__cluster.*` is not a valid regular expression: "
        "invalid or unsupported Perl syntax.")
    r = heartbeat("", "^__cluster.*")
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")
