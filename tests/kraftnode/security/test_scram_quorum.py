"""A 3-voter quorum whose controllers log in to each other with SCRAM-SHA-512 over SASL_SSL
(``sasl.mechanism.controller.protocol=SCRAM-SHA-512``), its users written by ``kraftnode
format --add-scram`` -- what Kafka 3.9 cannot do (KAFKA-15513): the peers verify each
other against bootstrap.checkpoint until the log has committed the users.  It elects a
leader and serves kafka-python, confluent-kafka and the genuine Java Admin within 10 s of
start, with no failed login in any node's log, and survives kill -9 of its leader (the
killed node, restarted, verifies its peers against its own log before it knows the high
watermark).  A controller whose bootstrap.checkpoint cannot verify its own login is
refused at start-up with one line."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.certs import PASSWORD, make_pki
from tests.support.cluster import CLUSTER_ID, free_ports
from tests.support.java_admin import JavaAdmin
from tests.support.quorums import StaticCluster, format_node

pytestmark = [pytest.mark.timeout(300)]

TOPIC = "__cluster_metadata"
SCRAM = "SCRAM-SHA-512"
CONTROLLER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                   'username="controller" password="controller-secret";')
USERS = ("--add-scram", f"{SCRAM}=[name=controller,password=controller-secret]",
         "--add-scram", f"{SCRAM}=[name=alice,password=alice-secret]")
#: what a failed SCRAM login leaves in a node's log (sasl.Authenticator, scram.ScramServer)
FAILED_LOGIN = re.compile(r"Invalid user credentials|Invalid client credentials|authentication of .* failed")
SERVE_WITHIN_S = 10.0


def _server_properties(node_p12: Path, ca_pem: Path) -> str:
    """A node's keys; the truststore (PEM: the Java Admin reads it from the same keys in
    kafka-metadata-quorum.sh --command-config) holds the CA."""
    return (f"listener.security.protocol.map=CONTROLLER:SASL_SSL\n"
            f"ssl.keystore.type=PKCS12\nssl.keystore.location={node_p12}\n"
            f"ssl.keystore.password={PASSWORD}\nssl.key.password={PASSWORD}\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca_pem}\n"
            f"sasl.enabled.mechanisms={SCRAM}\nsasl.mechanism.controller.protocol={SCRAM}\n"
            f"listener.name.controller.scram-sha-512.sasl.jaas.config={CONTROLLER_JAAS}\n")


def _leader(cl: StaticCluster, newer_than: int = 0, timeout: float = 30) -> tuple[int, int, float]:
    """(leader id, epoch, when seen) from the newest 'became leader' line of a running node."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        best = (-1, -1)
        for i in cl.running():
            for m in re.finditer(r"became leader in epoch (\d+)", cl.log(i)):
                best = max(best, (int(m.group(1)), i))
        if best[0] > newer_than:
            return best[1], best[0], time.monotonic()
        time.sleep(0.05)
    raise AssertionError("no leader elected:\n" + "\n".join(cl.log(i)[-3000:] for i in cl.ids))


def _no_failed_login(cl: StaticCluster) -> None:
    for i in cl.ids:
        bad = [ln for ln in cl.log(i).splitlines() if FAILED_LOGIN.search(ln)]
        assert not bad, f"node {i}: " + "\n".join(bad[:5])


@pytest.fixture
def scram_quorum(tmp_path: Path, kafka_home: Any) -> Iterator[tuple[StaticCluster, dict[str, Any], JavaAdmin]]:
    pki = make_pki(tmp_path / "pki")
    node = pki.issue("node")       # one certificate for all voters, SAN 127.0.0.1
    cl = StaticCluster(tmp_path / "q", 3, _server_properties(node.p12, pki.ca_cert),
                       format_flags=USERS)
    props = tmp_path / "alice.properties"
    props.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism={SCRAM}\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     'username="alice" password="alice-secret";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_cert}\n")
    clients = {"ca": str(pki.ca_cert), "java": str(props)}
    admin = JavaAdmin(kafka_home)   # the JVM is up before the quorum starts: its start is not timed
    try:
        yield cl, clients, admin
    finally:
        admin.close()
        cl.close()


def _kafka_python(boot: str, ca: str, values: list[bytes], starting: bool = False) -> list[int]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cfg: dict[str, Any] = dict(security_protocol="SASL_SSL", ssl_cafile=ca, sasl_mechanism=SCRAM,
                               sasl_plain_username="alice", sasl_plain_password="alice-secret")
    if starting:
        # the nodes may not listen yet: retry connecting every 100 ms, not with growing
        # backoff (which would also keep a dead node in the running later)
        cfg.update(reconnect_backoff_ms=100, reconnect_backoff_max_ms=100)
    prod = KafkaProducer(bootstrap_servers=boot, acks="all", retries=20, request_timeout_ms=10000,
                         retry_backoff_ms=100, **cfg)
    try:
        offsets = [prod.send(TOPIC, value=v, partition=0).get(timeout=30).offset for v in values]
    finally:
        prod.close()
    cons = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None, **cfg)
    tp = TopicPartition(TOPIC, 0)
    cons.assign([tp])
    cons.seek(tp, offsets[0])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not set(offsets) <= set(got):
        for m in cons.poll(timeout_ms=200).get(tp, []):
            got[m.offset] = m.value
    cons.close()
    assert [got.get(o) for o in offsets] == values
    return offsets


def _confluent(boot: str, ca: str, values: list[bytes]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = {"bootstrap.servers": boot, "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
            "sasl.mechanisms": SCRAM, "sasl.username": "alice", "sasl.password": "alice-secret",
            "retry.backoff.ms": 100, "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 100}
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 30000})
    offsets: list[int] = []
    errors: list[object] = []
    for v in values:
        p.produce(TOPIC, value=v, partition=0,
                  on_delivery=lambda e, m: errors.append(e) if e else offsets.append(m.offset()))
    p.flush(30)
    assert not errors and len(offsets) == len(values), errors
    c = Consumer({**conf, "group.id": "scram-quorum", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, min(offsets))])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not set(offsets) <= set(got):
        m = c.poll(0.2)
        if m is not None and not m.error():
            got[m.offset()] = m.value()
    c.close()
    assert [got.get(o) for o in offsets] == values


def _java_quorum(admin: JavaAdmin, boot: str, props: str) -> dict[str, Any]:
    assert admin("open", "controllers", boot, props) == {"ok": True}
    q: dict[str, Any] = admin("quorum")
    assert "error" not in q and q["leaderId"] > 0, q
    return q


def _in_parallel(jobs: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Run the clients side by side; when each finished (monotonic), or its error re-raised."""
    done: dict[str, float] = {}
    failed: list[BaseException] = []

    def run(name: str, job: Callable[[], object]) -> None:
        try:
            job()
            done[name] = time.monotonic()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
            failed.append(e)

    threads = [threading.Thread(target=run, args=item) for item in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if failed:
        raise failed[0]
    return done


def test_scram_controllers_elect_serve_clients_and_survive_kill_of_the_leader(
        scram_quorum: tuple[StaticCluster, dict[str, Any], JavaAdmin]) -> None:
    cl, clients, admin = scram_quorum
    ca, props = clients["ca"], clients["java"]
    t0 = time.monotonic()
    cl.start_all()
    boot = cl.bootstrap()
    elected: list[tuple[int, int, float]] = []
    done = _in_parallel({
        "leader": lambda: elected.append(_leader(cl)),
        "kafka-python": lambda: _kafka_python(boot, ca, [b"scram-kp-1", b"scram-kp-2"], starting=True),
        "confluent-kafka": lambda: _confluent(boot, ca, [b"scram-ck-1"]),
        "java-admin": lambda: _java_quorum(admin, boot, props)})
    leader, epoch, _ = elected[0]
    timings = {name: round(t - t0, 1) for name, t in done.items()}
    assert all(t <= SERVE_WITHIN_S for t in timings.values()), timings
    _no_failed_login(cl)
    for i in cl.ids:   # the peers really logged in with SCRAM (before anything was committed)
        assert f"authenticated as User:controller with {SCRAM}" in cl.log(i)
        assert "SCRAM credentials: 2 user(s) (alice, controller) from bootstrap.checkpoint" in cl.log(i)

    # ---- kill -9 of the leader: a new one within seconds, clients still served
    cl.kill(leader)
    killed = time.monotonic()
    new_leader, new_epoch, seen = _leader(cl, newer_than=epoch)
    assert new_leader != leader and seen - killed < 10, (new_leader, seen - killed)
    survivors = ",".join(f"127.0.0.1:{cl.port(i)}" for i in cl.running())
    after_kill = _kafka_python(survivors, ca, [b"scram-kp-3"])
    q = _java_quorum(admin, survivors, props)
    assert q["leaderId"] == new_leader and q["leaderEpoch"] == new_epoch

    # ---- the killed node restarts and rejoins: it catches up with a write made after it.
    # Before it knows the high watermark, logins to it are verified against its own log
    # (the bootstrap file no longer counts): the Java Admin bootstraps from it alone
    cl.start(leader)
    _java_quorum(admin, f"127.0.0.1:{cl.port(leader)}", props)
    _kafka_python(boot, ca, [b"scram-kp-4"])
    deadline = time.monotonic() + 30
    while True:
        q = _java_quorum(admin, boot, props)
        lag = {v["id"]: q["highWatermark"] - v["logEndOffset"] for v in q["voters"]}
        if lag[leader] <= 0 and q["highWatermark"] > after_kill[0]:
            break
        assert time.monotonic() < deadline, f"node {leader} did not catch up: {q}\n{cl.log(leader)[-3000:]}"
        time.sleep(0.2)
    assert cl.log(leader).count("SCRAM credentials come from the metadata log") == 1   # the restart
    _no_failed_login(cl)


def test_a_controller_formatted_without_users_joins_and_learns_them_from_the_log(
        tmp_path: Path, kafka_home: Any) -> None:
    """KIP-853: node 1 ``--standalone`` with the users, node 2 ``--no-initial-controllers``
    without any.  Node 2 logs in to node 1 with its own JAAS login (node 1 verifies it),
    learns the users as it replays the log, and so verifies the leader's login when the
    genuine kafka-metadata-quorum.sh adds it as a voter."""
    pki = make_pki(tmp_path / "pki")
    node = pki.issue("node")
    ports = free_ports(2)
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
    procs: list[subprocess.Popen[bytes]] = []
    conf = {i: tmp_path / f"node{i}" / "server.properties" for i in (1, 2)}
    for i, flags in ((1, ("--standalone", *USERS)), (2, ("--no-initial-controllers",))):
        d = tmp_path / f"node{i}"
        d.mkdir()
        conf[i].write_text(
            f"node.id={i}\nprocess.roles=controller\nkraftnode.application.records.enable=true\nlisteners=CONTROLLER://127.0.0.1:{ports[i - 1]}\n"
            f"controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers={bootstrap}\n"
            f"log.dirs={d / 'metadata'}\n{_server_properties(node.p12, pki.ca_cert)}"
            # the Admin client's keys (kafka-metadata-quorum.sh --command-config)
            f"security.protocol=SASL_SSL\nsasl.mechanism={SCRAM}\nsasl.jaas.config={CONTROLLER_JAAS}\n")
        format_node(str(conf[i]), CLUSTER_ID, *flags)
    logs = {i: tmp_path / f"node{i}" / "node.log" for i in (1, 2)}
    try:
        for i in (1, 2):
            with logs[i].open("ab") as out:
                procs.append(subprocess.Popen([sys.executable, "-m", "kraftnode", "start", str(conf[i])],
                                              stdout=out, stderr=subprocess.STDOUT))
        # node 2 cannot verify any login before it has replayed the users (its own Fetch to
        # itself -- it is one of the bootstrap servers -- fails until then); once it has, it
        # registers with the active controller
        deadline = time.monotonic() + 30
        caught_up = "registered with the active controller"
        while caught_up not in logs[2].read_text(errors="replace"):
            assert time.monotonic() < deadline, logs[1].read_text()[-2000:] + logs[2].read_text()[-2000:]
            time.sleep(0.1)
        added = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{ports[0]}",
                                "--command-config", str(conf[2]), "add-controller")
        text = {i: logs[i].read_text(errors="replace") for i in (1, 2)}
        assert added.returncode == 0, added.stderr[-2000:] + text[1][-2000:] + text[2][-2000:]
        assert added.stdout.startswith("Added controller 2 with directory id")
        assert "SCRAM credentials: no user from bootstrap.checkpoint until the metadata log holds" in text[2]
        assert f"authenticated as User:controller with {SCRAM}" in text[1]   # node 2 logging in to node 1
        after = text[2].split(caught_up, 1)[1]
        assert f"authenticated as User:controller with {SCRAM}" in after      # node 1 probing node 2
        for i, what in ((1, text[1]), (2, after)):
            bad = [ln for ln in what.splitlines() if FAILED_LOGIN.search(ln)]
            assert not bad, f"node {i}: " + "\n".join(bad[:5])
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_voter_formatted_without_its_login_user_is_refused(tmp_path: Path) -> None:
    """No peer formatted alike can verify it, and its bootstrap would erase the user."""
    pki = make_pki(tmp_path / "pki")
    node = pki.issue("node")
    cl = StaticCluster(tmp_path / "q", 3, _server_properties(node.p12, pki.ca_cert),
                       format_flags=("--add-scram", f"{SCRAM}=[name=alice,password=alice-secret]"))
    r = subprocess.run([sys.executable, "-m", "kraftnode", "start", str(cl.root / "node1" / "server.properties")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1 and lines[0].startswith(
        "kraftnode start: error: sasl.mechanism.controller.protocol=SCRAM-SHA-512: the controller login "
        "user 'controller' (listener.name.controller.scram-sha-512.sasl.jaas.config) has no SCRAM-SHA-512 "
        "credential in "), r.stderr
    assert "Traceback" not in r.stderr
