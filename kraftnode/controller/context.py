"""What every manager of the controller shares: its configuration and the active controller's
state (the view, the broker sessions, the clock value and the randomness it was given).

:class:`~kraftnode.controller.quorum_controller.QuorumController` is a ControllerContext that also
holds the managers; each manager is given the context (and the managers it calls), so the
modules import each other in one direction only.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kraftnode.controller.errors import ApiError
from kraftnode.controller.heartbeats import BrokerHeartbeatManager
from kraftnode.controller.view import ControllerView
from kraftnode.protocol.errors import Errors

__all__ = ["ControllerConfig", "ControllerContext"]

log = logging.getLogger("kraftnode.controller")


@dataclass
class ControllerConfig:
    """The Kafka configuration keys the controller honours (docs/controller.md)."""

    cluster_id: str
    node_id: int
    session_timeout_ms: int = 9000                  # broker.session.timeout.ms
    heartbeat_interval_ms: int = 2000               # broker.heartbeat.interval.ms
    num_partitions: int = 1                         # num.partitions
    default_replication_factor: int = 1             # default.replication.factor
    delete_topic_enable: bool = True                # delete.topic.enable
    auto_leader_rebalance_enable: bool = True       # auto.leader.rebalance.enable
    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds
    unclean_check_interval_ms: int = 300_000        # unclean.leader.election.interval.ms
    max_idle_interval_ms: int = 500                 # metadata.max.idle.interval.ms (0: no NoOpRecords)
    max_elections_per_imbalance: int = 1000         # QuorumController's constant
    #: min.insync.replicas: the cluster-level value the first activation writes
    min_insync_replicas: int = 1
    #: the controller's own properties: topic config defaults fall back to them (log.retention.hours, ...)
    static_configs: Mapping[str, str] = field(default_factory=dict)
    #: the quorum's voters (ConfigResourceExistenceChecker accepts a controller's id as a broker resource)
    controller_ids: frozenset[int] = frozenset()


class ControllerContext:
    def __init__(self, config: ControllerConfig, view: ControllerView, now_ms: int,
                 rng: random.Random | None = None, new_uuid: Callable[[], uuid.UUID] | None = None,
                 log_fn: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.view = view
        self.rng = rng or random.Random(0)
        self._new_uuid = new_uuid or (lambda: uuid.UUID(int=self.rng.getrandbits(128)))
        self._log = log_fn or log.info
        self.now_ms = now_ms
        self.heartbeats = BrokerHeartbeatManager(config.session_timeout_ms)

    def log(self, message: str) -> None:
        self._log(message)

    def new_uuid(self) -> uuid.UUID:
        """Uuid.randomUuid: never the zero id or a reserved directory-like id (nor one with a
        leading '-' in base64, which Kafka also avoids)."""
        while True:
            u = self._new_uuid()
            if u.int >> 64 != 0 and not (u.bytes[0] & 0xFC) == 0xF8:
                return u

    def controller_ids(self) -> set[int]:
        return set(self.config.controller_ids) | set(self.view.controllers)

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        """ClusterControlManager.checkBrokerEpoch: STALE_BROKER_EPOCH unless registered with it."""
        reg = self.view.broker(broker_id)
        if reg is None:
            raise ApiError(Errors.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
        if reg.broker_epoch != broker_epoch:
            raise ApiError(Errors.STALE_BROKER_EPOCH,
                           f"Expected broker epoch {reg.broker_epoch}, but got broker epoch {broker_epoch}")
