"""A small blocking Kafka client for one request/response, used by the CLI.

The node's own peer traffic uses the async client in ``kraftnode.server``; CLI
commands (``quorum describe``, ``dev-cluster``) only ever need one answer at a time.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kraftnode.commands.errors import UsageError
from kraftnode.protocol import DescribeClusterRequest, Errors
from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.registry import DESCRIBE_CLUSTER, SERVED
from recordbatch.message import Message


class ClientError(Exception):
    """The peer could not be reached or closed the connection."""


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ClientError("connection closed by the peer")
        buf += chunk
    return bytes(buf)


def call(host: str, port: int, api_key: int, version: int, body: Message,
         timeout: float = 10.0, client_id: str = "kraftnode-cli") -> tuple[int, Message]:
    """Send one request and return (correlation id, response body)."""
    spec = SERVED[api_key]
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(encode_request(spec, version, 1, client_id, body))
            (size,) = struct.unpack(">i", _recv_exactly(s, 4))
            return parse_response(spec, version, _recv_exactly(s, size))
    except OSError as e:
        raise ClientError(f"{host}:{port}: {e.strerror or e}") from None


def parse_servers(text: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` (the --bootstrap-controller / --bootstrap-server value)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UsageError(f"invalid bootstrap address {part!r}: expected host:port")
        out.append((host.strip("[]"), int(port)))
    return out


def describe_cluster(host: str, port: int, endpoint_type: int) -> Any:
    """DescribeCluster as the Java Admin client sends it; ClientError unless it succeeds."""
    _, dc = call(host, port, DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=endpoint_type))
    d: Any = dc
    if d.error_code != Errors.NONE:
        raise ClientError(f"DescribeCluster failed: {Errors(d.error_code).name}")
    return d
