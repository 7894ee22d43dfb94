"""Answers that used to differ from a Kafka broker's (issue 27), each asked of kraftnode and
of a genuine Apache Kafka 3.9 server (combined broker + controller, tests/support/kafka_server.py)
with the same client: an illegal topic name, a 2 MB record against ``message.max.bytes``,
DescribeConfigs of the node's own broker id, and ListOffsets by timestamp over a control
batch. (The fifth, transactions, is refused by kraftnode by design:
test_transactions_refused.py.)"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import DESCRIBE_CONFIGS, METADATA
from tests.support.cluster import Cluster, serving
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import KafkaServer, combined_server
from tests.support.node import frame_call
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]
TOPIC = "__cluster_metadata"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from serving(StaticCluster(tmp_path_factory.mktemp("answers"), 3))


@pytest.fixture(scope="module")
def broker(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    b = combined_server(kafka_home, tmp_path_factory.mktemp("kafka-broker"))
    try:
        b.wait_started()
        yield b
    finally:
        b.close()


def _ask(host_port: str, api: int, version: int, body: Any) -> Any:
    host, port = host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        return frame_call(s, api, version, body, 1, client_id="answers")


def _metadata_codes(host_port: str) -> list[tuple[str, int]]:
    M = w.MetadataRequest
    resp = _ask(host_port, METADATA, 12, M(topics=[M.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=n)
                                                   for n in ("bad name!", "no-such-topic")],
                                           allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
    return [(t.name, t.error_code) for t in resp.topics]


def test_illegal_topic_name_is_invalid_topic_exception(cluster: Cluster, broker: KafkaServer) -> None:
    """KafkaApis.getTopicMetadata: a name Topic.validate refuses gets INVALID_TOPIC_EXCEPTION
    (17), which clients do not retry; an unknown legal name UNKNOWN_TOPIC_OR_PARTITION (3)."""
    ours = _metadata_codes(f"127.0.0.1:{cluster.port(cluster.running()[0])}")
    assert ours == _metadata_codes(broker.bootstrap) == [("bad name!", 17), ("no-such-topic", 3)]


def _metadata_by_id(host_port: str, known: str) -> list[tuple[str | None, int, bool]]:
    """Metadata v12 naming topics by id, each name left "" (the field's default, as Java's
    KIP-848 consumer sends it): the known topic's id twice and an unknown id."""
    M = w.MetadataRequest
    T = M.MetadataRequestTopic
    (t,) = _ask(host_port, METADATA, 12, M(topics=[T(name=known)], allow_auto_topic_creation=False)).topics
    assert t.error_code == 0, t
    other = uuid.UUID(int=7)
    resp = _ask(host_port, METADATA, 12, M(topics=[T(name="", topic_id=t.topic_id), T(name="", topic_id=other),
                                                   T(name="", topic_id=t.topic_id)],
                                           allow_auto_topic_creation=False))
    return sorted(((r.name, r.error_code, r.topic_id == (t.topic_id if r.error_code == 0 else other))
                   for r in resp.topics), key=str)


def test_metadata_by_topic_id_as_kafka(cluster: Cluster, broker: KafkaServer) -> None:
    """KafkaApis.handleTopicMetadataRequest: a request naming any topic id is answered by the
    ids alone, once each (names not looked at): the known topic, and UNKNOWN_TOPIC_ID (100)
    with a null name for the other. kraftnode answered each "" INVALID_TOPIC_EXCEPTION."""
    _two_mb(broker.bootstrap, "answers-size")   # the topic exists (auto-created) whatever order tests run in
    ours = _metadata_by_id(f"127.0.0.1:{cluster.port(cluster.running()[0])}", TOPIC)
    theirs = _metadata_by_id(broker.bootstrap, "answers-size")
    assert [(n, c, i) for n, c, i in ours] == [(TOPIC, 0, True), (None, 100, True)]
    assert [(n, c, i) for n, c, i in theirs] == [("answers-size", 0, True), (None, 100, True)]


def _two_mb(bootstrap: str, topic: str) -> tuple[str, int]:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=4 << 20, retries=0)
    try:
        try:
            p.send(topic, b"x" * 2_000_000).get(timeout=30)
            big = "accepted"
        except KafkaError as e:
            big = type(e).__name__
        ok = p.send(topic, b"y" * (1_000_000 - 100)).get(timeout=30).offset
    finally:
        p.close()
    return big, ok


def test_message_max_bytes_is_kafkas_default(cluster: Cluster, broker: KafkaServer) -> None:
    """``message.max.bytes`` (default 1048588) bounds a producer's batch: a single 2 MB record
    gets MESSAGE_TOO_LARGE from both, a record of 1 MB - 100 bytes is accepted by both."""
    ours = _two_mb(cluster.bootstrap(), TOPIC)
    theirs = _two_mb(broker.bootstrap, "answers-size")
    assert ours[0] == theirs[0] == "MessageSizeTooLargeError", (ours, theirs)
    assert ours[1] >= 0 and theirs[1] >= 0


def _own_configs(host_port: str, node_id: int, version: int) -> dict[str, Any]:
    R = w.DescribeConfigsRequest
    resp = _ask(host_port, DESCRIBE_CONFIGS, version, R(resources=[
        R.DescribeConfigsResource(resource_type=4, resource_name=str(node_id), configuration_keys=None)],
        include_synonyms=True, include_documentation=False))
    r = resp.results[0]
    assert r.error_code == 0, r
    return {c.name: c for c in r.configs}


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_of_the_own_broker_id(cluster: Cluster, broker: KafkaServer, version: int) -> None:
    """ConfigHelper: every config of the node with its source -- a key set in the file is
    STATIC_BROKER_CONFIG (4) with a static and a default synonym, an unset one
    DEFAULT_CONFIG (5) with its default -- the keys both know answered alike."""
    leader = cluster.wait_for_leader().leader_id
    ours = _own_configs(f"127.0.0.1:{cluster.port(leader)}", leader, version)
    theirs = _own_configs(broker.bootstrap, broker.node_id, version)
    assert len(ours) > 50 and len(theirs) > 50
    for name, value in (("node.id", str(leader)), ("process.roles", None)):
        for side, got, expect in (("ours", ours, value), ("kafka", theirs, None)):
            c = got[name]
            assert c.config_source == 4 and c.read_only and not c.is_sensitive, (side, c)
            if expect is not None:
                assert c.value == expect, (side, c)
    ours_node, theirs_node = ours["node.id"], theirs["node.id"]
    assert [s.source for s in ours_node.synonyms] == [s.source for s in theirs_node.synonyms]
    for name in ("message.max.bytes", "controller.quorum.election.timeout.ms", "group.min.session.timeout.ms"):
        a, b = ours[name], theirs[name]
        assert (a.value, a.config_source, a.is_sensitive) == (b.value, b.config_source, b.is_sensitive), (name, a, b)
        assert [(s.source, s.value) for s in a.synonyms] == [(s.source, s.value) for s in b.synonyms], (name, a, b)
        if version >= 3:
            assert a.config_type == b.config_type, (name, a, b)


def test_list_offsets_by_timestamp_finds_a_control_batch(cluster: Cluster, broker: KafkaServer) -> None:
    """Kafka's time-index search (LogSegment.findOffsetByTimestamp) reads every batch,
    control batches included. On the genuine broker: a committed transaction leaves its
    COMMIT marker at offset 1; with the records before it deleted, a timestamp of 0 finds
    the marker's offset. On kraftnode the log's offset 0 is the LeaderChange control record:
    a timestamp of 0 finds offset 0, not the first data record after it."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("answers-txn", 1, 1)])
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="answers-tx")
        p.init_transactions()
        p.begin_transaction()
        p.send("answers-txn", b"in-a-transaction")
        p.commit_transaction()
        p.close()
        tp = TopicPartition("answers-txn", 0)
        admin.delete_records({tp: 1})
    finally:
        admin.close()
    for bootstrap, tp, want in ((broker.bootstrap, TopicPartition("answers-txn", 0), 1),
                                (cluster.bootstrap(), TopicPartition(TOPIC, 0), 0)):
        c = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            got = c.offsets_for_times({tp: 0})[tp]
            assert got is not None and got.offset == want, (bootstrap, got)
        finally:
            c.close()
