"""Broker registrations: Kafka's ClusterControlManager.

* **Registration.** A broker registers with its incarnation id (new on every start), listeners,
  supported feature ranges, log directories and rack. A new incarnation gets a new broker epoch:
  the offset at which its RegisterBrokerRecord batch is written; re-registering the same
  incarnation amends the record and keeps the epoch, fencing and shutdown state. Another
  incarnation is refused (DUPLICATE_BROKER_REGISTRATION) while the registered one's session is
  alive. Every finalized feature level must lie in the broker's range (UNSUPPORTED_VERSION
  otherwise); kraft.version is checked at the quorum's current level.
* **Heartbeats** are replication control's (``controller/replication.py``,
  ``ReplicationControl.process_broker_heartbeat``), as in Kafka, where ReplicationControlManager
  depends on ClusterControlManager and not the other way round: a registration that needs the
  partitions' ISRs changed asks through :class:`BrokerShutdownHandler` (Kafka's
  ``ClusterControlManager.BrokerShutdownHandler``), which replication control implements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kraftnode.controller.context import ControllerContext
from kraftnode.controller.errors import ApiError
from kraftnode.controller.result import ControllerResult, Record
from kraftnode.controller.view import reserved_directory
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import RegisterBrokerRecord

__all__ = ["BrokerHeartbeatReply", "BrokerShutdownHandler", "ClusterControl", "SECURITY_PROTOCOLS"]

SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


@dataclass(frozen=True)
class BrokerHeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


class BrokerShutdownHandler(Protocol):
    """ClusterControlManager.BrokerShutdownHandler: what a new incarnation's registration asks of
    replication control (``ReplicationControl.broker_shutdown``)."""

    def broker_shutdown(self, broker_id: int, clean: bool, records: list[Record]) -> None: ...


class ClusterControl:
    def __init__(self, ctl: ControllerContext, shutdown_handler: BrokerShutdownHandler) -> None:
        self.ctl = ctl
        self.shutdown_handler = shutdown_handler

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
            self._check_directories(broker_id, list(q.log_dirs))
        R = RegisterBrokerRecord
        endpoints: dict[str, Any] = {}
        for x in q.listeners:
            if x.security_protocol not in SECURITY_PROTOCOLS:
                raise ApiError(Errors.UNKNOWN_SERVER_ERROR,
                               f"Unknown security protocol {x.security_protocol} in listener {x.name}")
            endpoints[x.name] = R.BrokerEndpoint(name=x.name, host=x.host, port=x.port,
                                                 security_protocol=x.security_protocol)
        features = self._registration_features(q, kraft_version)
        rec = R(broker_id=broker_id, is_migrating_zk_broker=False, incarnation_id=q.incarnation_id,
                rack=q.rack, end_points=list(endpoints.values()), features=features)
        if mv.is_directory_assignment_supported():
            rec.log_dirs = list(q.log_dirs)
        records: list[Record] = []
        if q.incarnation_id != prev_incarnation:
            clean = (clean_shutdown_detection and existing is not None
                     and int(existing.broker_epoch) == int(getattr(q, "previous_broker_epoch", -1)))
            self.shutdown_handler.broker_shutdown(broker_id, clean, records)
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

    def _check_directories(self, broker_id: int, dirs: list[Any]) -> None:
        """ClusterControlManager.registerBroker's log directory checks (directory assignment)."""
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

    def _registration_features(self, q: w.BrokerRegistrationRequest, kraft_version: int) -> list[Any]:
        """The registration's features, each finalized level checked against the broker's range
        (kraft.version at the quorum's current level; metadata.version assumed [1, 1] when the
        request does not name it; a finalized feature it does not name must be at level 0)."""
        broker_id = q.broker_id
        finalized = dict(self.ctl.view.image.features)
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
        return features

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
