"""The committed offsets of simple consumer groups, replayed from the committed log.

Offsets are replicated and durable as Kafka's ``__consumer_offsets`` is: an OffsetCommit
(kraftnode.server.handlers.groups) appends one batch to the raft log and is answered once
that batch is committed (acks=all); every replica replays committed batches into
:class:`GroupOffsets`, so a new leader answers OffsetFetch with what the old one accepted.
The records are keyed, so the state machine's snapshots carry the latest offset per
(group, topic, partition): when the log below the view's position is gone (cleaned,
replaced by an installed snapshot, or at start-up) the view starts over from the snapshot
and replays the log after it. Record layout (docs/server.md "Consumer group offsets"):
key = ``OFFSET_KEY_PREFIX`` + Kafka's OffsetCommitKey v1 (int16 version 1, group, topic,
int32 partition), value = Kafka's OffsetCommitValue v3 (int16 version 3, int64 offset,
int32 leader epoch, string metadata, int64 commit timestamp), strings as int16 length +
UTF-8 -- exactly what ``__consumer_offsets`` holds after the prefix.
"""

from __future__ import annotations

import logging
import struct

from kraftnode.log.metadata_log import MetadataLog
from kraftnode.log.snapshot import (
    SnapshotError,
    list_snapshots,
    read_snapshot_batches,
    snapshot_file_name,
)
from kraftnode.metadata.state_machine import snapshot_data_records
from recordbatch import CorruptBatchError
from recordbatch.wire import DecodeError

__all__ = ["OFFSET_KEY_PREFIX", "GroupOffsets", "decode_key", "decode_value", "encode_key", "encode_value"]

log = logging.getLogger("kraftnode.groups")

# Reserved key prefix of an offset-commit record; no metadata record has a key at all.
OFFSET_KEY_PREFIX = b"kraftnode.offsets\x00"
KEY_VERSION = 1
VALUE_VERSION = 3


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _read_str(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if n < 0:
        return "", pos
    if pos + n > len(data):
        raise ValueError("string runs past the end")
    return data[pos:pos + n].decode(), pos + n


def encode_key(group: str, topic: str, partition: int) -> bytes:
    return OFFSET_KEY_PREFIX + struct.pack(">h", KEY_VERSION) + _str(group) + _str(topic) + struct.pack(">i", partition)


def encode_value(offset: int, leader_epoch: int, metadata: str, ts: int) -> bytes:
    return (struct.pack(">hqi", VALUE_VERSION, offset, leader_epoch) + _str(metadata)
            + struct.pack(">q", ts))


def decode_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an offset-commit key; None for any other key."""
    if not key.startswith(OFFSET_KEY_PREFIX):
        return None
    data = key[len(OFFSET_KEY_PREFIX):]
    try:
        (version,) = struct.unpack_from(">h", data, 0)
        if version not in (0, 1):
            return None
        group, pos = _read_str(data, 2)
        topic, pos = _read_str(data, pos)
        (partition,) = struct.unpack_from(">i", data, pos)
    except (struct.error, ValueError, UnicodeDecodeError):
        return None
    return group, topic, partition


def decode_value(value: bytes) -> tuple[int, int, str] | None:
    """(offset, leader epoch, metadata) of an OffsetCommitValue v3; None if unreadable."""
    try:
        (version, offset, epoch) = struct.unpack_from(">hqi", value, 0)
        if version != VALUE_VERSION:
            return None
        metadata, _ = _read_str(value, 14)
    except (struct.error, ValueError, UnicodeDecodeError):
        return None
    return offset, epoch, metadata


class GroupOffsets:
    """The committed offsets view: replayed from the committed log, up to the high watermark."""

    def __init__(self) -> None:
        self.next_offset = 0
        # group -> (topic, partition) -> (offset, leader epoch, metadata)
        self.groups: dict[str, dict[tuple[str, int], tuple[int, int, str]]] = {}

    def catch_up(self, mlog: MetadataLog, high_watermark: int) -> None:
        if self.next_offset < mlog.start_offset:
            # the log below our position is gone (cleaned by retention, or replaced by a
            # snapshot installed with FetchSnapshot, or we just started): the offsets
            # committed there are in the snapshot, as the state machine's keyed records
            self.load_snapshot(mlog, high_watermark)
        if high_watermark <= self.next_offset:
            return
        for b in mlog.batches(self.next_offset, high_watermark):
            if b.base_offset >= high_watermark:
                break
            if b.is_control or b.producer_id >= 0:
                continue
            try:
                for r in b.records():
                    if r.offset < self.next_offset or r.offset >= high_watermark:
                        continue
                    if r.key is None or r.value is None:
                        continue
                    self.apply(bytes(r.key), bytes(r.value))
            except (CorruptBatchError, DecodeError, ValueError):
                continue
        self.next_offset = high_watermark

    def load_snapshot(self, mlog: MetadataLog, high_watermark: int) -> None:
        """Start over from the newest snapshot between the log start offset and what is
        committed (the offsets below its end are its keyed offset-commit records); the log
        after it is replayed by :meth:`catch_up`."""
        for _attempt in range(3):   # a snapshot may be deleted by cleaning while we look
            start = mlog.start_offset
            usable = [s for s in list_snapshots(mlog.dir) if start <= s.offset <= max(high_watermark, start)]
            groups: dict[str, dict[tuple[str, int], tuple[int, int, str]]] = {}
            self.groups = groups
            if not usable:
                log.warning("no snapshot covers the log start offset %d: committed offsets below it are "
                            "not known", start)
                self.next_offset = start
                return
            sid = usable[-1]
            try:
                for k, v in snapshot_data_records(read_snapshot_batches(mlog.dir / snapshot_file_name(sid))):
                    if k is not None and v is not None:
                        self.apply(k, v)
            except FileNotFoundError:
                continue
            except (SnapshotError, CorruptBatchError, ValueError, OSError) as e:
                log.warning("cannot read the committed offsets of snapshot %s: %s", snapshot_file_name(sid), e)
                self.groups = {}
                self.next_offset = start
                return
            self.next_offset = sid.offset
            return
        self.next_offset = mlog.start_offset

    def apply(self, key: bytes, value: bytes) -> None:
        k = decode_key(key)
        if k is None:
            return
        v = decode_value(value)
        if v is None:
            return
        group, topic, partition = k
        self.groups.setdefault(group, {})[(topic, partition)] = v
