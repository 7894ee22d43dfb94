"""The active controller's decisions, sans I/O: Kafka's QuorumController without its event loop.

A :class:`QuorumController` exists while its node is the active controller. It is built from the
controller's view (the metadata image at the end of the log, :class:`ControllerView`) and owns
what only an active controller keeps in memory: broker sessions (the heartbeat manager) and the
schedule of its periodic duties. Each operation reads the view and a request (and ``now_ms``,
given by the caller: no clock, no randomness of its own -- the caller passes a seeded
``random.Random`` and a uuid source -- and no I/O) and returns a
:class:`~kraftnode.controller.result.ControllerResult`: the records to append, atomically where
Kafka writes them atomically, and the answer to send once they commit. The caller appends the
records and replays them into the view (:meth:`ControllerView.replay_batches` over its own log),
which keeps the heartbeat manager in step through :meth:`replayed`; operations run one at a
time, each seeing every earlier one's records, as in Kafka's single-threaded event queue.

Periodic duties (:meth:`next_deadline_ms`, :meth:`run_due`): fencing brokers whose session timed
out (one per run, as Kafka does, so each fencing is visible before the next), NoOpRecords every
``metadata.max.idle.interval.ms``, preferred-leader balancing every
``leader.imbalance.check.interval.seconds`` while some partition is not led by its preferred
replica (``auto.leader.rebalance.enable``), and unclean elections for leaderless partitions of
topics that allow them every ``unclean.leader.election.interval.ms``.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from typing import Any

from kraftnode.controller.cluster import BrokerHeartbeatReply, ClusterControl
from kraftnode.controller.configs import ConfigurationControl
from kraftnode.controller.context import ControllerConfig, ControllerContext
from kraftnode.controller.errors import ApiError
from kraftnode.controller.producer_ids import ProducerIdControl, ProducerIdsBlock
from kraftnode.controller.quotas import ClientQuotaControl
from kraftnode.controller.replication import ReplicationControl
from kraftnode.controller.result import ControllerResult
from kraftnode.controller.view import ControllerView
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    NoOpRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UnregisterControllerRecord,
)

__all__ = ["BrokerHeartbeatReply", "ControllerConfig", "ProducerIdsBlock", "QuorumController"]

log = logging.getLogger("kraftnode.controller")

#: a scheduled duty ran and there may be more to do: run again after this delay (Kafka's 10 ms)
IMMEDIATELY_MS = 10


class QuorumController(ControllerContext):
    def __init__(self, config: ControllerConfig, view: ControllerView, now_ms: int,
                 rng: random.Random | None = None, new_uuid: Callable[[], uuid.UUID] | None = None,
                 log_fn: Callable[[str], None] | None = None) -> None:
        super().__init__(config, view, now_ms, rng, new_uuid, log_fn)
        # ClusterControlManager.activate: every registered broker starts with a fresh session
        for bid, reg in view.brokers().items():
            self.heartbeats.register(bid, bool(reg.fenced), now_ms)
        view.listener = self.replayed
        self.configs = ConfigurationControl(self)
        self.replication = ReplicationControl(self, self.configs)
        self.cluster = ClusterControl(self, self.replication)
        self.producer_ids = ProducerIdControl(self)
        self.quotas = ClientQuotaControl(self)
        # periodic duties (QuorumController's deferred events); None: not scheduled
        self._noop_at: int | None = None
        self._balance_at: int | None = None
        self._unclean_at: int | None = None
        self.after_write(now_ms)

    def rebase(self, view: ControllerView) -> None:
        """Continue on ``view``, rebuilt from the committed state because records the old view
        never replayed are now only in a snapshot: brokers registered, fenced or unregistered
        by them get the session a replayed record would have given them; the others keep theirs."""
        self.view = view
        view.listener = self.replayed
        hb = self.heartbeats
        brokers = view.brokers()
        for bid in [b for b in hb.brokers if b not in brokers]:
            hb.remove(bid)
        for bid, reg in brokers.items():
            state = hb.brokers.get(bid)
            if state is None or state.fenced != bool(reg.fenced):
                hb.register(bid, bool(reg.fenced), self.now_ms)

    def use_replication(self, replication: ReplicationControl) -> None:
        """Swap the replication manager (the simulation's planted bugs)."""
        self.replication = replication
        self.cluster.shutdown_handler = replication

    def replayed(self, m: Any, offset: int) -> None:
        """A record entered the view (ClusterControlManager.replay's heartbeat-manager part)."""
        del offset
        hb = self.heartbeats
        if isinstance(m, RegisterBrokerRecord):
            if m.broker_id in hb.brokers:
                hb.remove(m.broker_id)
            hb.register(m.broker_id, bool(m.fenced), self.now_ms)
        elif isinstance(m, UnregisterBrokerRecord):
            if m.broker_id not in self.view.image.brokers:
                hb.remove(m.broker_id)
        elif isinstance(m, (FenceBrokerRecord, UnfenceBrokerRecord, BrokerRegistrationChangeRecord)):
            bid = m.broker_id if isinstance(m, BrokerRegistrationChangeRecord) else m.id
            reg = self.view.broker(bid)
            if reg is not None:
                hb.register(bid, bool(reg.fenced), self.now_ms)

    def _at(self, now_ms: int) -> None:
        self.now_ms = max(self.now_ms, now_ms)

    # ------------------------------------------------------------------ brokers
    def register_broker(self, q: w.BrokerRegistrationRequest, next_write_offset: int, kraft_version: int,
                        now_ms: int, clean_shutdown_detection: bool = False) -> ControllerResult[int]:
        self._at(now_ms)
        return self.cluster.register_broker(q, next_write_offset, kraft_version, now_ms, clean_shutdown_detection)

    def broker_heartbeat(self, q: w.BrokerHeartbeatRequest, now_ms: int) -> ControllerResult[BrokerHeartbeatReply]:
        self._at(now_ms)
        return self.replication.process_broker_heartbeat(q, now_ms)

    def unregister_broker(self, broker_id: int, now_ms: int) -> ControllerResult[None]:
        self._at(now_ms)
        return self.replication.unregister_broker(broker_id)

    def unregister_controller(self, controller_id: int, now_ms: int) -> ControllerResult[None]:
        """ClusterControlManager.unregisterController (Kafka 4.4): at a metadata.version without
        controller unregistration (below 4.4-IV2) UNSUPPORTED_VERSION with Kafka's message,
        before looking the controller up; an id without a registration is
        CONTROLLER_ID_NOT_REGISTERED; otherwise an UnregisterControllerRecord (v0), atomically."""
        self._at(now_ms)
        if not self.view.mv.is_controller_unregistration_supported():
            raise ApiError(Errors.UNSUPPORTED_VERSION,
                           "The current MetadataVersion is too old to support controller unregistration.")
        if controller_id not in self.view.controllers:
            raise ApiError(Errors.CONTROLLER_ID_NOT_REGISTERED,
                           f"Controller ID {controller_id} is not currently registered.")
        return ControllerResult.atomic_of([(UnregisterControllerRecord(controller_id=controller_id), 0)], None)

    def allocate_producer_ids(self, q: w.AllocateProducerIdsRequest, now_ms: int) -> ControllerResult[ProducerIdsBlock]:
        self._at(now_ms)
        return self.producer_ids.generate_next_producer_id(q.broker_id, q.broker_epoch)

    # ------------------------------------------------------------------ topics and partitions
    def create_topics(self, q: w.CreateTopicsRequest, describable: set[str], now_ms: int) -> ControllerResult[Any]:
        self._at(now_ms)
        return self.replication.create_topics(q, describable)

    def delete_topics(self, ids: list[uuid.UUID], now_ms: int) -> ControllerResult[dict[uuid.UUID, ApiError]]:
        self._at(now_ms)
        return self.replication.delete_topics(ids)

    def create_partitions(self, topics: list[Any], validate_only: bool, now_ms: int) -> ControllerResult[list[Any]]:
        self._at(now_ms)
        result = self.replication.create_partitions(topics)
        return result.without_records() if validate_only else result

    def alter_partition(self, q: w.AlterPartitionRequest, version: int, now_ms: int) -> ControllerResult[Any]:
        self._at(now_ms)
        return self.replication.alter_partition(q, version)

    def elect_leaders(self, q: w.ElectLeadersRequest, now_ms: int) -> ControllerResult[Any]:
        self._at(now_ms)
        return self.replication.elect_leaders(q)

    def alter_partition_reassignments(self, q: w.AlterPartitionReassignmentsRequest,
                                      now_ms: int) -> ControllerResult[Any]:
        self._at(now_ms)
        return self.replication.alter_partition_reassignments(q)

    def assign_replicas_to_dirs(self, q: w.AssignReplicasToDirsRequest, now_ms: int) -> ControllerResult[Any]:
        self._at(now_ms)
        return self.replication.assign_replicas_to_dirs(q)

    # ------------------------------------------------------------------ configs and quotas
    def incremental_alter_configs(self, changes: dict[Any, Any], validate_only: bool,
                                  now_ms: int, forwarded: bool = False) -> ControllerResult[dict[Any, ApiError]]:
        self._at(now_ms)
        return self.configs.incremental_alter_configs(changes, validate_only, forwarded)

    def legacy_alter_configs(self, changes: dict[Any, Any], validate_only: bool,
                             now_ms: int, forwarded: bool = False) -> ControllerResult[dict[Any, ApiError]]:
        self._at(now_ms)
        return self.configs.legacy_alter_configs(changes, validate_only, forwarded)

    def alter_client_quotas(self, alterations: list[Any], validate_only: bool,
                            now_ms: int) -> ControllerResult[dict[Any, ApiError]]:
        self._at(now_ms)
        return self.quotas.alter_client_quotas(alterations, validate_only)

    # ------------------------------------------------------------------ periodic duties
    def after_write(self, now_ms: int) -> None:
        """After every write operation (QuorumController.ControllerWriteEvent.run): schedule the
        leader balancing and unclean elections if there is work for them, and the NoOp timer."""
        cfg = self.config
        if self._noop_at is None and cfg.max_idle_interval_ms > 0 and self.view.mv.is_noop_record_supported():
            self._noop_at = now_ms + cfg.max_idle_interval_ms
        if self._balance_at is None and cfg.auto_leader_rebalance_enable and self.replication.imbalanced():
            self._balance_at = now_ms + cfg.leader_imbalance_check_interval_ms
        if self._unclean_at is None and self.replication.some_leaderless():
            self._unclean_at = now_ms + cfg.unclean_check_interval_ms

    def next_deadline_ms(self) -> int | None:
        """When :meth:`run_due` has something to do next (None: nothing scheduled)."""
        times = [t for t in (self.heartbeats.next_check_ms(), self._noop_at, self._balance_at, self._unclean_at)
                 if t is not None]
        return min(times) if times else None

    def run_due(self, now_ms: int, noop_allowed: bool = True) -> ControllerResult[None] | None:
        """Run one periodic duty that is due; its result (maybe without records), or None when
        nothing is due. Call again until None, appending each result first."""
        self._at(now_ms)
        check = self.heartbeats.next_check_ms()
        if check is not None and check <= now_ms:
            result = self.replication.maybe_fence_one_stale_broker(now_ms)
            if result.records:
                return result
        if self._balance_at is not None and self._balance_at <= now_ms:
            self._balance_at = None
            balance = self.replication.maybe_balance_partition_leaders()
            if balance.response:
                self._balance_at = now_ms + IMMEDIATELY_MS
            self.log(f"maybeBalancePartitionLeaders: generated {len(balance.records)} records.")
            return ControllerResult.of(balance.records, None)
        if self._unclean_at is not None and self._unclean_at <= now_ms:
            self._unclean_at = None
            unclean = self.replication.maybe_elect_unclean_leaders()
            if unclean.response:
                self._unclean_at = now_ms + IMMEDIATELY_MS
            return ControllerResult.of(unclean.records, None)
        if self._noop_at is not None and self._noop_at <= now_ms:
            self._noop_at = None
            if noop_allowed:
                return ControllerResult.of([(NoOpRecord(), 0)], None)
            self.after_write(now_ms)
            return ControllerResult.of([], None)
        return None
