"""Everything a running node reads from ``server.properties``, validated once at start.

Names and defaults are Kafka 3.9's (``KRaftConfigs``, ``QuorumConfig``,
``SocketServerConfigs``).  Any invalid value stops start-up with a
:class:`ConfigError` naming the key; keys we do not use are logged once, so a
typo does not silently fall back to a default.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kraftnode import configdefs, vocabulary
from kraftnode.config import ConfigError, Listener, ServerConfig
from kraftnode.log.metadata_log import LogConfig
from kraftnode.security import authorizer
from kraftnode.security import setup as security_setup
from kraftnode.security.listeners import ListenerSecurity
from kraftnode.server.metadata.snapshot_manager import SnapshotConfig

log = logging.getLogger("kraftnode.config")

# Kafka 3.9 defaults (the definitions that count are in kraftnode/configdefs.py)
ELECTION_TIMEOUT_MS = 1000          # controller.quorum.election.timeout.ms
FETCH_TIMEOUT_MS = 2000             # controller.quorum.fetch.timeout.ms
ELECTION_BACKOFF_MAX_MS = 1000      # controller.quorum.election.backoff.max.ms
REQUEST_TIMEOUT_MS = 2000           # controller.quorum.request.timeout.ms
RETRY_BACKOFF_MS = 20               # controller.quorum.retry.backoff.ms
APPEND_LINGER_MS = 25               # controller.quorum.append.linger.ms
SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024   # socket.request.max.bytes
CONNECTIONS_MAX_IDLE_MS = 10 * 60 * 1000       # connections.max.idle.ms

# every key with its type, default and validator: kraftnode/configdefs.py (docs/configuration.md)
KNOWN_KEYS = frozenset(configdefs.BY_NAME)


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
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    log_config: LogConfig
    source: str
    raft_topic: str | None = None   # kraftnode.raft.topic; None: decided by the cluster id
    #: Every controller listener as advertised, (name, host, port), the default one first: this
    #: node's endpoints in the voter set (Kafka's KafkaConfig.effectiveAdvertisedControllerListeners).
    #: Empty: just the default listener (advertised_host/advertised_port).
    controller_endpoints: tuple[tuple[str, str, int], ...] = ()
    #: kraftnode.log.file and its rotation (None: console only)
    log_file: str | None = None
    log_file_max_bytes: int = 100 * 1024 * 1024
    log_file_backups: int = 10
    #: kraftnode.raft.pre.vote.enable (KIP-996; on by default, as in Kafka 4.x)
    pre_vote: bool = True
    #: kraftnode.read.linearizable
    read_linearizable: bool = False
    #: controller.quorum.auto.join.enable (Kafka 4.x)
    auto_join: bool = False
    #: one start-up warning per line: keys accepted but not honoured, unknown keys
    warnings: tuple[str, ...] = ()
    #: kraftnode.metrics.listener (HOST:PORT): where Prometheus metrics, /healthz and /readyz
    #: are served over HTTP; None (the default, key unset): no metrics server at all.
    #: Port 0 binds a free port (printed at start-up).
    metrics_listener: tuple[str, int] | None = None
    #: metadata.log.max.record.bytes.between.snapshots, metadata.log.max.snapshot.interval.ms,
    #: metadata.max.retention.bytes, metadata.max.retention.ms (kraftnode.server.snapshots)
    snapshot_config: SnapshotConfig = SnapshotConfig()
    #: Listener name -> its security protocol and TLS context (kraftnode.server.security);
    #: empty: every listener PLAINTEXT
    security: dict[str, ListenerSecurity] = field(default_factory=dict, hash=False, compare=False)
    #: authorizer.class.name, super.users, allow.everyone.if.no.acl.found as set (checked at
    #: load; kraftnode.server.security.authorizer)
    authorizer_config: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_dynamic(self) -> bool:
        """Dynamic quorum (KIP-853): voters come from the log, not from configuration."""
        return not self.static_voters


def _hostport(key: str, text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: expected host:port")
    return host.strip("[]"), int(port)


def parse_metrics_listener(text: str | None) -> tuple[str, int] | None:
    """``kraftnode.metrics.listener``: HOST:PORT (port 0: any free port); unset or empty: None."""
    key = "kraftnode.metrics.listener"
    if text is None or not text.strip():
        return None
    host, sep, port = text.strip().rpartition(":")
    if "://" in host:
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: expected host:port "
                          "without a scheme (e.g. 127.0.0.1:9404)")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: expected host:port "
                          "(e.g. 127.0.0.1:9404)")
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
    values = configdefs.validate(props.raw())  # every key present, by its type and validator

    def ms(key: str) -> int:
        d = configdefs.BY_NAME[key]
        v = values.get(key)
        if v is None:
            assert d.default is not None
            v = int(d.default)
        assert isinstance(v, int)
        return v

    def flag(key: str) -> bool:
        """A boolean key, its default from the key table (configdefs)."""
        v = values.get(key)
        if v is None:
            v = configdefs.BY_NAME[key].default == "true"
        assert isinstance(v, bool)
        return v

    def long(key: str, default: int, at_least: int | None) -> int:
        v = props.get_long(key, default, at_least=at_least)
        assert v is not None
        return v

    node_id = cfg.node_id
    roles = cfg.process_roles
    if roles and "controller" not in roles:
        raise ConfigError(f"Invalid value {','.join(roles)!r} for configuration process.roles: "
                          "a kraftnode is a controller")
    listeners = cfg.listeners
    names, ctrl, controller_endpoints = _controller_listeners(cfg)
    adv_host = ctrl.host or "localhost"
    security = security_setup.build(props.raw(), [ln.name for ln in listeners], names)
    voters = parse_voters(cfg.quorum_voters)
    bootstrap = tuple(_hostport("controller.quorum.bootstrap.servers", s)
                      for s in cfg.quorum_bootstrap_servers)
    if not voters and not bootstrap:
        raise ConfigError("Missing required configuration: set controller.quorum.voters (static quorum) "
                          "or controller.quorum.bootstrap.servers (dynamic quorum)")
    warnings = tuple(configdefs.warnings_for(props.raw()))
    log_file = values.get("kraftnode.log.file")
    raft_topic = _raft_topic(props.get_str("kraftnode.raft.topic"))
    metrics_listener = parse_metrics_listener(props.get_str("kraftnode.metrics.listener"))
    authorizer_config = {k: v for k, v in props.raw().items() if k in authorizer.CONFIG_KEYS}
    authorizer.check_config(authorizer_config)
    return NodeConfig(
        authorizer_config=authorizer_config,
        raft_topic=raft_topic,
        metrics_listener=metrics_listener,
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
        election_timeout_ms=ms("controller.quorum.election.timeout.ms"),
        fetch_timeout_ms=ms("controller.quorum.fetch.timeout.ms"),
        election_backoff_max_ms=ms("controller.quorum.election.backoff.max.ms"),
        request_timeout_ms=ms("controller.quorum.request.timeout.ms"),
        retry_backoff_ms=ms("controller.quorum.retry.backoff.ms"),
        socket_request_max_bytes=ms("socket.request.max.bytes"),
        connections_max_idle_ms=ms("connections.max.idle.ms"),
        log_config=LogConfig.from_server_config(cfg),
        source=cfg.source,
        log_file=str(log_file) if log_file else None,
        log_file_max_bytes=ms("kraftnode.log.file.max.bytes"),
        log_file_backups=ms("kraftnode.log.file.backups"),
        pre_vote=flag("kraftnode.raft.pre.vote.enable"),
        read_linearizable=bool(props.get_bool("kraftnode.read.linearizable", False)),
        auto_join=bool(props.get_bool("controller.quorum.auto.join.enable", False)),
        warnings=warnings,
        snapshot_config=_snapshot_config(long),
    )


def _controller_listeners(cfg: ServerConfig) -> tuple[list[str], Listener, tuple[tuple[str, str, int], ...]]:
    """(controller listener names, the default one as advertised, every controller endpoint)."""
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
    # Kafka 3.9 (KafkaConfig.effectiveAdvertisedControllerListeners) puts *every* controller
    # listener in the node's voter entry, and kafka-metadata-quorum add-controller sends them
    # all: advertising only the first would make the entry look stale to this node, which
    # would then keep rewriting it with UpdateRaftVoter. A name without a listener is skipped.
    controller_endpoints = tuple(
        (name, ln.host or "localhost", ln.port)
        for name in dict.fromkeys(names)
        if (ln := adv.get(name) or by_name.get(name)) is not None
    )
    return names, ctrl, controller_endpoints


def _raft_topic(value: str | None) -> str | None:
    """kraftnode.raft.topic: one of the topics Kafka's raft runs on (vocabulary.RAFT_TOPICS)."""
    if value is None:
        return None
    topic = value.strip()
    if topic not in vocabulary.RAFT_TOPICS:
        raise ConfigError(f"Invalid value {topic!r} for configuration kraftnode.raft.topic: "
                          f"expected {' or '.join(vocabulary.RAFT_TOPICS)}")
    return topic


def _snapshot_config(long: Callable[[str, int, int | None], int]) -> SnapshotConfig:
    return SnapshotConfig(  # Kafka declares all four LONG
        max_bytes_between_snapshots=long("metadata.log.max.record.bytes.between.snapshots",
                                         SnapshotConfig.max_bytes_between_snapshots, 1),
        max_snapshot_interval_ms=long("metadata.log.max.snapshot.interval.ms",
                                      SnapshotConfig.max_snapshot_interval_ms, 0),
        retention_bytes=long("metadata.max.retention.bytes", SnapshotConfig.retention_bytes, None),
        retention_ms=long("metadata.max.retention.ms", SnapshotConfig.retention_ms, None))
