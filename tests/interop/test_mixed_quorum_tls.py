"""A mixed quorum over TLS: the genuine Kafka 3.9 ``KafkaRaftClient`` voter (the
``raftnode`` harness) and two kraftnode voters whose controller listener is SSL (mutual TLS)
or SASL_SSL (mutual TLS + PLAIN logins between voters), certificates made with openssl.

Both directions are real TLS: kraftnode's peer client dials the Java node's listener, which
is Kafka's own server channel builder (SslChannelBuilder / SaslChannelBuilder) configured
from Kafka's ``ssl.*`` / ``sasl.*`` keys; the Java node dials kraftnode's listener with
Kafka's client channel builder, as KafkaRaftManager does. Elections (kill -9 of a kraftnode
leader, kill -9 of the Java leader), replication and commit are checked across
implementations. Leaders and high watermarks of the kraftnode nodes are read from their
metrics listener (plain HTTP), the Java node's from its harness."""

from __future__ import annotations

import re
import socket
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import PRODUCE, SASL_AUTHENTICATE, SASL_HANDSHAKE
from kraftnode.security.tls import certificate_dn
from tests.interop.test_mixed_quorum import noops
from tests.support.certs import PASSWORD, Party, Pki, make_pki
from tests.support.cluster import CLUSTER_ID, Cluster, free_ports
from tests.support.java_raft import JavaRaftNode
from tests.support.kafka import KafkaHome
from tests.support.node import frame_call

pytestmark = pytest.mark.timeout(300)

JAVA = 3
TOPIC = "__cluster_metadata"
# fetch timeout (kraftnode 2 s, Java 1 s) + election timeout 1 s + 1 s slack + 1 s for TLS
# connection set-up after a kill
FAILOVER_BOUND_S = 5.0
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
        'password="controller-secret" user_controller="controller-secret" user_alice="alice-secret";')


def wait_until(what: str, check: Callable[[], Any], timeout: float, logs: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


def kraft_security(proto: str, node: Party, pki: Pki) -> str:
    """A kraftnode controller listener of this protocol, mutual TLS required."""
    extra = (f"listener.security.protocol.map=CONTROLLER:{proto}\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={node.p12}\n"
             f"ssl.keystore.password={PASSWORD}\nssl.key.password={PASSWORD}\n"
             f"ssl.truststore.type=PKCS12\nssl.truststore.location={pki.trust_p12}\n"
             f"ssl.truststore.password={PASSWORD}\n"
             f"{'listener.name.controller.' if proto == 'SASL_SSL' else ''}ssl.client.auth=required\n")
    if proto == "SASL_SSL":
        extra += ("sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.controller.protocol=PLAIN\n"
                  f"listener.name.controller.plain.sasl.jaas.config={JAAS}\n")
    return extra


def java_security(proto: str, node: Party, pki: Pki) -> dict[str, str]:
    """The same listener for the Java node, in Kafka's keys: a PKCS12 keystore and a PEM
    truststore (Java ignores the certificates of a PKCS12 truststore written by openssl
    without its trusted-key-usage attribute; PEM is Kafka's KIP-651 form)."""
    conf = {"listener.security.protocol.map": f"CONTROLLER:{proto}",
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(node.p12),
            "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD,
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert),
            ("listener.name.controller.ssl.client.auth" if proto == "SASL_SSL" else "ssl.client.auth"): "required"}
    if proto == "SASL_SSL":
        conf.update({"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.controller.protocol": "PLAIN",
                     "listener.name.controller.plain.sasl.jaas.config": JAAS})
    return conf


class TlsMixed:
    """kraftnode voters 1 and 2 and the Java voter 3 of one static quorum, over ``proto``."""

    def __init__(self, kafka: KafkaHome, root: Path, proto: str) -> None:
        self.proto = proto
        self.pki = make_pki(root / "pki")
        self.node = node = self.pki.issue("node")  # SAN IP:127.0.0.1, for every voter
        self.client = self.pki.issue("client")
        self.cl = Cluster(root, 3, kraft_security(proto, node, self.pki))
        self.metrics = dict(zip(self.cl.ids, free_ports(3), strict=True))
        self.cl.node_extra = {i: f"kraftnode.metrics.listener=127.0.0.1:{self.metrics[i]}" for i in self.cl.ids}
        self.cl.write_properties()
        voters = ",".join(f"{i}@127.0.0.1:{self.cl.port(i)}" for i in self.cl.ids)
        self.cl.start(1)
        self.cl.start(2)
        self.java = JavaRaftNode(kafka, root / "java3", node_id=JAVA, port=self.cl.port(JAVA),
                                 cluster_id=CLUSTER_ID, voters=voters,
                                 extra={"controller.quorum.fetch.timeout.ms": "1000",
                                        **java_security(proto, node, self.pki)})

    def gauges(self, i: int) -> dict[str, float]:
        """kraftnode i's raft gauges (leader, epoch, high watermark); {} while it is down."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics[i]}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return {}
        out = {}
        for name in ("current_leader", "current_epoch", "high_watermark"):
            m = re.search(rf"^kafka_server_raft_metrics_{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
            if m:
                out[name] = float(m.group(1))
        return out

    def logs(self) -> str:
        return "\n".join(f"--- node {i}\n" + self.cl.log(i)[-2500:] for i in (1, 2)) + \
            "\n--- java\n" + self.java.stderr()[-2500:]

    def wait_leader(self, pred: Callable[[int, int], bool], timeout: float, what: str,
                    java_alive: bool = True) -> tuple[int, int]:
        """(leader, epoch) once a running kraftnode (and the Java node, while alive) agree on a
        leader satisfying pred."""
        def check() -> tuple[int, int] | None:
            views = []
            for i in self.cl.running():
                g = self.gauges(i)
                if "current_leader" in g:
                    views.append((int(g["current_leader"]), int(g["current_epoch"])))
            if java_alive:
                st = self.java.status()
                views.append((st["leader"], st["epoch"]))
            best = max(views, default=(-1, -1), key=lambda v: v[1])
            if best[0] < 0 or not pred(*best) or sum(v == best for v in views) < 2:
                return None
            return best
        return wait_until(what, check, timeout, self.logs)  # type: ignore[no-any-return]

    def call(self, port: int, api: int, version: int, body: Any) -> Any:
        """One request over the listener's protocol: TLS with the client certificate, and
        over SASL_SSL a PLAIN login (SaslHandshake v1, SaslAuthenticate v2) first."""
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.client.cert), str(self.client.key))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            if self.proto == "SASL_SSL":
                assert frame_call(s, SASL_HANDSHAKE, 1, w.SaslHandshakeRequest(mechanism="PLAIN"), 1,
                                  "tests").error_code == 0  # type: ignore[attr-defined]
                r = frame_call(s, SASL_AUTHENTICATE, 2, w.SaslAuthenticateRequest(
                    auth_bytes=b"\0alice\0alice-secret"), 2, "tests")
                assert r.error_code == 0, r  # type: ignore[attr-defined]
            return frame_call(s, api, version, body, 3, "tests")

    def produce(self, port: int, n: int) -> Any:
        """acks=all: n framed NoOpRecords (the Java voter decodes every committed record as
        a metadata record; docs/server.md, "Produce in a mixed quorum")."""
        P = w.ProduceRequest
        req = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=noops(n))])])
        return self.call(port, PRODUCE, 9, req).responses[0].partition_responses[0]

    def close(self) -> None:
        self.java.close()
        self.cl.close()


@pytest.fixture(params=["SSL", "SASL_SSL"])
def tls_mixed(kafka_home: KafkaHome, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TlsMixed]:
    m = TlsMixed(kafka_home, tmp_path, request.param)
    try:
        yield m
    finally:
        m.close()
        assert not m.java.faults(), m.java.faults()


def test_mixed_quorum_over_tls_elects_replicates_and_commits(tls_mixed: TlsMixed) -> None:
    m = tls_mixed
    assert m.java.wait_for(lambda e: e["event"] == "started", 1, "started")["security_protocol"] == m.proto

    # 1. a leader, and a kraftnode leader (the Java one resigns if it won)
    lead, epoch = m.wait_leader(lambda ld, e: True, 30, "a first leader over TLS")
    if lead == JAVA:
        assert "error" not in m.java.resign()
        lead, epoch = m.wait_leader(lambda ld, e, ep=epoch: ld != JAVA and e > ep, 20, "a kraftnode leader")

    # 2. kraftnode -> Java really is TLS (and SASL): Kafka's server channel on the Java node
    # authenticated the kraftnode voters (certificate DN over SSL, the PLAIN login over SASL_SSL)
    # (over SSL the genuine DefaultKafkaPrincipalBuilder's name for the certificate is the one
    # kraftnode's own principal code gives it: same RFC 2253 order)
    node_dn = certificate_dn(ssl.PEM_cert_to_DER_cert(m.node.cert.read_text()))
    assert node_dn == "C=US,O=kraftnode tests,OU=test,CN=node"
    want = "User:controller" if m.proto == "SASL_SSL" else f"User:{node_dn}"
    inbound = m.java.wait_for(lambda e: e["event"] == "inbound" and e["client_id"].startswith("raft-client-"),
                              20, "a connection from a kraftnode voter's raft client")
    assert inbound["principal"] == want and inbound["security_protocol"] == m.proto, inbound

    # 3. replication kraftnode leader -> Java follower: acks=all writes committed by the Java voter
    r = m.produce(m.cl.port(lead), 5)
    assert r.error_code == 0, r
    last = r.base_offset + 4
    st = m.java.wait_status(lambda s: s["committed_offset"] >= last, 15, "the Java voter to commit the writes")
    assert st["high_watermark"] > last and st["noop_records"] == 5
    # Java -> kraftnode as a client of the controller listener: its ControllerRegistration
    reg = m.java.wait_for(lambda e: e["event"] == "registration" and e.get("error") == "NONE", 30,
                          "the Java node's ControllerRegistration with the kraftnode leader")
    assert reg["active_controller"] in (1, 2)

    # 4. kill -9 of the kraftnode leader: a new leader (across implementations) over TLS
    hw = last + 1
    t0 = time.monotonic()
    m.cl.kill(lead)
    new, new_epoch = m.wait_leader(lambda ld, e, old=lead, ep=epoch: ld != old and e > ep, FAILOVER_BOUND_S + 5,
                                   f"a leader after kill -9 of kraftnode {lead}")
    took = time.monotonic() - t0
    print(f"{m.proto}: kill -9 {lead}: {new} elected in epoch {new_epoch} after {took:.2f}s")
    assert took < FAILOVER_BOUND_S + 5
    st = m.java.wait_status(lambda s: s["committed_offset"] + 1 >= hw, 10, "nothing committed lost")
    m.cl.start(lead)

    # 5. the Java voter leads and both kraftnode voters replicate and commit from it
    for _ in range(4):
        if new == JAVA:
            break
        m.cl.kill(new)
        new, new_epoch = m.wait_leader(lambda ld, e, ep=new_epoch: e > ep, FAILOVER_BOUND_S + 5,
                                       "a leader after another kill -9")
        for i in (1, 2):
            if i not in m.cl.running():
                m.cl.start(i)
    assert new == JAVA, "the Java voter never won an election over TLS:\n" + m.logs()
    for i in (1, 2):
        if i not in m.cl.running():
            m.cl.start(i)
    appended = m.java.append(7)
    assert "error" not in appended, appended
    last = appended["last_offset"]
    st = m.java.wait_status(lambda s: s["high_watermark"] > last, 15, "the Java leader to commit")
    for i in (1, 2):
        wait_until(f"kraftnode {i} to commit the Java leader's records",
                   lambda i=i: m.gauges(i).get("high_watermark", -1) > last, 20, m.logs)

    # 6. kill -9 of the Java leader: the kraftnode voters elect one of themselves over TLS,
    # keep everything the Java leader committed, and take acks=all writes with 2 of 3 voters
    java_epoch = new_epoch
    m.java.proc.kill()
    m.java.proc.wait()
    lead, epoch = m.wait_leader(lambda ld, e: ld in (1, 2) and e > java_epoch, FAILOVER_BOUND_S + 5,
                                "a kraftnode leader after kill -9 of the Java leader", java_alive=False)
    r = m.produce(m.cl.port(lead), 3)
    assert r.error_code == 0 and r.base_offset > last, r
    for i in (1, 2):
        wait_until(f"kraftnode {i} to commit the writes after the Java leader died",
                   lambda i=i: m.gauges(i).get("high_watermark", -1) > r.base_offset + 2, 20, m.logs)
