"""Request parsing is exactly as lenient as Kafka's (issue 43).

Kafka's ``RequestContext.parseRequest`` hands the frame after the header to the generated
``XxxRequestData(readable, version)`` constructor, which reads the fields and never looks at
what remains: bytes after a request's last field are ignored. librdkafka 2.16 sends such a
MetadataRequest v12, and a Kafka 3.9 server answers it. Responses, records and everything
kraftnode decodes for itself stay strict (``Message.decode`` refuses trailing bytes).
"""

from __future__ import annotations

import uuid

import pytest

from kraftnode.protocol import DecodeError
from kraftnode.protocol import generated as w
from kraftnode.protocol.framing import encode_request, parse_request, parse_response
from kraftnode.protocol.registry import API_VERSIONS, METADATA, SERVED

CASES = [pytest.param(spec, v, id=f"{spec.name}-v{v}")
         for spec in SERVED.values() for v in range(spec.min_version, spec.max_version + 1)]


@pytest.mark.parametrize(("spec", "version"), CASES)
def test_bytes_after_a_requests_fields_are_ignored(spec: w.Any, version: int) -> None:
    body = spec.request()
    frame = encode_request(spec, version, 7, "c", body)[4:]
    for tail in (b"\x00", b"\x01\x02\x03", b"\xff" * 64):
        request = parse_request(frame + tail)
        assert request.correlation_id == 7
        assert request.body == body


def test_librdkafkas_metadata_v12_with_three_trailing_bytes() -> None:
    """The frame of issue 43: a MetadataRequest v12 followed by 3 bytes."""
    M = w.MetadataRequest
    body = M(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    frame = encode_request(SERVED[METADATA], 12, 2, "rdkafka", body)[4:] + b"\x00\x00\x00"
    request = parse_request(frame)
    assert request.body == body and request.api_version == 12


def test_truncated_requests_are_still_refused() -> None:
    """Kafka's readers throw on a read past the end (BufferUnderflowException): the
    connection is closed. Leniency is only about what follows the last field."""
    M = w.MetadataRequest
    body = M(topics=[M.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True)
    frame = encode_request(SERVED[METADATA], 12, 2, "c", body)[4:]
    header_len = len(encode_request(SERVED[METADATA], 12, 2, "c", M())[4:]) - len(M().encode(12))
    for cut in range(header_len, len(frame)):
        with pytest.raises(DecodeError):
            parse_request(frame[:cut])


def test_unknown_tagged_fields_are_skipped_in_header_and_body() -> None:
    """Kafka's generated readers keep unknown tags aside (``_unknownTaggedFields``) and go on."""
    spec = SERVED[METADATA]
    header = w.RequestHeader(request_api_key=METADATA, request_api_version=12, correlation_id=5,
                             client_id="c", unknown_tagged_fields=[(9, b"hdr")])
    body = w.MetadataRequest(topics=None, unknown_tagged_fields=[(77, b"\x01\x02")])
    frame = header.encode(2) + body.encode(12)
    request = parse_request(frame)
    assert request.correlation_id == 5
    assert request.body is not None and request.body.topics is None
    assert spec.request is w.MetadataRequest


def test_api_versions_of_an_unknown_version_is_not_parsed() -> None:
    """RequestContext.isUnsupportedApiVersionsRequest: the body is not read at all."""
    header = w.RequestHeader(request_api_key=API_VERSIONS, request_api_version=99, correlation_id=1,
                             client_id="c")
    request = parse_request(header.encode(2) + b"\xde\xad")
    assert request.body is None


def test_responses_stay_strict() -> None:
    """What kraftnode reads from its peers is checked to the last byte."""
    spec = SERVED[METADATA]
    frame = w.ResponseHeader(correlation_id=3).encode(1) + w.MetadataResponse().encode(12)
    assert parse_response(spec, 12, frame)[0] == 3
    with pytest.raises(DecodeError, match="trailing"):
        parse_response(spec, 12, frame + b"\x00")


def test_strings_arrays_and_lengths_are_read_as_kafka_reads_them() -> None:
    """Kafka's generated readers: a classic length below zero (any, not only -1) is null where
    null is allowed; malformed UTF-8 becomes U+FFFD (Java's ``new String(bytes, UTF_8)``); a
    compact string longer than 0x7fff bytes is refused. Both found by tools/fuzz/differential.py
    against a Kafka 3.9 controller, which answered these frames."""
    import struct

    # header v1: api 18 v2, correlation 1, client id of length -9724 (null, as Kafka reads it)
    request = parse_request(struct.pack(">hhih", API_VERSIONS, 2, 1, -9724) + b"junk")
    assert request.header.client_id is None and request.correlation_id == 1
    # malformed UTF-8 in the client id and in a body string
    request = parse_request(struct.pack(">hhih", METADATA, 1, 2, 4) + b"dif\x84"
                            + struct.pack(">ih", 1, 3) + b"\xe4ab")
    assert request.header.client_id == "dif\ufffd"
    assert request.body is not None and request.body.topics[0].name == "\ufffdab"
    # a nullable classic array of length -7 is null (MetadataRequest v1 topics)
    request = parse_request(struct.pack(">hhihi", METADATA, 1, 3, -1, -7))
    assert request.body is not None and request.body.topics is None
    # non-nullable: refused, as Kafka's "non-nullable field ... was serialized as null"
    with pytest.raises(DecodeError, match="null"):
        parse_request(struct.pack(">hhihi", METADATA, 0, 3, -1, -7))
    # a compact string of 0x8000 bytes (DescribeQuorum v1: compact topic name)
    # (our encoder refuses to write one: the bytes are patched in)
    body = w.DescribeQuorumRequest(topics=[w.DescribeQuorumRequest.TopicData(topic_name="xxxxx")]).encode(1)
    body = body.replace(b"\x06xxxxx", b"\x81\x80\x02" + b"x" * 0x8000)  # uvarint 0x8001: 0x8000 bytes
    with pytest.raises(DecodeError, match="invalid length"):
        parse_request(w.RequestHeader(request_api_key=55, request_api_version=1, correlation_id=4,
                                      client_id="c").encode(2) + body)


def test_known_tagged_fields_are_read_as_kafka_reads_them() -> None:
    """Kafka's generated readers read a known tag's value without looking at its declared
    size, and refuse a known tag outside the versions its field is tagged in ("Tag 0 is not
    valid for version 12"); unknown tags are skipped by their size."""
    from kraftnode.protocol.registry import API_VERSIONS as AV

    # ApiVersionsRequest v3 has no tagged fields: any tag is unknown and skipped
    header = w.RequestHeader(request_api_key=AV, request_api_version=3, correlation_id=9, client_id="c")
    body = w.ApiVersionsRequest(client_software_name="n", client_software_version="1").encode(3)
    assert body.endswith(b"\x00")
    request = parse_request(header.encode(2) + body[:-1] + b"\x01\x05\x02ab")
    assert request.body is not None and request.body.unknown_tagged_fields == [(5, b"ab")]
    # FetchRequest v17's FetchPartition tags ReplicaDirectoryId (tag 0, 16 bytes); at v12 the
    # same tag is refused. The declared size of a known tag is not looked at.
    F = w.FetchRequest
    part = F.FetchPartition(partition=0, fetch_offset=0, replica_directory_id=uuid.UUID(int=7))
    fetch = F(topics=[F.FetchTopic(topic_id=uuid.UUID(int=1), topic="t", partitions=[part])])
    frame17 = encode_request(SERVED[1], 17, 1, "c", fetch)[4:]
    tag = b"\x01\x00\x10" + uuid.UUID(int=7).bytes
    assert tag in frame17
    lying = frame17.replace(tag, b"\x01\x00\x7f" + uuid.UUID(int=7).bytes)  # declares 127 bytes
    got = parse_request(lying)
    assert got.body is not None
    assert got.body.topics[0].partitions[0].replica_directory_id == uuid.UUID(int=7)
    frame12 = encode_request(SERVED[1], 12, 1, "c", F(topics=[F.FetchTopic(topic="t", partitions=[
        F.FetchPartition(partition=0, partition_max_bytes=0x0A0B0C0D)])]))[4:]
    end_of_partition = b"\x0a\x0b\x0c\x0d\x00"  # its last field, then its (empty) tagged fields
    assert frame12.count(end_of_partition) == 1
    parse_request(frame12)
    with pytest.raises(DecodeError, match="Tag 0 is not valid for version 12"):
        parse_request(frame12.replace(end_of_partition, b"\x0a\x0b\x0c\x0d" + tag))
