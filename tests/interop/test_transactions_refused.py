"""kraftnode serves no transactions (docs/server.md "Transactions"): a transactional
producer of each client fails fast -- well within 5 s, not after a minute of retries --
with an error that says transactions are not supported (or, where the client prints no
broker message, the fatal error it reports), and idempotent producers keep working."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, serving
from tests.support.kafka import KafkaHome, java_env
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]
TOPIC = "__cluster_metadata"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from serving(StaticCluster(tmp_path_factory.mktemp("txn"), 3))


def test_java_transactional_producer_fails_fast(cluster: Cluster, kafka_home: KafkaHome) -> None:
    classes = kafka_home.compile("txn")
    r = subprocess.run(kafka_home.java(classes, "TxnProducer", cluster.bootstrap(), "tx-java"),  # type: ignore[arg-type]
                       capture_output=True, text=True, env=java_env(), timeout=90)
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(("failed", "initialized")))
    assert line.startswith("failed"), r.stdout
    _, millis, rest = line.split(" ", 2)
    assert int(millis) < 5000, line
    assert "Transactions are not supported" in rest, line


def test_kafka_python_transactional_producer_fails_fast(cluster: Cluster) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    p = KafkaProducer(bootstrap_servers=cluster.bootstrap(), transactional_id="tx-py", max_block_ms=30000)
    t = time.monotonic()
    try:
        with pytest.raises(KafkaError) as e:
            p.init_transactions()
    finally:
        p.close(timeout=5)
    assert time.monotonic() - t < 5, e.value
    # kafka-python reports the error code, not the broker's message: a fatal error of the
    # transaction coordinator lookup (FindCoordinator type 1 = TRANSACTION)
    assert "Could not find a coordinator with type 1" in str(e.value), repr(e.value)


def test_confluent_transactional_producer_fails_fast(cluster: Cluster) -> None:
    from confluent_kafka import KafkaException, Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "tx-rd"})
    t = time.monotonic()
    with pytest.raises(KafkaException) as e:
        p.init_transactions(30)
    assert time.monotonic() - t < 5, e.value
    err = e.value.args[0]
    assert err.fatal() and "Transactions are not supported" in err.str(), err.str()


def test_idempotent_producer_still_works(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True})
    delivered: list[object] = []
    p.produce(TOPIC, b"idempotent", on_delivery=lambda err, m: delivered.append(err))
    p.flush(30)
    assert delivered == [None]
