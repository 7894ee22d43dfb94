"""The group coordinator's records, as Kafka's ``__consumer_offsets`` holds them.

Each record is a key and a value (a null value is a tombstone: the key is deleted).
After the reserved prefix :data:`RECORD_KEY_PREFIX`, a key is byte for byte a
``__consumer_offsets`` key -- int16 key version, then the key message at that version
-- and a value is int16 value version, then the value message.  The key version names
the record type, as in Kafka's ``CoordinatorRecordSerde``:

==  ==========================================  =====================================
0,1 OffsetCommitKey                              OffsetCommitValue (we write v3)
2   GroupMetadataKey                             GroupMetadataValue (classic group, v3)
3   ConsumerGroupMetadataKey                     ConsumerGroupMetadataValue (group epoch)
4   ConsumerGroupPartitionMetadataKey            ConsumerGroupPartitionMetadataValue
5   ConsumerGroupMemberMetadataKey               ConsumerGroupMemberMetadataValue
6   ConsumerGroupTargetAssignmentMetadataKey     ConsumerGroupTargetAssignmentMetadataValue
7   ConsumerGroupTargetAssignmentMemberKey       ConsumerGroupTargetAssignmentMemberValue
8   ConsumerGroupCurrentMemberAssignmentKey      ConsumerGroupCurrentMemberAssignmentValue
==  ==========================================  =====================================

The prefix is the one the simple-group offsets always used (``kraftnode.offsets\\0``,
"the __consumer_offsets records"): a metadata record has no key at all, so the keyed
records of the state machine (kraftnode.metadata.state, compacted to the latest
value per key and carried by snapshots) hold the groups' state exactly as a compacted
``__consumer_offsets`` partition does.
"""

from __future__ import annotations

import struct
from typing import Any

from kraftnode.protocol.generated import groups as g
from recordbatch.wire import DecodeError

__all__ = ["RECORD_KEY_PREFIX", "Record", "decode", "encode", "KEY_TYPES"]

RECORD_KEY_PREFIX = b"kraftnode.offsets\x00"

Record = tuple[bytes, bytes | None]

# key version -> (key class, value class)
KEY_TYPES: dict[int, tuple[Any, Any]] = {
    0: (g.OffsetCommitKey, g.OffsetCommitValue),
    1: (g.OffsetCommitKey, g.OffsetCommitValue),
    2: (g.GroupMetadataKey, g.GroupMetadataValue),
    3: (g.ConsumerGroupMetadataKey, g.ConsumerGroupMetadataValue),
    4: (g.ConsumerGroupPartitionMetadataKey, g.ConsumerGroupPartitionMetadataValue),
    5: (g.ConsumerGroupMemberMetadataKey, g.ConsumerGroupMemberMetadataValue),
    6: (g.ConsumerGroupTargetAssignmentMetadataKey, g.ConsumerGroupTargetAssignmentMetadataValue),
    7: (g.ConsumerGroupTargetAssignmentMemberKey, g.ConsumerGroupTargetAssignmentMemberValue),
    8: (g.ConsumerGroupCurrentMemberAssignmentKey, g.ConsumerGroupCurrentMemberAssignmentValue),
}

# the value version Kafka 3.9 writes for each key version (metadata.version 3.9)
VALUE_VERSIONS = {0: 3, 1: 3, 2: 3, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0, 8: 0}


def encode(key_version: int, key: Any, value: Any | None) -> Record:
    """A record: the prefixed key, and the versioned value (None: a tombstone)."""
    k = RECORD_KEY_PREFIX + struct.pack(">h", key_version) + key.encode(key_version)
    if value is None:
        return k, None
    vv = VALUE_VERSIONS[key_version]
    return k, struct.pack(">h", vv) + value.encode(vv)


def decode(key: bytes, value: bytes | None) -> tuple[int, Any, Any | None] | None:
    """(key version, key message, value message or None) of a group record; None when
    ``key`` is not one (another application's key) or cannot be read."""
    if not key.startswith(RECORD_KEY_PREFIX):
        return None
    data = memoryview(key)[len(RECORD_KEY_PREFIX):]
    if len(data) < 2:
        return None
    (kv,) = struct.unpack_from(">h", data, 0)
    types = KEY_TYPES.get(kv)
    if types is None:
        return None
    key_cls, value_cls = types
    try:
        k = key_cls.decode(data[2:], kv)
        if value is None:
            return kv, k, None
        if len(value) < 2:
            return None
        (vv,) = struct.unpack_from(">h", value, 0)
        lo, hi = value_cls.VALID_VERSIONS
        if not lo <= vv <= hi:
            return None
        return kv, k, value_cls.decode(memoryview(value)[2:], vv)
    except (DecodeError, ValueError, IndexError, struct.error, UnicodeDecodeError):
        return None


# ------------------------------------------------------------------ builders
def offset_commit(group: str, topic: str, partition: int, offset: int, leader_epoch: int,
                  metadata: str, commit_ts: int) -> Record:
    return encode(1, g.OffsetCommitKey(group=group, topic=topic, partition=partition),
                  g.OffsetCommitValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                                      commit_timestamp=commit_ts))


def offset_tombstone(group: str, topic: str, partition: int) -> Record:
    return encode(1, g.OffsetCommitKey(group=group, topic=topic, partition=partition), None)


def group_metadata(group: str, value: Any | None) -> Record:
    return encode(2, g.GroupMetadataKey(group=group), value)


def consumer_group_epoch(group: str, epoch: int | None) -> Record:
    return encode(3, g.ConsumerGroupMetadataKey(group_id=group),
                  None if epoch is None else g.ConsumerGroupMetadataValue(epoch=epoch))


def consumer_group_subscription_metadata(group: str, value: Any | None) -> Record:
    return encode(4, g.ConsumerGroupPartitionMetadataKey(group_id=group), value)


def consumer_member_subscription(group: str, member_id: str, value: Any | None) -> Record:
    return encode(5, g.ConsumerGroupMemberMetadataKey(group_id=group, member_id=member_id), value)


def target_assignment_epoch(group: str, epoch: int | None) -> Record:
    return encode(6, g.ConsumerGroupTargetAssignmentMetadataKey(group_id=group),
                  None if epoch is None else g.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def target_assignment_member(group: str, member_id: str, value: Any | None) -> Record:
    return encode(7, g.ConsumerGroupTargetAssignmentMemberKey(group_id=group, member_id=member_id), value)


def current_assignment(group: str, member_id: str, value: Any | None) -> Record:
    return encode(8, g.ConsumerGroupCurrentMemberAssignmentKey(group_id=group, member_id=member_id), value)
