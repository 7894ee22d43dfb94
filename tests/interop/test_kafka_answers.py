"""Answers that used to differ from a Kafka broker's (issue 27), checked with genuine clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, serving
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]
TOPIC = "__cluster_metadata"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from serving(StaticCluster(tmp_path_factory.mktemp("answers"), 3))


def test_list_offsets_by_timestamp_finds_the_control_batch_at_offset_0(cluster: Cluster) -> None:
    """Kafka's time-index search (LogSegment.findOffsetByTimestamp) reads every batch,
    control batches included: a timestamp at or before the first batch's answers offset 0,
    the LeaderChange control record, not the first data record after it."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all")
    p.send(TOPIC, b"after-the-control-batch").get(timeout=30)
    p.close()
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap())
    try:
        tp = TopicPartition(TOPIC, 0)
        got = c.offsets_for_times({tp: 0})[tp]
        assert got is not None and got.offset == 0, got
        assert got.timestamp > 0
    finally:
        c.close()


def test_illegal_topic_name_is_invalid_topic_exception(cluster: Cluster) -> None:
    """KafkaApis.getTopicMetadata: a name Topic.validate refuses gets INVALID_TOPIC_EXCEPTION
    (17), which clients do not retry; an unknown legal name UNKNOWN_TOPIC_OR_PARTITION (3)."""
    import socket
    import uuid

    from kraftnode.protocol import generated as w
    from kraftnode.protocol.registry import METADATA
    from tests.support.node import frame_call

    M = w.MetadataRequest
    with socket.create_connection(("127.0.0.1", cluster.port(cluster.running()[0])), timeout=10) as s:
        resp = frame_call(s, METADATA, 12, M(topics=[M.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="bad name!"),
                                                     M.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="no-such-topic")],
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False), 1)
    assert [(t.name, t.error_code) for t in resp.topics] == [("bad name!", 17), ("no-such-topic", 3)]  # type: ignore[attr-defined]


def test_message_max_bytes_is_kafkas_default(cluster: Cluster) -> None:
    """``message.max.bytes`` (Kafka's key, default 1048588) bounds a producer's batch: a
    single 2 MB record gets MESSAGE_TOO_LARGE, as a Kafka 3.9 broker answers it; one of
    1 MB - 100 bytes is accepted."""
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    p = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", max_request_size=4 << 20,
                      retries=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            p.send(TOPIC, b"x" * 2_000_000).get(timeout=30)
        assert p.send(TOPIC, b"y" * (1_000_000 - 100)).get(timeout=30).offset > 0
    finally:
        p.close()
