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

Every other metadata record is only counted.  Records that are not metadata records
at all (application data written through Produce, kraftnode's extension) are counted
as *foreign*: a Kafka controller could not replay them, which is why Produce refuses
them once a Kafka controller is a member of the quorum (docs/server.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftnode.log.metadata_records import decode_metadata_record
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    RegisterControllerRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from recordbatch import BatchView, CorruptBatchError
from recordbatch.layout import RECORDS_OFFSET
from recordbatch.wire import DecodeError, read_varint, read_varlong

__all__ = ["MetadataState", "METADATA_VERSION_CONTROLLER_REGISTRATION", "is_metadata_record"]

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


@dataclass
class MetadataState:
    """Replays committed batches in offset order; ``next_offset`` is the first not yet seen."""

    next_offset: int = 0
    metadata_version: int | None = None
    finalized: dict[str, int] = field(default_factory=dict)
    controllers: dict[int, RegisterControllerRecord] = field(default_factory=dict)
    zk_migration_state: int | None = None
    #: SCRAM credentials, (user name, mechanism type) -> record (security.scram)
    scram: dict[tuple[str, int], UserScramCredentialRecord] = field(default_factory=dict)
    transaction_start: int = -1
    metadata_records: int = 0
    foreign_records: int = 0

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
            self._replay_batch(b, end_offset)
            self.next_offset = min(b.last_offset + 1, end_offset)
        self.next_offset = max(self.next_offset, end_offset)

    def reset_to_snapshot(self, batches: Iterable[BatchView], end_offset: int) -> None:
        """Start over from a snapshot whose records describe everything below ``end_offset``."""
        fresh = MetadataState()
        for b in batches:
            fresh._replay_batch(b, None)
        fresh.next_offset = end_offset
        self.__dict__.update(fresh.__dict__)

    def _replay_batch(self, b: BatchView, end_offset: int | None) -> None:
        if b.is_control:
            return
        if b.producer_id >= 0:
            # idempotent producers write application data; controllers write with no producer id
            self.foreign_records += b.records_count
            return
        if not is_metadata_record(_first_value(b)):
            # a batch is written by one writer: if its first record is application data, all
            # are (checked without decoding the batch: this runs for every committed batch)
            self.foreign_records += b.records_count
            return
        try:
            records = list(b.records())
        except (CorruptBatchError, DecodeError, ValueError) as e:
            raise ValueError(f"committed batch at offset {b.base_offset} is unreadable: {e}") from None
        for r in records:
            if r.offset < self.next_offset or (end_offset is not None and r.offset >= end_offset):
                continue
            try:
                message, _version = decode_metadata_record(r.value) if r.value is not None else (None, 0)
            except (DecodeError, ValueError, IndexError):
                message = None
            if message is None:
                self.foreign_records += 1
                continue
            self.metadata_records += 1
            self._apply(message, r.offset)

    def _apply(self, m: Any, offset: int) -> None:
        if isinstance(m, FeatureLevelRecord):
            if m.feature_level == 0:
                self.finalized.pop(m.name, None)
            else:
                self.finalized[m.name] = m.feature_level
            if m.name == "metadata.version":
                self.metadata_version = m.feature_level
        elif isinstance(m, RegisterControllerRecord):
            self.controllers[m.controller_id] = m
        elif isinstance(m, BeginTransactionRecord):
            self.transaction_start = offset
        elif isinstance(m, (EndTransactionRecord, AbortTransactionRecord)):
            self.transaction_start = -1
        elif isinstance(m, UserScramCredentialRecord):
            self.scram[(m.name, m.mechanism)] = m
        elif isinstance(m, RemoveUserScramCredentialRecord):
            self.scram.pop((m.name, m.mechanism), None)
        elif isinstance(m, ZkMigrationStateRecord):
            self.zk_migration_state = m.zk_migration_state
