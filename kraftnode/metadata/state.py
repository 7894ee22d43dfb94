"""The part of the KRaft metadata image a controller needs: what committed records say.

A Kafka 3.9 controller replays every committed metadata record into its image; a
kraftnode node replays the few record types that decide how it must behave as a
member of a KRaft quorum:

* ``FeatureLevelRecord`` -- the finalized ``metadata.version`` (ApiVersions reports
  it; controller registration needs 3.7-IV0 or later);
* ``RegisterControllerRecord`` -- which controllers registered, with which endpoints;
* ``BeginTransactionRecord``/``EndTransactionRecord``/``AbortTransactionRecord`` --
  an unfinished bootstrap transaction must be aborted by the next active controller;
* ``ZkMigrationStateRecord``;
* ``UserScramCredentialRecord`` / ``RemoveUserScramCredentialRecord`` -- SCRAM users.

It is the node's default :class:`~kraftnode.metadata.state_machine.StateMachine`: every
metadata record type of schemas/metadata is kept with the replace/remove semantics
of Kafka 3.9's ``MetadataDelta``/``MetadataImage`` (features, brokers and
controllers, topics and partitions, configs, client quotas, producer ids, ACLs, SCRAM
credentials, delegation tokens); a metadata transaction aborted by
``AbortTransactionRecord`` is rolled back as Kafka's loader discards its delta, and no
snapshot is taken inside an open transaction.  A snapshot writes the image in the
order of ``MetadataImage.write`` (so a Kafka controller can load the snapshot of a
log that holds only metadata records).

Records that are not metadata records at all (application data written through
Produce, kraftnode's extension) are *foreign*: a Kafka controller could not replay
them, which is why Produce refuses them once a Kafka controller is a member of the
quorum (docs/server.md).  They follow compacted-topic semantics: a record with a key
keeps its latest value per key (a null value deletes the key) and is written to
snapshots after the metadata image; a record without a key is only counted: it
lives in the log and leaves with retention.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata.state_machine import SnapshotRecords
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    EndTransactionRecord,
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
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from kraftnode.raft.java_order import java_hashmap_order
from kraftnode.security.authorizer import next_generation
from recordbatch import BatchView, CorruptBatchError
from recordbatch.layout import RECORDS_OFFSET
from recordbatch.wire import DecodeError, read_varint, read_varlong

__all__ = ["MetadataImage", "MetadataState", "METADATA_VERSION_CONTROLLER_REGISTRATION", "is_metadata_record"]

# MetadataVersion 3.7-IV0: the first with KIP-919 controller registration.
METADATA_VERSION_CONTROLLER_REGISTRATION = 15


def is_metadata_record(value: bytes | bytearray | memoryview | None) -> bool:
    """True if ``value`` decodes as a framed metadata record Kafka's serde would accept."""
    if value is None:
        return False
    try:
        decode_metadata_record(value)
    except (DecodeError, ValueError, IndexError):
        return False
    return True


def _first_value(b: BatchView) -> bytes | memoryview | None:
    """The first record's value, read from the batch bytes without decoding the rest."""
    if b.records_count <= 0:
        return None
    try:
        if b.compression_id != 0:
            first = next(iter(b.records()), None)
            return None if first is None else first.value
        data = memoryview(b.buffer)[RECORDS_OFFSET:]
        _length, pos = read_varint(data, 0)
        pos += 1  # attributes
        _ts, pos = read_varlong(data, pos)
        _od, pos = read_varint(data, pos)
        klen, pos = read_varint(data, pos)
        pos += max(klen, 0)
        vlen, pos = read_varint(data, pos)
        if vlen < 0 or pos + vlen > len(data):
            return None
        return data[pos:pos + vlen]
    except (CorruptBatchError, DecodeError, ValueError, IndexError):
        return None


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
        if isinstance(m, FeatureLevelRecord):
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
                                m.log_dirs or None)
        elif isinstance(m, RegisterControllerRecord):
            self.controllers[m.controller_id] = (m, version)
        elif isinstance(m, TopicRecord):
            self.topics[m.topic_id] = (m, version)
            self.partitions.setdefault(m.topic_id, {})
        elif isinstance(m, RemoveTopicRecord):
            topic = self.topics.pop(m.topic_id, None)
            self.partitions.pop(m.topic_id, None)
            if topic is not None:  # the topic's configs go with it (ConfigurationsDelta.replay)
                self.configs.pop((CONFIG_RESOURCE_TOPIC, topic[0].name), None)
        elif isinstance(m, PartitionRecord):
            # A partition of a topic the image does not hold is dropped: Kafka's TopicsDelta
            # cannot apply it (no TopicImage to build on; its controller never writes one), and
            # a snapshot -- topics with their partitions -- could not carry it, so replaying the
            # log and loading a snapshot of it would disagree once that topic is created.
            if m.topic_id in self.topics:
                self.partitions.setdefault(m.topic_id, {})[m.partition_id] = (m, version)
        elif isinstance(m, PartitionChangeRecord):
            parts = self.partitions.get(m.topic_id)
            cur = parts.get(m.partition_id) if parts is not None else None
            if parts is not None and cur is not None:
                parts[m.partition_id] = (_merge_partition(cur[0], m), max(cur[1], min(version, 2)))
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

    def _change_broker(self, broker_id: int, epoch: int, fenced: int, shutdown: int,
                       log_dirs: list[Any] | None) -> None:
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
        self.brokers[broker_id] = (reg, cur[1])

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


def _merge_partition(p: Any, c: PartitionChangeRecord) -> Any:
    """``PartitionRegistration.merge``: a PartitionChangeRecord applied to a partition."""
    n = copy.copy(p)
    if c.replicas is not None:
        n.replicas = list(c.replicas)
    if c.directories is not None:
        n.directories = list(c.directories)
    if c.isr is not None:
        n.isr = list(c.isr)
    if c.removing_replicas is not None:
        n.removing_replicas = list(c.removing_replicas)
    if c.adding_replicas is not None:
        n.adding_replicas = list(c.adding_replicas)
    if c.leader != NO_LEADER_CHANGE:
        n.leader = c.leader
        n.leader_epoch = p.leader_epoch + 1
    if c.leader_recovery_state != LEADER_RECOVERY_NO_CHANGE:
        n.leader_recovery_state = c.leader_recovery_state
    if c.eligible_leader_replicas is not None:
        n.eligible_leader_replicas = list(c.eligible_leader_replicas)
    if c.last_known_elr is not None:
        n.last_known_elr = list(c.last_known_elr)
    n.partition_epoch = p.partition_epoch + 1
    return n


@dataclass
class MetadataState:
    """Replays committed batches in offset order; ``next_offset`` is the first not yet seen.

    Implements :class:`~kraftnode.metadata.state_machine.StateMachine` (``apply``,
    ``snapshot``, ``load_snapshot``)."""

    next_offset: int = 0
    metadata_version: int | None = None
    finalized: dict[str, int] = field(default_factory=dict)
    controllers: dict[int, RegisterControllerRecord] = field(default_factory=dict)
    zk_migration_state: int | None = None
    #: SCRAM credentials, (user name, mechanism type) -> record (security.scram)
    scram: dict[tuple[str, int], UserScramCredentialRecord] = field(default_factory=dict)
    transaction_start: int = -1
    #: changes whenever the ACLs may have changed (the authorizer's cache key)
    acl_generation: int = field(default_factory=next_generation)
    metadata_records: int = 0
    foreign_records: int = 0
    #: ApiVersions' FinalizedFeaturesEpoch as a Kafka 3.9 controller reports it
    #: (FeaturesPublisher): the image's last offset when a feature level last changed --
    #: the last offset of the batch holding the FeatureLevelRecord, or of the batch that
    #: ends its metadata transaction. -1 until then.
    features_epoch: int = -1
    features_changed: bool = False
    image: MetadataImage = field(default_factory=MetadataImage)
    # application records with a key: the latest value per key (compacted-topic semantics)
    app: dict[bytes, bytes] = field(default_factory=dict)
    # the image as it was before an open metadata transaction (restored on abort)
    _before_transaction: tuple[MetadataImage, dict[str, Any]] | None = None

    @property
    def empty(self) -> bool:
        """No metadata record replayed yet: Kafka's test for "write the bootstrap records"."""
        return self.metadata_records == 0

    def replay_batches(self, batches: Iterable[BatchView], end_offset: int) -> None:
        """Replay every record in ``[next_offset, end_offset)``; batches may start earlier."""
        for b in batches:
            if b.base_offset >= end_offset:
                break
            if b.last_offset < self.next_offset:
                continue
            self.apply(b, end_offset)
        self.next_offset = max(self.next_offset, end_offset)

    def reset_to_snapshot(self, batches: Iterable[BatchView], end_offset: int) -> None:
        """Start over from a snapshot whose records describe everything below ``end_offset``."""
        from kraftnode.metadata.state_machine import snapshot_data_records

        self.load_snapshot(snapshot_data_records(batches))
        self.next_offset = end_offset

    # ------------------------------------------------------------------ StateMachine
    def apply(self, b: BatchView, end_offset: int) -> None:
        """Apply the records of committed batch ``b`` in ``[next_offset, end_offset)``."""
        self._replay_batch(b, end_offset)
        self.next_offset = max(self.next_offset, min(b.last_offset + 1, end_offset))

    def snapshot_allowed(self) -> bool:
        return self.transaction_start < 0

    def snapshot(self) -> Callable[[], SnapshotRecords]:
        image = self.image.copy()
        app = dict(self.app)

        def write() -> SnapshotRecords:
            for m, version in image.records():
                yield None, encode_metadata_record(m, version)
            yield from app.items()
        return write

    def load_snapshot(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        fresh = MetadataState()
        for key, value in records:
            message = None
            if key is None and value is not None:
                try:
                    message, version = decode_metadata_record(value)
                except (DecodeError, ValueError, IndexError):
                    message = None
            if message is not None:
                fresh.metadata_records += 1
                fresh._apply(message, -1, version)
            else:
                # application data (a snapshot written by another tool may hold unkeyed
                # records: they are counted, as in the log, and carry no state)
                fresh.foreign_records += 1
                if key is not None and value is not None:
                    fresh.app[bytes(key)] = bytes(value)
        fresh.next_offset = self.next_offset
        self.__dict__.update(fresh.__dict__)

    def _replay_batch(self, b: BatchView, end_offset: int | None) -> None:
        if b.is_control:
            return
        if b.producer_id >= 0 or not is_metadata_record(_first_value(b)):
            # idempotent producers write application data; controllers write with no
            # producer id.  A batch is written by one writer: if its first record is
            # application data, all are (checked without decoding the batch)
            self._replay_application(b, end_offset)
            return
        try:
            records = list(b.records())
        except (CorruptBatchError, DecodeError, ValueError) as e:
            raise ValueError(f"committed batch at offset {b.base_offset} is unreadable: {e}") from None
        for r in records:
            if r.offset < self.next_offset or (end_offset is not None and r.offset >= end_offset):
                continue
            try:
                message, version = decode_metadata_record(r.value) if r.value is not None else (None, 0)
            except (DecodeError, ValueError, IndexError):
                message = None
            if message is None:
                self.foreign_records += 1
                continue
            self.metadata_records += 1
            self._apply(message, r.offset, version)
        if self.features_changed and self.transaction_start == -1:
            self.features_epoch = b.last_offset if end_offset is None else min(b.last_offset, end_offset - 1)
            self.features_changed = False

    def _replay_application(self, b: BatchView, end_offset: int | None) -> None:
        try:
            records = list(b.records())
        except (CorruptBatchError, DecodeError, ValueError) as e:
            raise ValueError(f"committed batch at offset {b.base_offset} is unreadable: {e}") from None
        for r in records:
            if r.offset < self.next_offset or (end_offset is not None and r.offset >= end_offset):
                continue
            self.foreign_records += 1
            if r.key is not None:
                if r.value is None:
                    self.app.pop(bytes(r.key), None)
                else:
                    self.app[bytes(r.key)] = bytes(r.value)

    def _summary(self) -> dict[str, Any]:
        return {"metadata_version": self.metadata_version, "finalized": dict(self.finalized),
                "controllers": dict(self.controllers), "zk_migration_state": self.zk_migration_state}

    def _apply(self, m: Any, offset: int, version: int = 0) -> None:
        if isinstance(m, BeginTransactionRecord):
            self.transaction_start = offset
            self._before_transaction = (self.image.copy(), self._summary())
            return
        if isinstance(m, EndTransactionRecord):
            self.transaction_start = -1
            self._before_transaction = None
            return
        if isinstance(m, AbortTransactionRecord):
            # Kafka's MetadataLoader drops the delta of an aborted transaction
            self.transaction_start = -1
            self.acl_generation = next_generation()
            if self._before_transaction is not None:
                self.image, summary = self._before_transaction
                self.__dict__.update(summary)
                self._before_transaction = None
            return
        self.image.replay(m, version)
        if isinstance(m, (AccessControlEntryRecord, RemoveAccessControlEntryRecord)):
            self.acl_generation = next_generation()
        elif isinstance(m, FeatureLevelRecord):
            if m.feature_level == 0:
                self.finalized.pop(m.name, None)
            else:
                self.finalized[m.name] = m.feature_level
            if m.name == "metadata.version":
                self.metadata_version = m.feature_level
            self.features_changed = True
        elif isinstance(m, RegisterControllerRecord):
            self.controllers[m.controller_id] = m
        elif isinstance(m, UserScramCredentialRecord):
            self.scram[(m.name, m.mechanism)] = m
        elif isinstance(m, RemoveUserScramCredentialRecord):
            self.scram.pop((m.name, m.mechanism), None)
        elif isinstance(m, ZkMigrationStateRecord):
            self.zk_migration_state = m.zk_migration_state
