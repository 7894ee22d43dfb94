"""Hostile bytes never escape as anything but DecodeError, and never make us allocate
more than the input justifies."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftnode.protocol import (
    DecodeError,
    DescribeQuorumResponse,
    FetchResponse,
    MetadataRequest,
    VoteRequest,
)
from kraftnode.protocol.framing import FrameError, check_frame_size, parse_request
from tests.kraftnode.protocol.strategies import all_message_classes, attach_flexibility, message
from tools.fuzz.codec_fuzz import run as fuzz_run

CLASSES = all_message_classes()
attach_flexibility(CLASSES)
CASES = [
    pytest.param(cls, v, id=f"{cls.NAME}-v{v}")
    for cls in CLASSES
    for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]


def _decode_or_reject(cls: type, data: bytes, version: int) -> None:
    try:
        cls.decode(data, version)
    except DecodeError:
        pass


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncations_and_trailing_garbage(cls: type, version: int, data: st.DataObject) -> None:
    encoded = data.draw(message(cls, version)).encode(version)
    for cut in range(len(encoded)):
        _decode_or_reject(cls, encoded[:cut], version)
    with pytest.raises(DecodeError, match="trailing"):
        cls.decode(encoded + b"\x00", version)


@pytest.mark.parametrize(("cls", "version"), CASES[::3])
@settings(max_examples=30, deadline=None)
@given(raw=st.binary(max_size=80))
def test_random_bytes(cls: type, version: int, raw: bytes) -> None:
    _decode_or_reject(cls, raw, version)


def test_fuzz_run_finds_nothing() -> None:
    tried, _decoded, failures = fuzz_run(inputs=60_000, seed=7, seconds=60)
    print(f"codec fuzz inputs tried: {tried}")
    assert tried >= 10_000
    assert failures == []


def test_lying_lengths_do_not_allocate() -> None:
    # VoteRequest v1 (flexible): cluster id claims ~2 GiB, array count claims 2^31.
    huge_string = b"\xff\xff\xff\xff\x07" + b"x" * 10
    huge_array = b"\x00" + b"\x00\x00\x00\x01" + b"\xff\xff\xff\xff\x07"
    tracemalloc.start()
    for raw in (huge_string, huge_array):
        with pytest.raises(DecodeError):
            VoteRequest.decode(raw, 1)
    # classic int32 array count in MetadataRequest v1 (non-flexible)
    with pytest.raises(DecodeError, match="exceeds"):
        MetadataRequest.decode(b"\x7f\xff\xff\xff", 1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 1024


def test_overlong_varint_and_bad_utf8() -> None:
    with pytest.raises(DecodeError, match="varint"):
        VoteRequest.decode(b"\x80\x80\x80\x80\x80\x01", 1)
    # strict outside requests (responses, records, our files) ...
    resp = DescribeQuorumResponse(error_message="ab").encode(2)
    with pytest.raises(DecodeError, match="(?i)utf-8"):
        DescribeQuorumResponse.decode(resp.replace(b"ab", b"\xff\xfe"), 2)
    # ... while a request's malformed UTF-8 is replaced, as Java's new String(bytes, UTF_8)
    # does in Kafka's request readers (tests/kraftnode/protocol/test_request_parsing.py)
    req = VoteRequest(cluster_id="ab").encode(1)
    assert VoteRequest.decode(req.replace(b"ab", b"\xff\xfe"), 1).cluster_id == "\ufffd\ufffd"


def test_records_stay_zero_copy() -> None:
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        partitions=[FetchResponse.PartitionData(records=b"r" * 1000)])])
    frame = bytearray(resp.encode(16))
    decoded = FetchResponse.decode(memoryview(frame), 16)
    records = decoded.responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records.obj is frame


def test_absent_non_default_field_is_refused_unless_ignorable() -> None:
    from kraftnode.protocol import UnsupportedVersionError

    # Nodes is v2+ and not ignorable in DescribeQuorumResponse: Kafka refuses to drop it.
    resp = DescribeQuorumResponse(nodes=[DescribeQuorumResponse.Node(node_id=1)])
    with pytest.raises(UnsupportedVersionError, match="nodes"):
        resp.encode(1)
    assert DescribeQuorumResponse.decode(resp.encode(2), 2) == resp
    # VoterId is ignorable in VoteRequest: silently dropped at v0, as Kafka does.
    req = VoteRequest(voter_id=3)
    assert VoteRequest.decode(req.encode(0), 0).voter_id == -1


def test_frame_size_limits() -> None:
    check_frame_size(100, 100)
    with pytest.raises(FrameError):
        check_frame_size(101, 100)
    with pytest.raises(FrameError):
        check_frame_size(-1, 100)
    with pytest.raises(FrameError, match="API key"):
        parse_request(b"\x00\x63\x00\x00\x00\x00\x00\x01\xff\xff")  # api key 99
    with pytest.raises(DecodeError):
        parse_request(b"\x00")
