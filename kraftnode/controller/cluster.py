"""Broker registrations and heartbeats: Kafka's ClusterControlManager (and the heartbeat half of
ReplicationControlManager).

* **Registration.** A broker registers with its incarnation id (new on every start), listeners,
  supported feature ranges, log directories and rack. A new incarnation gets a new broker epoch:
  the offset at which its RegisterBrokerRecord batch is written; re-registering the same
  incarnation amends the record and keeps the epoch, fencing and shutdown state. Another
  incarnation is refused (DUPLICATE_BROKER_REGISTRATION) while the registered one's session is
  alive. Every finalized feature level must lie in the broker's range (UNSUPPORTED_VERSION
  otherwise); kraft.version is checked at the quorum's current level.
* **Heartbeats** carry the broker's replayed metadata offset and its wishes (fence itself, shut
  down). A fenced broker is unfenced once it has replayed its own registration; an unfenced one
  asking to shut down first has its leaderships moved away (controlled shutdown) and is told to
  shut down once every active broker has replayed that change. Fencing removes the broker from
  every ISR and moves its leaderships (ReplicationControl.broker_fenced). From metadata.version
  4.3-IV0 a heartbeat's cordoned log directories (KIP-1066) go into the registration
  (BrokerRegistrationChangeRecord v3); a broker with all of them cordoned gets no new replicas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kraftnode.controller.context import ControllerContext
from kraftnode.controller.errors import ApiError
from kraftnode.controller.heartbeats import BrokerControlState
from kraftnode.controller.replication import ReplicationControl
from kraftnode.controller.result import ControllerResult, Record
from kraftnode.controller.view import reserved_directory
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import RegisterBrokerRecord

__all__ = ["BrokerHeartbeatReply", "ClusterControl", "SECURITY_PROTOCOLS"]

SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


@dataclass(frozen=True)
class BrokerHeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


class ClusterControl:
    def __init__(self, ctl: ControllerContext, replication: ReplicationControl) -> None:
        self.ctl = ctl
        self.replication = replication

    # ------------------------------------------------------------------ registration
    def register_broker(self, q: w.BrokerRegistrationRequest, new_broker_epoch: int,
                        kraft_version: int, now_ms: int, clean_shutdown_detection: bool = False
                        ) -> ControllerResult[int]:
        """ClusterControlManager.registerBroker: the RegisterBrokerRecord; answer = broker epoch.
        A new incarnation first leaves the ISRs (and, after an unclean shutdown with ELR enabled,
        the ELRs): ``clean_shutdown_detection`` is Kafka's "request version >= 3", where the
        request's PreviousBrokerEpoch equal to the registered epoch means a clean shutdown."""
        ctl = self.ctl
        view = ctl.view
        mv = view.mv
        if q.cluster_id != ctl.config.cluster_id:
            raise ApiError(Errors.INCONSISTENT_CLUSTER_ID,
                           f"Expected cluster ID {ctl.config.cluster_id}, but got cluster ID {q.cluster_id}")
        broker_id = q.broker_id
        existing = view.broker(broker_id)
        prev_incarnation = existing.incarnation_id if existing is not None else None
        if existing is not None and ctl.heartbeats.has_valid_session(broker_id, now_ms) \
                and q.incarnation_id != prev_incarnation:
            raise ApiError(Errors.DUPLICATE_BROKER_REGISTRATION,
                           "Another broker is registered with that broker id. If the broker was recently "
                           "restarted this should self-resolve once the heartbeat manager expires the "
                           "broker's session.")
        if q.is_migrating_zk_broker:
            raise ApiError(Errors.BROKER_ID_NOT_REGISTERED, "Controller does not support registering ZK brokers.")
        if mv.is_directory_assignment_supported():
            dirs = list(q.log_dirs)
            if not dirs:
                raise ApiError(Errors.INVALID_REGISTRATION, "No directories specified in request")
            if any(reserved_directory(d) for d in dirs):
                raise ApiError(Errors.INVALID_REGISTRATION, "Reserved directory ID in request")
            if len(set(dirs)) != len(dirs):
                raise ApiError(Errors.INVALID_REGISTRATION, "Duplicate directory ID in request")
            for d in dirs:
                owner = self._directory_owner(d)
                if owner is not None and owner != broker_id:
                    raise ApiError(Errors.INVALID_REGISTRATION,
                                   f"Broker {owner} is already registered with directory {d}")
        R = RegisterBrokerRecord
        endpoints: dict[str, Any] = {}
        for x in q.listeners:
            if x.security_protocol not in SECURITY_PROTOCOLS:
                raise ApiError(Errors.UNKNOWN_SERVER_ERROR,
                               f"Unknown security protocol {x.security_protocol} in listener {x.name}")
            endpoints[x.name] = R.BrokerEndpoint(name=x.name, host=x.host, port=x.port,
                                                 security_protocol=x.security_protocol)
        finalized = dict(view.image.features)
        finalized["kraft.version"] = kraft_version
        features: list[Any] = []
        unverified = dict(finalized)
        for f in q.features:
            features.append(self._check_feature(broker_id, finalized, f.name, f.min_supported_version,
                                                f.max_supported_version))
            unverified.pop(f.name, None)
        if not any(f.name == "metadata.version" for f in q.features):
            features.append(self._check_feature(broker_id, finalized, "metadata.version", 1, 1))
            unverified.pop("metadata.version", None)
        for name, level in unverified.items():
            if level != 0:
                self._check_feature(broker_id, finalized, name, 0, 0)
        rec = R(broker_id=broker_id, is_migrating_zk_broker=False, incarnation_id=q.incarnation_id,
                rack=q.rack, end_points=list(endpoints.values()), features=features)
        if mv.is_directory_assignment_supported():
            rec.log_dirs = list(q.log_dirs)
        records: list[Record] = []
        if q.incarnation_id != prev_incarnation:
            clean = (clean_shutdown_detection and existing is not None
                     and int(existing.broker_epoch) == int(getattr(q, "previous_broker_epoch", -1)))
            self.replication.broker_shutdown(broker_id, clean, records)
        if q.incarnation_id != prev_incarnation or existing is None:
            rec.broker_epoch = new_broker_epoch
            rec.fenced = True
            rec.in_controlled_shutdown = False
        else:
            rec.fenced = existing.fenced
            rec.in_controlled_shutdown = existing.in_controlled_shutdown
            rec.broker_epoch = existing.broker_epoch
        records.append((rec, mv.register_broker_record_version()))
        if existing is None or q.incarnation_id != prev_incarnation:
            ctl.heartbeats.remove(broker_id)
        ctl.heartbeats.register(broker_id, rec.fenced, now_ms)
        return ControllerResult.atomic_of(records, int(rec.broker_epoch))

    def _directory_owner(self, d: Any) -> int | None:
        for bid, reg in self.ctl.view.brokers().items():
            if d in (reg.log_dirs or []):
                return bid
        return None

    @staticmethod
    def _check_feature(broker_id: int, finalized: dict[str, int], name: str, lo: int, hi: int) -> Any:
        """ClusterControlManager.processRegistrationFeature."""
        level = finalized.get(name, 1 if name == "metadata.version" else 0)
        if not lo <= level <= hi:
            raise ApiError(Errors.UNSUPPORTED_VERSION,
                           f"Unable to register because the broker does not support finalized version "
                           f"{level} of {name}. The broker wants a version between {lo} and {hi}, inclusive.")
        return RegisterBrokerRecord.BrokerFeature(name=name, min_supported_version=lo, max_supported_version=hi)

    # ------------------------------------------------------------------ heartbeats
    def heartbeat(self, q: w.BrokerHeartbeatRequest, now_ms: int) -> ControllerResult[BrokerHeartbeatReply]:
        """QuorumController.processBrokerHeartbeat + ReplicationControlManager.processBrokerHeartbeat."""
        ctl = self.ctl
        broker_id = q.broker_id
        register_offset = ctl.view.register_offsets.get(broker_id)
        if register_offset is None:
            raise ApiError(Errors.STALE_BROKER_EPOCH, f"Receive a heartbeat from broker {broker_id} before registration")
        ctl.check_broker_epoch(broker_id, q.broker_epoch)
        hb = ctl.heartbeats
        if broker_id not in hb.brokers:  # registered before this controller's view was built
            hb.register(broker_id, ctl.view.broker(broker_id).fenced, now_ms)  # type: ignore[union-attr]
        cur, nxt = hb.next_state(broker_id, q.want_fence, q.want_shut_down, q.current_metadata_offset,
                                 register_offset, self.replication.has_leaderships(broker_id))
        records: list[Record] = []
        S = BrokerControlState
        if cur != nxt:
            if nxt in (S.FENCED, S.SHUTDOWN_NOW):
                self.replication.broker_fenced(broker_id, records)
            elif nxt is S.UNFENCED:
                self.replication.broker_unfenced(broker_id, q.broker_epoch, records)
            elif nxt is S.CONTROLLED_SHUTDOWN:
                self.replication.broker_in_controlled_shutdown(broker_id, q.broker_epoch, records)
        hb.touch(broker_id, nxt.fenced, q.current_metadata_offset, now_ms)
        mv = ctl.view.mv
        if mv.is_directory_assignment_supported():
            self.replication.directories_offline(broker_id, q.broker_epoch, list(q.offline_log_dirs), records)
        if mv.is_cordoned_log_dirs_supported():  # v2's CordonedLogDirs, null until the broker's RECOVERY
            self.replication.directories_cordoned(broker_id, q.broker_epoch, q.cordoned_log_dirs, records)
        reply = BrokerHeartbeatReply(q.current_metadata_offset >= register_offset, nxt.fenced,
                                     nxt.in_controlled_shutdown, nxt.should_shut_down)
        result = ControllerResult.of(records, reply)
        if nxt.in_controlled_shutdown:
            result.on_offset = lambda offset: hb.maybe_update_controlled_shutdown_offset(broker_id, offset)
        return result

    def maybe_fence_one_stale_broker(self, now_ms: int) -> ControllerResult[None]:
        records: list[Record] = []
        stale = self.ctl.heartbeats.find_one_stale_broker(now_ms)
        if stale is not None:
            self.ctl.log(f"Fencing broker {stale} because its session has timed out.")
            self.replication.broker_fenced(stale, records)
            self.ctl.heartbeats.fence(stale)
        return ControllerResult.of(records, None)

    def unregister_broker(self, broker_id: int) -> ControllerResult[None]:
        reg = self.ctl.view.broker(broker_id)
        if reg is None:
            raise ApiError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
        records: list[Record] = []
        self.replication.broker_unregistered(broker_id, int(reg.broker_epoch), records)
        return ControllerResult.of(records, None)
