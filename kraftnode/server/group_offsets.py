"""Committed offsets of simple (standalone) consumer groups: FindCoordinator, OffsetCommit
and OffsetFetch, as a Kafka 3.9 broker's group coordinator serves them for consumers that
``assign()`` partitions and commit with generation -1 and an empty member id.

Group membership (JoinGroup, SyncGroup, Heartbeat, ConsumerGroupHeartbeat) is not served,
so ``subscribe()`` does not work; a group here never has members.

Offsets are replicated and durable as Kafka's ``__consumer_offsets`` is: an OffsetCommit
appends one batch to the raft log and is answered once that batch is committed (acks=all);
every replica replays committed batches into :class:`GroupOffsets`, so a new leader answers
OffsetFetch with what the old one accepted. The records are keyed, so the state machine's
snapshots carry the latest offset per (group, topic, partition): when the log below the
view's position is gone (cleaned, replaced by an installed snapshot, or at start-up) the
view starts over from the snapshot and replays the log after it. Record layout (docs/server.md "Consumer group
offsets"): key = ``OFFSET_KEY_PREFIX`` + Kafka's OffsetCommitKey v1 (int16 version 1,
group, topic, int32 partition), value = Kafka's OffsetCommitValue v3 (int16 version 3,
int64 offset, int32 leader epoch, string metadata, int64 commit timestamp), strings as
int16 length + UTF-8 -- exactly what ``__consumer_offsets`` holds after the prefix.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import TYPE_CHECKING, Any

import anyio

from kraftnode.log.snapshot import (
    SnapshotError,
    list_snapshots,
    read_snapshot_batches,
    snapshot_file_name,
)
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH
from kraftnode.server import raft_wire as rw
from kraftnode.server.raft_log import RawBatches
from kraftnode.server.security import authorizer as az
from kraftnode.server.state_machine import snapshot_data_records
from recordbatch import CorruptBatchError, Record, build_batch
from recordbatch.wire import DecodeError

if TYPE_CHECKING:
    from kraftnode.server.handlers.base import HandlerBase

log = logging.getLogger("kraftnode.groups")

# Reserved key prefix of an offset-commit record; no metadata record has a key at all.
OFFSET_KEY_PREFIX = b"kraftnode.offsets\x00"
KEY_VERSION = 1
VALUE_VERSION = 3
GENERATION_UNKNOWN = -1

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


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

    def catch_up(self, mlog: Any, high_watermark: int) -> None:
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

    def load_snapshot(self, mlog: Any, high_watermark: int) -> None:
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


# ------------------------------------------------------------------ handlers
def _catch_up(h: HandlerBase) -> GroupOffsets:
    view: GroupOffsets = h.group_offsets
    view.catch_up(h.driver.metadata_log, h.driver.high_watermark)
    return view


def _coordinator_error(h: HandlerBase) -> int:
    """NOT_COORDINATOR on a non-leader; COORDINATOR_LOAD_IN_PROGRESS on a leader that has not
    yet committed its epoch's first entry (earlier commits may still be unreplayed)."""
    if not h.driver.is_leader:
        return int(Errors.NOT_COORDINATOR)
    if h.driver.high_watermark <= h._epoch_start_offset():
        return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
    return int(Errors.NONE)


async def find_coordinator(h: HandlerBase, q: w.FindCoordinatorRequest, v: int) -> w.FindCoordinatorResponse:
    R = w.FindCoordinatorResponse
    leader, _ = h.driver.leader_and_epoch()
    ep = h._voter_endpoints().get(leader) if leader >= 0 else None

    def answer(key: str) -> Any:
        c = R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=0, error_message=None)
        if q.key_type == GROUP_KEY_TYPE and v >= 4 and h._denied(az.GROUP, key, az.DESCRIBE,
                                                                  FIND_COORDINATOR):
            # KafkaApis.getCoordinator (v0-3 are refused whole, security.api_checks)
            c.error_code = Errors.GROUP_AUTHORIZATION_FAILED
            c.error_message = "Group authorization failed."
        elif q.key_type == GROUP_KEY_TYPE:
            if ep is None:
                c.error_code = Errors.COORDINATOR_NOT_AVAILABLE
            else:
                c.node_id, c.host, c.port = leader, ep[0], ep[1]
        elif q.key_type == TRANSACTION_KEY_TYPE:
            # Kafka answers COORDINATOR_NOT_AVAILABLE while it has no transaction state
            # partition for the id; kraftnode has no transaction coordinator at all
            c.error_code = Errors.COORDINATOR_NOT_AVAILABLE
        else:
            c.error_code = Errors.INVALID_REQUEST
            c.error_message = f"Unknown coordinator type: {q.key_type}"
        return c

    if v >= 4:
        return R(throttle_time_ms=0, coordinators=[answer(k) for k in q.coordinator_keys])
    c = answer(q.key)
    return R(throttle_time_ms=0, error_code=c.error_code, error_message=c.error_message,
             node_id=c.node_id, host=c.host, port=c.port)


def _commit_refusal(h: HandlerBase, q: w.OffsetCommitRequest, v: int, view: GroupOffsets) -> int:
    code = _coordinator_error(h)
    if code:
        return code
    if h.kafka_controllers() or h.duties is None or h.registered_brokers():
        # a Kafka raft node (or broker) replaying this log accepts only key-less metadata records
        return int(Errors.COORDINATOR_NOT_AVAILABLE)
    if not q.group_id:
        return int(Errors.INVALID_GROUP_ID)
    if q.generation_id_or_member_epoch < 0 and not q.member_id:
        return int(Errors.NONE)  # a simple group: no generation, no member
    if q.group_id in view.groups:
        # an empty group: every member id is unknown (ClassicGroup.validateOffsetCommit)
        return int(Errors.UNKNOWN_MEMBER_ID) if q.member_id else int(Errors.ILLEGAL_GENERATION)
    if q.generation_id_or_member_epoch < 0:
        return int(Errors.UNKNOWN_MEMBER_ID)
    return int(Errors.GROUP_ID_NOT_FOUND) if v >= 9 else int(Errors.ILLEGAL_GENERATION)


async def offset_commit(h: HandlerBase, q: w.OffsetCommitRequest, v: int) -> w.OffsetCommitResponse:
    R = w.OffsetCommitResponse
    view = _catch_up(h)
    code = _commit_refusal(h, q, v, view)
    now = int(time.time() * 1000)
    records: list[Record] = []
    topics = []
    for t in q.topics:
        parts = []
        for p in t.partitions:
            pr = R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            parts.append(pr)
            if code:
                continue
            if h._denied(az.TOPIC, t.name, az.READ, OFFSET_COMMIT):  # KafkaApis: READ per topic
                pr.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                continue
            if t.name != rw.METADATA_TOPIC or p.partition_index != 0:
                pr.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            ts = p.commit_timestamp if v == 1 and p.commit_timestamp >= 0 else now
            records.append(Record(key=encode_key(q.group_id, t.name, p.partition_index),
                                  value=encode_value(p.committed_offset, p.committed_leader_epoch,
                                                     p.committed_metadata or "", ts)))
        topics.append(R.OffsetCommitResponseTopic(name=t.name, partitions=parts))
    if records:
        ok = [pr for t in topics for pr in t.partitions if pr.error_code == 0]
        _, waiter = h.driver.append_nowait([RawBatches(build_batch(records, now_ms=now))])
        with anyio.move_on_after(h.driver.request_timeout_s):
            await waiter.done.wait()
        done = waiter.value
        err = (Errors.REQUEST_TIMED_OUT if done is None
               else Errors.NOT_COORDINATOR if done.error_code == Errors.NOT_LEADER_OR_FOLLOWER
               else done.error_code)
        for pr in ok:
            pr.error_code = err
        if not err:
            _catch_up(h)
    return R(throttle_time_ms=0, topics=topics)


def _fetch_group(h: HandlerBase, view: GroupOffsets, group: str, wanted: list[tuple[str, list[int]]] | None
                 ) -> list[tuple[str, list[tuple[int, int, int, str, int]]]]:
    """(topic, [(partition, offset, epoch, metadata, error)]) for the partitions asked for;
    all the group's committed partitions when ``wanted`` is None. Unknown ones get offset -1.
    With an authorizer (KafkaApis.handleOffsetFetchRequest): a topic asked for by name that
    the caller may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED; such topics are left out
    of an all-topics answer."""
    offsets = view.groups.get(group, {})
    if wanted is None:
        by_topic: dict[str, list[int]] = {}
        for (t, p) in sorted(offsets):
            by_topic.setdefault(t, []).append(p)
        wanted = list(by_topic.items())
        # all the group's topics: those the caller may not describe are left out
        wanted = [(t, ps) for t, ps in wanted if not h._denied(az.TOPIC, t, az.DESCRIBE, OFFSET_FETCH)]
    out = []
    for topic, parts in wanted:
        rows = []
        denied = h._denied(az.TOPIC, topic, az.DESCRIBE, OFFSET_FETCH)
        for p in parts:
            off, epoch, md = (-1, -1, "") if denied else offsets.get((topic, p), (-1, -1, ""))
            rows.append((p, off, epoch, md, int(Errors.TOPIC_AUTHORIZATION_FAILED) if denied else 0))
        out.append((topic, rows))
    return out


async def offset_fetch(h: HandlerBase, q: w.OffsetFetchRequest, v: int) -> w.OffsetFetchResponse:
    R = w.OffsetFetchResponse
    code = _coordinator_error(h)
    view = _catch_up(h)
    if v >= 8:
        groups = []
        for g in q.groups:
            wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
            topics = []
            group_code = code
            if not code and h._denied(az.GROUP, g.group_id, az.DESCRIBE, OFFSET_FETCH):
                group_code = Errors.GROUP_AUTHORIZATION_FAILED
            if not group_code:
                for topic, rows in _fetch_group(h, view, g.group_id, wanted):
                    topics.append(R.OffsetFetchResponseTopics(name=topic, partitions=[
                        R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=o,
                                                        committed_leader_epoch=e, metadata=md,
                                                        error_code=err)
                        for p, o, e, md, err in rows]))
            groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics,
                                                     error_code=group_code))
        return R(throttle_time_ms=0, groups=groups)
    wanted = None if q.topics is None else [(t.name, list(t.partition_indexes)) for t in q.topics]
    out = []
    if code and v < 2:
        # no top-level error before v2: every partition asked for carries it
        for topic, parts in wanted or []:
            out.append(R.OffsetFetchResponseTopic(name=topic, partitions=[
                R.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1,
                                               committed_leader_epoch=-1, metadata="", error_code=code)
                for p in parts]))
        return R(throttle_time_ms=0, topics=out)
    if not code:
        for topic, rows in _fetch_group(h, view, q.group_id, wanted):
            out.append(R.OffsetFetchResponseTopic(name=topic, partitions=[
                R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o,
                                               committed_leader_epoch=e, metadata=md,
                                               error_code=err)
                for p, o, e, md, err in rows]))
    return R(throttle_time_ms=0, topics=out, error_code=code)


HANDLERS: dict[int, Any] = {
    FIND_COORDINATOR: find_coordinator, OFFSET_COMMIT: offset_commit, OFFSET_FETCH: offset_fetch,
}
