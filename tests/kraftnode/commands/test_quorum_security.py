"""``kraftnode quorum --command-config`` on secured listeners, with the Java Admin client's
keys (security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config): SCRAM-SHA-512 and PLAIN
over SASL_SSL, mutual TLS with a PKCS12 keystore; the same answer as the genuine
kafka-metadata-quorum.sh with the same file; every refusal one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.certs import PASSWORD, Pki, make_pki
from tests.support.cluster import free_ports
from tests.support.node import running_node

pytestmark = pytest.mark.timeout(180)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
SCRAM_LOGIN = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
               'password="alice-secret";')


@dataclass
class SecuredNode:
    sasl_port: int     # CONTROLLER: SASL_SSL, SCRAM-SHA-512 and PLAIN
    tls_port: int      # SECURE: SSL, client certificates required
    pki: Pki
    dir: Path


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    tmp = tmp_path_factory.mktemp("quorum-security")
    pki = make_pki(tmp / "pki")
    server = pki.issue("server")
    p1, p2 = free_ports(2)
    extra = (f"listeners=CONTROLLER://127.0.0.1:{p1},SECURE://127.0.0.1:{p2}\n"
             "controller.listener.names=CONTROLLER,SECURE\n"
             f"controller.quorum.voters=1@127.0.0.1:{p1}\n"
             "listener.security.protocol.map=CONTROLLER:SASL_SSL,SECURE:SSL\n"
             "sasl.mechanism.controller.protocol=SCRAM-SHA-512\n"
             "listener.name.controller.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN\n"
             f"listener.name.controller.scram-sha-512.sasl.jaas.config={SCRAM_LOGIN}\n"
             f"listener.name.controller.plain.sasl.jaas.config={PLAIN_JAAS}\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={server.p12}\n"
             f"ssl.keystore.password={PASSWORD}\n"
             f"listener.name.secure.ssl.truststore.type=PEM\n"
             f"listener.name.secure.ssl.truststore.location={pki.ca_cert}\n"
             "listener.name.secure.ssl.client.auth=required\n")
    with running_node(tmp, extra, format_args=(
            "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]")) as n:
        deadline = time.monotonic() + 30
        while "controller activation" not in n.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield SecuredNode(p1, p2, pki, tmp)


def _props(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _scram(node: SecuredNode, path: Path, password: str = "alice-secret") -> Path:
    return _props(path, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                        f'required username="alice" password="{password}";\n'
                        f"ssl.truststore.type=PEM\nssl.truststore.location={node.pki.ca_cert}\n")


def _quorum(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                           f"127.0.0.1:{port}", *args], capture_output=True, text=True, timeout=60)


def _refused(r: subprocess.CompletedProcess[str], text: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert text in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_scram_and_plain_over_sasl_ssl(node: SecuredNode, tmp_path: Path) -> None:
    r = _quorum(node.sasl_port, "--command-config", str(_scram(node, tmp_path / "scram.properties")),
                "describe", "--status")
    assert r.returncode == 0, r.stderr
    assert "LeaderId:               1\n" in r.stdout
    assert f'"endpoints": ["CONTROLLER://127.0.0.1:{node.sasl_port}"]' in r.stdout, r.stdout
    plain = _props(tmp_path / "plain.properties",
                   "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                   'username="admin" password="admin-secret";\n'
                   f"ssl.truststore.type=PEM\nssl.truststore.location={node.pki.ca_cert}\n")
    r = _quorum(node.sasl_port, "--command-config", str(plain), "describe", "--replication")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].split()[-1] == "Leader"


def test_mutual_tls_with_a_pkcs12_keystore(node: SecuredNode, tmp_path: Path) -> None:
    client = node.pki.issue("cli-client")
    cfg = _props(tmp_path / "tls.properties",
                 f"security.protocol=SSL\nssl.truststore.type=PKCS12\n"
                 f"ssl.truststore.location={node.pki.trust_p12}\nssl.truststore.password={PASSWORD}\n"
                 f"ssl.keystore.type=PKCS12\nssl.keystore.location={client.p12}\n"
                 f"ssl.keystore.password={PASSWORD}\n")
    r = _quorum(node.tls_port, "--command-config", str(cfg), "describe", "--status")
    assert r.returncode == 0, r.stderr
    assert "LeaderId:               1\n" in r.stdout


def test_the_genuine_tool_gives_the_same_status_with_the_same_file(
        node: SecuredNode, tmp_path: Path, kafka_home: Any) -> None:
    cfg = _scram(node, tmp_path / "scram.properties")
    ours = _quorum(node.sasl_port, "--command-config", str(cfg), "describe", "--status")
    java = kafka_home.tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{node.sasl_port}",
                           "--command-config", str(cfg), "describe", "--status")
    assert ours.returncode == java.returncode == 0, (ours.stderr, java.stderr[-2000:])

    def stable(out: str) -> list[str]:   # the lag time is a clock reading
        return [ln for ln in out.splitlines() if not ln.startswith("MaxFollowerLagTimeMs")]
    assert stable(ours.stdout) == stable(java.stdout)


def test_refusals_are_one_line_and_exit_2(node: SecuredNode, tmp_path: Path) -> None:
    # a wrong password: the server's refusal, named
    r = _quorum(node.sasl_port, "--command-config", str(_scram(node, tmp_path / "bad.properties", "wrong")),
                "describe", "--status")
    _refused(r, "SASL_AUTHENTICATION_FAILED")
    # no client settings on a TLS listener: the hint names --command-config
    _refused(_quorum(node.tls_port, "describe", "--status"), "--command-config")
    # TLS without the client certificate the listener requires
    no_cert = _props(tmp_path / "nocert.properties", "security.protocol=SSL\nssl.truststore.type=PEM\n"
                                                     f"ssl.truststore.location={node.pki.ca_cert}\n")
    r = _quorum(node.tls_port, "--command-config", str(no_cert), "describe", "--status")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    # configuration mistakes, named by key
    _refused(_quorum(node.sasl_port, "--command-config",
                     str(_props(tmp_path / "p.properties", "security.protocol=TLS\n")), "describe", "--status"),
             "security.protocol")
    _refused(_quorum(node.sasl_port, "--command-config",
                     str(_props(tmp_path / "m.properties", "security.protocol=SASL_SSL\n"
                                f"ssl.truststore.type=PEM\nssl.truststore.location={node.pki.ca_cert}\n")),
                     "describe", "--status"),
             "sasl.mechanism GSSAPI is not supported")
    _refused(_quorum(node.sasl_port, "--command-config",
                     str(_props(tmp_path / "j.properties", "security.protocol=SASL_PLAINTEXT\n"
                                                           "sasl.mechanism=PLAIN\n")), "describe", "--status"),
             "sasl.jaas.config")
    _refused(_quorum(node.sasl_port, "--command-config",
                     str(_props(tmp_path / "t.properties", "security.protocol=SSL\n"
                                                           "ssl.truststore.type=PEM\n"
                                                           "ssl.truststore.location=/no/such/file\n")),
                     "describe", "--status"),
             "ssl.truststore.location")
    _refused(_quorum(node.sasl_port, "--command-config", str(tmp_path / "missing.properties"),
                     "describe", "--status"), "does not exist")
