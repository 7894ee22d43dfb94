"""Simple (standalone) consumer groups: FindCoordinator, OffsetCommit and OffsetFetch, as a
Kafka 3.9 broker's group coordinator serves them for consumers that ``assign()`` partitions
and commit with generation -1 and an empty member id.

Group membership (JoinGroup, SyncGroup, Heartbeat, ConsumerGroupHeartbeat) is not served,
so ``subscribe()`` does not work; a group here never has members. The committed offsets
are the replicated :class:`~kraftnode.server.metadata.group_offsets.GroupOffsets` view: an
OffsetCommit appends one batch and is answered once it commits (acks=all).
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH
from kraftnode.security import authorizer as az
from kraftnode.server.handlers.base import HandlerBase
from kraftnode.server.metadata.group_offsets import GroupOffsets, encode_key, encode_value
from kraftnode.server.raft import wire as rw
from kraftnode.server.raft.disk_log import RawBatches
from recordbatch import Record, build_batch

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


class GroupHandlers(HandlerBase):
    """FindCoordinator, OffsetCommit and OffsetFetch for groups without members."""

    def _offsets_caught_up(self) -> GroupOffsets:
        """The committed offsets view, replayed up to the high watermark."""
        view = self.group_offsets
        view.catch_up(self.driver.metadata_log, self.driver.high_watermark)
        return view

    def _coordinator_error(self) -> int:
        """NOT_COORDINATOR on a non-leader; COORDINATOR_LOAD_IN_PROGRESS on a leader that has not
        yet committed its epoch's first entry (earlier commits may still be unreplayed)."""
        if not self.driver.is_leader:
            return int(Errors.NOT_COORDINATOR)
        if self.driver.high_watermark <= self._epoch_start_offset():
            return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return int(Errors.NONE)

    async def _find_coordinator(self, q: w.FindCoordinatorRequest, v: int) -> w.FindCoordinatorResponse:
        R = w.FindCoordinatorResponse
        leader, _ = self.driver.leader_and_epoch()
        ep = self._voter_endpoints().get(leader) if leader >= 0 else None

        def answer(key: str) -> Any:
            c = R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=0, error_message=None)
            if q.key_type == GROUP_KEY_TYPE and v >= 4 and self.denied(az.GROUP, key, az.DESCRIBE,
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

    def _commit_refusal(self, q: w.OffsetCommitRequest, v: int, view: GroupOffsets) -> int:
        code = self._coordinator_error()
        if code:
            return code
        if self.kafka_controllers() or self.duties is None:
            # a Kafka raft node replaying this log accepts only key-less metadata records
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

    async def _offset_commit(self, q: w.OffsetCommitRequest, v: int) -> w.OffsetCommitResponse:
        R = w.OffsetCommitResponse
        view = self._offsets_caught_up()
        code = self._commit_refusal(q, v, view)
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
                if self.denied(az.TOPIC, t.name, az.READ, OFFSET_COMMIT):  # KafkaApis: READ per topic
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
            _, waiter = self.driver.append_nowait([RawBatches(build_batch(records, now_ms=now))])
            with anyio.move_on_after(self.driver.request_timeout_s):
                await waiter.done.wait()
            done = waiter.value
            err = (Errors.REQUEST_TIMED_OUT if done is None
                   else Errors.NOT_COORDINATOR if done.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                   else done.error_code)
            for pr in ok:
                pr.error_code = err
            if not err:
                self._offsets_caught_up()
        return R(throttle_time_ms=0, topics=topics)

    def _fetch_group(self, view: GroupOffsets, group: str, wanted: list[tuple[str, list[int]]] | None
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
            wanted = [(t, ps) for t, ps in wanted if not self.denied(az.TOPIC, t, az.DESCRIBE, OFFSET_FETCH)]
        out = []
        for topic, parts in wanted:
            rows = []
            denied = self.denied(az.TOPIC, topic, az.DESCRIBE, OFFSET_FETCH)
            for p in parts:
                off, epoch, md = (-1, -1, "") if denied else offsets.get((topic, p), (-1, -1, ""))
                rows.append((p, off, epoch, md, int(Errors.TOPIC_AUTHORIZATION_FAILED) if denied else 0))
            out.append((topic, rows))
        return out

    async def _offset_fetch(self, q: w.OffsetFetchRequest, v: int) -> w.OffsetFetchResponse:
        R = w.OffsetFetchResponse
        code = self._coordinator_error()
        view = self._offsets_caught_up()
        if v >= 8:
            groups = []
            for g in q.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                topics = []
                group_code = code
                if not code and self.denied(az.GROUP, g.group_id, az.DESCRIBE, OFFSET_FETCH):
                    group_code = Errors.GROUP_AUTHORIZATION_FAILED
                if not group_code:
                    for topic, rows in self._fetch_group(view, g.group_id, wanted):
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
            for topic, rows in self._fetch_group(view, q.group_id, wanted):
                out.append(R.OffsetFetchResponseTopic(name=topic, partitions=[
                    R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o,
                                                   committed_leader_epoch=e, metadata=md,
                                                   error_code=err)
                    for p, o, e, md, err in rows]))
        return R(throttle_time_ms=0, topics=out, error_code=code)
