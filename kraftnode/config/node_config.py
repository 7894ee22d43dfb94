"""Everything a running node reads from ``server.properties``, validated once at start.

:func:`load` reads every key through :class:`~kraftnode.config.server_config.ServerConfig`,
whose getters take type, validator and default from the key table
(:mod:`kraftnode.config.keys`); nothing here repeats a default.  Each consumer's keys become
its own typed configuration (:mod:`kraftnode.config.consumers`): the raft core's
``RaftConfig``, the log's ``LogConfig`` and ``SnapshotConfig``, the group coordinator's
``GroupConfig``, the controller's ``ControllerConfig``, the authorizer's ``AuthorizerConfig``,
each listener's security; no dictionary of raw properties travels to a consumer (the one
listing of every property as written, :class:`~kraftnode.config.properties.ListedProperties`,
goes to DescribeConfigs and to the controller's static layer of topic-config defaults).  Any
invalid value, and any combination Kafka refuses (:mod:`kraftnode.config.validation`), stops
start-up with a :class:`ConfigError` naming the key; keys we accept but do not honour, and keys
we do not know, become start-up warnings, so a typo does not silently fall back to a default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftnode.config import consumers, keys, validation
from kraftnode.config.properties import ListedProperties, Listener
from kraftnode.config.server_config import ServerConfig
from kraftnode.config.validation import VoterAddress, parse_voters
from kraftnode.controller.context import ControllerConfig
from kraftnode.groups.config import GroupConfig
from kraftnode.log.metadata_log import LogConfig, SnapshotConfig
from kraftnode.raft import RaftConfig
from kraftnode.security import setup as security_setup
from kraftnode.security.authorizer import AuthorizerConfig
from kraftnode.security.listeners import ListenerSecurity

__all__ = ["NodeConfig", "SnapshotConfig", "VoterAddress", "load", "parse_voters"]


def _table_default(name: str) -> int:
    v = keys.value({}, name)
    assert isinstance(v, int)
    return v


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
    #: the raft core's: controller.quorum.* timeouts, kraftnode.raft.pre.vote.enable,
    #: controller.quorum.auto.join.enable (its cluster id is set at start, from meta.properties)
    raft: RaftConfig
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
    #: kraftnode.read.linearizable
    read_linearizable: bool
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
    #: authorizer.class.name, super.users, allow.everyone.if.no.acl.found, checked
    authorizer_config: AuthorizerConfig = field(default_factory=AuthorizerConfig)
    #: the controller's keys (docs/controller.md; its cluster id is set at start)
    controller: ControllerConfig = field(default_factory=lambda: ControllerConfig("", -1),
                                         hash=False, compare=False)
    #: every property as written: what DescribeConfigs lists as this node's static configs
    listed_properties: ListedProperties = field(default_factory=ListedProperties, hash=False,
                                                compare=False)
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
    formatted, readable and writable, as Kafka checks it.  The refusals come in this order:
    a key's own value, Kafka's checks across keys, listener security, the authorizer, the
    group coordinator, the storage, the log's segment sizes."""
    cfg = ServerConfig.load(path, overrides)
    cfg.validate_all()  # every key present, by its type and validator
    voters, bootstrap = validation.check_config(cfg)  # Kafka's checks across keys
    listeners = cfg.listeners
    names, ctrl, controller_endpoints = _controller_listeners(cfg)
    security = security_setup.build(cfg.props.raw(), [ln.name for ln in listeners], names)
    authorizer_config = consumers.authorizer_config(cfg)
    group_config = consumers.group_config(cfg)
    if check_storage:  # after every key: a configuration error is reported before the disk's
        validation.check_metadata_log_dir(cfg)
    listed = ListedProperties(cfg.props.raw())
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
        raft=consumers.raft_config(cfg, names[0]),
        socket_request_max_bytes=cfg.int_value("socket.request.max.bytes"),
        connections_max_idle_ms=cfg.int_value("connections.max.idle.ms"),
        log_config=consumers.log_config(cfg),
        source=cfg.source,
        raft_topic=cfg.str_value("kraftnode.raft.topic"),
        log_file=cfg.str_value("kraftnode.log.file") or None,
        log_file_max_bytes=cfg.int_value("kraftnode.log.file.max.bytes"),
        log_file_backups=cfg.int_value("kraftnode.log.file.backups"),
        read_linearizable=cfg.bool_value("kraftnode.read.linearizable"),
        warnings=tuple(keys.warnings_for(listed)),
        metrics_listener=cfg.host_port("kraftnode.metrics.listener"),
        snapshot_config=consumers.snapshot_config(cfg),
        security=security,
        authorizer_config=authorizer_config,
        controller=consumers.controller_config(cfg, frozenset(v.node_id for v in voters), listed),
        listed_properties=listed,
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
