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

A record of a metadata batch that this node cannot decode (an unknown record type, a version
it does not read) or cannot apply is a :class:`MetadataFault`, as it is a fatal fault for a
Kafka 4.4 controller (the node stops, with Kafka's ``MetadataParseException`` text or its
"Unable to apply ..." message); such a record is never taken for application data. A batch
counts as metadata when it has no producer id and its first record is framed as a metadata
record (frame version 1, a record type and a version).

Records that are not metadata records at all (application data written through
Produce, kraftnode's extension) are *foreign*: a Kafka controller could not replay
them, which is why Produce refuses them once a Kafka controller is a member of the
quorum (docs/server.md).  They follow compacted-topic semantics: a record with a key
keeps its latest value per key (a null value deletes the key) and is written to
snapshots after the metadata image; a record without a key is only counted: it
lives in the log and leaves with retention.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kraftnode.errors import LocalError
from kraftnode.log.metadata_records import (
    FRAME_VERSION,
    RECORD_CLASSES,
    decode_metadata_record,
    encode_metadata_record,
)
from kraftnode.metadata.compact import decode_image_record, decode_snapshot_partition
from kraftnode.metadata.image import MetadataImage
from kraftnode.metadata.state_machine import SnapshotRecords, snapshot_data_records
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterControllerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from recordbatch import BatchView, CorruptBatchError
from recordbatch.layout import RECORDS_OFFSET
from recordbatch.wire import DecodeError, read_uvarint, read_varint, read_varlong

__all__ = ["MetadataFault", "MetadataImage", "MetadataState", "next_generation",
           "METADATA_VERSION_CONTROLLER_REGISTRATION", "holds_metadata_records", "is_metadata_record",
           "metadata_parse_error", "replay_fault"]

# MetadataVersion 3.7-IV0: the first with KIP-919 controller registration.
METADATA_VERSION_CONTROLLER_REGISTRATION = 15


class MetadataFault(LocalError, ValueError):
    """A committed metadata record this node cannot decode or apply: a fatal fault for a Kafka
    controller (``ProcessTerminatingFaultHandler``), and for this node."""


_FRAME_0 = ("Could not deserialize metadata record with frame version 0. Note that upgrades from the preview "
            "release of KRaft in 2.8 to newer versions are not supported.")


def metadata_parse_error(value: bytes | bytearray | memoryview) -> str | None:
    """The message of the ``MetadataParseException`` Kafka 4.4's ``MetadataRecordSerde.read``
    throws for ``value``, or None when it decodes."""
    try:
        frame, pos = read_uvarint(value, 0)
    except (DecodeError, ValueError, IndexError):
        return "Error while reading frame version"
    if frame == 0:
        return _FRAME_0
    if frame != FRAME_VERSION:
        return f"Could not deserialize metadata record due to unknown frame version {frame}(only frame version 1 " \
               f"is supported)"
    try:
        api_key, pos = read_uvarint(value, pos)
    except (DecodeError, ValueError, IndexError):
        return "Error while reading type"
    try:
        _version, pos = read_uvarint(value, pos)
    except (DecodeError, ValueError, IndexError):
        return "Error while reading version"
    if api_key not in RECORD_CLASSES:
        return f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}"
    try:
        decode_metadata_record(value)
    except (DecodeError, ValueError, IndexError):
        return f"Failed to deserialize record with type {api_key}"
    return None


def is_metadata_framed(value: bytes | bytearray | memoryview | None) -> bool:
    """Whether ``value`` is framed as a metadata record (frame version 1, then a record type and a
    version), whether or not this node can decode it."""
    if value is None:
        return False
    try:
        frame, pos = read_uvarint(value, 0)
        if frame != FRAME_VERSION:
            return False
        _key, pos = read_uvarint(value, pos)
        read_uvarint(value, pos)
    except (DecodeError, ValueError, IndexError):
        return False
    return True


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


def holds_undecodable_metadata(b: BatchView) -> bool:
    """A batch framed as metadata (no producer id, first record framed as a metadata record)
    whose first record this node cannot decode: a fault, never application data."""
    if b.producer_id >= 0:
        return False
    first = _first_value(b)
    return is_metadata_framed(first) and not is_metadata_record(first)


def replay_fault(b: BatchView) -> str | None:
    """The fault replaying data batch ``b`` would be (Kafka's MetadataParseException text), or
    None: a batch framed as metadata must decode whole. Produce refuses such a batch, so that no
    client can stop the controllers (every one of them would stop replaying it)."""
    if b.is_control or b.producer_id >= 0 or not is_metadata_framed(_first_value(b)):
        return None
    for r in b.records():
        why = "null value" if r.value is None else metadata_parse_error(r.value)
        if why is not None:
            return f"record at batch offset {r.offset}: MetadataParseException: {why}"
    return None


def holds_metadata_records(b: BatchView) -> bool:
    """Whether a data batch holds metadata records rather than application data.  A batch
    has one writer: idempotent producers write application data, controllers write with no
    producer id, and if the first record is application data all are -- checked without
    decoding the rest of the batch."""
    return b.producer_id < 0 and is_metadata_record(_first_value(b))


#: the record types :meth:`MetadataState._apply` does more with than replay them into the image
_STATE_RECORDS = frozenset({
    BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord, AccessControlEntryRecord,
    RemoveAccessControlEntryRecord, FeatureLevelRecord, RegisterControllerRecord, UnregisterControllerRecord,
    UserScramCredentialRecord, RemoveUserScramCredentialRecord, ZkMigrationStateRecord})

#: Values of :attr:`MetadataState.acl_generation`: a new one whenever the ACLs may have
#: changed (the authorizer's cache key; process-wide, so no two states share one).
_ACL_GENERATIONS = itertools.count(1)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off while a snapshot loads: a million partitions are millions of
    objects that all live on, and the default thresholds walked the growing heap again and
    again (a third of a 1M-partition load). The load makes no garbage cycles; the collector
    is enabled again after it, as it was.

    What the load made then goes straight to the oldest generation, where objects that survive
    two collections end up: otherwise the first young collection after the load walks all of
    them (0.4 s at a million partitions) and the middle one again (0.5 s). A process that
    freezes its long-lived objects (``kraftnode start`` freezes what it has loaded once it
    runs) gets the new state frozen too."""
    was = gc.isenabled()
    frozen_before = gc.get_freeze_count() > 0
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if not frozen_before:
            gc.unfreeze()   # into the oldest generation, without a walk
        if was:
            gc.enable()


def next_generation() -> int:
    """A new value for :attr:`MetadataState.acl_generation`."""
    return next(_ACL_GENERATIONS)


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
    #: whether application records' keys and values are kept in ``app``: the committed state
    #: keeps them (snapshots hold them, groups load their offsets from them); a view that only
    #: needs ``foreign_records`` counts a batch from its header instead of decoding it
    keeps_application_data: ClassVar[bool] = True
    # the image as it was before an open metadata transaction (restored on abort)
    _before_transaction: tuple[MetadataImage, dict[str, Any]] | None = None
    #: records whose writer holds them as objects (the active controller's own appends), by the
    #: (base offset, partition leader epoch) of their batch -- which names one batch for good in a
    #: raft log: the batch is replayed from these, not decoded again (see :meth:`replay_known`)
    known_batches: dict[tuple[int, int], list[tuple[Any, int]]] = field(default_factory=dict, repr=False,
                                                                        compare=False)
    #: called after each batch this state replays, with the offset it started at and the records it
    #: decoded ((offset, message, version); None for a control or application batch): a standby
    #: controller's view replays the same objects instead of decoding the batch a second time
    on_replayed: Callable[[BatchView, int, int, list[tuple[int, Any, int]] | None], None] | None = field(
        default=None, repr=False, compare=False)

    @property
    def image_before_transaction(self) -> MetadataImage | None:
        """The image as it was before the open metadata transaction (None outside one)."""
        return None if self._before_transaction is None else self._before_transaction[0]

    def copy_metadata_to(self, other: MetadataState) -> None:
        """Give ``other`` a copy of the replayed metadata that later replays do not share: the
        offsets and counts, the finalized features, the controllers, the SCRAM credentials, the
        image and an open transaction's image before it (not the application records, not the
        ACL generation) -- what a controller view starts from."""
        other.next_offset = self.next_offset
        other.metadata_version = self.metadata_version
        other.finalized = dict(self.finalized)
        other.controllers = dict(self.controllers)
        other.zk_migration_state = self.zk_migration_state
        other.scram = dict(self.scram)
        other.transaction_start = self.transaction_start
        other.metadata_records = self.metadata_records
        other.foreign_records = self.foreign_records
        other.features_epoch = self.features_epoch
        other.image = self.image.copy()
        before = self._before_transaction
        if before is not None:
            other._before_transaction = (before[0].copy(), dict(before[1]))

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
        self.load_snapshot(snapshot_data_records(batches))
        self.next_offset = end_offset

    # ------------------------------------------------------------------ StateMachine
    def apply(self, b: BatchView, end_offset: int) -> None:
        """Apply the records of committed batch ``b`` in ``[next_offset, end_offset)``."""
        start = self.next_offset
        decoded = self._replay_batch(b, end_offset)
        self.next_offset = max(self.next_offset, min(b.last_offset + 1, end_offset))
        if self.on_replayed is not None:
            self.on_replayed(b, start, end_offset, decoded)

    def replay_known(self, base_offset: int, epoch: int, records: list[tuple[Any, int]]) -> None:
        """The records of the batch the log holds at ``base_offset`` in ``epoch``, as objects
        (the active controller's own append): replayed from these once committed. Objects are
        never mutated once written (records are replaced), so they equal what decoding gives."""
        known = self.known_batches
        if len(known) >= 4096:   # batches truncated away, never replayed: forget them
            known.clear()
        known[(base_offset, epoch)] = records

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
        with gc_paused():
            fresh = MetadataState()
            fresh._load_records(records)
        fresh.next_offset = self.next_offset
        fresh.known_batches, fresh.on_replayed = self.known_batches, self.on_replayed
        self.__dict__.update(fresh.__dict__)

    def _load_records(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Replay a snapshot's data records into this (fresh) state.

        A snapshot is mostly PartitionRecords, each after its topic's TopicRecord: those are
        decoded by the fast path straight into their topic's partitions, under the topic id
        object of the image (what :meth:`MetadataImage.replay` does with them, without its
        dispatch); every other record, and a partition of a topic not seen yet, is replayed
        as the log replays it."""
        #: the 16 bytes of each topic id -> the image's UUID object, and its partitions
        topic_ids: dict[bytes, Any] = {}
        topic_parts: dict[bytes, dict[int, Any]] = {}
        fast = decode_snapshot_partition
        for key, value in records:
            message = None
            if key is None and value is not None:
                got = fast(value, topic_ids) if topic_ids else None
                if got is not None:
                    parts = topic_parts.get(value[7:23])
                    if parts is not None:
                        p = got[0]
                        parts[p.partition_id] = got
                        self.metadata_records += 1
                        continue
                    message, version = got
                else:
                    try:
                        message, version = decode_image_record(value)
                    except (DecodeError, ValueError, IndexError):
                        message = None
                        if is_metadata_framed(value):
                            raise MetadataFault(f"Unable to load a metadata record of the snapshot: "
                                                f"MetadataParseException: {metadata_parse_error(value)}") from None
            if message is not None:
                self.metadata_records += 1
                try:
                    self._apply(message, -1, version)
                except MetadataFault:
                    raise
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    raise MetadataFault(f"Unable to apply {message.NAME} record from the snapshot: {e}") from None
                t = type(message)
                if t is TopicRecord:
                    topic = self.image.topics.get(message.topic_id)
                    if topic is not None:
                        raw = message.topic_id.bytes
                        topic_ids[raw] = topic[0].topic_id
                        topic_parts[raw] = self.image.partitions.setdefault(message.topic_id, {})
                elif t in _STATE_RECORDS or t is RemoveTopicRecord:
                    # the image's containers may be replaced (an aborted transaction) or a topic
                    # removed: the topics seen so far go the generic way
                    topic_ids.clear()
                    topic_parts.clear()
            else:
                # application data (a snapshot written by another tool may hold unkeyed
                # records: they are counted, as in the log, and carry no state)
                self.foreign_records += 1
                if key is not None and value is not None:
                    self.app[bytes(key)] = bytes(value)

    def _replay_batch(self, b: BatchView, end_offset: int | None) -> list[tuple[int, Any, int]] | None:
        """Replay ``b``; the metadata records replayed, (offset, message, version), or None for
        a control or application batch."""
        if b.is_control:
            return None
        known = self.known_batches.pop((b.base_offset, b.partition_leader_epoch), None) \
            if self.known_batches else None
        if known is not None and len(known) == b.records_count and b.producer_id < 0:
            decoded = [(b.base_offset + i, m, v) for i, (m, v) in enumerate(known)]
        else:
            if not holds_metadata_records(b):
                if holds_undecodable_metadata(b):
                    first = _first_value(b)
                    assert first is not None
                    raise MetadataFault(f"handleCommit[baseOffset={b.base_offset}]: MetadataParseException: "
                                        f"{metadata_parse_error(first)}")
                self._replay_application(b, end_offset)
                return None
            decoded = self._decode_batch(b, end_offset)
        replayed: list[tuple[int, Any, int]] = []
        for offset, message, version in decoded:
            if offset < self.next_offset or (end_offset is not None and offset >= end_offset):
                continue
            replayed.append((offset, message, version))
            self.metadata_records += 1
            try:
                self._apply(message, offset, version)
            except MetadataFault:
                raise
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise MetadataFault(f"Unable to apply {message.NAME} record at offset {offset} on standby "
                                    f"controller, from the batch with baseOffset {b.base_offset}: {e}") from None
        if self.features_changed and self.transaction_start == -1:
            self.features_epoch = b.last_offset if end_offset is None else min(b.last_offset, end_offset - 1)
            self.features_changed = False
        return replayed

    def _decode_batch(self, b: BatchView, end_offset: int | None) -> list[tuple[int, Any, int]]:
        """The records of metadata batch ``b`` in ``[next_offset, end_offset)``, decoded:
        (offset, message, version)."""
        try:
            records = list(b.records())
        except (CorruptBatchError, DecodeError, ValueError) as e:
            raise ValueError(f"committed batch at offset {b.base_offset} is unreadable: {e}") from None
        out: list[tuple[int, Any, int]] = []
        for r in records:
            if r.offset < self.next_offset or (end_offset is not None and r.offset >= end_offset):
                continue
            try:
                message, version = decode_image_record(r.value) if r.value is not None else (None, 0)
            except (DecodeError, ValueError, IndexError):
                message = None
            if message is None:  # in a metadata batch: Kafka's RecordsIterator throws
                why = "null value" if r.value is None else metadata_parse_error(r.value)
                raise MetadataFault(f"handleCommit[baseOffset={b.base_offset}]: MetadataParseException: {why} "
                                    f"(the record at offset {r.offset})")
            out.append((r.offset, message, version))
        return out

    def _replay_application(self, b: BatchView, end_offset: int | None) -> None:
        if not self.keeps_application_data and b.base_offset >= self.next_offset and (
                end_offset is None or b.last_offset < end_offset):
            self.foreign_records += b.records_count  # wholly in range: every record counts
            return
        try:
            records = list(b.records())
        except (CorruptBatchError, DecodeError, ValueError) as e:
            raise ValueError(f"committed batch at offset {b.base_offset} is unreadable: {e}") from None
        for r in records:
            if r.offset < self.next_offset or (end_offset is not None and r.offset >= end_offset):
                continue
            self.foreign_records += 1
            if r.key is not None and self.keeps_application_data:
                if r.value is None:
                    self.app.pop(bytes(r.key), None)
                else:
                    self.app[bytes(r.key)] = bytes(r.value)

    def _summary(self) -> dict[str, Any]:
        return {"metadata_version": self.metadata_version, "finalized": dict(self.finalized),
                "controllers": dict(self.controllers), "zk_migration_state": self.zk_migration_state}

    def _apply(self, m: Any, offset: int, version: int = 0) -> None:
        if type(m) not in _STATE_RECORDS:  # most records (partitions above all) only change the image
            self.image.replay(m, version)
            return
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
        elif isinstance(m, UnregisterControllerRecord):
            self.controllers.pop(m.controller_id, None)
        elif isinstance(m, UserScramCredentialRecord):
            self.scram[(m.name, m.mechanism)] = m
        elif isinstance(m, RemoveUserScramCredentialRecord):
            self.scram.pop((m.name, m.mechanism), None)
        elif isinstance(m, ZkMigrationStateRecord):
            self.zk_migration_state = m.zk_migration_state
