"""Dynamic group configs (``kafka-configs.sh --entity-type groups``, resource type GROUP = 32):
the names and value types of Kafka 4.4's ``GroupConfig`` ConfigDef, checked as the controller's
``ControllerConfigurationValidator`` checks them before it writes the ConfigRecords.

A Kafka 4.x broker forwards a group's IncrementalAlterConfigs to the controller; the group
coordinators on the brokers then read the group's configs from the metadata (a share group's
``share.auto.offset.reset``, a consumer group's session timeout, ...). What is checked here, with
Kafka's messages: the group name (the default resource ``""`` is refused), null values, every
name (``Unknown group config name: X``), and each value's type and choices as the ConfigDef
parses them. Kafka also bounds the timeouts by the brokers' ``group.*`` ranges
(``GroupConfig.validateValues``); kraftnode's controller does not know the brokers' ranges and
leaves those bounds to the brokers' group coordinators (docs/controller.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from kraftnode.errors import RemoteError

__all__ = ["GROUP_CONFIGS", "GroupConfigValueError", "validate_group_configs"]

_INT, _LONG, _BOOLEAN, _STRING, _LIST = "INT", "LONG", "BOOLEAN", "STRING", "LIST"

#: GroupConfig.CONFIG_DEF (Kafka 4.4): name -> type
GROUP_CONFIGS: dict[str, str] = {
    "consumer.session.timeout.ms": _INT,
    "consumer.heartbeat.interval.ms": _INT,
    "consumer.assignment.interval.ms": _INT,
    "consumer.assignor.offload.enable": _BOOLEAN,
    "share.session.timeout.ms": _INT,
    "share.heartbeat.interval.ms": _INT,
    "share.record.lock.duration.ms": _INT,
    "share.delivery.count.limit": _INT,
    "share.partition.max.record.locks": _INT,
    "share.auto.offset.reset": _STRING,
    "share.assignment.interval.ms": _INT,
    "share.assignor.offload.enable": _BOOLEAN,
    "share.isolation.level": _STRING,
    "share.renew.acknowledge.enable": _BOOLEAN,
    "streams.session.timeout.ms": _INT,
    "streams.heartbeat.interval.ms": _INT,
    "streams.num.standby.replicas": _INT,
    "streams.initial.rebalance.delay.ms": _INT,
    "streams.assignment.interval.ms": _INT,
    "streams.rack.aware.assignment.tags": _LIST,
    "streams.assignor.offload.enable": _BOOLEAN,
    "streams.task.offset.interval.ms": _INT,
    "streams.num.warmup.replicas": _INT,
    "streams.acceptable.recovery.lag": _LONG,
    "streams.assignor.name": _STRING,
    "errors.deadletterqueue.topic.name": _STRING,
    "errors.deadletterqueue.copy.record.enable": _BOOLEAN,
}

_CHOICES = {"share.isolation.level": ("read_committed", "read_uncommitted")}


class GroupConfigValueError(RemoteError, ValueError):
    """A group config Kafka refuses (INVALID_CONFIG with this message)."""


def _check_value(name: str, kind: str, value: str) -> None:
    """ConfigDef.parseType and the key's validator."""
    text = value.strip()
    if kind in (_INT, _LONG):
        try:
            n = int(text)
        except ValueError:
            raise GroupConfigValueError(f"Invalid value {value} for configuration {name}: Not a number of type "
                                        f"{kind}") from None
        if kind == _INT and not -(2**31) <= n < 2**31:
            raise GroupConfigValueError(f"Invalid value {value} for configuration {name}: Not a number of type INT")
    elif kind == _BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise GroupConfigValueError(f"Invalid value {value} for configuration {name}: Expected value to be "
                                        f"either true or false")
    if name in _CHOICES and text not in _CHOICES[name]:
        raise GroupConfigValueError(f"Invalid value {value} for configuration {name}: String must be one of: "
                                    f"{', '.join(_CHOICES[name])}")
    if name == "share.auto.offset.reset" and text not in ("latest", "earliest") \
            and not text.startswith("by_duration:"):
        raise GroupConfigValueError(f"Invalid value {value} for configuration {name}: Invalid value `{value}` for "
                                    f"configuration share.auto.offset.reset. The value must be either 'earliest', "
                                    f"'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    if name == "streams.rack.aware.assignment.tags":
        tags = [t.strip() for t in text.split(",") if t.strip()]
        if len(set(tags)) != len(tags):
            raise GroupConfigValueError("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    if name == "errors.deadletterqueue.topic.name" and text.startswith("__"):
        raise GroupConfigValueError("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")


def validate_group_configs(configs: Mapping[str, str | None]) -> None:
    """ControllerConfigurationValidator's GROUP case after the name check: null values
    (``Null value not supported for group configs: a,b``), then GroupConfig.validate's names and
    values. GroupConfigValueError with Kafka's message."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise GroupConfigValueError("Null value not supported for group configs: " + ",".join(nulls))
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise GroupConfigValueError(f"Unknown group config name: {name}")
    for name, value in configs.items():
        assert value is not None
        _check_value(name, GROUP_CONFIGS[name], value)
