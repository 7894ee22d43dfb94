"""Committed offsets (OffsetCommit, OffsetFetch, OffsetDelete): Kafka 3.9's
OffsetMetadataManager, sans-IO, a mixin of the group coordinator.
"""

from __future__ import annotations

from typing import Any

from kraftnode.groups import records as rec
from kraftnode.groups.classic import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    State,
)
from kraftnode.groups.consumer import ConsumerGroup
from kraftnode.groups.core import (
    CoordinatorCore,
    GroupError,
    Result,
)
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w

__all__ = ["OffsetManager"]


class OffsetManager(CoordinatorCore):
    """OffsetCommit, OffsetFetch and OffsetDelete, validated against either kind of group."""

    def offset_commit(self, token: Any, q: w.OffsetCommitRequest, version: int, now: int,
                      partition_errors: dict[tuple[str, int], int] | None = None) -> Result:
        """``partition_errors``: what the shell already refused per (topic, partition)
        (an unknown topic or topic id, an authorization failure): answered as given, not
        committed. From v10 the shell has named each topic by its id ("" for an unknown id)."""
        self._begin(now)
        R = w.OffsetCommitResponse
        refused = partition_errors or {}
        code = 0
        try:
            if not q.group_id:
                raise GroupError(Errors.INVALID_GROUP_ID)
            self._validate_offset_commit(q, version)
        except GroupError as e:
            code = e.code
        topics = []
        for t in q.topics:
            parts = []
            for p in t.partitions:
                err = code or refused.get((t.name, p.partition_index), 0)
                if not err and p.committed_metadata is not None and \
                        len(p.committed_metadata) > self.config.offset_metadata_max_bytes:
                    err = int(Errors.OFFSET_METADATA_TOO_LARGE)
                parts.append(R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=err))
                if not err:
                    # the commit time is the coordinator's: the request's own (v1) is gone
                    self._write([rec.offset_commit(q.group_id, t.name, p.partition_index, p.committed_offset,
                                                   p.committed_leader_epoch, p.committed_metadata or "", now)],
                                replay=True)
            # v10+ answers by topic id (the name is not on the wire), as it was asked
            topics.append(R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=parts))
        self._reply(token, R(throttle_time_ms=0, topics=topics))
        return self._end()

    def _validate_offset_commit(self, q: w.OffsetCommitRequest, version: int) -> None:
        grp = self.groups.get(q.group_id)
        gen = q.generation_id_or_member_epoch
        instance_id = getattr(q, "group_instance_id", None)
        if grp is None:
            if gen < 0:
                grp = ClassicGroup(q.group_id)
                self.groups[q.group_id] = grp
            elif version >= 9:
                raise GroupError(Errors.GROUP_ID_NOT_FOUND)
            else:
                raise GroupError(Errors.ILLEGAL_GENERATION)
        if isinstance(grp, ConsumerGroup):
            if gen < 0 and not grp.members:
                return
            m = grp.members.get(q.member_id)
            if m is None:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID)
            if version < 9:
                raise GroupError(Errors.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by "
                                                         "members using the modern group protocol")
            if gen != m.member_epoch:
                raise GroupError(Errors.STALE_MEMBER_EPOCH)
            return
        if grp.state == State.DEAD:
            raise GroupError(Errors.COORDINATOR_NOT_AVAILABLE)
        if gen < 0 and grp.state == State.EMPTY:
            return
        if gen >= 0 or q.member_id or instance_id is not None:
            self._validate_member(grp, q.member_id, instance_id)
            if gen != grp.generation_id:
                raise GroupError(Errors.ILLEGAL_GENERATION)
        elif grp.state != State.EMPTY:
            raise GroupError(Errors.UNKNOWN_MEMBER_ID)
        if grp.state == State.COMPLETING_REBALANCE:
            raise GroupError(Errors.REBALANCE_IN_PROGRESS)
        if grp.state in (State.STABLE, State.PREPARING_REBALANCE):
            cm = grp.members[q.member_id]
            self._reschedule_heartbeat(grp, cm, cm.session_timeout_ms)

    def offset_fetch(self, group_id: str, wanted: list[tuple[str, list[int]]] | None,
                     member_id: str | None = None, member_epoch: int = -1) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str]]]]]:
        """(group error, [(topic, [(partition, offset, leader epoch, metadata)])]): the
        partitions asked for (-1 where nothing is committed), or every committed one when
        ``wanted`` is None; a KIP-848 member is checked as Kafka does (UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH)."""
        grp = self.groups.get(group_id)
        if isinstance(grp, ConsumerGroup) and not (member_id is None and member_epoch < 0):
            m = grp.members.get(member_id or "")
            if m is None:
                return int(Errors.UNKNOWN_MEMBER_ID), []
            if member_epoch != m.member_epoch:
                return int(Errors.STALE_MEMBER_EPOCH), []
        offsets = self.offsets.get(group_id, {})
        if wanted is None:
            by_topic: dict[str, list[int]] = {}
            for (t, p) in sorted(offsets):
                by_topic.setdefault(t, []).append(p)
            wanted = list(by_topic.items())
        out = []
        for topic, parts in wanted:
            rows = []
            for p in parts:
                o = offsets.get((topic, p))
                rows.append((p, -1, -1, "") if o is None else (p, o[0], o[1], o[2]))
            out.append((topic, rows))
        return 0, out

    def offset_delete(self, token: Any, q: w.OffsetDeleteRequest, now: int) -> Result:
        self._begin(now)
        R = w.OffsetDeleteResponse
        grp = self.groups.get(q.group_id)
        code = 0
        if not q.group_id:
            code = int(Errors.INVALID_GROUP_ID)
        elif grp is None or (isinstance(grp, ClassicGroup) and grp.state == State.DEAD):
            code = int(Errors.GROUP_ID_NOT_FOUND)
        elif isinstance(grp, ClassicGroup) and grp.state != State.EMPTY and grp.protocol_type != CONSUMER_PROTOCOL_TYPE:
            code = int(Errors.NON_EMPTY_GROUP)
        if code:
            self._reply(token, R(error_code=code, throttle_time_ms=0, topics=[]))
            return self._end()
        assert grp is not None
        topics = []
        records = []
        for t in q.topics:
            subscribed = self._is_subscribed(grp, t.name)
            parts = []
            for p in t.partitions:
                if subscribed:
                    parts.append(R.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                                                 error_code=Errors.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                parts.append(R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=0))
                if (t.name, p.partition_index) in self.offsets.get(q.group_id, {}):
                    records.append(rec.offset_tombstone(q.group_id, t.name, p.partition_index))
            topics.append(R.OffsetDeleteResponseTopic(name=t.name, partitions=parts))
        self._write(records, replay=True)
        self._reply(token, R(error_code=0, throttle_time_ms=0, topics=topics))
        return self._end()

    def _is_subscribed(self, grp: ClassicGroup | ConsumerGroup, topic: str) -> bool:
        if isinstance(grp, ConsumerGroup):
            return topic in grp.subscribed_topic_names(topics=self.topics())
        if grp.subscribed is not None:
            return topic in grp.subscribed
        return grp.protocol_type == CONSUMER_PROTOCOL_TYPE and grp.state != State.EMPTY
