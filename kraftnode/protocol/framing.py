"""Kafka framing: 4-byte size prefix, request/response headers, header-version choice.

A frame that parses gets a Kafka answer; one that does not raises
:class:`FrameError` (or ``DecodeError``), and the server closes the connection
with a log line -- exactly what a Kafka 3.9 controller does for unknown API keys
and for versions it cannot parse.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kraftnode.errors import RemoteError
from kraftnode.protocol.generated import RequestHeader, ResponseHeader
from kraftnode.protocol.registry import API_VERSIONS, SERVED, ApiSpec
from kraftnode.vocabulary import SOCKET_REQUEST_MAX_BYTES
from recordbatch.message import Message
from recordbatch.wire import DecodeError

DEFAULT_MAX_FRAME_BYTES = SOCKET_REQUEST_MAX_BYTES  # Kafka's socket.request.max.bytes default

_HH = struct.Struct(">hh")
_I32 = struct.Struct(">i")


class FrameError(RemoteError):
    """The peer sent something we cannot answer in Kafka's protocol; close the connection."""


def check_frame_size(size: int, limit: int) -> None:
    """Refuse negative or oversize frames before allocating a buffer for them."""
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds the limit of {limit} bytes")


@dataclass
class Request:
    """A parsed request: its header, what we know of the API, and the decoded body.

    ``body`` is None only for an ApiVersions request of a version we do not
    support: Kafka answers those with a v0 UNSUPPORTED_VERSION response instead
    of parsing a body it does not understand.
    """

    header: RequestHeader
    spec: ApiSpec
    body: Message | None

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)


def parse_request(frame: bytes | bytearray | memoryview) -> Request:
    """Parse one request frame (without its size prefix), exactly as leniently as Kafka's
    ``RequestHeader.parse`` + ``RequestContext.parseRequest``: a frame too short for its
    fields raises; bytes after the body's last field are ignored (docs/protocol.md)."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(buf) < 4:
        raise DecodeError(f"request of {len(buf)} bytes is too short for a header")
    api_key, api_version = _HH.unpack_from(buf, 0)
    spec = SERVED.get(api_key)
    if spec is None:
        raise FrameError(f"unsupported API key {api_key}")
    header, pos = RequestHeader.decode_from(buf, 0, spec.request_header_version(api_version))
    if not spec.supports(api_version):
        if api_key == API_VERSIONS:
            return Request(header, spec, None)
        raise FrameError(
            f"unsupported version {api_version} of {spec.name} "
            f"(we serve {spec.min_version}-{spec.max_version})"
        )
    # Kafka's generated XxxRequestData(readable, version) reads the fields and stops: bytes
    # after the last field are ignored (RequestContext.parseRequest, AbstractRequest.parseRequest
    # never check what remains). librdkafka 2.16 sends such requests; Kafka answers them, so we
    # do. A read past the end still fails, and responses stay strict (parse_response).
    body, _end = spec.request.decode_from(buf, pos, api_version)
    return Request(header, spec, body)


def encode_request(
    spec: ApiSpec, version: int, correlation_id: int, client_id: str | None, body: Message
) -> bytes:
    """A complete size-prefixed request frame (used by our peer client and tests)."""
    out = bytearray(4)
    RequestHeader(
        request_api_key=spec.key, request_api_version=version,
        correlation_id=correlation_id, client_id=client_id,
    ).encode_into(out, spec.request_header_version(version))
    body.encode_into(out, version)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response(
    spec: ApiSpec, request_version: int, correlation_id: int, body: Message,
    body_version: int | None = None,
) -> bytes:
    """A complete size-prefixed response frame.

    The header version follows the *request's* version; ``body_version`` differs
    only for the ApiVersions downgrade (v0 body for an unsupported request).
    """
    out = bytearray(4)
    ResponseHeader(correlation_id=correlation_id).encode_into(
        out, spec.response_header_version(request_version)
    )
    body.encode_into(out, request_version if body_version is None else body_version)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def parse_response(spec: ApiSpec, version: int, frame: bytes | memoryview) -> tuple[int, Message]:
    """Parse a response frame (without size prefix); return (correlation id, body)."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    header, pos = ResponseHeader.decode_from(buf, 0, spec.response_header_version(version))
    return int(header.correlation_id), spec.response.decode(buf[pos:], version)
