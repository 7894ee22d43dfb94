"""A 3-voter quorum whose raft traffic runs over mutual TLS -- the controller listener SSL
with ssl.client.auth=required, or SASL_SSL with mutual TLS and the voters logging in to
each other with PLAIN (sasl.mechanism.controller.protocol and the listener's JAAS login):
it elects a leader, commits a genuine client's acks=all writes, and survives kill -9 of
the leader."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.certs import PASSWORD, make_pki
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.timeout(300)]

TOPIC = "__cluster_metadata"


def _leader(cl: Cluster, newer_than: int = 0, timeout: float = 30) -> tuple[int, int]:
    """(leader id, epoch) from the newest 'became leader' line of a running node."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        best = (-1, -1)
        for i in cl.running():
            for m in re.finditer(r"became leader in epoch (\d+)", cl.log(i)):
                best = max(best, (int(m.group(1)), i))
        if best[0] > newer_than:
            return best[1], best[0]
        time.sleep(0.1)
    raise AssertionError("no leader elected over TLS:\n" + "\n".join(cl.log(i)[-1500:] for i in cl.ids))


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
        'password="controller-secret" user_controller="controller-secret" user_alice="alice-secret";')


@pytest.fixture(params=["SSL", "SASL_SSL"])
def tls_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Cluster, dict[str, str]]]:
    pki = make_pki(tmp_path / "pki")
    node = pki.issue("node")          # one certificate for all voters, SAN 127.0.0.1
    client = pki.issue("client")
    proto = request.param
    extra = (f"listener.security.protocol.map=CONTROLLER:{proto}\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={node.p12}\n"
             f"ssl.keystore.password={PASSWORD}\nssl.key.password={PASSWORD}\n"
             f"ssl.truststore.type=PKCS12\nssl.truststore.location={pki.trust_p12}\n"
             f"ssl.truststore.password={PASSWORD}\n"
             # on SASL_SSL only the listener-prefixed key turns mutual TLS on (as in Kafka)
             f"{'listener.name.controller.' if proto == 'SASL_SSL' else ''}ssl.client.auth=required\n")
    cfg = dict(security_protocol=proto, ssl_cafile=str(pki.ca_cert),
               ssl_certfile=str(client.cert), ssl_keyfile=str(client.key))
    if proto == "SASL_SSL":
        extra += ("sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.controller.protocol=PLAIN\n"
                  f"listener.name.controller.plain.sasl.jaas.config={JAAS}\n")
        cfg.update(sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    cl = Cluster(tmp_path / "q", 3, extra)
    try:
        cl.start_all()
        yield cl, cfg
    finally:
        cl.close()


def _produce(bootstrap: str, tls_cfg: dict[str, str], values: list[bytes]) -> list[int]:
    from kafka import KafkaProducer

    prod = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, request_timeout_ms=10000,
                         **tls_cfg)  # type: ignore[arg-type]
    try:
        return [prod.send(TOPIC, value=v, partition=0).get(timeout=60).offset for v in values]
    finally:
        prod.close()


def test_quorum_over_mutual_tls_survives_kill_of_the_leader(
        tls_cluster: tuple[Cluster, dict[str, str]]) -> None:
    from kafka import KafkaConsumer, TopicPartition

    cl, tls_cfg = tls_cluster
    leader, epoch = _leader(cl)
    first = _produce(cl.bootstrap(), tls_cfg, [b"tls-q-1", b"tls-q-2"])
    cl.kill(leader)
    new_leader, new_epoch = _leader(cl, newer_than=epoch)
    assert new_leader != leader and new_epoch > epoch
    boot = ",".join(f"127.0.0.1:{cl.port(i)}" for i in cl.running())
    second = _produce(boot, tls_cfg, [b"tls-q-3"])
    assert second[0] > first[-1]
    cons = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                         consumer_timeout_ms=5000, **tls_cfg)  # type: ignore[arg-type]
    tp = TopicPartition(TOPIC, 0)
    cons.assign([tp])
    cons.seek(tp, first[0])
    got = {m.offset: m.value for m in cons if m.offset <= second[-1]}
    cons.close()
    assert [got.get(o) for o in (*first, *second)] == [b"tls-q-1", b"tls-q-2", b"tls-q-3"]
    # raft connections really ran over TLS (and logged in, over SASL_SSL)
    for i in cl.running():
        assert "WRONG_VERSION_NUMBER" not in cl.log(i)
        if tls_cfg["security_protocol"] == "SASL_SSL":
            assert "authenticated as User:controller with PLAIN" in cl.log(i)
