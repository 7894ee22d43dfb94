"""Control records: transaction markers and the KRaft control messages.

A control record lives in a batch with the control attribute set.  Its key is
``int16 version (0), int16 type``; its value depends on the type:

====  ===============  ==============================================
type  name             value
====  ===============  ==============================================
0     ABORT            EndTransactionMarker: int16 version, int32 coordinatorEpoch
1     COMMIT           EndTransactionMarker
2     LEADER_CHANGE    LeaderChangeMessage
3     SNAPSHOT_HEADER  SnapshotHeaderRecord
4     SNAPSHOT_FOOTER  SnapshotFooterRecord
5     KRAFT_VERSION    KRaftVersionRecord
6     KRAFT_VOTERS     VotersRecord
====  ===============  ==============================================

The KRaft values are the generated classes of :mod:`recordbatch.generated`,
serialised without any framing at message version 0 -- what Kafka 3.9's
``ControlRecordUtils`` writes and reads (each message carries its own ``Version``
data field as its first int16).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from typing import Final, NamedTuple, Protocol

from recordbatch.builder import build_batch
from recordbatch.errors import CorruptBatchError
from recordbatch.generated import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VotersRecord,
)
from recordbatch.layout import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from recordbatch.record import Record
from recordbatch.wire import DecodeError

__all__ = [
    "ControlType",
    "EndTransactionMarker",
    "KRaftControlMessage",
    "CONTROL_MESSAGE_VERSION",
    "control_key",
    "parse_control_key",
    "build_control_batch",
    "build_kraft_control_batch",
    "end_txn_marker_batch",
    "leader_change_batch",
    "snapshot_header_batch",
    "snapshot_footer_batch",
    "kraft_version_batch",
    "voters_batch",
    "decode_control_record",
]


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_KEY_VERSION: Final = 0
CONTROL_MESSAGE_VERSION: Final = 0
"""Message version Kafka 3.9 uses for every KRaft control value (ControlRecordUtils)."""

_KEY: Final = struct.Struct(">hh")
_END_TXN: Final = struct.Struct(">hi")

KRaftControlMessage = (
    LeaderChangeMessage | SnapshotHeaderRecord | SnapshotFooterRecord | KRaftVersionRecord | VotersRecord
)

_TYPE_OF: Final[dict[type[KRaftControlMessage], ControlType]] = {
    LeaderChangeMessage: ControlType.LEADER_CHANGE,
    SnapshotHeaderRecord: ControlType.SNAPSHOT_HEADER,
    SnapshotFooterRecord: ControlType.SNAPSHOT_FOOTER,
    KRaftVersionRecord: ControlType.KRAFT_VERSION,
    VotersRecord: ControlType.KRAFT_VOTERS,
}
_CLASS_OF: Final[dict[int, type[KRaftControlMessage]]] = {t: c for c, t in _TYPE_OF.items()}


class EndTransactionMarker(NamedTuple):
    """Value of an ABORT/COMMIT control record."""

    version: int
    coordinator_epoch: int

    def encode(self) -> bytes:
        return _END_TXN.pack(self.version, self.coordinator_epoch)


class _HasKeyValue(Protocol):
    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


def control_key(control_type: int) -> bytes:
    """The 4-byte key of a control record of ``control_type``."""
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type) of a control record key, checked as Kafka's ControlRecordType.parse
    does: at least 4 bytes, non-negative version (higher versions are read as 0)."""
    if key is None or len(key) < _KEY.size:
        size = "null" if key is None else f"{len(key)} bytes"
        raise CorruptBatchError(f"invalid control record key: need at least 4 bytes, found {size}")
    version, ctype = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptBatchError(f"invalid control record key version {version}")
    return int(version), int(ctype)


def build_control_batch(
    control_type: int,
    value: bytes,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    is_transactional: bool = False,
) -> bytes:
    """A control batch holding one control record (key (0, control_type), ``value``)."""
    return build_batch(
        [Record(control_key(control_type), value, (), timestamp)],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=is_transactional,
        is_control=True,
        now_ms=timestamp,
    )


def _message_type(message: KRaftControlMessage) -> ControlType:
    try:
        return _TYPE_OF[type(message)]
    except KeyError:
        raise TypeError(f"{type(message).__name__} is not a KRaft control message") from None


def build_kraft_control_batch(
    messages: Sequence[KRaftControlMessage],
    *,
    base_offset: int,
    partition_leader_epoch: int,
    timestamp: int,
) -> bytes:
    """One control batch with a record per message, types inferred from the classes.

    This is how Kafka writes a snapshot's first batch ([SnapshotHeader,
    KRaftVersion, Voters] in ``0000...-0000.checkpoint``) and the leader's
    KRaftVersion + Voters when bootstrapping a dynamic quorum.
    """
    records = [
        Record(control_key(_message_type(m)), m.encode(CONTROL_MESSAGE_VERSION), (), timestamp)
        for m in messages
    ]
    return build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        is_control=True,
        now_ms=timestamp,
    )


def _single(message: KRaftControlMessage, base_offset: int, epoch: int, timestamp: int) -> bytes:
    return build_kraft_control_batch(
        [message], base_offset=base_offset, partition_leader_epoch=epoch, timestamp=timestamp
    )


def leader_change_batch(
    message: LeaderChangeMessage, *, base_offset: int, partition_leader_epoch: int, timestamp: int
) -> bytes:
    """The batch a new leader appends at the start of its epoch."""
    return _single(message, base_offset, partition_leader_epoch, timestamp)


def snapshot_header_batch(
    message: SnapshotHeaderRecord, *, base_offset: int, partition_leader_epoch: int, timestamp: int
) -> bytes:
    return _single(message, base_offset, partition_leader_epoch, timestamp)


def snapshot_footer_batch(
    message: SnapshotFooterRecord, *, base_offset: int, partition_leader_epoch: int, timestamp: int
) -> bytes:
    return _single(message, base_offset, partition_leader_epoch, timestamp)


def kraft_version_batch(
    message: KRaftVersionRecord, *, base_offset: int, partition_leader_epoch: int, timestamp: int
) -> bytes:
    return _single(message, base_offset, partition_leader_epoch, timestamp)


def voters_batch(
    message: VotersRecord, *, base_offset: int, partition_leader_epoch: int, timestamp: int
) -> bytes:
    return _single(message, base_offset, partition_leader_epoch, timestamp)


def end_txn_marker_batch(
    commit: bool,
    coordinator_epoch: int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int,
    partition_leader_epoch: int,
    timestamp: int,
) -> bytes:
    """A transactional control batch with one COMMIT or ABORT marker."""
    return build_control_batch(
        ControlType.COMMIT if commit else ControlType.ABORT,
        EndTransactionMarker(0, coordinator_epoch).encode(),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
    )


def decode_control_record(
    record: _HasKeyValue,
) -> tuple[int, KRaftControlMessage | EndTransactionMarker | bytes | None]:
    """(control type, decoded value) of a record from a control batch.

    Values of types 0-6 are decoded (generated classes for 2-6, EndTransactionMarker
    for 0/1); an unknown type -- a newer Kafka -- yields its raw value bytes, as
    Kafka itself skips control types it does not know.  Malformed values raise
    CorruptBatchError.
    """
    _, ctype = parse_control_key(record.key)
    value = record.value
    if ctype in (ControlType.ABORT, ControlType.COMMIT):
        if value is None or len(value) < _END_TXN.size:
            raise CorruptBatchError("invalid end transaction marker value: need at least 6 bytes")
        version, epoch = _END_TXN.unpack_from(value, 0)
        if version < 0:
            raise CorruptBatchError(f"invalid end transaction marker version {version}")
        return ctype, EndTransactionMarker(int(version), int(epoch))
    cls = _CLASS_OF.get(ctype)
    if cls is None:
        return ctype, value
    if value is None:
        raise CorruptBatchError(f"control record of type {ctype} has a null value")
    try:
        message: KRaftControlMessage = cls.decode(value, CONTROL_MESSAGE_VERSION)
    except DecodeError as e:
        raise CorruptBatchError(f"invalid {cls.__name__} control record value: {e}") from None
    return ctype, message
