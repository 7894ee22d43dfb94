"""The group coordinator's configuration: Kafka 3.9's keys and defaults (GroupCoordinatorConfig).

The coordinator owns the shape; :func:`kraftnode.config.consumers.group_config` fills it from the
key table (the one source of the keys' types, defaults and validators) and makes Kafka's
checks across them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ASSIGNORS", "ASSIGNOR_CLASSES", "CLASSIC", "CONSUMER", "GroupConfig"]

CLASSIC = "classic"
CONSUMER = "consumer"
ASSIGNORS = ("uniform", "range")
# the assignor class names Kafka accepts in group.consumer.assignors, by short name
ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


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
