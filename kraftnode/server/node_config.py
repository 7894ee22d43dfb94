"""Everything a running node reads from ``server.properties``, validated once at start.

Names and defaults are Kafka 3.9's (``KRaftConfigs``, ``QuorumConfig``,
``SocketServerConfigs``).  Any invalid value stops start-up with a
:class:`ConfigError` naming the key; keys we do not use are logged once, so a
typo does not silently fall back to a default.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kraftnode.config import ConfigError, Listener, ServerConfig
from kraftnode.log.metadata_log import LogConfig
from kraftnode.server.security import setup as security_setup
from kraftnode.server.security.listeners import ListenerSecurity, is_known_key

log = logging.getLogger("kraftnode.config")

# Kafka 3.9 defaults
ELECTION_TIMEOUT_MS = 1000          # controller.quorum.election.timeout.ms
FETCH_TIMEOUT_MS = 2000             # controller.quorum.fetch.timeout.ms
ELECTION_BACKOFF_MAX_MS = 1000      # controller.quorum.election.backoff.max.ms
REQUEST_TIMEOUT_MS = 2000           # controller.quorum.request.timeout.ms
RETRY_BACKOFF_MS = 20               # controller.quorum.retry.backoff.ms
APPEND_LINGER_MS = 25               # controller.quorum.append.linger.ms
SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024   # socket.request.max.bytes
CONNECTIONS_MAX_IDLE_MS = 10 * 60 * 1000       # connections.max.idle.ms

KNOWN_KEYS = {
    "node.id", "broker.id", "process.roles", "controller.quorum.voters",
    "controller.quorum.bootstrap.servers", "listeners", "advertised.listeners",
    "controller.listener.names", "listener.security.protocol.map", "inter.broker.listener.name",
    "metadata.log.dir", "log.dirs", "log.dir", "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms", "controller.quorum.election.backoff.max.ms",
    "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms",
    "controller.quorum.append.linger.ms", "socket.request.max.bytes", "connections.max.idle.ms",
    "metadata.log.segment.bytes", "metadata.log.segment.ms", "metadata.log.segment.min.bytes",
    "metadata.max.retention.bytes", "metadata.max.retention.ms",
    "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "num.partitions", "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "log.retention.hours", "log.segment.bytes",
    "log.retention.check.interval.ms", "group.initial.rebalance.delay.ms",
    "kraftnode.raft.topic",
}


@dataclass(frozen=True)
class VoterAddress:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    listeners: tuple[Listener, ...]
    controller_listener: str
    advertised_host: str
    advertised_port: int
    static_voters: tuple[VoterAddress, ...]
    bootstrap_servers: tuple[tuple[str, int], ...]
    metadata_log_dir: str
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    append_linger_ms: int
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    log_config: LogConfig
    source: str
    raft_topic: str | None = None   # kraftnode.raft.topic; None: decided by the cluster id
    #: Every controller listener as advertised, (name, host, port), the default one first: this
    #: node's endpoints in the voter set (Kafka's KafkaConfig.effectiveAdvertisedControllerListeners).
    #: Empty: just the default listener (advertised_host/advertised_port).
    controller_endpoints: tuple[tuple[str, str, int], ...] = ()
    #: Listener name -> its security protocol and TLS context (kraftnode.server.security);
    #: empty: every listener PLAINTEXT
    security: dict[str, ListenerSecurity] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_dynamic(self) -> bool:
        """Dynamic quorum (KIP-853): voters come from the log, not from configuration."""
        return not self.static_voters


def _hostport(key: str, text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: expected host:port")
    return host.strip("[]"), int(port)


def parse_voters(text: list[str]) -> tuple[VoterAddress, ...]:
    out = []
    for entry in text:
        node, sep, hp = entry.partition("@")
        if not sep or not node.strip().isdigit():
            raise ConfigError(f"Invalid value {entry!r} for configuration controller.quorum.voters: "
                              "expected id@host:port")
        host, port = _hostport("controller.quorum.voters", hp)
        out.append(VoterAddress(int(node), host, port))
    ids = [v.node_id for v in out]
    if len(set(ids)) != len(ids):
        raise ConfigError("Invalid value for configuration controller.quorum.voters: duplicate voter id")
    return tuple(out)


def load(path: str) -> NodeConfig:
    cfg = ServerConfig.load(path)
    props = cfg.props

    def ms(key: str, default: int, at_least: int = 0) -> int:
        v = props.get_int(key, default, at_least=at_least)
        assert v is not None
        return v

    node_id = cfg.node_id
    roles = cfg.process_roles
    if roles and "controller" not in roles:
        raise ConfigError(f"Invalid value {','.join(roles)!r} for configuration process.roles: "
                          "a kraftnode is a controller")
    listeners = cfg.listeners
    if not listeners:
        raise ConfigError("Invalid value for configuration listeners: no listener given")
    names = cfg.controller_listener_names or [listeners[0].name]
    by_name = {ln.name: ln for ln in listeners}
    if names[0] not in by_name:
        raise ConfigError(f"Invalid value for configuration controller.listener.names: "
                          f"listener {names[0]} is not in listeners")
    adv = {ln.name: ln for ln in cfg.advertised_listeners}
    ctrl = adv.get(names[0]) or by_name[names[0]]
    adv_host = ctrl.host or "localhost"
    # Kafka 3.9 (KafkaConfig.effectiveAdvertisedControllerListeners) puts *every* controller
    # listener in the node's voter entry, and kafka-metadata-quorum add-controller sends them
    # all: advertising only the first would make the entry look stale to this node, which
    # would then keep rewriting it with UpdateRaftVoter. A name without a listener is skipped.
    controller_endpoints = tuple(
        (name, ln.host or "localhost", ln.port)
        for name in dict.fromkeys(names)
        if (ln := adv.get(name) or by_name.get(name)) is not None
    )
    security = security_setup.build(props.raw(), [ln.name for ln in listeners], names)
    voters = parse_voters(cfg.quorum_voters)
    bootstrap = tuple(_hostport("controller.quorum.bootstrap.servers", s)
                      for s in cfg.quorum_bootstrap_servers)
    if not voters and not bootstrap:
        raise ConfigError("Missing required configuration: set controller.quorum.voters (static quorum) "
                          "or controller.quorum.bootstrap.servers (dynamic quorum)")
    for key in sorted(k for k in set(props.raw()) - KNOWN_KEYS if not is_known_key(k)):
        log.warning("unknown configuration %s in %s is ignored", key, cfg.source)
    raft_topic = props.get_str("kraftnode.raft.topic")
    if raft_topic is not None:
        raft_topic = raft_topic.strip()
        if raft_topic not in ("__cluster_metadata", "__raft_performance_test"):
            raise ConfigError(f"Invalid value {raft_topic!r} for configuration kraftnode.raft.topic: "
                              "expected __cluster_metadata or __raft_performance_test")
    return NodeConfig(
        raft_topic=raft_topic,
        security=security,
        node_id=node_id,
        listeners=tuple(listeners),
        controller_listener=names[0],
        advertised_host=adv_host,
        advertised_port=ctrl.port,
        controller_endpoints=controller_endpoints,
        static_voters=voters,
        bootstrap_servers=bootstrap,
        metadata_log_dir=cfg.metadata_log_dir,
        election_timeout_ms=ms("controller.quorum.election.timeout.ms", ELECTION_TIMEOUT_MS, 1),
        fetch_timeout_ms=ms("controller.quorum.fetch.timeout.ms", FETCH_TIMEOUT_MS, 1),
        election_backoff_max_ms=ms("controller.quorum.election.backoff.max.ms", ELECTION_BACKOFF_MAX_MS, 1),
        request_timeout_ms=ms("controller.quorum.request.timeout.ms", REQUEST_TIMEOUT_MS, 1),
        retry_backoff_ms=ms("controller.quorum.retry.backoff.ms", RETRY_BACKOFF_MS, 0),
        append_linger_ms=ms("controller.quorum.append.linger.ms", APPEND_LINGER_MS, 0),
        socket_request_max_bytes=ms("socket.request.max.bytes", SOCKET_REQUEST_MAX_BYTES, 1),
        connections_max_idle_ms=ms("connections.max.idle.ms", CONNECTIONS_MAX_IDLE_MS, 1),
        log_config=LogConfig.from_server_config(cfg),
        source=cfg.source,
    )
