"""Bad input from genuine clients and raw frames gets the answer a Kafka 3.9 controller gives,
and no connection is closed that Kafka would keep open.

Kafka 3.9's SocketServer answers an ApiVersions request of any version (a version it does
not know with a v0 UNSUPPORTED_VERSION answer listing its ApiVersions range, KIP-511) and
keeps the connection; an invalid ClientSoftwareName gets INVALID_REQUEST. A request for an
API key it does not know, or for a version of an API outside the listener's range, fails
``parseRequestHeader`` / ``ApiKeys.forId`` and the connection is closed. Genuine clients
only send what ApiVersions advertised, so an API we do not serve fails in the client
("The node does not support ...") without a request, and the connection stays up.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import API_VERSIONS, SERVED, VOTE
from tests.support.java_admin import JavaAdmin
from tests.support.kafka import KafkaHome
from tests.support.node import NodeProcess, frame_call, recv_frame, running_node

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with running_node(tmp_path_factory.mktemp("bad-input")) as n:
        yield n


def raw(api_key: int, version: int, cid: int, body: bytes = b"", client_id: bytes = b"raw") -> bytes:
    """A request with header v1 (no tagged fields: parsed the same at any header version up to
    the client id) and the given body bytes."""
    head = struct.pack(">hhih", api_key, version, cid, len(client_id)) + client_id
    return struct.pack(">i", len(head) + len(body)) + head + body


def still_open(sock: socket.socket) -> bool:
    """The connection answers an ApiVersions v0 after the bad request."""
    sock.sendall(raw(API_VERSIONS, 0, 99))
    frame = recv_frame(sock)
    return frame is not None and struct.unpack(">i", frame[:4])[0] == 99


def test_api_versions_of_an_unknown_version_is_answered_and_the_connection_kept(node: NodeProcess) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
        s.sendall(raw(API_VERSIONS, 127, 7, b"\x00\x00\x00"))
        frame = recv_frame(s)
        assert frame is not None
        cid, = struct.unpack(">i", frame[:4])
        body = w.ApiVersionsResponse.decode(frame[4:], 0)  # v0 body, v0 header
        assert cid == 7 and body.error_code == Errors.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 5)]
        assert still_open(s)


def test_api_versions_with_an_invalid_software_name_is_refused_and_the_connection_kept(node: NodeProcess) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
        resp = frame_call(s, API_VERSIONS, 3, w.ApiVersionsRequest(
            client_software_name="bad name!", client_software_version="1.0"), 5)
        assert resp.error_code == Errors.INVALID_REQUEST  # type: ignore[attr-defined]
        assert still_open(s)


@pytest.mark.parametrize("api_key,version", [(55, 3), (60, 9), (32767, 0), (21, 2), (7, 3), (32, 0)],
                         ids=["DescribeQuorum-v3", "DescribeCluster-v9", "unknown-key", "DeleteRecords",
                              "ControlledShutdown (removed in Kafka 4.0)", "DescribeConfigs-v0 (KIP-896)"])
def test_a_version_or_api_not_served_closes_the_connection(node: NodeProcess, api_key: int, version: int) -> None:
    """As Kafka's SocketServer does (DeleteRecords, a broker API: see docs/interop.md, known differences)."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
        s.sendall(raw(api_key, version, 3, b"\x00" * 8))
        assert recv_frame(s) is None


def test_genuine_java_clients_and_apis_we_do_not_serve(node: NodeProcess, kafka_home: KafkaHome) -> None:
    before = node.log().count("closing connection")
    admin = JavaAdmin(kafka_home)
    try:
        for mode in ("servers", "controllers"):
            assert admin("open", mode, f"127.0.0.1:{node.port}") == {"ok": True}
            assert admin("cluster")["nodes"][0]["id"] == 1
            made = admin("createtopic", "t1")
            if mode == "servers":  # the controller places it, as a Kafka controller without brokers
                assert (made["error"], made["message"]) == (
                    "org.apache.kafka.common.errors.InvalidReplicationFactorException",
                    "Unable to replicate the partition 1 time(s): All brokers are currently fenced.")
            else:  # the Admin sends no CreateTopics to a controller quorum at all (as with Kafka)
                assert made["error"] == "org.apache.kafka.common.errors.UnsupportedEndpointTypeException"
            groups = admin("listgroups")
            if mode == "servers":  # the group coordinator serves ListGroups (docs/server.md)
                assert groups == {"groups": 0}, groups
            else:  # no broker among the controllers, as the Admin finds with Kafka
                assert groups["message"] == "Failed to find brokers to send ListGroups"
            assert admin("cluster")["controller"] == 1  # the same Admin goes on working
    finally:
        admin.close()
    r = kafka_home.tool("kafka-topics", "--bootstrap-server", f"127.0.0.1:{node.port}", "--create",
                        "--topic", "t2", "--partitions", "1", "--replication-factor", "1")
    assert r.returncode == 1
    assert "Unable to replicate the partition 1 time(s): All brokers are currently fenced." in r.stdout + r.stderr
    assert node.log().count("closing connection") == before, node.log()[-3000:]


def test_describe_cluster_of_an_unknown_endpoint_type(node: NodeProcess) -> None:
    """AuthHelper.computeDescribeClusterResponse: UNSUPPORTED_ENDPOINT_TYPE (v1) with Kafka's
    message and every other field at its default."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
        resp = frame_call(s, 60, 1, w.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                             endpoint_type=3), 1)
    assert resp == w.DescribeClusterResponse(error_code=Errors.UNSUPPORTED_ENDPOINT_TYPE,
                                             error_message="Unsupported endpoint type 3")


def test_every_served_api_is_advertised(node: NodeProcess) -> None:
    """What genuine clients negotiate against: ApiVersions lists exactly what is served."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
        resp = frame_call(s, API_VERSIONS, 3, w.ApiVersionsRequest(
            client_software_name="kraftnode-tests", client_software_version="1"), 1)
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}  # type: ignore[attr-defined]
    served = {s.key: (s.min_version, s.max_version) for s in SERVED.values()}
    # Vote 0-2: pre-vote (KIP-996) is on by default, as in Kafka 4.x (0-1 with it off:
    # tests/kraftnode/server/test_api_versions_server.py)
    assert served[VOTE] == (0, 2)
    assert got == served


