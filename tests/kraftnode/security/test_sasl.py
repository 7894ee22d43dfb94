"""SASL listeners as Kafka 3.9 serves them: PLAIN users from the listener's JAAS entry,
SCRAM-SHA-512 users written by `kraftnode format --add-scram` (kafka-storage.sh's syntax)
into the bootstrap and replayed from the metadata log; genuine clients (kafka-python,
confluent-kafka, kcat) produce with acks=all and consume over SASL_SSL (SCRAM-SHA-512)
and SASL_PLAINTEXT (PLAIN); refusals with Kafka's error codes and messages."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import ApiVersionsRequest, MetadataRequest
from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.generated import SaslAuthenticateRequest, SaslHandshakeRequest
from kraftnode.protocol.registry import (
    API_VERSIONS,
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SERVED,
)
from kraftnode.security import scram
from tests.support.certs import PASSWORD, make_pki
from tests.support.cluster import free_ports
from tests.support.node import NodeProcess, recv_frame, running_node

TOPIC = "__cluster_metadata"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
              'password="alice-secret";')


@pytest.fixture(scope="module")
def sasl_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, int, int, Path]]:
    """CONTROLLER: SASL_SSL with SCRAM-SHA-512 and PLAIN; CLIENTS: SASL_PLAINTEXT with PLAIN."""
    tmp = tmp_path_factory.mktemp("sasl-node")
    pki = make_pki(tmp / "pki")
    server = pki.issue("server")
    p1, p2 = free_ports(2)
    extra = (f"listeners=CONTROLLER://127.0.0.1:{p1},CLIENTS://127.0.0.1:{p2}\n"
             "controller.listener.names=CONTROLLER,CLIENTS\n"
             f"controller.quorum.voters=1@127.0.0.1:{p1}\n"
             "listener.security.protocol.map=CONTROLLER:SASL_SSL,CLIENTS:SASL_PLAINTEXT\n"
             "sasl.mechanism.controller.protocol=SCRAM-SHA-512\n"
             "listener.name.controller.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN\n"
             f"listener.name.controller.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}\n"
             f"listener.name.controller.plain.sasl.jaas.config={PLAIN_JAAS}\n"
             "listener.name.clients.sasl.enabled.mechanisms=PLAIN\n"
             f"listener.name.clients.plain.sasl.jaas.config={PLAIN_JAAS}\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={server.p12}\n"
             f"ssl.keystore.password={PASSWORD}\n")
    with running_node(tmp, extra, format_args=(
            "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
            "--add-scram", 'SCRAM-SHA-512=[name=carol,iterations=8192,password="carol-secret"]')) as n:
        # verified against bootstrap.checkpoint from the start; these tests use the log's copy
        deadline = time.monotonic() + 30
        while "controller activation" not in n.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield n, p1, p2, pki.ca_cert


def _kafka_python(boot: str, cfg: dict[str, Any], values: list[bytes]) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    prod = KafkaProducer(bootstrap_servers=boot, acks="all", request_timeout_ms=10000, **cfg)
    offsets = [prod.send(TOPIC, value=v, partition=0).get(timeout=30).offset for v in values]
    prod.close()
    cons = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                         consumer_timeout_ms=5000, **cfg)
    tp = TopicPartition(TOPIC, 0)
    cons.assign([tp])
    cons.seek(tp, offsets[0])
    got = {m.offset: m.value for m in cons if m.offset <= offsets[-1]}
    cons.close()
    assert [got.get(o) for o in offsets] == values


def _confluent(conf: dict[str, Any], values: list[bytes]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({**conf, "acks": "all", "message.timeout.ms": 30000})
    offsets: list[int] = []
    errors: list[object] = []
    for v in values:
        p.produce(TOPIC, value=v, partition=0,
                  on_delivery=lambda e, m: errors.append(e) if e else offsets.append(m.offset()))
    p.flush(30)
    assert not errors and len(offsets) == len(values), errors
    c = Consumer({**conf, "group.id": "sasl", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, min(offsets))])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not set(offsets) <= set(got):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got[m.offset()] = m.value()
    c.close()
    assert [got.get(o) for o in offsets] == values


def _kcat(boot: str, args: list[str], values: list[str], tmp: Path) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    src = tmp / "in.txt"
    src.write_text("\n".join(values) + "\n")
    r = subprocess.run([kcat, "-b", boot, *args, "-t", TOPIC, "-p", "0", "-P", "-X", "acks=all",
                        "-l", str(src)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r2 = subprocess.run([kcat, "-b", boot, *args, "-t", TOPIC, "-p", "0", "-C", "-o", "beginning",
                         "-e", "-f", "%o %s\\n"], capture_output=True, timeout=60)
    assert r2.returncode == 0, r2.stderr
    found = {ln.split(" ", 1)[1] for ln in r2.stdout.decode(errors="replace").splitlines() if " " in ln}
    assert set(values) <= found


def test_scram_sha_512_over_sasl_ssl_with_every_client(
        sasl_node: tuple[NodeProcess, int, int, Path], tmp_path: Path) -> None:
    _node, p1, _p2, ca = sasl_node
    boot = f"127.0.0.1:{p1}"
    _kafka_python(boot, dict(security_protocol="SASL_SSL", ssl_cafile=str(ca), sasl_mechanism="SCRAM-SHA-512",
                             sasl_plain_username="alice", sasl_plain_password="alice-secret"),
                  [b"kp-scram-1", b"kp-scram-2"])
    _confluent({"bootstrap.servers": boot, "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret"},
               [b"ck-scram-1", b"ck-scram-2"])
    _kcat(boot, ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={ca}", "-X",
                 "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"],
          ["kc-scram-1"], tmp_path)


def test_plain_over_sasl_plaintext_with_every_client(
        sasl_node: tuple[NodeProcess, int, int, Path], tmp_path: Path) -> None:
    _node, _p1, p2, _ca = sasl_node
    boot = f"127.0.0.1:{p2}"
    _kafka_python(boot, dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="bob", sasl_plain_password="bob-secret"), [b"kp-plain-1"])
    _confluent({"bootstrap.servers": boot, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                "sasl.username": "admin", "sasl.password": "admin-secret"}, [b"ck-plain-1"])
    _kcat(boot, ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X",
                 "sasl.username=bob", "-X", "sasl.password=bob-secret"], ["kc-plain-1"], tmp_path)


# ------------------------------------------------------------------ raw exchanges
def _send(s: socket.socket, api: int, v: int, body: Any, cid: int) -> Any:
    s.sendall(encode_request(SERVED[api], v, cid, "t", body))
    frame = recv_frame(s)
    if frame is None:
        return None
    got_cid, resp = parse_response(SERVED[api], v, frame)
    assert got_cid == cid
    return resp


def _closed(s: socket.socket) -> bool:
    return recv_frame(s, 5) is None


def test_wrong_password_fails_with_kafkas_error_then_closes(
        sasl_node: tuple[NodeProcess, int, int, Path]) -> None:
    node, _p1, p2, _ca = sasl_node
    with socket.create_connection(("127.0.0.1", p2), timeout=5) as s:
        assert _send(s, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0bob\0wrong"), 2)
        assert (r.error_code, r.error_message) == (58, "Authentication failed: Invalid username or password")
        assert _closed(s)
    assert "Invalid username or password" in node.log()


def test_unknown_mechanism_gets_the_enabled_list_then_closes(
        sasl_node: tuple[NodeProcess, int, int, Path]) -> None:
    _node, _p1, p2, _ca = sasl_node
    with socket.create_connection(("127.0.0.1", p2), timeout=5) as s:
        r = _send(s, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert (r.error_code, list(r.mechanisms)) == (33, ["PLAIN"])
        assert _closed(s)


def test_any_other_api_before_authentication_closes_the_connection(
        sasl_node: tuple[NodeProcess, int, int, Path]) -> None:
    node, _p1, p2, _ca = sasl_node
    meta = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)
    with socket.create_connection(("127.0.0.1", p2), timeout=5) as s:
        assert _send(s, API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t",
                                                            client_software_version="1"), 1).error_code == 0
        assert _send(s, METADATA, 12, meta, 2) is None
    assert "Unexpected Kafka request of type Metadata during SASL handshake." in node.log()
    # after the handshake, before SaslAuthenticate completes
    with socket.create_connection(("127.0.0.1", p2), timeout=5) as s:
        assert _send(s, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert _send(s, METADATA, 12, meta, 2) is None


def test_scram_wrong_password_and_unknown_user_get_kafkas_generic_message(
        sasl_node: tuple[NodeProcess, int, int, Path]) -> None:
    _node, p1, _p2, ca = sasl_node
    ctx = ssl.create_default_context(cafile=str(ca))
    for user, password in (("alice", "nope"), ("mallory", "x")):
        with socket.create_connection(("127.0.0.1", p1), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert _send(s, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
            c = scram.ScramClient("SCRAM-SHA-512", user, password)
            r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=c.first()), 2)
            if user == "alice":
                assert r.error_code == 0
                r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
                    auth_bytes=c.final(bytes(r.auth_bytes))), 3)
            assert (r.error_code, r.error_message) == (
                58, "Authentication failed during authentication due to invalid credentials with SASL "
                    "mechanism SCRAM-SHA-512")
            assert _closed(s)


def test_handshake_v0_raw_tokens_authenticate(sasl_node: tuple[NodeProcess, int, int, Path]) -> None:
    """SaslHandshake v0: the tokens follow as bare size-prefixed frames (no Kafka header)."""
    _node, _p1, p2, _ca = sasl_node
    with socket.create_connection(("127.0.0.1", p2), timeout=5) as s:
        assert _send(s, SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        token = b"\0bob\0bob-secret"
        s.sendall(len(token).to_bytes(4, "big") + token)
        assert recv_frame(s) == b""
        r = _send(s, API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t",
                                                         client_software_version="1"), 2)
        assert r.error_code == 0


def test_scram_exchange_and_session_lifetime(sasl_node: tuple[NodeProcess, int, int, Path]) -> None:
    _node, p1, _p2, ca = sasl_node
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", p1), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        r = _send(s, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        assert list(r.mechanisms) == ["SCRAM-SHA-512", "PLAIN"]
        c = scram.ScramClient("SCRAM-SHA-512", "carol", "carol-secret")
        r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=c.first()), 2)
        assert r.error_code == 0 and b",i=8192" in bytes(r.auth_bytes)
        r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=c.final(bytes(r.auth_bytes))), 3)
        assert (r.error_code, r.session_lifetime_ms) == (0, 0)
        c.verify(bytes(r.auth_bytes))


def test_add_scram_arguments_are_checked_as_kafka_checks_them() -> None:
    rec = scram.parse_add_scram('SCRAM-SHA-256=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]')
    assert (rec.name, rec.mechanism, bytes(rec.salt), rec.iterations) == ("alice", 1, b"7q", 8192)
    for arg, msg in [
        ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
        ("SCRAM-SHA-256=name=a,password=b]", "Expected configuration string to start with ["),
        ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=100]",
         "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"),
        ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
    ]:
        with pytest.raises(scram.ScramArgumentError) as e:
            scram.parse_add_scram(arg)
        assert str(e.value) == msg


def test_format_refuses_a_bad_add_scram_with_exit_2(tmp_path: Path) -> None:
    import sys
    p = tmp_path / "server.properties"
    p.write_text("node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:9093\n"
                 "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                 f"log.dirs={tmp_path / 'm'}\n")
    r = subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config", str(p), "--cluster-id",
                        "MkU3OEVBNTcwNTJENDM2Qg", "--add-scram", "SCRAM-SHA-256=[name=a]"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "You must supply one of 'password'" in r.stderr
    r = subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config", str(p), "--cluster-id",
                        "MkU3OEVBNTcwNTJENDM2Qg", "-r", "3.4-IV0", "--add-scram",
                        "SCRAM-SHA-256=[name=a,password=b]"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "SCRAM is only supported in metadata.version 3.5-IV2 or later." in r.stderr


def test_java_metadata_quorum_and_console_consumer_over_sasl_ssl(
        sasl_node: tuple[NodeProcess, int, int, Path], tmp_path: Path, kafka_home: Any) -> None:
    """The genuine Java tools with --command-config / --consumer.config: SCRAM-SHA-512 over
    SASL_SSL (Java's SCRAM client, TLS with a PEM truststore)."""
    _node, p1, _p2, ca = sasl_node
    cfg = tmp_path / "client.properties"
    cfg.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                   'username="alice" password="alice-secret";\n'
                   f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n")
    r = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{p1}",
                        "--command-config", str(cfg), "describe", "--status")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "LeaderId:               1" in r.stdout and "CurrentVoters:          [{\"id\": 1" in r.stdout, r.stdout
    r = kafka_home.tool("kafka-console-consumer", "--bootstrap-server", f"127.0.0.1:{p1}",
                        "--consumer.config", str(cfg), "--topic", TOPIC, "--partition", "0",
                        "--offset", "0", "--max-messages", "1", "--timeout-ms", "30000",
                        "--property", "print.offset=true", "--value-deserializer",
                        "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Offset:" in r.stdout and "Processed a total of 1 messages" in r.stderr, (r.stdout, r.stderr[-2000:])
    # a wrong password: the Java tool fails with Kafka's message
    cfg.write_text(cfg.read_text().replace("alice-secret", "wrong"))
    r = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{p1}",
                        "--command-config", str(cfg), "describe", "--status", timeout=120)
    assert r.returncode != 0
    assert "Authentication failed during authentication due to invalid credentials with SASL " \
           "mechanism SCRAM-SHA-512" in r.stdout + r.stderr


def test_handshakes_that_never_complete_are_closed_after_the_idle_timeout(tmp_path: Path) -> None:
    """connections.max.idle.ms closes a TLS handshake that stalls and a SASL exchange that
    stops half way (Kafka's Selector expires idle channels whether authenticated or not)."""
    pki = make_pki(tmp_path / "pki")
    server = pki.issue("server")
    p1, p2 = free_ports(2)
    extra = (f"listeners=CONTROLLER://127.0.0.1:{p1},SECURE://127.0.0.1:{p2}\n"
             "controller.listener.names=CONTROLLER,SECURE\n"
             f"controller.quorum.voters=1@127.0.0.1:{p1}\n"
             "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,SECURE:SSL\n"
             "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.controller.protocol=PLAIN\n"
             f"listener.name.controller.plain.sasl.jaas.config={PLAIN_JAAS}\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={server.p12}\n"
             f"ssl.keystore.password={PASSWORD}\nconnections.max.idle.ms=1500\n")
    with running_node(tmp_path, extra) as n:
        deadline = time.monotonic() + 20
        while " started: cluster " not in n.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", p2), timeout=10) as tls_stall, \
                socket.create_connection(("127.0.0.1", p1), timeout=10) as sasl_stall:
            tls_stall.sendall(b"\x16\x03\x01\x00\x40")     # a TLS record header, then nothing
            assert _send(sasl_stall, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            assert recv_frame(sasl_stall, 10) is None
            tls_stall.settimeout(10)
            try:
                assert tls_stall.recv(100) == b""
            except ConnectionResetError:
                pass
        assert time.monotonic() - t0 < 9
        # the node still serves a well-behaved client
        with socket.create_connection(("127.0.0.1", p1), timeout=5) as s:
            assert _send(s, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret"), 2)
            assert r.error_code == 0
        assert n.proc.poll() is None


def test_java_admin_alters_scram_credentials(
        sasl_node: tuple[NodeProcess, int, int, Path], tmp_path: Path, kafka_home: Any) -> None:
    """Admin.alterUserScramCredentials (as alice, over SASL_SSL) adds a user the node then
    authenticates, refuses too few iterations with Kafka's error, and deletes the user."""
    _node, p1, _p2, ca = sasl_node
    cfg = tmp_path / "admin.properties"
    cfg.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                   'username="alice" password="alice-secret";\n'
                   f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n")
    classes = kafka_home.compile("scram-admin")
    boot = f"127.0.0.1:{p1}"

    def admin(*args: str) -> str:
        r = subprocess.run(kafka_home.java(classes, "ScramAdmin", boot, str(cfg), *args),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout.strip().splitlines()[-1]

    def login(user: str, password: str) -> int:
        ctx = ssl.create_default_context(cafile=str(ca))
        with socket.create_connection(("127.0.0.1", p1), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as s:
            _send(s, SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
            c = scram.ScramClient("SCRAM-SHA-512", user, password)
            r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=c.first()), 2)
            if r.error_code == 0:
                r = _send(s, SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
                    auth_bytes=c.final(bytes(r.auth_bytes))), 3)
            return int(r.error_code)

    def login_settles(user: str, password: str, want: int) -> int:
        # every node replays committed records into its credentials (up to ~1 s behind)
        deadline = time.monotonic() + 10
        got = login(user, password)
        while got != want and time.monotonic() < deadline:
            time.sleep(0.2)
            got = login(user, password)
        return got

    assert login("dave", "dave-secret") == 58
    assert admin("upsert", "dave", "SCRAM-SHA-512", "dave-secret", "8192") == "OK"
    assert login_settles("dave", "dave-secret", 0) == 0
    assert login("dave", "wrong") == 58
    assert admin("upsert", "erin", "SCRAM-SHA-512", "x", "100") == \
        "ERROR UnacceptableCredentialException: Too few iterations"
    assert admin("delete", "dave", "SCRAM-SHA-512") == "OK"
    assert login_settles("dave", "dave-secret", 58) == 58
    assert admin("delete", "dave", "SCRAM-SHA-512") == \
        "ERROR ResourceNotFoundException: Attempt to delete a user credential that does not exist"
