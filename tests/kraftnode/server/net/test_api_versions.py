"""ApiVersions against a real ``kraftnode start`` process, byte-level, including the
answers Kafka gives to versions and APIs it does not know."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest

from kraftnode.protocol import ApiVersionsRequest, ApiVersionsResponse, Errors, RequestHeader
from kraftnode.protocol.registry import API_VERSIONS, SERVED, VOTE
from tests.support.node import NodeProcess, call, recv_frame, running_node


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> NodeProcess:
    with running_node(tmp_path_factory.mktemp("node")) as n:
        yield n  # type: ignore[misc]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_every_version_lists_every_served_api(node: NodeProcess, version: int) -> None:
    req = ApiVersionsRequest(client_software_name="kraftnode-tests", client_software_version="1.0")
    cid, resp = call(node.port, API_VERSIONS, version, req, correlation_id=41 + version)
    assert cid == 41 + version
    assert isinstance(resp, ApiVersionsResponse)
    assert resp.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    # Vote v2 (KIP-996): pre-vote is on by default, as in Kafka 4.x, so Vote 0-2 is advertised
    expected = {s.key: (s.advertised_min_version, s.max_version) for s in SERVED.values()}
    assert expected[VOTE] == (0, 2)
    assert got == expected
    features = [(f.name, f.min_version, f.max_version) for f in resp.supported_features]
    # a static quorum: kraft.version 0 is not listed as finalized at any version, as a
    # Kafka controller's ApiVersions leaves out features finalized at level 0
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}
    assert finalized == ({"metadata.version": (21, 21)} if version >= 3 else {})
    # as a genuine Kafka 4.4 controller lists them, in its (HashMap) order: metadata.version
    # 3.3-IV3 to 4.4-IV2 and every production feature from 0 to its latest production level
    if version >= 4:
        assert features == [("group.version", 0, 1), ("kraft.version", 0, 1), ("metadata.version", 7, 33),
                            ("share.version", 0, 2), ("streams.version", 0, 1),
                            ("transaction.version", 0, 2), ("eligible.leader.replicas.version", 0, 1)]
    elif version == 3:
        assert features == [("metadata.version", 7, 33)]  # min-version-0 features left out
    else:
        assert features == []


def _raw_request(api_key: int, version: int, header_version: int, body: bytes, cid: int = 7) -> bytes:
    head = RequestHeader(request_api_key=api_key, request_api_version=version,
                         correlation_id=cid, client_id="raw").encode(header_version)
    payload = head + body
    return struct.pack(">i", len(payload)) + payload


def test_unknown_apiversions_version_gets_a_v0_downgrade(node: NodeProcess) -> None:
    with socket.create_connection(("127.0.0.1", node.port)) as s:
        # v9 does not exist; the body is whatever a future client might send
        s.sendall(_raw_request(API_VERSIONS, 9, 2, b"\x05future\x02x\x00\x01\x02", cid=99))
        frame = recv_frame(s)
    assert frame is not None
    assert frame[:4] == struct.pack(">i", 99)  # response header v0: correlation id only
    resp = ApiVersionsResponse.decode(frame[4:], 0)
    assert resp.error_code == Errors.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 5)]


def test_v5_names_the_cluster_and_node_it_means(node: NodeProcess) -> None:
    """KIP-1242 (ApiVersions v5), Kafka 4.4's broker check: another cluster id, or our cluster
    id with another node id, is REBOOTSTRAP_REQUIRED (no api keys); no cluster id, or ours
    with our node id, is answered as usual (the node id alone is not checked)."""
    ours, me = "MkU3OEVBNTcwNTJENDM2Qg", 1  # tests/support/node.py formats node 1 with this id
    for cluster, node_id, code in ((ours, me, 0), (None, 99, 0), (None, -1, 0),
                                   ("AAAAAAAAAAAAAAAAAAAAAA", me, Errors.REBOOTSTRAP_REQUIRED),
                                   (ours, me + 1, Errors.REBOOTSTRAP_REQUIRED)):
        req = ApiVersionsRequest(client_software_name="kraftnode-tests", client_software_version="1.0",
                                 cluster_id=cluster, node_id=node_id)
        _, resp = call(node.port, API_VERSIONS, 5, req)
        assert resp.error_code == code, (cluster, node_id)
        assert bool(resp.api_keys) == (code == 0)
    # below v5 the fields do not exist: a v4 request cannot carry them and is never refused
    _, resp = call(node.port, API_VERSIONS, 4, ApiVersionsRequest(
        client_software_name="kraftnode-tests", client_software_version="1.0"))
    assert resp.error_code == 0


def test_invalid_client_software_name_is_invalid_request(node: NodeProcess) -> None:
    req = ApiVersionsRequest(client_software_name="-bad name-", client_software_version="1")
    _, resp = call(node.port, API_VERSIONS, 3, req)
    assert resp.error_code == Errors.INVALID_REQUEST and resp.api_keys == []


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (_raw_request(99, 0, 1, b""), "unknown api key"),
        (_raw_request(52, 7, 2, b"\x00"), "unsupported Vote version"),
        (struct.pack(">i", 200 * 1024 * 1024), "oversize frame, no body sent"),
        (struct.pack(">i", -5), "negative size"),
        (struct.pack(">i", 2) + b"\x00\x12", "frame too short for a header"),
        (_raw_request(18, 3, 2, b"\x7f\xff"), "truncated body"),
    ],
)
def test_bad_frames_close_the_connection_and_the_node_survives(
    node: NodeProcess, frame: bytes, why: str
) -> None:
    with socket.create_connection(("127.0.0.1", node.port)) as s:
        s.sendall(frame)
        assert recv_frame(s) is None, why
    # the node keeps serving
    _, resp = call(node.port, API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="after", client_software_version="1"))
    assert resp.error_code == 0
    assert node.proc.poll() is None


def test_pipelined_requests_are_answered_in_order(node: NodeProcess) -> None:
    spec = SERVED[API_VERSIONS]
    from kraftnode.protocol.framing import encode_request, parse_response

    reqs = b"".join(encode_request(spec, v, 100 + i, "pipe", ApiVersionsRequest(
        client_software_name="p", client_software_version="1"))
        for i, v in enumerate([4, 0, 3, 1, 2]))
    with socket.create_connection(("127.0.0.1", node.port)) as s:
        s.sendall(reqs)
        cids = []
        for v in [4, 0, 3, 1, 2]:
            frame = recv_frame(s)
            assert frame is not None
            cid, resp = parse_response(spec, v, frame)
            cids.append(cid)
            assert resp.error_code == 0
    assert cids == [100, 101, 102, 103, 104]


def test_start_with_bad_config_is_one_line_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.properties"
    bad.write_text("node.id=abc\nlisteners=CONTROLLER://127.0.0.1:0\n")
    for args in (["start", str(bad)], ["start", str(tmp_path / "missing.properties")]):
        r = subprocess.run([sys.executable, "-m", "kraftnode", *args], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_with_pre_vote_off_vote_is_advertised_as_kafka_3_9_does(tmp_path: Path) -> None:
    """kraftnode.raft.pre.vote.enable=false: Kafka 3.9's elections and its ApiVersions, Vote 0-1."""
    with running_node(tmp_path, extra="kraftnode.raft.pre.vote.enable=false\n") as n:
        _, resp = call(n.port, API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="kraftnode-tests", client_software_version="1.0"))
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}  # type: ignore[attr-defined]
    expected = {s.key: (s.advertised_min_version, s.max_version) for s in SERVED.values()} | {VOTE: (0, 1)}
    assert got == expected
