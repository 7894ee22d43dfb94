"""Topics, partitions, leaders and ISRs: Kafka's ReplicationControlManager.

Every decision reads the controller's view (the image at the end of its log) and returns
records; nothing here changes the view -- the records do, once the shell has appended them.

* **CreateTopics**: names checked as ``Topic.validate`` and for collisions of '.' and '_';
  partitions placed by :mod:`kraftnode.controller.placement` (or given by the request), the
  ISR being the replicas that are active, the first of them the leader; topic configs checked
  as the configuration manager checks them and written as ConfigRecords between the TopicRecord
  and its PartitionRecords; the answer lists the topic's effective configs when the caller may
  describe them. One atomic batch for the whole request.
* **Broker heartbeats** (``ReplicationControl.process_broker_heartbeat``), the stale-session
  fencing and unregistration, as Kafka's ReplicationControlManager serves them; replication
  control depends on cluster control (``controller/cluster.py``), never the other way round.
* **Fencing / unfencing / controlled shutdown / unregistration** of a broker: every partition
  whose ISR holds it loses it from the ISR and, if it led, gets a new leader (an ONLINE election,
  UNCLEAN where the topic allows it); an unfenced broker may lead the leaderless partitions whose
  ISR holds it.
* **AlterPartition** (a leader's ISR change), **ElectLeaders**, **reassignments**, **directory
  assignments**, **preferred leader balancing** and **unclean elections** go through
  :class:`~kraftnode.controller.partition_change.PartitionChangeBuilder`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kraftnode.controller.cluster import BrokerHeartbeatReply
from kraftnode.controller.configs import ConfigurationControl
from kraftnode.controller.context import ControllerContext
from kraftnode.controller.elr import (
    MIN_INSYNC_REPLICAS,
    effective_min_isr,
    elr_enabled,
    elr_supported,
    partition_record_version,
)
from kraftnode.controller.errors import ApiError
from kraftnode.controller.heartbeats import BrokerControlState
from kraftnode.controller.partition_change import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChangeBuilder,
    has_preferred_leader,
    reassignment_in_progress,
    replica_directory,
)
from kraftnode.controller.placement import InvalidReplicationFactor, UsableBroker, place
from kraftnode.controller.result import ControllerResult, Record
from kraftnode.controller.topic_names import topic_name_error
from kraftnode.controller.view import has_uncordoned_dirs
from kraftnode.metadata.image import merge_partition
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from recordbatch.wire import uuid_to_base64

__all__ = ["ReplicationControl", "topic_name_error"]

FENCE, UNFENCE = 1, -1
IN_CONTROLLED_SHUTDOWN = 1
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1


class ReplicationControl:
    def __init__(self, ctl: ControllerContext, configs: ConfigurationControl) -> None:
        self.ctl = ctl
        self.configs = configs
        #: what the topics of the CreateTopics request being decided share (None between requests)
        self._memo: dict[Any, Any] | None = None

    @property
    def view(self) -> Any:
        return self.ctl.view

    # ------------------------------------------------------------------ helpers
    def _acceptor(self, part: PartitionRecord,
                  acceptable: Callable[[int], bool] | None = None) -> Callable[[int], bool]:
        """LeaderAcceptor: an acceptable broker whose directory for the partition is online."""
        view = self.view
        ok = acceptable or view.is_active

        def test(broker: int) -> bool:
            if not ok(broker):
                return False
            d = replica_directory(part, broker)
            return d is not None and view.has_online_dir(broker, d)
        return test

    def _builder(self, part: PartitionRecord, topic_id: uuid.UUID, pid: int,
                 acceptable: Callable[[int], bool] | None = None) -> PartitionChangeBuilder:
        b = PartitionChangeBuilder(part, topic_id, pid, self._acceptor(part, acceptable), self.view.mv,
                                   self.effective_min_isr(topic_id), self.elr_enabled())
        b.set_default_dir_provider(self.view.default_dir)
        return b

    def elr_enabled(self) -> bool:
        """FeatureControlManager.isElrFeatureEnabled (KIP-966)."""
        return elr_enabled(self.view.image.features)

    def effective_min_isr(self, topic_id: uuid.UUID) -> int:
        """getTopicEffectiveMinIsr: min(min.insync.replicas, the replication factor of partition 0)."""
        name = self.view.topic_name(topic_id) or ""
        first = self.view.partition(topic_id, 0)
        rf = len(first.replicas) if first is not None else 0
        return effective_min_isr(self.configs.topic_config(name, MIN_INSYNC_REPLICAS), rf)

    def _partitions_with_elr_member(self, broker_id: int) -> list[tuple[uuid.UUID, int, PartitionRecord]]:
        """BrokersToElrs.partitionsWithBrokerInElr (a walk: only registrations need it)."""
        return [(t, i, p) for t, i, p in self.view.all_partitions() if broker_id in (p.eligible_leader_replicas or [])]

    def unclean_enabled(self, topic: str) -> bool:
        value = self.configs.topic_config(topic, "unclean.leader.election.enable")
        return value is not None and value.strip().lower() == "true"

    def has_leaderships(self, broker_id: int) -> bool:
        return bool(self.view.indexes.leads.get(broker_id, 0) > 0)

    def _partitions(self, keys: Iterable[tuple[uuid.UUID, int]]) -> list[tuple[uuid.UUID, int, PartitionRecord]]:
        """The partitions of index keys, in the image's order."""
        view = self.view
        return [(t, i, view.partition(t, i)) for t, i in view.indexes.in_order(keys)]

    def _partitions_with_isr_member(self, broker_id: int) -> list[tuple[uuid.UUID, int, PartitionRecord]]:
        return self._partitions(self.view.indexes.isr_members.get(broker_id, ()))

    def _leaderless(self) -> list[tuple[uuid.UUID, int, PartitionRecord]]:
        return self._partitions(self.view.indexes.leaderless)

    def imbalanced(self) -> bool:
        return bool(self.view.indexes.imbalanced)

    def some_leaderless(self) -> bool:
        return bool(self.view.indexes.leaderless)

    def generate_leader_and_isr_updates(self, context: str, remove: int, add: int,
                                        parts: Iterable[tuple[uuid.UUID, int, PartitionRecord]],
                                        records: list[Record], unclean_shutdown: int = NO_LEADER) -> None:
        """ReplicationControlManager.generateLeaderAndIsrUpdates: drop ``remove`` from each ISR
        and from leadership; ``add`` may lead even though the view still has it fenced;
        ``unclean_shutdown`` leaves ISR, ELR and leadership (KIP-966)."""
        view = self.view
        before = len(records)

        def acceptable(r: int) -> bool:
            return r not in (remove, unclean_shutdown) and (r == add or view.is_active(r))
        for tid, pid, part in parts:
            name = view.topic_name(tid) or ""
            b = self._builder(part, tid, pid, acceptable)
            if self.unclean_enabled(name):
                b.set_election(Election.UNCLEAN)
            if unclean_shutdown != NO_LEADER:
                b.set_unclean_shutdown_replicas([unclean_shutdown])
            b.set_target_isr([r for r in part.isr if r not in (remove, unclean_shutdown)])
            rec = b.build()
            if rec is not None:
                records.append(rec)
        if len(records) != before:
            self.ctl.log(f"{context}: changing {len(records) - before} partition(s)")

    # ------------------------------------------------------------------ broker state changes
    def broker_fenced(self, broker_id: int, records: list[Record]) -> None:
        reg = self.view.broker(broker_id)
        if reg is None:
            raise RuntimeError(f"Can't find broker registration for broker {broker_id}")
        self.generate_leader_and_isr_updates("handleBrokerFenced", broker_id, NO_LEADER,
                                             self._partitions_with_isr_member(broker_id), records)
        if self.view.mv.is_broker_registration_change_record_supported():
            records.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=reg.broker_epoch,
                                                           fenced=FENCE), 0))
        else:
            records.append((FenceBrokerRecord(id=broker_id, epoch=reg.broker_epoch), 0))

    def broker_unfenced(self, broker_id: int, broker_epoch: int, records: list[Record]) -> None:
        if self.view.mv.is_broker_registration_change_record_supported():
            records.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                           fenced=UNFENCE), 0))
        else:
            records.append((UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch), 0))
        self.generate_leader_and_isr_updates("handleBrokerUnfenced", NO_LEADER, broker_id,
                                             self._leaderless(), records)

    def broker_in_controlled_shutdown(self, broker_id: int, broker_epoch: int, records: list[Record]) -> None:
        reg = self.view.broker(broker_id)
        if self.view.mv.is_in_controlled_shutdown_state_supported() and not (reg and reg.in_controlled_shutdown):
            records.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                           in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN), 1))
        self.generate_leader_and_isr_updates(f"enterControlledShutdown[{broker_id}]", broker_id, NO_LEADER,
                                             self._partitions_with_isr_member(broker_id), records)

    def broker_unregistered(self, broker_id: int, broker_epoch: int, records: list[Record]) -> None:
        self.generate_leader_and_isr_updates("handleBrokerUnregistered", broker_id, NO_LEADER,
                                             self._partitions_with_isr_member(broker_id), records)
        self.generate_leader_and_isr_updates("handleBrokerUnregistered", broker_id, NO_LEADER,
                                             self._partitions_with_elr_member(broker_id), records)
        records.append((UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker_epoch), 0))

    def broker_shutdown(self, broker_id: int, clean: bool, records: list[Record]) -> None:
        """handleBrokerShutdown: a new incarnation of a broker registers. When it did not shut
        down cleanly (ELR enabled) it leaves every ISR and ELR it was in (its log may be
        truncated); otherwise it leaves the ISRs."""
        if self.elr_enabled() and not clean:
            self.generate_leader_and_isr_updates("handleBrokerUncleanShutdown", NO_LEADER, NO_LEADER,
                                                 self._partitions_with_isr_member(broker_id), records,
                                                 unclean_shutdown=broker_id)
            self.generate_leader_and_isr_updates("handleBrokerUncleanShutdown", NO_LEADER, NO_LEADER,
                                                 self._partitions_with_elr_member(broker_id), records,
                                                 unclean_shutdown=broker_id)
        else:
            self.generate_leader_and_isr_updates("handleBrokerShutdown", broker_id, NO_LEADER,
                                                 self._partitions_with_isr_member(broker_id), records)

    def directories_offline(self, broker_id: int, broker_epoch: int, offline: list[uuid.UUID],
                            records: list[Record]) -> None:
        """handleDirectoriesOffline: partitions in newly offline directories lose this broker."""
        reg = self.view.broker(broker_id)
        if reg is None:
            return
        dirs = list(reg.log_dirs or [])
        newly = [d for d in dirs if d in offline]
        if not newly:
            return
        for d in newly:
            parts = [(t, i, p) for t, i, p in self.view.all_partitions() if replica_directory(p, broker_id) == d]
            self.generate_leader_and_isr_updates(f"handleDirectoriesOffline[{broker_id}:{d}]", broker_id,
                                                 NO_LEADER, parts, records)
        online = [d for d in dirs if d not in offline]
        records.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                       log_dirs=online), 2))
        self.ctl.log(f"Directories {newly} in broker {broker_id} marked offline, remaining directories: {online}")

    def directories_cordoned(self, broker_id: int, broker_epoch: int, cordoned: list[uuid.UUID] | None,
                             records: list[Record]) -> None:
        """handleDirectoriesCordoned (KIP-1066, Kafka 4.3+): a heartbeat's CordonedLogDirs (null
        before the broker's RECOVERY state: nothing to say) that differ, as a set, from the
        registration's -- or that the registration has never had -- are written into it
        (BrokerRegistrationChangeRecord v3)."""
        if cordoned is None:
            return
        reg = self.view.broker(broker_id)
        if reg is None:
            return
        if reg.cordoned_log_dirs is not None and set(reg.cordoned_log_dirs) == set(cordoned):
            return
        records.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                       cordoned_log_dirs=list(cordoned)), 3))
        if cordoned:  # Kafka logs this at DEBUG; an empty list (the first after registering) goes unsaid
            names = ", ".join(uuid_to_base64(d) for d in cordoned)
            self.ctl.log(f"Directories [{names}] in broker {broker_id} marked cordoned")

    # ------------------------------------------------------------------ topics
    def create_topics(self, q: w.CreateTopicsRequest, describable: set[str]) -> ControllerResult[Any]:
        """ReplicationControlManager.createTopics (the request holds only topics the caller may
        create, without duplicates: ControllerApis filters those)."""
        view = self.view
        errors: dict[str, ApiError] = {}
        for t in q.topics:
            if t.name in errors:
                continue
            why = topic_name_error(t.name)
            if why is not None:
                errors[t.name] = ApiError(Errors.INVALID_TOPIC_EXCEPTION, why)
            collides = view.indexes.colliding_with(t.name) if "." in t.name or "_" in t.name else None
            if collides is not None:
                errors[t.name] = ApiError(Errors.INVALID_TOPIC_EXCEPTION,
                                          f"Topic '{t.name}' collides with existing topic: {collides}")
        for t in q.topics:
            if t.name in view.topics_by_name:
                errors[t.name] = ApiError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        config_changes: dict[str, dict[str, str]] = {}
        for t in q.topics:
            if t.name in errors:
                continue
            nulls = [c.name for c in t.configs if c.value is None]
            if nulls:
                errors[t.name] = ApiError(Errors.INVALID_CONFIG,
                                          "Null value not supported for topic configs: " + ",".join(nulls))
            elif t.configs:
                config_changes[t.name] = {c.name: str(c.value) for c in t.configs}
        records: list[Record] = []
        successes: dict[str, Any] = {}
        # what every topic of the request asks of the same state: computed once per request
        self._memo = {}
        try:
            self._create_all(q, errors, config_changes, records, successes, describable)
        finally:
            self._memo = None
        R = w.CreateTopicsResponse
        out = R(topics=[])
        summary = []
        for t in q.topics:
            err = errors.get(t.name)
            if err is not None:
                out.topics.append(R.CreatableTopicResult(name=t.name, error_code=err.code, error_message=err.message))
                summary.append(f"{t.name}: {Errors(err.code).name} ({err.message})")
            else:
                out.topics.append(successes[t.name])
                summary.append(f"{t.name}: SUCCESS")
        self.ctl.log(("Validate-only CreateTopics result(s): " if q.validate_only else "CreateTopics result(s): ")
                     + ", ".join(summary))
        return ControllerResult.atomic_of([] if q.validate_only else records, out)

    def _create_all(self, q: w.CreateTopicsRequest, errors: dict[str, ApiError], config_changes: dict[str, dict[str, str]],
                    records: list[Record], successes: dict[str, Any], describable: set[str]) -> None:
        for t in q.topics:
            if t.name in errors:
                continue
            config_records: list[Record] = []
            if t.name in config_changes:
                err, config_records = self.configs.topic_config_records(t.name, config_changes[t.name])
                if err is not None:
                    errors[t.name] = err
                    continue
            try:
                self._create_topic(t, records, successes, config_records, t.name in describable)
            except ApiError as e:
                errors[t.name] = ApiError.from_throwable(e)

    def _create_topic(self, t: Any, records: list[Record], successes: dict[str, Any],
                      config_records: list[Record], describable: bool) -> None:
        view = self.view
        cfg = self.ctl.config
        new_parts: dict[int, tuple[list[int], list[int]]] = {}
        if t.assignments:
            if t.replication_factor != -1:
                raise ApiError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                       "replication factor was not set to -1.")
            if t.num_partitions != -1:
                raise ApiError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                       "numPartitions was not set to -1.")
            rf: int | None = None
            for a in t.assignments:
                if a.partition_index in new_parts:
                    raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                   f"Found multiple manual partition assignments for partition {a.partition_index}")
                self.validate_manual_assignment(list(a.broker_ids), rf)
                rf = len(a.broker_ids)
                isr = [b for b in a.broker_ids if view.is_active(b)]
                if not isr:
                    raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                   f"All brokers specified in the manual partition assignment for partition "
                                   f"{a.partition_index} are fenced or in controlled shutdown.")
                new_parts[a.partition_index] = (list(a.broker_ids), isr)
            for i in range(len(new_parts)):
                if i not in new_parts:
                    raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                   "partitions should be a consecutive 0-based integer sequence")
        elif t.replication_factor < -1 or t.replication_factor == 0:
            raise ApiError(Errors.INVALID_REPLICATION_FACTOR,
                           "Replication factor must be larger than 0, or -1 to use the default value.")
        elif t.num_partitions < -1 or t.num_partitions == 0:
            raise ApiError(Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        else:
            num = cfg.num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = cfg.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            try:
                assignments = place(self.ctl.rng, self._usable(), 0, num, rf)
            except InvalidReplicationFactor as e:
                raise ApiError(Errors.INVALID_REPLICATION_FACTOR,
                               f"Unable to replicate the partition {rf} time(s): {e.message}") from None
            for pid, replicas in enumerate(assignments):
                isr = [b for b in replicas if view.is_active(b)]
                if not isr:
                    raise ApiError(Errors.INVALID_REPLICATION_FACTOR,
                                   f"Unable to replicate the partition {rf} time(s): All brokers are currently "
                                   f"fenced or in controlled shutdown.")
                new_parts[pid] = (replicas, isr)
        topic_id = self.ctl.new_uuid()
        R = w.CreateTopicsResponse
        result = R.CreatableTopicResult(name=t.name, topic_id=topic_id, error_code=0, error_message=None)
        if describable:
            result.configs = list(self._result_configs({c.name: c.value for c in t.configs}))
            result.num_partitions = len(new_parts)
            result.replication_factor = len(next(iter(new_parts.values()))[0])
            result.topic_config_error_code = 0
        else:
            result.topic_config_error_code = Errors.TOPIC_AUTHORIZATION_FAILED
        successes[t.name] = result
        records.append((TopicRecord(name=t.name, topic_id=topic_id), 0))
        records.extend(config_records)
        for pid in sorted(new_parts):
            replicas, isr = new_parts[pid]
            records.append(self.partition_record(topic_id, pid, replicas, isr))

    def partition_record(self, topic_id: uuid.UUID, pid: int, replicas: list[int], isr: list[int]) -> Record:
        """PartitionRegistration.toRecord of a new partition (PartitionAssignment's default dirs)."""
        memo = self._memo
        got = memo.get("record") if memo is not None else None
        if got is None:   # what the metadata.version says of a new partition's record
            mv = self.view.mv
            got = (mv.is_directory_assignment_supported(), elr_supported(mv.level), partition_record_version(mv))
            if memo is not None:
                memo["record"] = got
        dirs, elr, version = got
        rec = PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=list(replicas), isr=list(isr),
                              removing_replicas=[], adding_replicas=[], leader=isr[0],
                              leader_recovery_state=RECOVERED, leader_epoch=0, partition_epoch=0)
        if dirs:
            rec.directories = [self._default_dir(b) for b in replicas]
        if elr:  # PartitionRegistration.toRecord: the (empty) ELR fields
            rec.eligible_leader_replicas = []
            rec.last_known_elr = []
        return rec, version

    def _default_dir(self, broker: int) -> uuid.UUID:
        """The view's default directory of ``broker``, once per broker in a CreateTopics request."""
        memo = self._memo
        if memo is None:
            return self.view.default_dir(broker)  # type: ignore[no-any-return]
        key = ("dir", broker)
        got = memo.get(key)
        if got is None:
            got = memo[key] = self.view.default_dir(broker)
        return got  # type: ignore[no-any-return]

    def _usable(self) -> list[UsableBroker]:
        """:meth:`usable_brokers`, once per CreateTopics request."""
        memo = self._memo
        if memo is None:
            return self.usable_brokers()
        got = memo.get("usable")
        if got is None:
            got = memo["usable"] = self.usable_brokers()
        return list(got)

    def _result_configs(self, creation: dict[str, str]) -> list[Any]:
        """The configs a created topic's result lists (Kafka's CreatableTopicConfigs), once per
        distinct set of creation configs in a CreateTopics request."""
        memo = self._memo
        key = ("configs", tuple(sorted(creation.items())))
        got = memo.get(key) if memo is not None else None
        if got is None:
            R = w.CreateTopicsResponse
            effective = self.configs.effective_topic_configs(creation)
            got = [R.CreatableTopicConfigs(name=e.name, value=e.value, read_only=False, config_source=e.source,
                                           is_sensitive=False)
                   for e in sorted(effective.values(), key=lambda e: e.name)]
            if memo is not None:
                memo[key] = got
        return got

    def usable_brokers(self) -> list[UsableBroker]:
        """ClusterControlManager.usableBrokers (Kafka 4.4): every broker not in controlled
        shutdown that has a directory not cordoned (KIP-1066)."""
        view = self.view
        out = []
        for bid, fenced in self.ctl.heartbeats.usable_brokers():
            reg = view.broker(bid)
            if reg is not None and has_uncordoned_dirs(reg):
                out.append(UsableBroker(bid, reg.rack, fenced))
        return out

    def validate_manual_assignment(self, replicas: list[int], rf: int | None) -> None:
        if not replicas:
            raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                           "The manual partition assignment includes an empty replica list.")
        prev = None
        for b in sorted(replicas):
            reg = self.view.broker(b)
            if reg is None:
                raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                                                  f"broker {b}, but no such broker is registered.")
            if not has_uncordoned_dirs(reg):
                raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                                                  f"broker {b}, but all its log directories are "
                                                                  f"cordoned.")
            if b == prev:
                raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the "
                                                                  f"broker {prev} more than once.")
            prev = b
        if rf is not None and len(replicas) != rf:
            raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                           f"but this is not consistent with previous partitions, which have {rf} replica(s).")

    def delete_topics(self, ids: Iterable[uuid.UUID]) -> ControllerResult[dict[uuid.UUID, ApiError]]:
        records: list[Record] = []
        results: dict[uuid.UUID, ApiError] = {}
        for tid in ids:
            if tid not in self.view.image.topics:
                results[tid] = ApiError.from_throwable(ApiError(Errors.UNKNOWN_TOPIC_ID))
                continue
            records.append((RemoveTopicRecord(topic_id=tid), 0))
            results[tid] = ApiError(Errors.NONE, None)
        return ControllerResult.atomic_of(records, results)

    def create_partitions(self, topics: list[Any]) -> ControllerResult[list[Any]]:
        R = w.CreatePartitionsResponse
        records: list[Record] = []
        results = []
        for t in topics:
            err = ApiError(Errors.NONE, None)
            try:
                self._create_partitions(t, records)
            except ApiError as e:
                err = ApiError.from_throwable(e)
            results.append(R.CreatePartitionsTopicResult(name=t.name, error_code=err.code, error_message=err.message))
        return ControllerResult.atomic_of(records, results)

    def _create_partitions(self, t: Any, records: list[Record]) -> None:
        view = self.view
        tid = view.topic_id(t.name)
        if tid is None:
            raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        parts = view.partitions(tid)
        # this request's earlier records (other topics) do not touch this topic
        if t.count == len(parts):
            raise ApiError(Errors.INVALID_PARTITIONS, f"Topic already has {len(parts)} partition(s).")
        if t.count < len(parts):
            raise ApiError(Errors.INVALID_PARTITIONS, f"The topic {t.name} currently has {len(parts)} partition(s); "
                                                      f"{t.count} would not be an increase.")
        additional = t.count - len(parts)
        if t.assignments is not None and len(t.assignments) != additional:
            raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {additional} additional "
                                                              f"partition(s), but only {len(t.assignments)} "
                                                              f"assignment(s) were specified.")
        if not parts:
            raise ApiError(Errors.UNKNOWN_SERVER_ERROR, f"Invalid state: topic {t.name} appears to have no partitions.")
        rf = len(next(iter(parts.values())).replicas)
        start = len(parts)
        if t.assignments is not None:
            assignments = []
            for i, a in enumerate(t.assignments):
                replicas = list(a.broker_ids)
                self.validate_manual_assignment(replicas, rf)
                if not any(view.is_active(b) for b in replicas):
                    raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                   f"All brokers specified in the manual partition assignment for partition "
                                   f"{start + i} are fenced or in controlled shutdown.")
                assignments.append(replicas)
        else:
            try:
                assignments = place(self.ctl.rng, self.usable_brokers(), start, additional, rf)
            except InvalidReplicationFactor as e:
                raise ApiError(Errors.INVALID_REPLICATION_FACTOR, e.message) from None
        for i, replicas in enumerate(assignments):
            isr = [b for b in replicas if view.is_active(b)]
            if not isr:
                raise ApiError(Errors.INVALID_REPLICATION_FACTOR,
                               f"Unable to replicate the partition {rf} time(s): All brokers are currently fenced "
                               f"or in controlled shutdown.")
            records.append(self.partition_record(tid, start + i, replicas, isr))

    # ------------------------------------------------------------------ AlterPartition
    def alter_partition(self, q: w.AlterPartitionRequest, version: int) -> ControllerResult[Any]:
        view = self.view
        self.ctl.check_broker_epoch(q.broker_id, q.broker_epoch)
        R = w.AlterPartitionResponse
        resp = R(error_code=0, topics=[])
        records: list[Record] = []
        for td in q.topics:
            # v2+ only (KIP-896 removed v0-1 in Kafka 4.0): topics are named by id
            rt = R.TopicData(topic_id=td.topic_id, partitions=[])
            resp.topics.append(rt)
            tid = td.topic_id
            if tid.int == 0 or tid not in view.image.topics:
                code = Errors.UNKNOWN_TOPIC_ID
                rt.partitions.extend(R.PartitionData(partition_index=pd.partition_index, error_code=code)
                                     for pd in td.partitions)
                continue
            name = view.topic_name(tid)
            for pd in td.partitions:
                if version < 3:
                    new_isr = [(b, -1) for b in pd.new_isr]
                else:
                    new_isr = [(s.broker_id, s.broker_epoch) for s in pd.new_isr_with_epochs]
                part = view.partition(tid, pd.partition_index)
                err = self._validate_alter_partition(q.broker_id, part, version, pd, new_isr)
                if err != Errors.NONE:
                    rt.partitions.append(R.PartitionData(partition_index=pd.partition_index, error_code=err))
                    continue
                assert part is not None
                b = self._builder(part, tid, pd.partition_index)
                if self.unclean_enabled(name or ""):
                    b.set_election(Election.UNCLEAN)
                b.set_target_isr([x for x, _e in new_isr]).set_target_leader_recovery_state(pd.leader_recovery_state)
                rec = b.build()
                if rec is not None:
                    records.append(rec)
                    change = rec[0]
                    part = _merged(part, change)
                    if change.leader not in (q.broker_id, NO_LEADER_CHANGE):
                        # v2+ (v0-1, which got FENCED_LEADER_EPOCH, were removed in Kafka 4.0)
                        rt.partitions.append(R.PartitionData(partition_index=pd.partition_index,
                                                             error_code=Errors.NEW_LEADER_ELECTED))
                        continue
                rt.partitions.append(R.PartitionData(
                    partition_index=pd.partition_index, error_code=0, leader_id=part.leader, isr=list(part.isr),
                    leader_recovery_state=part.leader_recovery_state, leader_epoch=part.leader_epoch,
                    partition_epoch=part.partition_epoch))
        return ControllerResult.of(records, resp)

    def _validate_alter_partition(self, broker_id: int, part: PartitionRecord | None, version: int, pd: Any,
                                  new_isr: list[tuple[int, int]]) -> int:
        if part is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if pd.leader_epoch > part.leader_epoch or pd.partition_epoch > part.partition_epoch:
            return Errors.NOT_CONTROLLER
        if pd.leader_epoch < part.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if broker_id != part.leader:
            return Errors.INVALID_REQUEST
        if pd.partition_epoch < part.partition_epoch:
            return Errors.INVALID_UPDATE_VERSION
        ids = [b for b, _e in new_isr]
        if len(set(ids)) != len(ids) or not set(ids) <= set(part.replicas):
            return Errors.INVALID_REQUEST  # Replicas.validateIsr
        if part.leader not in ids:
            return Errors.INVALID_REQUEST
        if pd.leader_recovery_state == RECOVERING and len(ids) > 1:
            return Errors.INVALID_REQUEST
        if part.leader_recovery_state == RECOVERED and pd.leader_recovery_state == RECOVERING:
            return Errors.INVALID_REQUEST
        for b, epoch in new_isr:
            reg = self.view.broker(b)
            if reg is None or reg.in_controlled_shutdown or reg.fenced or (epoch != -1 and reg.broker_epoch != epoch):
                return Errors.INELIGIBLE_REPLICA  # v2+ (v0-1's OPERATION_NOT_ATTEMPTED: removed in 4.0)
        return Errors.NONE

    # ------------------------------------------------------------------ elections
    def elect_leaders(self, q: w.ElectLeadersRequest) -> ControllerResult[Any]:
        R = w.ElectLeadersResponse
        if q.election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            raise ApiError(Errors.INVALID_REQUEST, f"Unknown election type {q.election_type}")
        records: list[Record] = []
        resp = R(error_code=0, replica_election_results=[])
        if q.topic_partitions is None:
            for name, tid in self.view.topics_by_name.items():
                tr = R.ReplicaElectionResult(topic=name, partition_result=[])
                resp.replica_election_results.append(tr)
                for pid in self.view.partitions(tid):
                    err = self.elect_leader(name, pid, q.election_type, records)
                    if err.code != Errors.ELECTION_NOT_NEEDED:
                        tr.partition_result.append(R.PartitionResult(partition_id=pid, error_code=err.code,
                                                                     error_message=err.message))
        else:
            for t in q.topic_partitions:
                tr = R.ReplicaElectionResult(topic=t.topic, partition_result=[])
                resp.replica_election_results.append(tr)
                for pid in t.partitions:
                    err = self.elect_leader(t.topic, pid, q.election_type, records)
                    tr.partition_result.append(R.PartitionResult(partition_id=pid, error_code=err.code,
                                                                 error_message=err.message))
        return ControllerResult.of(records, resp)

    def elect_leader(self, topic: str, pid: int, election_type: int, records: list[Record]) -> ApiError:
        view = self.view
        tid = view.topic_id(topic)
        if tid is None:
            return ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}")
        part = view.partition(tid, pid)
        if part is None:
            return ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{pid}")
        if (election_type == ELECTION_PREFERRED and has_preferred_leader(part)) or \
                (election_type == ELECTION_UNCLEAN and part.leader != NO_LEADER):
            return ApiError(Errors.ELECTION_NOT_NEEDED)
        b = self._builder(part, tid, pid)
        b.set_election(Election.UNCLEAN if election_type == ELECTION_UNCLEAN else Election.PREFERRED)
        rec = b.build()
        if rec is None:
            return ApiError(Errors.PREFERRED_LEADER_NOT_AVAILABLE if election_type == ELECTION_PREFERRED
                            else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        records.append(rec)
        return ApiError(Errors.NONE, None)

    def maybe_balance_partition_leaders(self) -> ControllerResult[bool]:
        """Preferred elections for partitions not led by their first replica (at most
        ``max_elections_per_imbalance``); the answer says whether more may remain."""
        limit = self.ctl.config.max_elections_per_imbalance
        records: list[Record] = []
        for tid, pid, part in self._partitions(self.view.indexes.imbalanced):
            if len(records) >= limit:
                break
            rec = self._builder(part, tid, pid).set_election(Election.PREFERRED).build()
            if rec is not None:
                records.append(rec)
        return ControllerResult.of(records, len(records) >= limit)

    def maybe_elect_unclean_leaders(self) -> ControllerResult[bool]:
        limit = self.ctl.config.max_elections_per_imbalance
        records: list[Record] = []
        for tid, pid, _part in self._leaderless():
            if len(records) >= limit:
                break
            name = self.view.topic_name(tid) or ""
            if self.unclean_enabled(name):
                err = self.elect_leader(name, pid, ELECTION_UNCLEAN, records)
                if err.code == Errors.NONE:
                    self.ctl.log(f"Triggering unclean leader election for offline partition {name}-{pid}.")
        return ControllerResult.of(records, len(records) >= limit)

    # ------------------------------------------------------------------ reassignments
    def alter_partition_reassignments(self, q: w.AlterPartitionReassignmentsRequest) -> ControllerResult[Any]:
        R = w.AlterPartitionReassignmentsResponse
        records: list[Record] = []
        # v1 (KIP-860, Kafka 4.4): AllowReplicationFactorChange, echoed in the answer; a v0
        # request decodes with its default, true, so v0 keeps its meaning
        allow_rf_change = q.allow_replication_factor_change
        resp = R(error_code=0, error_message=None, responses=[],
                 allow_replication_factor_change=allow_rf_change)
        for t in q.topics:
            tr = R.ReassignableTopicResponse(name=t.name, partitions=[])
            for p in t.partitions:
                err = ApiError(Errors.NONE, None)
                try:
                    self._alter_reassignment(t.name, p, records, allow_rf_change)
                except ApiError as e:
                    err = ApiError.from_throwable(e)
                tr.partitions.append(R.ReassignablePartitionResponse(partition_index=p.partition_index,
                                                                     error_code=err.code, error_message=err.message))
            resp.responses.append(tr)
        return ControllerResult.atomic_of(records, resp)

    def _alter_reassignment(self, topic: str, target: Any, records: list[Record],
                            allow_rf_change: bool = True) -> None:
        view = self.view
        tid = view.topic_id(topic)
        if tid is None:
            raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
        part = view.partition(tid, target.partition_index)
        if part is None:
            raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                           f"Unable to find partition {topic}:{target.partition_index}.")
        if target.replicas is None:
            rec = self._cancel_reassignment(topic, tid, target.partition_index, part)
        else:
            rec = self._change_reassignment(tid, target.partition_index, part, list(target.replicas),
                                            allow_rf_change)
        if rec is not None:
            records.append(rec)

    @staticmethod
    def _validate_replication_factor_unchanged(part: PartitionRecord, target: list[int]) -> None:
        """ReplicationControlManager.validatePartitionReplicationFactorUnchanged (KIP-860): the
        current replication factor is the target of a reassignment in progress (replicas and
        adding replicas, less the removing ones), else the replica count."""
        if reassignment_in_progress(part):
            current = (set(part.replicas) | set(part.adding_replicas)) - set(part.removing_replicas)
            size = len(current)
        else:
            size = len(part.replicas)
        if size != len(target):
            raise ApiError(Errors.INVALID_REPLICATION_FACTOR,
                           f"The replication factor is changed from {size} to {len(target)}")

    def _cancel_reassignment(self, topic: str, tid: uuid.UUID, pid: int, part: PartitionRecord) -> Record | None:
        if not reassignment_in_progress(part):
            raise ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
        adding = list(part.adding_replicas)
        replicas = [r for r in part.replicas if r not in adding]
        isr = [r for r in part.isr if r not in adding]
        unclean = False
        if not isr:
            if not replicas:
                raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT,
                               "Invalid replica assignment: addingReplicas contains all replicas.")
            isr = [replicas[0]]
            unclean = True
        if unclean and not self.unclean_enabled(topic):
            raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, f"Unable to revert partition assignment for "
                                                              f"{topic}:{pid} because it would require an unclean "
                                                              f"leader election.")
        b = self._builder(part, tid, pid)
        if self.unclean_enabled(topic):
            b.set_election(Election.UNCLEAN)
        return (b.set_target_isr(isr).set_target_replicas(replicas).set_target_removing([])
                .set_target_adding([]).build())

    def _change_reassignment(self, tid: uuid.UUID, pid: int, part: PartitionRecord,
                             target: list[int], allow_rf_change: bool = True) -> Record | None:
        self.validate_manual_assignment(target, None)
        if not allow_rf_change:
            self._validate_replication_factor_unchanged(part, target)
        current = list(part.replicas)
        removing = sorted(set(current) - set(target))
        adding = sorted(set(target) - set(current))
        replicas = list(target) + removing
        b = self._builder(part, tid, pid)
        if replicas != current:
            b.set_target_replicas(replicas)
        if removing:
            b.set_target_removing(removing)
        if adding:
            b.set_target_adding(adding)
        return b.build()

    def list_partition_reassignments(self, topics: list[Any] | None) -> Any:
        R = w.ListPartitionReassignmentsResponse
        view = self.view
        resp = R(error_code=0, error_message=None, topics=[])
        wanted: list[tuple[uuid.UUID, list[int]]] = []
        if topics is None:
            for tid in view.image.topics:
                parts = view.partitions(tid)
                ids = sorted(p for p, rec in parts.items() if reassignment_in_progress(rec))
                if ids:
                    wanted.append((tid, ids))
        else:
            for t in topics:
                tid = view.topic_id(t.name)
                if tid is not None:
                    wanted.append((tid, list(t.partition_indexes)))
        for tid, ids in wanted:
            ot = R.OngoingTopicReassignment(name=view.topic_name(tid), partitions=[])
            for pid in ids:
                part = view.partition(tid, pid)
                if part is None or not reassignment_in_progress(part):
                    continue
                ot.partitions.append(R.OngoingPartitionReassignment(
                    partition_index=pid, replicas=list(part.replicas), adding_replicas=list(part.adding_replicas),
                    removing_replicas=list(part.removing_replicas)))
            if ot.partitions:
                resp.topics.append(ot)
        return resp

    # ------------------------------------------------------------------ directories
    def assign_replicas_to_dirs(self, q: w.AssignReplicasToDirsRequest) -> ControllerResult[Any]:
        view = self.view
        if not view.mv.is_directory_assignment_supported():
            raise ApiError(Errors.UNSUPPORTED_VERSION, "Directory assignment is not supported yet.")
        broker_id = q.broker_id
        self.ctl.check_broker_epoch(broker_id, q.broker_epoch)
        reg = view.broker(broker_id)
        R = w.AssignReplicasToDirsResponse
        resp = R(error_code=0, directories=[])
        records: list[Record] = []
        offline_parts: list[tuple[uuid.UUID, int, PartitionRecord]] = []
        for d in q.directories:
            offline = not view.has_online_dir(broker_id, d.id)
            rd = R.DirectoryData(id=d.id, topics=[])
            for t in d.topics:
                topic_err = Errors.NONE if t.topic_id in view.image.topics else Errors.UNKNOWN_TOPIC_ID
                rt = R.TopicData(topic_id=t.topic_id, partitions=[])
                for p in t.partitions:
                    err = topic_err
                    if err == Errors.NONE:
                        part = view.partition(t.topic_id, p.partition_index)
                        if part is None:
                            err = Errors.UNKNOWN_TOPIC_OR_PARTITION
                        elif broker_id not in part.replicas:
                            err = Errors.NOT_LEADER_OR_FOLLOWER
                        else:
                            rec = self._builder(part, t.topic_id, p.partition_index).set_directory(broker_id, d.id).build()
                            if rec is not None:
                                records.append(rec)
                            if offline:
                                offline_parts.append((t.topic_id, p.partition_index, part))
                    rt.partitions.append(R.PartitionData(partition_index=p.partition_index, error_code=err))
                rd.topics.append(rt)
            resp.directories.append(rd)
        if offline_parts and reg is not None:
            self.generate_leader_and_isr_updates("offline-dir-assignment", broker_id, NO_LEADER, offline_parts, records)
        return ControllerResult.of(records, resp)

    # ------------------------------------------------------------------ heartbeats
    def process_broker_heartbeat(self, q: w.BrokerHeartbeatRequest, now_ms: int
                                 ) -> ControllerResult[BrokerHeartbeatReply]:
        """QuorumController.processBrokerHeartbeat + ReplicationControlManager.processBrokerHeartbeat.

        A heartbeat carries the broker's replayed metadata offset and its wishes (fence itself,
        shut down). A fenced broker is unfenced once it has replayed its own registration; an
        unfenced one asking to shut down first has its leaderships moved away (controlled
        shutdown) and is told to shut down once every active broker has replayed that change.
        Fencing removes the broker from every ISR and moves its leaderships
        (:meth:`broker_fenced`). From metadata.version 4.3-IV0 a heartbeat's cordoned log
        directories (KIP-1066) go into the registration (BrokerRegistrationChangeRecord v3); a
        broker with all of them cordoned gets no new replicas."""
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
                                 register_offset, self.has_leaderships(broker_id))
        records: list[Record] = []
        S = BrokerControlState
        if cur != nxt:
            if nxt in (S.FENCED, S.SHUTDOWN_NOW):
                self.broker_fenced(broker_id, records)
            elif nxt is S.UNFENCED:
                self.broker_unfenced(broker_id, q.broker_epoch, records)
            elif nxt is S.CONTROLLED_SHUTDOWN:
                self.broker_in_controlled_shutdown(broker_id, q.broker_epoch, records)
        hb.touch(broker_id, nxt.fenced, q.current_metadata_offset, now_ms)
        mv = ctl.view.mv
        if mv.is_directory_assignment_supported():
            self.directories_offline(broker_id, q.broker_epoch, list(q.offline_log_dirs), records)
        if mv.is_cordoned_log_dirs_supported():  # v2's CordonedLogDirs, null until the broker's RECOVERY
            self.directories_cordoned(broker_id, q.broker_epoch, q.cordoned_log_dirs, records)
        reply = BrokerHeartbeatReply(q.current_metadata_offset >= register_offset, nxt.fenced,
                                     nxt.in_controlled_shutdown, nxt.should_shut_down)
        result = ControllerResult.of(records, reply)
        if nxt.in_controlled_shutdown:
            result.on_offset = lambda offset: hb.maybe_update_controlled_shutdown_offset(broker_id, offset)
        return result

    def maybe_fence_one_stale_broker(self, now_ms: int) -> ControllerResult[None]:
        """ReplicationControlManager.maybeFenceOneStaleBroker."""
        records: list[Record] = []
        stale = self.ctl.heartbeats.find_one_stale_broker(now_ms)
        if stale is not None:
            self.ctl.log(f"Fencing broker {stale} because its session has timed out.")
            self.broker_fenced(stale, records)
            self.ctl.heartbeats.fence(stale)
        return ControllerResult.of(records, None)

    def unregister_broker(self, broker_id: int) -> ControllerResult[None]:
        """ReplicationControlManager.unregisterBroker."""
        reg = self.ctl.view.broker(broker_id)
        if reg is None:
            raise ApiError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
        records: list[Record] = []
        self.broker_unregistered(broker_id, int(reg.broker_epoch), records)
        return ControllerResult.of(records, None)


def _merged(part: PartitionRecord, c: Any) -> PartitionRecord:
    """PartitionRegistration.merge, for the answer to an AlterPartition."""
    merged: PartitionRecord = merge_partition(part, c)
    return merged
