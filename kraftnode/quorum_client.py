"""A small blocking Kafka client for one request/response, used by the CLI.

The node's own peer traffic uses the async client in ``kraftnode.server``; CLI
commands (``quorum describe``, ``dev-cluster``) only ever need one answer at a time;
:func:`fetch_quorum_info` is the quorum as ``kafka-metadata-quorum.sh describe`` sees it.

It connects as the Java Admin client does with the same ``--command-config``: Kafka's
client keys ``security.protocol``, ``ssl.*`` (truststore, keystore for mutual TLS,
endpoint identification) and ``sasl.mechanism`` / ``sasl.jaas.config`` (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), so ``kraftnode quorum`` works on a secured listener.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anyio

from kraftnode.config import ConfigError
from kraftnode.errors import RemoteError, UsageError
from kraftnode.protocol import (
    DescribeClusterRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    Errors,
)
from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.registry import DESCRIBE_CLUSTER, DESCRIBE_QUORUM, SERVED
from kraftnode.security import sasl, tls
from kraftnode.security.listeners import ListenerProps, SecurityProtocol
from kraftnode.security.sasl import client_authenticate
from kraftnode.vocabulary import METADATA_PARTITION, METADATA_TOPIC
from recordbatch.message import Message


class ClientError(RemoteError):
    """The peer could not be reached, refused our login, or closed the connection."""


class PeerClosed(ClientError):
    """The peer closed the connection before answering."""


@dataclass(frozen=True)
class ClientSecurity:
    """How the CLI connects: TLS context (SSL, SASL_SSL) and SASL login (SASL_*)."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    tls: ssl.SSLContext | None = None
    login: tuple[str, str, str] | None = None  # (mechanism, username, password)


_security = ClientSecurity()


def use_security(security: ClientSecurity) -> None:
    """Every later call of this process connects this way (one CLI command, one setting)."""
    global _security
    _security = security


def security_from_properties(props: Mapping[str, str]) -> ClientSecurity:
    """Kafka's client security keys from an Admin client's properties; UsageError naming the
    key otherwise. Keys the client does not use (a server.properties given to add-controller)
    are ignored, as the Admin client ignores them."""
    name = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if name not in SecurityProtocol.__members__:
        raise UsageError(f"Invalid value {props.get('security.protocol')} for configuration "
                         f"security.protocol: expected one of {', '.join(SecurityProtocol.__members__)}")
    protocol = SecurityProtocol[name]
    lp = ListenerProps("client", props)   # no listener prefix: the keys as a client has them
    try:
        context = tls.client_context(lp) if protocol.uses_tls else None
        login = None
        if protocol.uses_sasl:
            mechanism = (props.get("sasl.mechanism") or "GSSAPI").strip()
            if mechanism not in sasl.SUPPORTED:
                raise UsageError(f"sasl.mechanism {mechanism} is not supported by kraftnode "
                                 f"(supported: {', '.join(sasl.SUPPORTED)})")
            jaas = props.get("sasl.jaas.config")
            if jaas is None:
                raise UsageError("Missing required configuration sasl.jaas.config for "
                                 f"security.protocol {name}")
            login = (mechanism, *sasl.jaas_credentials(jaas, "sasl.jaas.config"))
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return ClientSecurity(protocol, context, login)


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    """A connection ready for requests: TLS handshake and SASL login done if configured."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        if _security.tls is not None:
            sock = _security.tls.wrap_socket(sock, server_hostname=host)
        if _security.login is not None:
            _login(sock, _security.login, timeout)
    except BaseException:
        sock.close()
        raise
    return sock


def _login(sock: socket.socket, login: tuple[str, str, str], timeout: float) -> None:
    """The raft peers' SASL exchange (SaslHandshake v1, SaslAuthenticate v2), on this socket."""
    async def request_at(key: int, version: int, body: Any, _timeout: float) -> Any:
        return _roundtrip(sock, key, version, body)[1]

    try:
        anyio.run(client_authenticate, request_at, login, timeout, f"{login[0]} login refused")
    except PermissionError as e:
        raise ClientError(str(e)) from None


def _roundtrip(sock: socket.socket, api_key: int, version: int, body: Message,
               client_id: str = "kraftnode-cli") -> tuple[int, Message]:
    spec = SERVED[api_key]
    sock.sendall(encode_request(spec, version, 1, client_id, body))
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    return parse_response(spec, version, _recv_exactly(sock, size))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise PeerClosed("connection closed by the peer")
        buf += chunk
    return bytes(buf)


def call(host: str, port: int, api_key: int, version: int, body: Message,
         timeout: float = 10.0, client_id: str = "kraftnode-cli") -> tuple[int, Message]:
    """Send one request and return (correlation id, response body)."""
    try:
        with _connect(host, port, timeout) as s:
            return _roundtrip(s, api_key, version, body, client_id)
    except PeerClosed as e:
        hint = "" if _security.protocol is not SecurityProtocol.PLAINTEXT else (
            " (if the listener uses SSL or SASL, give the client's security.protocol, ssl.* "
            "and sasl.* keys with --command-config)")
        raise ClientError(f"{host}:{port}: {e}{hint}") from None
    except ClientError as e:
        raise ClientError(f"{host}:{port}: {e}") from None
    except ssl.SSLError as e:
        raise ClientError(f"{host}:{port}: TLS handshake failed ({_security.protocol.name}): "
                          f"{e.reason or e}") from None
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
        if not 1 <= int(port) <= 65535:
            # said before any connection is tried: "Connection refused" misled (issue 41);
            # Kafka's Admin refuses it too, as "Invalid url in bootstrap.controllers"
            raise UsageError(f"invalid bootstrap address {part!r}: port {int(port)} is out of range (1-65535)")
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


@dataclass
class ReplicaInfo:
    replica_id: int
    directory_id: Any
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass
class QuorumInfo:
    cluster_id: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[ReplicaInfo]
    observers: list[ReplicaInfo]
    endpoints: dict[int, list[str]] = field(default_factory=dict)


class NoLeader(UsageError):
    """Controllers answered, none of them as the quorum's leader: an election in progress (or
    no majority). Kafka's Admin client retries it (NOT_LEADER_OR_FOLLOWER is retriable)."""


def fetch_quorum_info(servers: list[tuple[str, int]], endpoint_type: int) -> QuorumInfo:
    """The quorum as the leader describes it (DescribeCluster, then DescribeQuorum at the
    active controller, as the Java Admin client asks); UsageError when no server answers,
    :class:`NoLeader` when servers answered but none as the leader."""
    last_error = "no bootstrap server answered"
    no_leader = False
    for host, port in servers:
        try:
            dc = describe_cluster(host, port, endpoint_type)
        except ClientError as e:
            last_error = str(e)
            continue
        brokers = {b.broker_id: (b.host, b.port) for b in dc.brokers}
        leader = dc.controller_id
        targets = [brokers[leader]] if leader in brokers else []
        targets += [hp for hp in brokers.values() if hp not in targets] + [(host, port)]
        for th, tp in targets:
            try:
                info = _describe_quorum(th, tp)
            except ClientError as e:
                last_error = str(e)
                continue
            if info is None:
                last_error = "no controller answered DescribeQuorum as leader"
                no_leader = True
                continue
            info.cluster_id = dc.cluster_id
            return info
    if no_leader:
        raise NoLeader("no controller answered DescribeQuorum as leader")
    raise UsageError(last_error)


def _describe_quorum(host: str, port: int) -> QuorumInfo | None:
    req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name=METADATA_TOPIC, partitions=[DescribeQuorumRequest.PartitionData(partition_index=METADATA_PARTITION)])])
    _, answer = call(host, port, DESCRIBE_QUORUM, 2, req)
    resp = cast(DescribeQuorumResponse, answer)
    if resp.error_code != Errors.NONE:
        return None
    part = resp.topics[0].partitions[0]
    if part.error_code != Errors.NONE:
        return None

    def replicas(states: Sequence[Any]) -> list[ReplicaInfo]:
        return [ReplicaInfo(s.replica_id, s.replica_directory_id, s.log_end_offset,
                            s.last_fetch_timestamp, s.last_caught_up_timestamp) for s in states]

    endpoints = {n.node_id: [f"{lst.name}://{_host(lst.host)}:{lst.port}" for lst in n.listeners]
                 for n in resp.nodes}
    return QuorumInfo("", part.leader_id, part.leader_epoch, part.high_watermark,
                      replicas(part.current_voters), replicas(part.observers), endpoints)


def _host(h: str) -> str:
    return f"[{h}]" if ":" in h else h
