"""Topic configurations as a Kafka 3.9 controller knows them (LogConfig's ConfigDef).

Each topic config: its type, default, validator, and the broker-level keys it falls back to
(ServerTopicConfigSynonyms, highest priority first, with the hours/minutes-to-milliseconds
conversions). :func:`validate_topic_configs` checks a topic's configs as
``ControllerConfigurationValidator`` does (``LogConfig.validate``: known names, parseable values
within range, min.compaction.lag.ms <= max.compaction.lag.ms, no remote storage: kraftnode's
brokers are Kafka's, and the controller cannot know whether they enable tiered storage, so it
answers as a controller with ``remote.log.storage.system.enable=false`` does).
:func:`resolve` gives a config's effective value and source as ``KafkaConfigSchema`` resolves
it: topic override, dynamic config of this node, dynamic cluster default, the controller's
static configuration, Kafka's default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kraftnode.errors import RemoteError

__all__ = ["TOPIC_CONFIGS", "Source", "TopicConfigDef", "TopicConfigError", "parse_value", "resolve",
           "resolve_all", "validate_topic_configs"]


class TopicConfigError(RemoteError, ValueError):
    """Kafka's ConfigException / InvalidConfigurationException: INVALID_CONFIG with this message
    (a client's config value, refused in its answer)."""


class Source:
    """DescribeConfigsResponse ConfigSource ids."""
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


MAX_LONG = 9223372036854775807
_MFV = ("0.8.0 0.8.1 0.8.2 0.9.0 0.10.0-IV0 0.10.0-IV1 0.10.1-IV0 0.10.1-IV1 0.10.1-IV2 0.10.2-IV0 "
        "0.11.0-IV0 0.11.0-IV1 0.11.0-IV2 1.0-IV0 1.1-IV0 2.0-IV0 2.0-IV1 2.1-IV0 2.1-IV1 2.1-IV2 "
        "2.2-IV0 2.2-IV1 2.3-IV0 2.3-IV1 2.4-IV0 2.4-IV1 2.5-IV0 2.6-IV0 2.7-IV0 2.7-IV1 2.7-IV2 "
        "2.8-IV0 2.8-IV1 3.0-IV0 3.0-IV1 3.1-IV0 3.2-IV0 3.3-IV0 3.3-IV1 3.3-IV2 3.3-IV3 3.4-IV0 "
        "3.5-IV0 3.5-IV1 3.5-IV2 3.6-IV0 3.6-IV1 3.6-IV2 3.7-IV0 3.7-IV1 3.7-IV2 3.7-IV3 3.7-IV4 "
        "3.8-IV0 3.9-IV0 4.0-IV0 4.0-IV1").split()

Validator = Callable[[str, object, str], None]  # (name, parsed value, raw text) -> raises TopicConfigError


def _invalid(name: str, raw: object, why: str) -> TopicConfigError:
    return TopicConfigError(f"Invalid value {raw} for configuration {name}: {why}")


def at_least(lo: float) -> Validator:
    def check(name: str, v: object, raw: str) -> None:
        if v < lo:  # type: ignore[operator]
            raise _invalid(name, v, f"Value must be at least {_num(lo)}")
    return check


def between(lo: float, hi: float) -> Validator:
    def check(name: str, v: object, raw: str) -> None:
        if v < lo:  # type: ignore[operator]
            raise _invalid(name, v, f"Value must be at least {_num(lo)}")
        if v > hi:  # type: ignore[operator]
            raise _invalid(name, v, f"Value must be no more than {_num(hi)}")
    return check


def level(lo: int, hi: int, default: int) -> Validator:
    def check(name: str, v: object, raw: str) -> None:
        if v > hi or (v < lo and v != default):  # type: ignore[operator]
            raise _invalid(name, v, f"Value must be between {lo} and {hi} or equal to {default}")
    return check


def one_of(*choices: str) -> Validator:
    def check(name: str, v: object, raw: str) -> None:
        items = v if isinstance(v, list) else [v]
        for s in items:
            if s not in choices:
                raise _invalid(name, s, "String must be one of: " + ", ".join(choices))
    return check


def _throttled(name: str, v: object, raw: str) -> None:
    assert isinstance(v, list)
    if not (all(re.fullmatch(r"([0-9]+:[0-9]+)?", s.strip()) for s in v) or "".join(v) == "*"):
        raise _invalid(name, "[" + ", ".join(v) + "]", f"{name} must be the literal '*' or a list of replicas in "
                       "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _mfv(name: str, v: object, raw: str) -> None:
    if v not in _MFV:
        raise TopicConfigError(f"Invalid value {v} for configuration {name}: Version {v} is not a valid version")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


HOURS = 3_600_000
MINUTES = 60_000


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: str                 # BOOLEAN INT LONG DOUBLE STRING LIST
    default: str              # as ConfigDef.convertToString prints it
    validator: Validator | None = None
    #: broker keys, highest priority first: (key, multiplier to milliseconds or 1)
    synonyms: tuple[tuple[str, int], ...] = field(default_factory=tuple)


def _d(name: str, type_: str, default: str, validator: Validator | None = None,
       *synonyms: str | tuple[str, int]) -> TopicConfigDef:
    syn = tuple((s, 1) if isinstance(s, str) else s for s in synonyms)
    return TopicConfigDef(name, type_, default, validator, syn)


_DEFS = [
    _d("cleanup.policy", "LIST", "delete", one_of("compact", "delete"), "log.cleanup.policy"),
    _d("compression.gzip.level", "INT", "-1", level(1, 9, -1), "compression.gzip.level"),
    _d("compression.lz4.level", "INT", "9", between(1, 17), "compression.lz4.level"),
    _d("compression.type", "STRING", "producer",
       one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), "compression.type"),
    _d("compression.zstd.level", "INT", "3", between(-131072, 22), "compression.zstd.level"),
    _d("delete.retention.ms", "LONG", "86400000", at_least(0), "log.cleaner.delete.retention.ms"),
    _d("file.delete.delay.ms", "LONG", "60000", at_least(0), "log.segment.delete.delay.ms"),
    _d("flush.messages", "LONG", str(MAX_LONG), at_least(1), "log.flush.interval.messages"),
    _d("flush.ms", "LONG", str(MAX_LONG), at_least(0), "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    _d("follower.replication.throttled.replicas", "LIST", "", _throttled),
    _d("index.interval.bytes", "INT", "4096", at_least(0), "log.index.interval.bytes"),
    _d("leader.replication.throttled.replicas", "LIST", "", _throttled),
    _d("local.retention.bytes", "LONG", "-2", at_least(-2), "log.local.retention.bytes"),
    _d("local.retention.ms", "LONG", "-2", at_least(-2), "log.local.retention.ms"),
    _d("max.compaction.lag.ms", "LONG", str(MAX_LONG), at_least(1), "log.cleaner.max.compaction.lag.ms"),
    _d("max.message.bytes", "INT", "1048588", at_least(0), "message.max.bytes"),
    _d("message.downconversion.enable", "BOOLEAN", "true", None, "log.message.downconversion.enable"),
    _d("message.format.version", "STRING", "3.0-IV1", _mfv, "log.message.format.version"),
    _d("message.timestamp.after.max.ms", "LONG", str(MAX_LONG), at_least(0), "log.message.timestamp.after.max.ms"),
    _d("message.timestamp.before.max.ms", "LONG", str(MAX_LONG), at_least(0), "log.message.timestamp.before.max.ms"),
    _d("message.timestamp.difference.max.ms", "LONG", str(MAX_LONG), at_least(0),
       "log.message.timestamp.difference.max.ms"),
    _d("message.timestamp.type", "STRING", "CreateTime", one_of("CreateTime", "LogAppendTime"),
       "log.message.timestamp.type"),
    _d("min.cleanable.dirty.ratio", "DOUBLE", "0.5", between(0, 1), "log.cleaner.min.cleanable.ratio"),
    _d("min.compaction.lag.ms", "LONG", "0", at_least(0), "log.cleaner.min.compaction.lag.ms"),
    _d("min.insync.replicas", "INT", "1", at_least(1), "min.insync.replicas"),
    _d("preallocate", "BOOLEAN", "false", None, "log.preallocate"),
    _d("remote.log.copy.disable", "BOOLEAN", "false"),
    _d("remote.log.delete.on.disable", "BOOLEAN", "false"),
    _d("remote.storage.enable", "BOOLEAN", "false"),
    _d("retention.bytes", "LONG", "-1", None, "log.retention.bytes"),
    _d("retention.ms", "LONG", "604800000", at_least(-1), "log.retention.ms", ("log.retention.minutes", MINUTES),
       ("log.retention.hours", HOURS)),
    _d("segment.bytes", "INT", "1073741824", at_least(14), "log.segment.bytes"),
    _d("segment.index.bytes", "INT", "10485760", at_least(4), "log.index.size.max.bytes"),
    _d("segment.jitter.ms", "LONG", "0", at_least(0), "log.roll.jitter.ms", ("log.roll.jitter.hours", HOURS)),
    _d("segment.ms", "LONG", "604800000", at_least(1), "log.roll.ms", ("log.roll.hours", HOURS)),
    _d("unclean.leader.election.enable", "BOOLEAN", "false", None, "unclean.leader.election.enable"),
]

#: name -> definition, sorted by name (LogConfig.configNames)
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in sorted(_DEFS, key=lambda d: d.name)}

_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
_LONG_RANGE = (-(1 << 63), (1 << 63) - 1)


def parse_value(d: TopicConfigDef, raw: str) -> object:
    """ConfigDef.parseType, then the validator: the typed value, or TopicConfigError."""
    text = raw.strip()
    value: object
    if d.type == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise _invalid(d.name, raw, "Expected value to be either true or false")
        value = text.lower() == "true"
    elif d.type in ("INT", "LONG"):
        lo, hi = _INT_RANGE if d.type == "INT" else _LONG_RANGE
        try:
            value = int(text, 10)
            if not lo <= value <= hi or not text.lstrip("+-").isdigit():
                raise ValueError
        except ValueError:
            raise _invalid(d.name, raw, f"Not a number of type {d.type}") from None
    elif d.type == "DOUBLE":
        try:
            value = float(text)
        except ValueError:
            raise _invalid(d.name, raw, "Not a number of type DOUBLE") from None
    elif d.type == "LIST":
        value = [] if text == "" else [s.strip() for s in text.split(",")]
    else:
        value = text
    if d.validator is not None:
        d.validator(d.name, value, raw)
    return value


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """LogConfig.validate over a topic's complete configs (after the change); TopicConfigError."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise TopicConfigError("Null value not supported for topic configs: " + ",".join(nulls))
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise TopicConfigError(f"Unknown topic config name: {name}")
    parsed: dict[str, object] = {}
    for name, d in TOPIC_CONFIGS.items():
        raw = configs.get(name)
        parsed[name] = parse_value(d, d.default if raw is None else raw)
    lo, hi = parsed["min.compaction.lag.ms"], parsed["max.compaction.lag.ms"]
    if lo > hi:  # type: ignore[operator]
        raise TopicConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                          f"max.compaction.lag.ms ({hi})")
    if parsed["remote.storage.enable"]:
        raise TopicConfigError("Tiered Storage functionality is disabled in the broker. "
                          "Topic cannot be configured with remote log storage.")


@dataclass(frozen=True)
class Effective:
    name: str
    value: str | None
    source: int


def resolve(name: str, static: Mapping[str, str], cluster: Mapping[str, str], node: Mapping[str, str],
            topic: Mapping[str, str]) -> Effective:
    """KafkaConfigSchema.resolveEffectiveTopicConfig."""
    d = TOPIC_CONFIGS[name]
    if name in topic:
        return Effective(name, topic[name], Source.DYNAMIC_TOPIC_CONFIG)
    for where, source in ((node, Source.DYNAMIC_BROKER_CONFIG), (cluster, Source.DYNAMIC_DEFAULT_BROKER_CONFIG),
                          (static, Source.STATIC_BROKER_CONFIG)):
        for key, factor in d.synonyms:
            if key in where:
                value = where[key]
                if factor != 1:
                    try:
                        value = str(int(value.strip()) * factor)
                    except ValueError:
                        pass
                return Effective(name, value, source)
    return Effective(name, d.default, Source.DEFAULT_CONFIG)


def resolve_all(static: Mapping[str, str], cluster: Mapping[str, str], node: Mapping[str, str],
                topic: Mapping[str, str]) -> dict[str, Effective]:
    return {n: resolve(n, static, cluster, node, topic) for n in TOPIC_CONFIGS}
