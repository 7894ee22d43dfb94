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
from kraftnode.protocol.framing import encode_request
from kraftnode.protocol.registry import API_VERSIONS, DESCRIBE_CLUSTER, METADATA, SERVED, VOTE
from recordbatch.message import Message
from tests.support.java_admin import JavaAdmin
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import KafkaServer, combined_server
from tests.support.node import NodeProcess, frame_call, recv_frame, running_node

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with running_node(tmp_path_factory.mktemp("bad-input")) as n:
        yield n


@pytest.fixture(scope="module")
def kafka(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """A genuine Kafka 3.9 server (broker and controller in one process), to send the same frames."""
    k = combined_server(kafka_home, tmp_path_factory.mktemp("kafka-bad-input"))
    try:
        k.wait_started()
        yield k
    finally:
        k.close()


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
                    "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log directories cordoned.")
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
    assert "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log directories cordoned." in r.stdout + r.stderr
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
    served = {s.key: (s.advertised_min_version, s.max_version) for s in SERVED.values()}
    # Vote 0-2: pre-vote (KIP-996) is on by default, as in Kafka 4.x (0-1 with it off:
    # tests/kraftnode/server/test_api_versions_server.py)
    assert served[VOTE] == (0, 2)
    assert got == served




def _controller_port(server: KafkaServer) -> int:
    (voters,) = [ln for ln in server.properties.splitlines() if ln.startswith("controller.quorum.voters=")]
    return int(voters.rsplit(":", 1)[1])


# The frames of issue 43: librdkafka 2.16 sends a MetadataRequest v12 followed by 3 bytes.
_METADATA = (METADATA, 12, w.MetadataRequest(topics=None, allow_auto_topic_creation=False))
_API_VERSIONS = (API_VERSIONS, 3, w.ApiVersionsRequest(client_software_name="raw", client_software_version="1"))
_CLUSTER_OF_BROKERS = (DESCRIBE_CLUSTER, 0, w.DescribeClusterRequest())
_CLUSTER_OF_CONTROLLERS = (DESCRIBE_CLUSTER, 1, w.DescribeClusterRequest(endpoint_type=2))


def _trailing_outcomes(port: int, requests: list[tuple[int, int, Message]]) -> list[tuple[int, int, str]]:
    """Each request sent twice on one connection, the second time with 3 bytes after its last
    field; per request, the error code answered (or "closed")."""
    out: list[tuple[int, int, str]] = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for cid, (api, version, body) in enumerate(requests):
            for tail in (b"", b"\x00\x00\x00"):
                frame = encode_request(SERVED[api], version, cid, "rdkafka", body)
                frame = struct.pack(">i", len(frame) - 4 + len(tail)) + frame[4:] + tail
                s.sendall(frame)
                got = recv_frame(s, 10)
                if got is None:
                    out.append((api, len(tail), "closed"))
                    return out
                assert struct.unpack(">i", got[:4])[0] == cid
                code = getattr(SERVED[api].response.decode(
                    got[4 + (1 if SERVED[api].response_header_version(version) else 0):], version),
                    "error_code", 0)
                out.append((api, len(tail), f"answered {code}"))
    return out


def test_bytes_after_a_requests_last_field_are_ignored_as_kafka_does(node: NodeProcess, kafka: KafkaServer) -> None:
    """Kafka's generated request readers stop after the last field and RequestContext does not
    look at what remains (docs/protocol.md): a Kafka 3.9 broker and controller answer such a
    frame as they answer it without the bytes, on the same connection, and so does kraftnode."""
    before = node.log().count("closing connection")
    as_broker = [_METADATA, _API_VERSIONS, _CLUSTER_OF_BROKERS]
    as_controller = [_API_VERSIONS, _CLUSTER_OF_CONTROLLERS]  # a Kafka controller serves no Metadata
    expected = [(api, tail, "answered 0") for api, _, _ in as_broker for tail in (0, 3)]
    assert _trailing_outcomes(kafka.port, as_broker) == expected
    assert _trailing_outcomes(node.port, as_broker) == expected
    expected = [(api, tail, "answered 0") for api, _, _ in as_controller for tail in (0, 3)]
    assert _trailing_outcomes(_controller_port(kafka), as_controller) == expected
    assert _trailing_outcomes(node.port, as_controller) == expected
    assert node.log().count("closing connection") == before, node.log()[-3000:]


def test_confluent_kafka_admin_list_topics(node: NodeProcess) -> None:
    """Issue 43's report: librdkafka 2.16's list_topics() sends MetadataRequest v12 with 3
    trailing bytes; it failed with _TRANSPORT when kraftnode closed the connection."""
    from confluent_kafka.admin import AdminClient

    before = node.log().count("closing connection")
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.port}"})
    md = admin.list_topics(timeout=8)
    assert set(md.brokers) == {1}
    assert node.log().count("closing connection") == before, node.log()[-3000:]


def _rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("size", [(1 << 31) - 1, 100 * 1024 * 1024 + 1, -1, -(1 << 31)],
                         ids=["int32-max", "limit+1", "minus-1", "int32-min"])
def test_huge_and_negative_length_prefixes_close_the_connection_as_kafka_does(
        node: NodeProcess, kafka: KafkaServer, size: int) -> None:
    """NetworkReceive.readFrom: a size below 0 or above socket.request.max.bytes (100 MiB)
    throws InvalidReceiveException before anything is allocated, and the connection is
    closed; the server serves on."""
    for port in (kafka.port, node.port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(struct.pack(">i", size) + b"\x00\x12\x00\x00")
            assert recv_frame(s, 10) is None, port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            assert still_open(s), port


def test_many_connections_declaring_large_frames_keep_memory_bounded(node: NodeProcess) -> None:
    """A frame's buffer grows with the bytes that arrive, never with the size a peer declares:
    200 connections each declaring a frame of socket.request.max.bytes (100 MiB) and sending
    64 KiB of it cost the node about what they sent (Kafka would reserve each declared size
    from its memory pool; we never reserve it). The node serves on meanwhile, and each
    connection is closed when the peer goes."""
    before = _rss_kib(node.proc.pid)
    conns = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", node.port), timeout=10)
            s.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 65536)
            conns.append(s)
        with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
            assert still_open(s)
        grown = _rss_kib(node.proc.pid) - before
        print(f"200 connections declaring 100 MiB frames, 64 KiB sent each: the node grew by {grown} KiB")
        # 200 x 64 KiB = 12.5 MiB sent; declared: 20 GiB
        assert grown < 64 * 1024, f"the node grew by {grown} KiB"
    finally:
        for s in conns:
            s.close()
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        assert still_open(s)
    assert node.proc.poll() is None


def _token_codes(port: int) -> list[int]:
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for cid, (api, version, body) in enumerate([
                (38, 3, w.CreateDelegationTokenRequest(owner_principal_type=None, owner_principal_name=None,
                                                       renewers=[], max_lifetime_ms=-1)),
                (39, 2, w.RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1000)),
                (40, 2, w.ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=-1))]):
            out.append(frame_call(s, api, version, body, cid).error_code)  # type: ignore[attr-defined]
    return out


def test_delegation_tokens_on_a_plaintext_listener_are_not_allowed_as_kafka_says(
        node: NodeProcess, kafka: KafkaServer) -> None:
    """ControllerApis.allowTokenRequests: unforwarded on PLAINTEXT -> DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
    before anything else (found by tools/fuzz/differential.py: kraftnode answered AUTH_DISABLED)."""
    assert _token_codes(_controller_port(kafka)) == [Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED] * 3
    assert _token_codes(node.port) == [Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED] * 3


def test_socket_request_max_bytes_is_honoured_as_kafka_does(kafka_home: KafkaHome,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """With ``socket.request.max.bytes=65536`` a frame of exactly 65536 bytes is read (here an
    ApiVersions v0 padded with bytes after its fields, which are ignored) and answered; one
    byte more is refused before it is read, and the connection closed (NetworkReceive)."""
    limit = 65536
    padded = raw(API_VERSIONS, 0, 5)[4:]
    padded = struct.pack(">i", limit) + padded + b"\x00" * (limit - len(padded))
    k = combined_server(kafka_home, tmp_path_factory.mktemp("kafka-limit"), extra=f"socket.request.max.bytes={limit}\n")
    try:
        with running_node(tmp_path_factory.mktemp("node-limit"), extra=f"socket.request.max.bytes={limit}\n") as n:
            k.wait_started()
            for port in (k.port, n.port):
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(padded)
                    frame = recv_frame(s, 10)
                    assert frame is not None and struct.unpack(">i", frame[:4])[0] == 5, port
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(struct.pack(">i", limit + 1) + padded[4:])
                    assert recv_frame(s, 10) is None, port
            assert "exceeds the limit of 65536 bytes" in n.log()
    finally:
        k.close()
