"""Everything a running node reads from ``server.properties``, validated once at start.

:func:`load` reads every key through :class:`~kraftnode.config.server_config.ServerConfig`,
whose getters take type, validator and default from the key table
(:mod:`kraftnode.config.keys`); nothing here repeats a default.  Any invalid value, and any
combination Kafka refuses (:mod:`kraftnode.config.validation`), stops start-up with a
:class:`ConfigError` naming the key; keys we accept but do not honour, and keys we do not
know, become start-up warnings, so a typo does not silently fall back to a default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftnode.config import keys, validation
from kraftnode.config.properties import Listener
from kraftnode.config.server_config import ServerConfig
from kraftnode.config.validation import VoterAddress, parse_voters
from kraftnode.errors import ConfigError
from kraftnode.groups import config as groups_config
from kraftnode.groups.config import GroupConfig
from kraftnode.log.metadata_log import LogConfig
from kraftnode.security import authorizer
from kraftnode.security import setup as security_setup
from kraftnode.security.listeners import ListenerSecurity

__all__ = ["NodeConfig", "SnapshotConfig", "VoterAddress", "load", "parse_voters"]


def _table_default(name: str) -> int:
    v = keys.value({}, name)
    assert isinstance(v, int)
    return v


@dataclass(frozen=True)
class SnapshotConfig:
    """When snapshots are generated and how much log is retained behind them (Kafka's keys,
    defaults from the key table; ``-1`` retention: unbounded).  Read by
    :class:`kraftnode.server.controller_io.snapshot_manager.SnapshotManager`."""

    #: metadata.log.max.record.bytes.between.snapshots
    max_bytes_between_snapshots: int = _table_default("metadata.log.max.record.bytes.between.snapshots")
    #: metadata.log.max.snapshot.interval.ms (0: never by time)
    max_snapshot_interval_ms: int = _table_default("metadata.log.max.snapshot.interval.ms")
    #: metadata.max.retention.bytes
    retention_bytes: int = _table_default("metadata.max.retention.bytes")
    #: metadata.max.retention.ms
    retention_ms: int = _table_default("metadata.max.retention.ms")


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    listeners: tuple[Listener, ...]
    controller_listener: str
    advertised_host: str
    advertised_port: int
    #: Every controller listener as advertised, (name, host, port), the default one first: this
    #: node's endpoints in the voter set (Kafka's KafkaConfig.effectiveAdvertisedControllerListeners).
    controller_endpoints: tuple[tuple[str, str, int], ...]
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
    #: kraftnode.raft.topic; None: decided by the cluster id
    raft_topic: str | None
    #: kraftnode.log.file and its rotation (None: console only)
    log_file: str | None
    log_file_max_bytes: int
    log_file_backups: int
    #: kraftnode.raft.pre.vote.enable (KIP-996; on by default, as in Kafka 4.x)
    pre_vote: bool
    #: kraftnode.read.linearizable
    read_linearizable: bool
    #: controller.quorum.auto.join.enable (Kafka 4.x)
    auto_join: bool
    #: one start-up warning per line: keys accepted but not honoured, unknown keys
    warnings: tuple[str, ...]
    #: kraftnode.metrics.listener (HOST:PORT): where Prometheus metrics, /healthz and /readyz
    #: are served over HTTP; None (the key unset): no metrics server at all.
    #: Port 0 binds a free port (printed at start-up).
    metrics_listener: tuple[str, int] | None
    #: metadata.log.max.record.bytes.between.snapshots, metadata.log.max.snapshot.interval.ms,
    #: metadata.max.retention.bytes, metadata.max.retention.ms
    snapshot_config: SnapshotConfig
    #: Listener name -> its security protocol and TLS context (kraftnode.security);
    #: empty: every listener PLAINTEXT
    security: dict[str, ListenerSecurity] = field(hash=False, compare=False)
    #: authorizer.class.name, super.users, allow.everyone.if.no.acl.found as set (checked at
    #: load; kraftnode.security.authorizer)
    authorizer_config: dict[str, str] = field(hash=False, compare=False)
    #: every property as written: the controller reads its keys and its topic-config defaults
    #: from them (docs/controller.md; kraftnode.server.controller_io.controller_shell.controller_config)
    properties: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    #: the group coordinator's keys (group.*, offset.metadata.max.bytes; kraftnode.groups.config)
    group_config: GroupConfig = field(default_factory=GroupConfig, hash=False, compare=False)
    #: message.max.bytes: the largest record batch a producer may write (capped by the raft
    #: log's 8 MiB, KafkaRaftClient.MAX_BATCH_SIZE_BYTES)
    message_max_bytes: int = _table_default("message.max.bytes")
    #: kraftnode.application.records.enable: records other than KRaft metadata records may
    #: be written (Produce, groups, the embedding API, which sets it); no broker may register
    application_records: bool = False

    @property
    def is_dynamic(self) -> bool:
        """Dynamic quorum (KIP-853): voters come from the log, not from configuration."""
        return not self.static_voters


def load(path: str, *, check_storage: bool = False, overrides: Mapping[str, str] | None = None) -> NodeConfig:
    """Read and check ``path``, with ``overrides`` over its keys (``--override``); with
    ``check_storage`` (``kraftnode start``), also that the metadata log directory is
    formatted, readable and writable, as Kafka checks it."""
    cfg = ServerConfig.load(path, overrides)
    cfg.validate_all()  # every key present, by its type and validator
    voters, bootstrap = validation.check_config(cfg)  # Kafka's checks across keys
    raw = cfg.props.raw()
    listeners = cfg.listeners
    names, ctrl, controller_endpoints = _controller_listeners(cfg)
    security = security_setup.build(raw, [ln.name for ln in listeners], names)
    authorizer_config = {k: v for k, v in raw.items() if k in authorizer.CONFIG_KEYS}
    authorizer.check_config(authorizer_config)
    try:
        group_config = groups_config.from_properties(raw)
    except groups_config.GroupConfigError as e:
        raise ConfigError(str(e)) from None
    if check_storage:  # after every key: a configuration error is reported before the disk's
        validation.check_metadata_log_dir(cfg)
    return NodeConfig(
        node_id=cfg.node_id,
        listeners=tuple(listeners),
        controller_listener=names[0],
        advertised_host=ctrl.host or "localhost",
        advertised_port=ctrl.port,
        controller_endpoints=controller_endpoints,
        static_voters=voters,
        bootstrap_servers=bootstrap,
        metadata_log_dir=cfg.metadata_log_dir,
        election_timeout_ms=cfg.int_value("controller.quorum.election.timeout.ms"),
        fetch_timeout_ms=cfg.int_value("controller.quorum.fetch.timeout.ms"),
        election_backoff_max_ms=cfg.int_value("controller.quorum.election.backoff.max.ms"),
        request_timeout_ms=cfg.int_value("controller.quorum.request.timeout.ms"),
        retry_backoff_ms=cfg.int_value("controller.quorum.retry.backoff.ms"),
        socket_request_max_bytes=cfg.int_value("socket.request.max.bytes"),
        connections_max_idle_ms=cfg.int_value("connections.max.idle.ms"),
        log_config=LogConfig(segment_bytes=cfg.metadata_log_segment_bytes,
                             segment_ms=cfg.metadata_log_segment_ms,
                             segment_min_bytes=cfg.metadata_log_segment_min_bytes),
        source=cfg.source,
        raft_topic=cfg.str_value("kraftnode.raft.topic"),
        log_file=cfg.str_value("kraftnode.log.file") or None,
        log_file_max_bytes=cfg.int_value("kraftnode.log.file.max.bytes"),
        log_file_backups=cfg.int_value("kraftnode.log.file.backups"),
        pre_vote=cfg.bool_value("kraftnode.raft.pre.vote.enable"),
        read_linearizable=cfg.bool_value("kraftnode.read.linearizable"),
        auto_join=cfg.bool_value("controller.quorum.auto.join.enable"),
        warnings=tuple(keys.warnings_for(raw)),
        metrics_listener=cfg.host_port("kraftnode.metrics.listener"),
        snapshot_config=SnapshotConfig(
            max_bytes_between_snapshots=cfg.int_value("metadata.log.max.record.bytes.between.snapshots"),
            max_snapshot_interval_ms=cfg.int_value("metadata.log.max.snapshot.interval.ms"),
            retention_bytes=cfg.int_value("metadata.max.retention.bytes"),
            retention_ms=cfg.int_value("metadata.max.retention.ms")),
        security=security,
        authorizer_config=authorizer_config,
        properties=dict(raw),
        group_config=group_config,
        message_max_bytes=cfg.int_value("message.max.bytes"),
        application_records=cfg.bool_value("kraftnode.application.records.enable"),
    )


def _controller_listeners(cfg: ServerConfig) -> tuple[list[str], Listener, tuple[tuple[str, str, int], ...]]:
    """(controller listener names, the default one as advertised, every controller endpoint)."""
    listeners = cfg.listeners
    names = cfg.controller_listener_names or [listeners[0].name]
    by_name = {ln.name: ln for ln in listeners}  # every name is a listener (validation.check_config)
    adv = {ln.name: ln for ln in cfg.advertised_listeners}
    ctrl = adv.get(names[0]) or by_name[names[0]]
    # Kafka 3.9 (KafkaConfig.effectiveAdvertisedControllerListeners) puts *every* controller
    # listener in the node's voter entry, and kafka-metadata-quorum add-controller sends them
    # all: advertising only the first would make the entry look stale to this node, which
    # would then keep rewriting it with UpdateRaftVoter.
    controller_endpoints = tuple(
        (name, (adv.get(name) or by_name[name]).host or "localhost", (adv.get(name) or by_name[name]).port)
        for name in dict.fromkeys(names))
    return names, ctrl, controller_endpoints
