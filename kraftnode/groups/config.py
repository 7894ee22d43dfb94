"""The group coordinator's configuration: Kafka 3.9's keys and defaults (GroupCoordinatorConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kraftnode.errors import LocalError

__all__ = ["GroupConfig", "GroupConfigError", "KEYS", "from_properties"]

CLASSIC = "classic"
CONSUMER = "consumer"
ASSIGNORS = ("uniform", "range")
# the assignor class names Kafka accepts in group.consumer.assignors, by short name
ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


class GroupConfigError(LocalError, ValueError):
    """A group configuration value Kafka would refuse; the message names the key."""


@dataclass(frozen=True)
class GroupConfig:
    # classic protocol
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = 5 * 60 * 1000
    # KIP-848 consumer protocol
    # Kafka 4.x's default (less "streams"): librdkafka's and Java's group.protocol=consumer work
    # out of the box, as against a Kafka 4 broker
    rebalance_protocols: tuple[str, ...] = (CLASSIC, CONSUMER)
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ASSIGNORS
    # offsets
    offset_metadata_max_bytes: int = 4096

    @property
    def consumer_protocol_enabled(self) -> bool:
        return CONSUMER in self.rebalance_protocols


# key -> (attribute, kind)
KEYS: dict[str, tuple[str, str]] = {
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
# accepted with their Kafka meaning as bounds of the keys above (checked, not otherwise used)
BOUND_KEYS = {
    "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
}


def _int(key: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise GroupConfigError(f"Invalid value {text} for configuration {key}: Not a number of type INT") from None


def from_properties(props: Mapping[str, str]) -> GroupConfig:
    """The configuration the properties set (Kafka's defaults for the rest); GroupConfigError
    for a value Kafka's GroupCoordinatorConfig refuses."""
    values: dict[str, object] = {}
    for key, (attr, kind) in KEYS.items():
        text = props.get(key)
        if text is None:
            continue
        if kind == "int":
            values[attr] = _int(key, text)
        else:
            items = tuple(s.strip() for s in text.split(",") if s.strip())
            if key == "group.coordinator.rebalance.protocols":
                bad = [s for s in items if s.lower() not in (CLASSIC, CONSUMER, "share")]
                if bad or CLASSIC not in [s.lower() for s in items]:
                    raise GroupConfigError(f"Invalid value {text} for configuration {key}: "
                                           "the classic protocol must be enabled (classic, consumer)")
                items = tuple(s.lower() for s in items)
            else:
                short = [ASSIGNOR_CLASSES.get(s, s) for s in items]
                bad = [s for s in short if s not in ASSIGNORS]
                if bad or not short:
                    raise GroupConfigError(f"Invalid value {text} for configuration {key}: kraftnode "
                                           f"serves the assignors {', '.join(ASSIGNORS)}")
                items = tuple(short)
            values[attr] = items
    bounds = {k: _int(k, props[k]) if k in props else d for k, d in BOUND_KEYS.items()}
    cfg = GroupConfig(**values)  # type: ignore[arg-type]
    lo, hi = bounds["group.consumer.min.session.timeout.ms"], bounds["group.consumer.max.session.timeout.ms"]
    if not lo <= cfg.consumer_session_timeout_ms <= hi:
        raise GroupConfigError(
            f"group.consumer.session.timeout.ms must be greater than or equal to "
            f"group.consumer.min.session.timeout.ms ({lo}) and less than or equal to "
            f"group.consumer.max.session.timeout.ms ({hi})")
    lo, hi = bounds["group.consumer.min.heartbeat.interval.ms"], bounds["group.consumer.max.heartbeat.interval.ms"]
    if not lo <= cfg.consumer_heartbeat_interval_ms <= hi:
        raise GroupConfigError(
            f"group.consumer.heartbeat.interval.ms must be greater than or equal to "
            f"group.consumer.min.heartbeat.interval.ms ({lo}) and less than or equal to "
            f"group.consumer.max.heartbeat.interval.ms ({hi})")
    if cfg.consumer_heartbeat_interval_ms >= cfg.consumer_session_timeout_ms:
        raise GroupConfigError("group.consumer.heartbeat.interval.ms must be less than "
                               "group.consumer.session.timeout.ms")
    if cfg.initial_rebalance_delay_ms < 0 or cfg.min_session_timeout_ms < 0:
        raise GroupConfigError("group.initial.rebalance.delay.ms and group.min.session.timeout.ms "
                               "must not be negative")
    return cfg
