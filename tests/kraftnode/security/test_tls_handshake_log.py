"""A failed TLS handshake leaves one clear WARN line naming the client and the reason
(Kafka's Selector logs "Failed authentication with /IP (SSL handshake failed)"): a
plaintext client on the TLS port, an untrusted or expired client certificate, no client
certificate under ssl.client.auth=required, a client that does not trust the node, and a
handshake that never completes. The node keeps serving a good client after each."""

from __future__ import annotations

import re
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kraftnode.protocol import ApiVersionsRequest
from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.registry import API_VERSIONS, SERVED
from tests.support.certs import PASSWORD, Party, make_pki
from tests.support.node import recv_frame, running_node

pytestmark = pytest.mark.timeout(180)


def _ctx(ca: Path, party: Party | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if party is not None:
        ctx.load_cert_chain(str(party.cert), str(party.key))
    return ctx


def _api_versions(port: int, ctx: ssl.SSLContext) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(encode_request(SERVED[API_VERSIONS], 3, 1, "t", ApiVersionsRequest(
            client_software_name="t", client_software_version="1")))
        frame = recv_frame(s)
        assert frame is not None, "connection closed"
        return parse_response(SERVED[API_VERSIONS], 3, frame)[1].error_code  # type: ignore[attr-defined]


def _refused(port: int, ctx: ssl.SSLContext) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError, OSError)):
        _api_versions(port, ctx)


def _wait_for_line(log: Callable[[], str], pattern: str, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [ln for ln in log().splitlines() if re.search(pattern, ln)]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no log line matching {pattern!r}:\n{log()[-3000:]}")


def test_failed_handshakes_are_logged_with_the_reason(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    server, client = pki.issue("server"), pki.issue("client")
    other = make_pki(tmp_path / "other", "untrusted-ca")
    stranger = other.issue("stranger")
    expired = pki.issue("expired-client", days=-1)
    extra = ("listener.security.protocol.map=CONTROLLER:SSL\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={server.p12}\nssl.keystore.password={PASSWORD}\n"
             f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_cert}\nssl.client.auth=required\n"
             "connections.max.idle.ms=2000\n")
    with running_node(tmp_path, extra) as node:
        port = node.port
        good = _ctx(pki.ca_cert, client)
        line = "TLS handshake with 127.0.0.1:{} on listener CONTROLLER \\(127.0.0.1:" + str(port) + "\\) failed: "

        # a plaintext Kafka client on the TLS port
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(encode_request(SERVED[API_VERSIONS], 3, 1, "t", ApiVersionsRequest(
                client_software_name="t", client_software_version="1")))
            me = s.getsockname()[1]
            s.settimeout(10)
            try:
                assert s.recv(4096) == b""
            except ConnectionResetError:
                pass
        got = _wait_for_line(node.log, line.format(me))
        assert "the client did not start a TLS handshake (a plaintext client on a TLS port?)" in got
        assert " WARN [kraftnode.network] " in got and got.endswith("closing the connection")
        assert _api_versions(port, good) == 0

        cases = [
            (stranger, pki.ca_cert, r"the client's certificate was refused: unable to get local issuer certificate"),
            (expired, pki.ca_cert, r"the client's certificate was refused: certificate has expired"),
            (None, pki.ca_cert, r"the client sent no certificate, and ssl.client.auth requires one"),
            # the client does not trust the node's certificate: it aborts with an alert
            (client, other.ca_cert, r"the client refused the handshake with TLS alert 'unknown ca'"),
        ]
        for party, ca, why in cases:
            _refused(port, _ctx(ca, party))
            _wait_for_line(node.log, line.format(r"\d+") + why)
            assert _api_versions(port, good) == 0

        # a client that connects and never finishes the handshake: closed after
        # connections.max.idle.ms, with a line saying so
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            me = s.getsockname()[1]
            s.sendall(b"\x16\x03\x01")   # the first bytes of a ClientHello, then nothing
            s.settimeout(10)
            try:
                assert s.recv(4096) == b""
            except ConnectionResetError:
                pass
        got = _wait_for_line(node.log, line.format(me))
        assert "the handshake did not complete within 2000 ms (connections.max.idle.ms)" in got
        # a port probe (connect, close) is not worth a warning
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            probe = s.getsockname()[1]
        assert _api_versions(port, good) == 0
        time.sleep(0.5)
        assert f"127.0.0.1:{probe} " not in node.log()
        assert _api_versions(port, good) == 0
        assert "Traceback" not in node.log()
        assert node.proc.poll() is None
