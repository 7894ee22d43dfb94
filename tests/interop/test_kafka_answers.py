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
