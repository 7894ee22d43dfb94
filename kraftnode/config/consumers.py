"""Each consumer's typed configuration, filled in one place from the key table.

A consumer owns the shape of its configuration, a dataclass next to the code that reads it:
the raft core :class:`~kraftnode.raft.quorum_config.RaftConfig`, the metadata log
:class:`~kraftnode.log.metadata_log.LogConfig` and its snapshots
:class:`~kraftnode.log.metadata_log.SnapshotConfig`, the group coordinator
:class:`~kraftnode.groups.config.GroupConfig`, the controller
:class:`~kraftnode.controller.context.ControllerConfig`, the authorizer
:class:`~kraftnode.security.authorizer.AuthorizerConfig`.  The functions below fill them:
every value through :class:`~kraftnode.config.server_config.ServerConfig`'s getters, which read
the key table (:func:`kraftnode.config.keys.value`: its type, validator and default), and
Kafka's checks across the keys of one consumer, with Kafka's messages.  Nothing below the
configuration parses a key again; :func:`kraftnode.config.node_config.load` calls each once and
``server/node.py`` hands each consumer its object.

The cluster id is the one value a consumer's configuration holds that the file cannot know
(``meta.properties`` has it): ``RaftConfig.cluster_id`` and ``ControllerConfig.cluster_id`` are
set when the node starts (``server/node.py``), nothing else.
"""

from __future__ import annotations

import os

from kraftnode.config.properties import ListedProperties
from kraftnode.config.server_config import ServerConfig
from kraftnode.controller.context import ControllerConfig
from kraftnode.errors import ConfigError
from kraftnode.groups.config import ASSIGNOR_CLASSES, ASSIGNORS, CLASSIC, CONSUMER, GroupConfig
from kraftnode.log.metadata_log import LogConfig, SnapshotConfig
from kraftnode.raft import RaftConfig
from kraftnode.security import authorizer

__all__ = ["GROUP_KEYS", "authorizer_config", "controller_config", "group_config", "log_config",
           "raft_config", "snapshot_config"]


def raft_config(cfg: ServerConfig, listener: str) -> RaftConfig:
    """The raft core's timeouts and switches (QuorumConfig's keys); ``listener``: the default
    controller listener, the one the core advertises."""
    return RaftConfig(
        election_timeout_ms=cfg.int_value("controller.quorum.election.timeout.ms"),
        election_backoff_max_ms=cfg.int_value("controller.quorum.election.backoff.max.ms"),
        fetch_timeout_ms=cfg.int_value("controller.quorum.fetch.timeout.ms"),
        request_timeout_ms=cfg.int_value("controller.quorum.request.timeout.ms"),
        retry_backoff_ms=cfg.int_value("controller.quorum.retry.backoff.ms"),
        listener_name=listener,
        pre_vote=cfg.bool_value("kraftnode.raft.pre.vote.enable"),
        auto_join=cfg.bool_value("controller.quorum.auto.join.enable"))


def log_config(cfg: ServerConfig) -> LogConfig:
    """The metadata log's segments (ConfigError when the segment size is below its minimum)."""
    return LogConfig(segment_bytes=cfg.int_value("metadata.log.segment.bytes"),
                     segment_ms=cfg.int_value("metadata.log.segment.ms"),
                     segment_min_bytes=cfg.int_value("metadata.log.segment.min.bytes"))


def snapshot_config(cfg: ServerConfig) -> SnapshotConfig:
    """When snapshots are generated, and the log retained behind them."""
    return SnapshotConfig(
        max_bytes_between_snapshots=cfg.int_value("metadata.log.max.record.bytes.between.snapshots"),
        max_snapshot_interval_ms=cfg.int_value("metadata.log.max.snapshot.interval.ms"),
        retention_bytes=cfg.int_value("metadata.max.retention.bytes"),
        retention_ms=cfg.int_value("metadata.max.retention.ms"),
        fork=cfg.bool_value("kraftnode.snapshot.fork.enable") and hasattr(os, "fork"))


def controller_config(cfg: ServerConfig, voter_ids: frozenset[int],
                      listed: ListedProperties) -> ControllerConfig:
    """The controller's keys (docs/controller.md); ``listed``: every property as written, the
    static layer its topic-config defaults fall back to."""
    return ControllerConfig(
        cluster_id="", node_id=cfg.node_id,  # the cluster id: set at start (meta.properties)
        session_timeout_ms=cfg.int_value("broker.session.timeout.ms"),
        heartbeat_interval_ms=cfg.int_value("broker.heartbeat.interval.ms"),
        num_partitions=cfg.int_value("num.partitions"),
        default_replication_factor=cfg.int_value("default.replication.factor"),
        delete_topic_enable=cfg.bool_value("delete.topic.enable"),
        auto_leader_rebalance_enable=cfg.bool_value("auto.leader.rebalance.enable"),
        leader_imbalance_check_interval_ms=cfg.int_value("leader.imbalance.check.interval.seconds") * 1000,
        unclean_check_interval_ms=cfg.int_value("unclean.leader.election.interval.ms"),
        max_idle_interval_ms=cfg.int_value("metadata.max.idle.interval.ms"),
        min_insync_replicas=cfg.int_value("min.insync.replicas"),
        static_configs=listed,
        controller_ids=voter_ids)


def authorizer_config(cfg: ServerConfig) -> authorizer.AuthorizerConfig:
    """The authorizer's keys, checked (only the StandardAuthorizer; ``super.users`` principals,
    ``;``-separated as Kafka splits them, so read as written)."""
    return authorizer.authorizer_config(cfg.str_value("authorizer.class.name") or "",
                                        cfg.written("super.users"),
                                        cfg.bool_value("allow.everyone.if.no.acl.found"))


#: The group coordinator's keys: key -> (GroupConfig field, kind)
GROUP_KEYS: dict[str, tuple[str, str]] = {
    "group.min.session.timeout.ms": ("min_session_timeout_ms", "int"),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", "int"),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", "int"),
    "group.max.size": ("max_size", "int"),
    "group.coordinator.rebalance.protocols": ("rebalance_protocols", "list"),
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", "int"),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", "int"),
    "group.consumer.max.size": ("consumer_max_size", "int"),
    "group.consumer.assignors": ("consumer_assignors", "list"),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", "int"),
}


def _group_list(cfg: ServerConfig, key: str) -> tuple[str, ...]:
    """A LIST key of the group coordinator, as GroupCoordinatorConfig checks it."""
    items = tuple(s for s in cfg.list_value(key) if s)
    text = cfg.written(key)
    if key == "group.coordinator.rebalance.protocols":
        bad = [s for s in items if s.lower() not in (CLASSIC, CONSUMER, "share")]
        if bad or CLASSIC not in [s.lower() for s in items]:
            raise ConfigError(f"Invalid value {text} for configuration {key}: "
                              "the classic protocol must be enabled (classic, consumer)")
        return tuple(s.lower() for s in items)
    short = [ASSIGNOR_CLASSES.get(s, s) for s in items]
    if [s for s in short if s not in ASSIGNORS] or not short:
        raise ConfigError(f"Invalid value {text} for configuration {key}: kraftnode "
                          f"serves the assignors {', '.join(ASSIGNORS)}")
    return tuple(short)


def group_config(cfg: ServerConfig) -> GroupConfig:
    """The group coordinator's keys, with GroupCoordinatorConfig's checks across them."""
    values: dict[str, object] = {
        attr: cfg.int_value(key) if kind == "int" else _group_list(cfg, key)
        for key, (attr, kind) in GROUP_KEYS.items()}
    g = GroupConfig(**values)  # type: ignore[arg-type]
    lo = cfg.int_value("group.consumer.min.session.timeout.ms")
    hi = cfg.int_value("group.consumer.max.session.timeout.ms")
    if not lo <= g.consumer_session_timeout_ms <= hi:
        raise ConfigError(
            f"group.consumer.session.timeout.ms must be greater than or equal to "
            f"group.consumer.min.session.timeout.ms ({lo}) and less than or equal to "
            f"group.consumer.max.session.timeout.ms ({hi})")
    lo = cfg.int_value("group.consumer.min.heartbeat.interval.ms")
    hi = cfg.int_value("group.consumer.max.heartbeat.interval.ms")
    if not lo <= g.consumer_heartbeat_interval_ms <= hi:
        raise ConfigError(
            f"group.consumer.heartbeat.interval.ms must be greater than or equal to "
            f"group.consumer.min.heartbeat.interval.ms ({lo}) and less than or equal to "
            f"group.consumer.max.heartbeat.interval.ms ({hi})")
    if g.consumer_heartbeat_interval_ms >= g.consumer_session_timeout_ms:
        raise ConfigError("group.consumer.heartbeat.interval.ms must be less than "
                          "group.consumer.session.timeout.ms")
    if g.initial_rebalance_delay_ms < 0 or g.min_session_timeout_ms < 0:
        raise ConfigError("group.initial.rebalance.delay.ms and group.min.session.timeout.ms "
                          "must not be negative")
    return g
