"""TLS listeners configured with Kafka's ssl.* keys: certificates made with `openssl`, a
real node process, genuine clients (kafka-python, confluent-kafka, kcat) producing with
acks=all and consuming over SSL with mutual TLS; refusals of plaintext clients and of
untrusted certificates; several listeners at once; start-up errors naming the key."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.config import ConfigError
from kraftnode.config.node_config import load
from kraftnode.protocol import ApiVersionsRequest, MetadataRequest
from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.registry import API_VERSIONS, METADATA, SERVED
from kraftnode.security import tls
from kraftnode.security.listeners import ListenerProps, SecurityProtocol, protocol_map
from tests.support.certs import PASSWORD, Party, Pki, make_pki
from tests.support.node import NodeProcess, recv_frame, running_node

TOPIC = "__cluster_metadata"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki) -> Party:
    return pki.issue("server")


@pytest.fixture(scope="module")
def client(pki: Pki) -> Party:
    return pki.issue("client")


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def _ssl_props(pki: Pki, server: Party, prefix: str = "") -> str:
    return (f"{prefix}ssl.keystore.type=PKCS12\n{prefix}ssl.keystore.location={server.p12}\n"
            f"{prefix}ssl.keystore.password={PASSWORD}\n{prefix}ssl.truststore.type=PEM\n"
            f"{prefix}ssl.truststore.location={pki.ca_cert}\n{prefix}ssl.client.auth=required\n")


@pytest.fixture(scope="module")
def ssl_node(tmp_path_factory: pytest.TempPathFactory, pki: Pki, server: Party) -> Iterator[NodeProcess]:
    tmp = tmp_path_factory.mktemp("ssl-node")
    with running_node(tmp, "listener.security.protocol.map=CONTROLLER:SSL\n"
                      + _ssl_props(pki, server, "listener.name.controller.")) as n:
        yield n


def _client_ctx(pki: Pki, party: Party | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if party is not None:
        ctx.load_cert_chain(str(party.cert), str(party.key))
    return ctx


def _api_versions_over(sock: socket.socket) -> int:
    spec = SERVED[API_VERSIONS]
    sock.sendall(encode_request(spec, 3, 7, "t", ApiVersionsRequest(
        client_software_name="t", client_software_version="1")))
    frame = recv_frame(sock)
    assert frame is not None, "connection closed"
    cid, resp = parse_response(spec, 3, frame)
    assert cid == 7
    return int(resp.error_code)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ genuine clients
def test_kafka_python_produces_acks_all_and_consumes_over_mutual_tls(
        ssl_node: NodeProcess, pki: Pki, client: Party) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tls_cfg = dict(security_protocol="SSL", ssl_cafile=str(pki.ca_cert), ssl_certfile=str(client.cert),
                   ssl_keyfile=str(client.key), ssl_check_hostname=True)
    boot = f"127.0.0.1:{ssl_node.port}"
    prod = KafkaProducer(bootstrap_servers=boot, acks="all", request_timeout_ms=10000, **tls_cfg)
    values = [b"kp-tls-1", b"kp-tls-2", b"kp-tls-3"]
    offsets = [prod.send(TOPIC, value=v, partition=0).get(timeout=30).offset for v in values]
    prod.close()
    cons = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                         consumer_timeout_ms=5000, **tls_cfg)
    tp = TopicPartition(TOPIC, 0)
    cons.assign([tp])
    cons.seek(tp, offsets[0])
    got = {m.offset: m.value for m in cons if m.offset <= offsets[-1]}
    cons.close()
    assert [got.get(o) for o in offsets] == values


def test_confluent_kafka_produces_acks_all_and_consumes_over_mutual_tls(
        ssl_node: NodeProcess, pki: Pki, client: Party) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = {"bootstrap.servers": f"127.0.0.1:{ssl_node.port}", "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca_cert), "ssl.certificate.location": str(client.cert),
            "ssl.key.location": str(client.key)}
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 30000})
    offsets: list[int] = []
    errors: list[object] = []
    values = [b"ck-tls-1", b"ck-tls-2", b"ck-tls-3"]
    for v in values:
        p.produce(TOPIC, value=v, partition=0,
                  on_delivery=lambda e, m: errors.append(e) if e else offsets.append(m.offset()))
    p.flush(30)
    assert not errors and len(offsets) == len(values)
    c = Consumer({**conf, "group.id": "tls", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, min(offsets))])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not set(offsets) <= set(got):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got[m.offset()] = m.value()
    c.close()
    assert [got.get(o) for o in offsets] == values


def test_kcat_produces_acks_all_and_consumes_over_mutual_tls(
        ssl_node: NodeProcess, pki: Pki, client: Party, tmp_path: Path) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    tls_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca_cert}",
                "-X", f"ssl.certificate.location={client.cert}", "-X", f"ssl.key.location={client.key}"]
    boot = f"127.0.0.1:{ssl_node.port}"
    src = tmp_path / "in.txt"
    values = ["kc-tls-1", "kc-tls-2"]
    src.write_text("\n".join(values) + "\n")
    r = subprocess.run([kcat, "-b", boot, *tls_args, "-t", TOPIC, "-p", "0", "-P", "-X", "acks=all",
                        "-l", str(src)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r2 = subprocess.run([kcat, "-b", boot, *tls_args, "-t", TOPIC, "-p", "0", "-C", "-o", "beginning",
                         "-e", "-f", "%o %s\\n"], capture_output=True, timeout=60)
    assert r2.returncode == 0, r2.stderr
    found = {ln.split(" ", 1)[1] for ln in r2.stdout.decode(errors="replace").splitlines() if " " in ln}
    assert set(values) <= found


# ------------------------------------------------------------------ refusals
def test_refused_clients_do_not_disturb_the_node(
        ssl_node: NodeProcess, pki: Pki, client: Party, tmp_path: Path) -> None:
    port = ssl_node.port
    # a plaintext Kafka client on the TLS port: its bytes are no TLS handshake; closed
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(encode_request(SERVED[API_VERSIONS], 3, 1, "t", ApiVersionsRequest(
            client_software_name="t", client_software_version="1")))
        s.settimeout(10)
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(b"\x00\x00"), "a plaintext request was answered in plaintext"
    # no client certificate while ssl.client.auth=required
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                _client_ctx(pki, None).wrap_socket(raw, server_hostname="localhost") as s:
            _api_versions_over(s)
    # a certificate from a CA the node does not trust
    other = make_pki(tmp_path / "other", "untrusted-ca")
    stranger = other.issue("stranger")
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                _client_ctx(pki, stranger).wrap_socket(raw, server_hostname="localhost") as s:
            _api_versions_over(s)
    # an expired certificate from the trusted CA
    expired = pki.issue("expired-client", days=-1)
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                _client_ctx(pki, expired).wrap_socket(raw, server_hostname="localhost") as s:
            _api_versions_over(s)
    # the node still serves a trusted client
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            _client_ctx(pki, client).wrap_socket(raw, server_hostname="localhost") as s:
        assert _api_versions_over(s) == 0
    assert ssl_node.proc.poll() is None


# ------------------------------------------------------------------ several listeners
def test_several_listeners_each_answer_with_their_own_endpoints(
        tmp_path: Path, pki: Pki, server: Party, client: Party) -> None:
    """CONTROLLER over PLAINTEXT and SECURE over SSL at once, the SSL keys for SECURE given
    with listener.name.secure.*: Metadata on each lists that listener's endpoint."""
    p1, p2 = _free_port(), _free_port()
    extra = (f"listeners=CONTROLLER://127.0.0.1:{p1},SECURE://127.0.0.1:{p2}\n"
             "controller.listener.names=CONTROLLER,SECURE\n"
             f"controller.quorum.voters=1@127.0.0.1:{p1}\n"
             "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SECURE:SSL\n"
             + _ssl_props(pki, server, "listener.name.secure."))
    spec = SERVED[METADATA]
    with running_node(tmp_path, extra) as n:
        assert n.port == p1
        deadline = time.monotonic() + 20
        while " started: cluster " not in n.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        for port, ctx in ((p1, None), (p2, _client_ctx(pki, client))):
            # the SECURE endpoint comes from the node's controller registration, which
            # commits shortly after the node becomes leader
            brokers: list[tuple[int, int]] = []
            deadline = time.monotonic() + 30
            while brokers != [(1, port)] and time.monotonic() < deadline:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                    s = ctx.wrap_socket(raw, server_hostname="localhost") if ctx else raw
                    s.sendall(encode_request(spec, 12, 3, "t", MetadataRequest(
                        topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False)))
                    frame = recv_frame(s)
                    assert frame is not None
                    _, resp = parse_response(spec, 12, frame)
                    brokers = [(b.node_id, b.port) for b in resp.brokers]  # type: ignore[attr-defined]
                    s.close()
                time.sleep(0.2)
            assert brokers == [(1, port)]


# ------------------------------------------------------------------ configuration
BASE = ("node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:9093\n"
        "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n")


def _load(tmp_path: Path, text: str) -> object:
    p = tmp_path / "server.properties"
    p.write_text(BASE + text)
    return load(str(p))


def test_protocol_map_is_resolved_as_kafka_resolves_it() -> None:
    # no explicit map, no SSL/SASL names: controller listeners are PLAINTEXT
    assert protocol_map({}, ["CONTROLLER"], ["CONTROLLER"]) == {"CONTROLLER": SecurityProtocol.PLAINTEXT}
    # default map names its own protocols
    assert protocol_map({}, ["SSL"], ["SSL"]) == {"SSL": SecurityProtocol.SSL}
    # an SSL listener name turns the implicit PLAINTEXT mapping off
    with pytest.raises(ConfigError, match="No security protocol defined for listener CONTROLLER"):
        protocol_map({}, ["CONTROLLER", "SSL"], ["CONTROLLER"])
    with pytest.raises(ConfigError, match="No security protocol defined for listener OTHER"):
        protocol_map({"listener.security.protocol.map": "CONTROLLER:SSL"}, ["CONTROLLER", "OTHER"],
                     ["CONTROLLER"])
    m = protocol_map({"listener.security.protocol.map": "controller:sasl_ssl , x:ssl"}, ["CONTROLLER"],
                     ["CONTROLLER"])
    assert m == {"CONTROLLER": SecurityProtocol.SASL_SSL}


def test_listener_prefixed_keys_override(pki: Pki, server: Party) -> None:
    lp = ListenerProps("CONTROLLER", {"ssl.client.auth": "none",
                                      "listener.name.controller.ssl.client.auth": "required"})
    assert lp.get("ssl.client.auth") == "required"
    assert lp.key("ssl.client.auth") == "listener.name.controller.ssl.client.auth"
    assert lp.key("ssl.keystore.type") == "ssl.keystore.type"


def test_every_keystore_form_loads(pki: Pki, server: Party) -> None:
    forms = [
        {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(server.p12),
         "ssl.keystore.password": PASSWORD},
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem_store),
         "ssl.key.password": PASSWORD},
        {"ssl.keystore.type": "PEM", "ssl.keystore.key": server.key.read_text(),
         "ssl.keystore.certificate.chain": server.cert.read_text()},
    ]
    truststores = [
        {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert)},
        {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(pki.trust_p12),
         "ssl.truststore.password": PASSWORD},
        {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca_cert.read_text()},
    ]
    for ks, ts in zip(forms, truststores, strict=True):
        ctx = tls.server_context(ListenerProps("C", {**ks, **ts, "ssl.client.auth": "required"}))
        assert ctx.verify_mode == ssl.CERT_REQUIRED
        assert [c["subject"] for c in ctx.get_ca_certs()] != []


@pytest.mark.parametrize(("text", "key"), [
    ("listener.security.protocol.map=CONTROLLER:TLS\n", "listener.security.protocol.map"),
    ("listener.security.protocol.map=CONTROLLER:SSL\n", "listener.name.controller.ssl.keystore.location"),
    ("listener.security.protocol.map=CONTROLLER:SSL\nssl.keystore.location=/nonexistent.p12\n"
     "ssl.keystore.type=PKCS12\nssl.keystore.password=x\n", "ssl.keystore.location"),
    ("listener.security.protocol.map=CONTROLLER:SSL\nssl.keystore.location=/x.jks\n"
     "ssl.keystore.password=x\n", "ssl.keystore.type"),
    ("listener.security.protocol.map=CONTROLLER:SSL\nssl.enabled.protocols=TLSv9\n"
     "{keystore}", "ssl.enabled.protocols"),
    ("listener.security.protocol.map=CONTROLLER:SSL\nssl.cipher.suites=TLS_NOPE_WITH_NOTHING\n"
     "{keystore}", "ssl.cipher.suites"),
    ("listener.security.protocol.map=CONTROLLER:SSL\nssl.client.auth=maybe\n{keystore}", "ssl.client.auth"),
    ("listener.security.protocol.map=CONTROLLER:SSL\nssl.principal.mapping.rules=RULE:x\n{keystore}",
     "ssl.principal.mapping.rules"),
])
def test_start_up_refusals_name_the_key(tmp_path: Path, server: Party, text: str, key: str) -> None:
    keystore = (f"ssl.keystore.type=PKCS12\nssl.keystore.location={server.p12}\n"
                f"ssl.keystore.password={PASSWORD}\n")
    with pytest.raises(ConfigError, match=f"configuration {key.replace('.', '[.]')}[ :]"):
        _load(tmp_path, text.replace("{keystore}", keystore))


def test_wrong_passwords_name_the_key_and_hide_the_value(tmp_path: Path, server: Party) -> None:
    with pytest.raises(ConfigError, match=r"\[hidden\] for configuration ssl\.key\.password") as e:
        _load(tmp_path, f"listener.security.protocol.map=CONTROLLER:SSL\nssl.keystore.type=PEM\n"
              f"ssl.keystore.location={server.pem_store}\nssl.key.password=wrong-one\n")
    assert "wrong-one" not in str(e.value)
    with pytest.raises(ConfigError, match=r"for configuration ssl\.keystore\.password"):
        _load(tmp_path, f"listener.security.protocol.map=CONTROLLER:SSL\nssl.keystore.type=PKCS12\n"
              f"ssl.keystore.location={server.p12}\nssl.keystore.password=wrong-one\n")


def test_start_command_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    import sys
    p = tmp_path / "server.properties"
    p.write_text(BASE + "log.dirs=" + str(tmp_path / "m") + "\nlistener.security.protocol.map=CONTROLLER:SSL\n"
                 "ssl.keystore.type=PKCS12\nssl.keystore.location=/nonexistent.p12\nssl.keystore.password=x\n")
    r = subprocess.run([sys.executable, "-m", "kraftnode", "start", str(p)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "ssl.keystore.location" in lines[0], r.stderr


# ------------------------------------------------------------------ principals
def test_principal_mapping_rules_as_kafka_applies_them() -> None:
    """Cases from Kafka's SslPrincipalMapperTest."""
    m = tls.PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),"
                            "L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^cn=(.*?),ou=(.*?),dc=(.*?),"
                            "dc=(.*?)$/$1@$2/U,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT")
    assert m.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "Duke"
    assert m.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US") == "duke@javasoft"
    assert m.name("cn=duke,ou=javasoft,dc=example,dc=com") == "DUKE@JAVASOFT"
    assert m.name("OU=JavaSoft,O=Sun Microsystems,C=US,cn=duke") == "DUKE"
    assert m.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert tls.PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x") is None
    assert tls.PrincipalMapper(None).name("CN=a") == "CN=a"


def test_client_certificate_principal(client: Party) -> None:
    der = ssl.PEM_cert_to_DER_cert(client.cert.read_text())
    assert tls.certificate_dn(der) == "C=US,O=kraftnode tests,OU=test,CN=client"
    assert tls.PrincipalMapper("RULE:^.*CN=([a-z]+)$/$1/").name(tls.certificate_dn(der)) == "client"


def test_cipher_suite_names_translate() -> None:
    assert tls.openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert tls.openssl_cipher_name("TLS_RSA_WITH_AES_256_CBC_SHA") == "AES256-SHA"
    assert tls.openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == \
        "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert tls.openssl_cipher_name("TLS_AES_128_GCM_SHA256") is None


def test_peer_client_context_checks_the_host_unless_told_not_to(pki: Pki, server: Party) -> None:
    base = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert),
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(server.p12),
            "ssl.keystore.password": PASSWORD}
    assert tls.client_context(ListenerProps("C", base)).check_hostname
    off = {**base, "listener.name.c.ssl.endpoint.identification.algorithm": ""}
    assert not tls.client_context(ListenerProps("C", off)).check_hostname
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        tls.client_context(ListenerProps("C", {**base, "ssl.endpoint.identification.algorithm": "ldap"}))


def test_peer_connection_refuses_a_server_with_a_wrong_host_name(
        tmp_path: Path, pki: Pki, server: Party) -> None:
    """A raft client (PeerConnection) with Kafka's default https identification refuses a
    voter whose certificate does not name the address it dialled."""
    import anyio

    from kraftnode.server.net.peer_client import PeerConnection

    wrong = pki.issue("wrong-host", san="DNS:elsewhere.example")
    with running_node(tmp_path, "listener.security.protocol.map=CONTROLLER:SSL\n"
                      f"ssl.keystore.type=PKCS12\nssl.keystore.location={wrong.p12}\n"
                      f"ssl.keystore.password={PASSWORD}\n") as n:
        base = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_cert)}

        async def dial(props: dict[str, str]) -> None:
            conn = await PeerConnection.open("1", "127.0.0.1", n.port, "t", 10,
                                             ssl=tls.client_context(ListenerProps("C", props)))
            await conn.close()

        with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
            anyio.run(dial, base)
        anyio.run(dial, {**base, "ssl.endpoint.identification.algorithm": ""})
