"""Kafka 4.4's ``MetadataImage``: what the committed metadata records say, one attribute per
sub-image, and the order ``MetadataImage.write`` writes it in.

:meth:`MetadataImage.replay` applies one metadata record with the replace/remove semantics
of Kafka's ``MetadataDelta`` (features, brokers and controllers, topics and partitions,
configs, client quotas, producer ids, ACLs, SCRAM credentials, delegation tokens), Kafka 4.4's
records included: ``ClearElrRecord`` (KIP-966), ``UnregisterControllerRecord``, the cordoned
log directories of RegisterBrokerRecord v4 / BrokerRegistrationChangeRecord v3 (KIP-1066);
:meth:`MetadataImage.records` is the image as records, as a snapshot holds it.  Pure data:
:class:`~kraftnode.metadata.state.MetadataState` decides which records reach it (committed,
outside an aborted transaction).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kraftnode.java_order import java_hashmap_order
from kraftnode.metadata.compact import compact_partition, shared_ints, shared_uuids
from kraftnode.protocol.generated.metadata import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UnregisterControllerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)

__all__ = ["MetadataImage", "Versioned", "merge_partition"]

# MetadataVersion 3.4-IV0: ZkMigrationStateRecord is written to images from here on.
METADATA_VERSION_MIGRATION = 8
NO_LEADER_CHANGE = -2
CONFIG_RESOURCE_TOPIC = 2  # ConfigResource.Type.TOPIC
LEADER_RECOVERY_NO_CHANGE = -1
# BrokerRegistrationFencingChange / InControlledShutdownChange as Kafka encodes them
FENCE, UNFENCE = 1, -1
IN_CONTROLLED_SHUTDOWN = 1

Versioned = tuple[Any, int]  # (message, record version)


@dataclass
class MetadataImage:
    """Kafka 3.9's ``MetadataImage``, one attribute per sub-image, values as records."""

    features: dict[str, int] = field(default_factory=dict)   # finalized levels incl. metadata.version
    zk_migration_state: int | None = None
    brokers: dict[int, Versioned] = field(default_factory=dict)       # RegisterBrokerRecord
    controllers: dict[int, Versioned] = field(default_factory=dict)   # RegisterControllerRecord
    topics: dict[Any, Versioned] = field(default_factory=dict)        # topic id -> TopicRecord
    partitions: dict[Any, dict[int, Versioned]] = field(default_factory=dict)  # topic id -> PartitionRecords
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, Versioned]] = field(default_factory=dict)
    next_producer_id: int = -1
    acls: dict[Any, Versioned] = field(default_factory=dict)
    scram: dict[tuple[int, str], Versioned] = field(default_factory=dict)
    delegation_tokens: dict[str, Versioned] = field(default_factory=dict)

    def copy(self) -> MetadataImage:
        """A copy the live image's later changes do not touch (records are replaced, never
        mutated, so copying the containers suffices)."""
        return MetadataImage(
            dict(self.features), self.zk_migration_state, dict(self.brokers), dict(self.controllers),
            dict(self.topics), {t: dict(p) for t, p in self.partitions.items()},
            {k: dict(v) for k, v in self.configs.items()},
            {k: dict(v) for k, v in self.client_quotas.items()}, self.next_producer_id,
            dict(self.acls), dict(self.scram), dict(self.delegation_tokens))

    # ------------------------------------------------------------------ replay
    def replay(self, m: Any, version: int) -> None:
        t = type(m)
        if t is PartitionRecord:  # the most frequent records first
            self._replay_partition(m, version)
        elif t is PartitionChangeRecord:
            self._replay_change(m, version)
        elif isinstance(m, FeatureLevelRecord):
            if m.feature_level == 0 and m.name != "metadata.version":
                self.features.pop(m.name, None)
            else:
                self.features[m.name] = m.feature_level
        elif isinstance(m, ZkMigrationStateRecord):
            self.zk_migration_state = m.zk_migration_state
        elif isinstance(m, RegisterBrokerRecord):
            self.brokers[m.broker_id] = (m, version)
        elif isinstance(m, UnregisterBrokerRecord):
            cur = self.brokers.get(m.broker_id)
            if cur is not None and cur[0].broker_epoch == m.broker_epoch:
                del self.brokers[m.broker_id]
        elif isinstance(m, (FenceBrokerRecord, UnfenceBrokerRecord)):
            self._change_broker(m.id, m.epoch, FENCE if isinstance(m, FenceBrokerRecord) else UNFENCE, 0, None)
        elif isinstance(m, BrokerRegistrationChangeRecord):
            self._change_broker(m.broker_id, m.broker_epoch, m.fenced, m.in_controlled_shutdown,
                                m.log_dirs or None, getattr(m, "cordoned_log_dirs", None))
        elif isinstance(m, RegisterControllerRecord):
            self.controllers[m.controller_id] = (m, version)
        elif isinstance(m, UnregisterControllerRecord):
            self.controllers.pop(m.controller_id, None)
        elif isinstance(m, ClearElrRecord):
            self._clear_elr(m.topic_name)
        elif isinstance(m, TopicRecord):
            self.topics[m.topic_id] = (m, version)
            self.partitions.setdefault(m.topic_id, {})
        elif isinstance(m, RemoveTopicRecord):
            topic = self.topics.pop(m.topic_id, None)
            self.partitions.pop(m.topic_id, None)
            if topic is not None:  # the topic's configs go with it (ConfigurationsDelta.replay)
                self.configs.pop((CONFIG_RESOURCE_TOPIC, topic[0].name), None)
        elif isinstance(m, PartitionRecord):
            self._replay_partition(m, version)
        elif isinstance(m, PartitionChangeRecord):
            self._replay_change(m, version)
        elif isinstance(m, ConfigRecord):
            key = (m.resource_type, m.resource_name)
            if m.value is None:
                cfg = self.configs.get(key)
                if cfg is not None:
                    cfg.pop(m.name, None)
                    if not cfg:
                        del self.configs[key]
            else:
                self.configs.setdefault(key, {})[m.name] = m.value
        elif isinstance(m, ClientQuotaRecord):
            entity = tuple(sorted((e.entity_type, e.entity_name) for e in m.entity))
            if m.remove:
                q = self.client_quotas.get(entity)
                if q is not None:
                    q.pop(m.key, None)
                    if not q:
                        del self.client_quotas[entity]
            else:
                self.client_quotas.setdefault(entity, {})[m.key] = (m, version)
        elif isinstance(m, ProducerIdsRecord):
            self.next_producer_id = m.next_producer_id
        elif isinstance(m, AccessControlEntryRecord):
            self.acls[m.id] = (m, version)
        elif isinstance(m, RemoveAccessControlEntryRecord):
            self.acls.pop(m.id, None)
        elif isinstance(m, UserScramCredentialRecord):
            self.scram[(m.mechanism, m.name)] = (m, version)
        elif isinstance(m, RemoveUserScramCredentialRecord):
            self.scram.pop((m.mechanism, m.name), None)
        elif isinstance(m, DelegationTokenRecord):
            self.delegation_tokens[m.token_id] = (m, version)
        elif isinstance(m, RemoveDelegationTokenRecord):
            self.delegation_tokens.pop(m.token_id, None)
        # NoOpRecord and the transaction markers carry no image state

    def _replay_partition(self, m: PartitionRecord, version: int) -> None:
        # A partition of a topic the image does not hold is dropped: Kafka's TopicsDelta
        # cannot apply it (no TopicImage to build on; its controller never writes one), and
        # a snapshot -- topics with their partitions -- could not carry it, so replaying the
        # log and loading a snapshot of it would disagree once that topic is created.
        topic = self.topics.get(m.topic_id)
        if topic is not None:  # kept compact: lists shared with equal ones, the topic's own id
            self.partitions.setdefault(m.topic_id, {})[m.partition_id] = (
                compact_partition(m, topic[0].topic_id), version)

    def _replay_change(self, m: PartitionChangeRecord, version: int) -> None:
        parts = self.partitions.get(m.topic_id)
        cur = parts.get(m.partition_id) if parts is not None else None
        if parts is not None and cur is not None:
            parts[m.partition_id] = (merge_partition(cur[0], m), max(cur[1], min(version, 2)))

    def _clear_elr(self, topic_name: str) -> None:
        """TopicsDelta.replay(ClearElrRecord): every partition of the named topic (of every
        topic when the name is empty) with an ELR or last-known ELR gets both emptied, as a
        PartitionChangeRecord would (the partition epoch moves). An unknown topic is a fault."""
        if topic_name:
            tid = next((t for t, (rec, _v) in self.topics.items() if rec.name == topic_name), None)
            if tid is None:
                raise ValueError(f"Unable to clear elr for topic with name {topic_name}: no such topic found.")
            ids = [tid]
        else:
            ids = list(self.topics)
        for tid in ids:
            parts = self.partitions.get(tid, {})
            for pid, (p, ver) in list(parts.items()):
                if p.eligible_leader_replicas or p.last_known_elr:
                    change = PartitionChangeRecord(topic_id=tid, partition_id=pid, eligible_leader_replicas=[],
                                                   last_known_elr=[])
                    parts[pid] = (merge_partition(p, change), max(ver, 2))

    def _change_broker(self, broker_id: int, epoch: int, fenced: int, shutdown: int,
                       log_dirs: list[Any] | None, cordoned: list[Any] | None = None) -> None:
        cur = self.brokers.get(broker_id)
        if cur is None or cur[0].broker_epoch != epoch:
            return  # Kafka's ClusterDelta throws on an unknown broker or epoch: nothing changes
        reg = copy.copy(cur[0])
        if fenced == FENCE:
            reg.fenced = True
        elif fenced == UNFENCE:
            reg.fenced = False
        if shutdown == IN_CONTROLLED_SHUTDOWN:
            reg.in_controlled_shutdown = True
        if log_dirs is not None:
            reg.log_dirs = list(log_dirs)
        version = cur[1]
        if cordoned is not None:  # BrokerRegistrationChangeRecord v3 (KIP-1066)
            reg.cordoned_log_dirs = list(cordoned)
            version = max(version, 4)
        self.brokers[broker_id] = (reg, version)

    # ------------------------------------------------------------------ write
    def records(self) -> list[Versioned]:
        """The image as records, in ``MetadataImage.write``'s order."""
        out: list[Versioned] = []
        mv = self.features.get("metadata.version")
        if mv is not None:  # FeaturesImage.writeFeatureLevels: metadata.version first
            out.append((FeatureLevelRecord(name="metadata.version", feature_level=mv), 0))
        for name, level in sorted(self.features.items()):
            if name != "metadata.version":
                out.append((FeatureLevelRecord(name=name, feature_level=level), 0))
        if mv is not None and mv >= METADATA_VERSION_MIGRATION:
            out.append((ZkMigrationStateRecord(zk_migration_state=self.zk_migration_state or 0), 0))
        out.extend(self.brokers[b] for b in sorted(self.brokers))
        out.extend(self.controllers[c] for c in sorted(self.controllers))
        for tid, topic in self.topics.items():
            out.append(topic)
            parts = self.partitions.get(tid, {})
            out.extend(parts[p] for p in sorted(parts))
        for (rtype, rname), cfg in self.configs.items():
            out.extend((ConfigRecord(resource_type=rtype, resource_name=rname, name=n, value=v), 0)
                       for n, v in cfg.items())
        for q in self.client_quotas.values():
            out.extend(q.values())
        if self.next_producer_id >= 0:
            out.append((ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                          next_producer_id=self.next_producer_id), 0))
        # AclsImage.write: its HashMap<Uuid, StandardAcl> in iteration order
        out.extend(self.acls[i] for i in java_hashmap_order(list(self.acls), _uuid_hash))
        out.extend(self.scram[k] for k in sorted(self.scram))
        out.extend(self.delegation_tokens.values())
        return out


def _uuid_hash(u: Any) -> int:
    """org.apache.kafka.common.Uuid.hashCode."""
    n: int = u.int
    x = (n >> 64) ^ (n & 0xFFFFFFFFFFFFFFFF)
    return ((x >> 32) ^ x) & 0xFFFFFFFF


def merge_partition(p: Any, c: PartitionChangeRecord) -> Any:
    """``PartitionRegistration.merge``: a PartitionChangeRecord applied to a partition."""
    n = copy.copy(p)
    if c.replicas is not None:
        n.replicas = shared_ints(c.replicas)
    if c.directories is not None:
        n.directories = shared_uuids(c.directories)
    if c.isr is not None:
        n.isr = shared_ints(c.isr)
    if c.removing_replicas is not None:
        n.removing_replicas = shared_ints(c.removing_replicas)
    if c.adding_replicas is not None:
        n.adding_replicas = shared_ints(c.adding_replicas)
    if c.leader != NO_LEADER_CHANGE:
        n.leader = c.leader
        n.leader_epoch = p.leader_epoch + 1
    if c.leader_recovery_state != LEADER_RECOVERY_NO_CHANGE:
        n.leader_recovery_state = c.leader_recovery_state
    if c.eligible_leader_replicas is not None:
        n.eligible_leader_replicas = shared_ints(c.eligible_leader_replicas)
    if c.last_known_elr is not None:
        n.last_known_elr = shared_ints(c.last_known_elr)
    n.partition_epoch = p.partition_epoch + 1
    return n
