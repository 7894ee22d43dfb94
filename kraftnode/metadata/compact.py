"""Partitions as the image keeps them: compact, and decoded fast.

At a hundred thousand partitions the image is mostly ``PartitionRecord`` objects, and each one
carried five lists of its own (replicas, ISR, removing, adding, directories) although a cluster
has few distinct ones: every partition of a 30-broker cluster with RF 3 has one of a few
hundred replica lists, most ISRs equal them, removing and adding replicas are empty, and the
directories are the brokers' few log directories. :func:`compact_partition` replaces a record's
lists by shared (interned) equal ones and its topic id by the image's own UUID object, which
takes a partition from about 650 to about 250 bytes of Python heap (issue 39). Records in the
image are replaced, never mutated -- neither the record nor its lists -- so sharing equal
lists between records is safe; code that changes a partition builds a new list. The shared
lists are :class:`FrozenList`: read as lists, and any attempt to change one in place is a
TypeError rather than a change to every partition holding it.

:func:`decode_image_record` is :func:`~kraftnode.log.metadata_records.decode_metadata_record`
with a fast path for the record a snapshot and a busy log are mostly made of: a
``PartitionRecord`` (any version) whose arrays are shorter than 127 and that has no tagged
field, read with ``struct`` straight into interned lists (half a snapshot's load was the
generic decoder). Anything else -- and any record the fast path finds malformed -- goes to the
generated codec, which stays the one source of truth: ``tests/kraftnode/metadata/test_compact.py``
checks the two decode every record alike over many random records.

The committed state and the controller view share one object per partition without this module:
the active controller hands its committed state the records it appended
(``MetadataState.replay_known``), and a standby's view replays the records its committed state
has just decoded (``MetadataState.on_replayed``).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kraftnode.log.metadata_records import decode_metadata_record
from kraftnode.protocol.generated.metadata import PartitionRecord
from recordbatch.message import uuid_from_bytes
from recordbatch.wire import DecodeError

__all__ = ["FrozenList", "compact_partition", "decode_image_record", "decode_snapshot_partition", "shared_ints",
           "shared_uuids"]

class FrozenList(list):  # type: ignore[type-arg]
    """A list shared by partitions of the image: reads as a list, refuses every change (a
    partition that changes gets a new list), copies and pickles as a list's contents."""

    __slots__ = ()

    def _refuse(self, *_a: Any, **_k: Any) -> Any:
        raise TypeError("this list is shared by partitions of the metadata image: build a new one")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce_ex__(self, _protocol: Any) -> tuple[Any, tuple[list[Any]]]:
        return FrozenList, (list(self),)


#: interned lists, by their contents; cleared when they grow past the bound (the lists handed
#: out stay valid: only the sharing of later ones is lost)
_INTS: dict[tuple[int, ...], list[int]] = {}
_DIRS: dict[bytes, list[uuid.UUID]] = {}
_DIRS_BY_VALUE: dict[tuple[uuid.UUID, ...], list[uuid.UUID]] = {}
_MAX = 1 << 16

_new = object.__new__
_HEAD = struct.Struct(">i16s")
_TAIL = struct.Struct(">iii")
_INT_FORMATS = [struct.Struct(f">{n}i") for n in range(127)]
_PARTITION_PREFIX = b"\x01\x03"  # frame version 1, PartitionRecord (api key 3)


def _interned(table: dict[tuple[Any, ...], list[Any]], values: list[Any] | tuple[Any, ...]) -> list[Any]:
    """The shared list of ``table`` equal to ``values`` (a frozen copy of the first one seen: the
    caller's list stays its own)."""
    if type(values) is FrozenList:
        return values
    key = tuple(values)
    got = table.get(key)
    if got is None:
        if len(table) >= _MAX:
            table.clear()
        got = table[key] = FrozenList(key)
    return got


#: the shared empty list (removing and adding replicas of nearly every partition)
_EMPTY: list[int] = _interned(_INTS, ())


def shared_ints(values: list[int] | tuple[int, ...]) -> list[int]:
    """The interned list equal to ``values``."""
    return _interned(_INTS, values)


def shared_uuids(values: list[uuid.UUID] | tuple[uuid.UUID, ...]) -> list[uuid.UUID]:
    """The interned list of directory ids equal to ``values``."""
    return _interned(_DIRS_BY_VALUE, values)


def compact_partition(p: Any, topic_id: uuid.UUID | None = None) -> Any:
    """``p`` (a PartitionRecord) with its lists replaced by shared equal ones and its topic id
    by ``topic_id`` (the image's, when given); returns ``p``."""
    if topic_id is not None:
        p.topic_id = topic_id
    elr, lkelr = p.eligible_leader_replicas, p.last_known_elr
    if (type(p.replicas) is FrozenList and type(p.isr) is FrozenList and type(p.directories) is FrozenList
            and type(p.removing_replicas) is FrozenList and type(p.adding_replicas) is FrozenList
            and (elr is None or type(elr) is FrozenList) and (lkelr is None or type(lkelr) is FrozenList)):
        return p  # compact already (decoded by the fast path, or replayed by another image)
    p.replicas = shared_ints(p.replicas)
    p.isr = shared_ints(p.isr)
    p.removing_replicas = shared_ints(p.removing_replicas)
    p.adding_replicas = shared_ints(p.adding_replicas)
    p.directories = shared_uuids(p.directories)
    if p.eligible_leader_replicas is not None:
        p.eligible_leader_replicas = shared_ints(p.eligible_leader_replicas)
    if p.last_known_elr is not None:
        p.last_known_elr = shared_ints(p.last_known_elr)
    return p


def _ints(buf: bytes, pos: int) -> tuple[list[int], int]:
    n = buf[pos] - 1
    if not 0 <= n < 126:
        raise DecodeError("not on the fast path")
    pos += 1
    key = _INT_FORMATS[n].unpack_from(buf, pos)
    got = _INTS.get(key)
    if got is None:
        if len(_INTS) >= _MAX:
            _INTS.clear()
        got = _INTS[key] = FrozenList(key)
    return got, pos + 4 * n


def _fast_partition(buf: bytes, version: int, topic_ids: dict[bytes, uuid.UUID] | None = None) -> Any:
    """The PartitionRecord framed in ``buf`` (its frame header is 3 bytes), or DecodeError when
    it is not on the fast path. ``topic_ids``: UUID objects by their 16 bytes, taken for the
    partition's topic id when there (the image's own, when a snapshot loads)."""
    p = _new(PartitionRecord)
    p.partition_id, raw = _HEAD.unpack_from(buf, 3)
    tid = topic_ids.get(raw) if topic_ids is not None else None
    p.topic_id = uuid_from_bytes(raw) if tid is None else tid
    p.replicas, pos = _ints(buf, 23)
    p.isr, pos = _ints(buf, pos)
    # removing and adding replicas: nearly always empty (a count byte of 1: no elements)
    if buf[pos] == 1:
        p.removing_replicas = _EMPTY
        pos += 1
    else:
        p.removing_replicas, pos = _ints(buf, pos)
    if buf[pos] == 1:
        p.adding_replicas = _EMPTY
        pos += 1
    else:
        p.adding_replicas, pos = _ints(buf, pos)
    p.leader, p.leader_epoch, p.partition_epoch = _TAIL.unpack_from(buf, pos)
    pos += 12
    if version >= 1:
        n = buf[pos] - 1
        if not 0 <= n < 126:
            raise DecodeError("not on the fast path")
        end = pos + 1 + 16 * n
        if end > len(buf):
            raise DecodeError("truncated")
        raw = buf[pos + 1:end]
        dirs = _DIRS.get(raw)
        if dirs is None:
            if len(_DIRS) >= _MAX:
                _DIRS.clear()
            dirs = _DIRS[raw] = shared_uuids([uuid_from_bytes(raw[i:i + 16]) for i in range(0, 16 * n, 16)])
        p.directories = dirs
        pos = end
    else:
        p.directories = shared_uuids([])
    if pos + 1 != len(buf) or buf[pos] != 0:  # a tagged field, or bytes after the record
        raise DecodeError("not on the fast path")
    p.leader_recovery_state = 0
    p.eligible_leader_replicas = None
    p.last_known_elr = None
    p.unknown_tagged_fields = None
    return p


def decode_snapshot_partition(value: bytes, topic_ids: dict[bytes, uuid.UUID]) -> tuple[Any, int] | None:
    """(PartitionRecord, version) for a snapshot's record ``value`` when it is a PartitionRecord on
    the fast path, its topic id the object ``topic_ids`` holds for its 16 bytes (None when it
    is not: :func:`decode_image_record` decides, and names what is wrong)."""
    if type(value) is bytes and value[:2] == _PARTITION_PREFIX and len(value) > 2 and value[2] <= 2:
        try:
            return _fast_partition(value, value[2], topic_ids), value[2]
        except (DecodeError, struct.error, IndexError):
            return None
    return None


def decode_image_record(value: bytes | bytearray | memoryview) -> tuple[Any, int]:
    """(message, version) from a metadata record value, as ``decode_metadata_record`` returns
    them (its errors too); PartitionRecords come compact (their lists shared)."""
    if value[:2] == _PARTITION_PREFIX and len(value) > 2 and value[2] <= 2:
        buf = value if type(value) is bytes else bytes(value)
        try:
            return _fast_partition(buf, buf[2]), buf[2]
        except (DecodeError, struct.error, IndexError):
            pass  # the generated codec decides (and names what is wrong)
        message, version = decode_metadata_record(buf)
        return compact_partition(message), version
    return decode_metadata_record(value)
