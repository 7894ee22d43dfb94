"""The active controller's picture of the metadata: the image at the end of its log.

Kafka's QuorumController keeps its managers' state at the end of the log it has written:
committed records plus the ones it appended and has not yet seen committed (replayed as they
are appended, reverted if leadership is lost). :class:`ControllerView` is that state: a
:class:`MetadataState` (the metadata image with Kafka's replay semantics) that the I/O shell
starts from a copy of the committed state when the node becomes the active controller and then
advances over every batch the log holds after it -- its own appends included, at the offsets
the log gave them. Besides the image it keeps what the managers look up by key:

* ``register_offsets`` -- the offset of each broker's RegisterBrokerRecord
  (``ClusterControlManager.registerBrokerRecordOffsets``): a broker is caught up, and may be
  unfenced, once its heartbeat reports a metadata offset at least this high;
* ``topics_by_name``;
* ``indexes`` (:class:`~kraftnode.controller.indexes.PartitionIndexes`): brokers to the
  partitions whose ISR holds them, leaderless and imbalanced partitions, leaderships per broker,
  colliding topic names -- so that no decision walks every partition.

All of them follow the image through a metadata transaction's abort as the image does.

A listener (the heartbeat manager's hook) sees every replayed record with its offset.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kraftnode.controller.indexes import PartitionIndexes
from kraftnode.controller.versions import MetadataVersion
from kraftnode.metadata.state import MetadataState
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

__all__ = ["MIGRATING_DIR", "UNASSIGNED_DIR", "LOST_DIR", "ControllerView", "ViewBuilder", "directory_online",
           "has_uncordoned_dirs", "java_uuid_key", "reserved_directory"]

# DirectoryId's reserved ids
MIGRATING_DIR = uuid.UUID(int=0)
UNASSIGNED_DIR = uuid.UUID(int=1)
LOST_DIR = uuid.UUID(int=2)

CONFIG_TOPIC = 2
CONFIG_BROKER = 4


def reserved_directory(u: uuid.UUID) -> bool:
    """DirectoryId.reserved: the first 100 ids (most significant half zero)."""
    return (u.int >> 64) == 0 and (u.int & 0xFFFFFFFFFFFFFFFF) < 100


def _signed64(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def java_uuid_key(u: uuid.UUID) -> tuple[int, int]:
    """Sort key of org.apache.kafka.common.Uuid.compareTo (signed halves)."""
    return _signed64(u.int >> 64), _signed64(u.int & 0xFFFFFFFFFFFFFFFF)


def directory_online(d: uuid.UUID, online: list[uuid.UUID]) -> bool:
    """DirectoryId.isOnline."""
    if d in (UNASSIGNED_DIR, MIGRATING_DIR):
        return True
    if d == LOST_DIR:
        return False
    return not online or d in online


def has_uncordoned_dirs(reg: RegisterBrokerRecord) -> bool:
    """BrokerRegistration.hasUncordonedDirs (KIP-1066): a broker without directories or without
    cordoned ones (null: it never said), or with a directory not cordoned, may get new replicas."""
    dirs = list(reg.log_dirs or [])
    cordoned = reg.cordoned_log_dirs
    if not dirs or cordoned is None:
        return True
    return bool(set(dirs) - set(cordoned))


class ControllerView(MetadataState):
    """A :class:`MetadataState` with the controller's indexes (see the module docstring).

    Application data (Produce, OffsetCommit) is counted, not decoded: the controller needs
    only ``foreign_records`` (BrokerRegistration is refused while the log holds any), and the
    view replays every batch the leader appends, so under a full Produce load decoding them
    here stalled the leader's event loop once a second."""

    keeps_application_data = False

    def __init__(self) -> None:
        super().__init__()
        self.register_offsets: dict[int, int] = {}
        self.topics_by_name: dict[str, uuid.UUID] = {}
        self.indexes = PartitionIndexes()
        self.listener: Callable[[Any, int], None] | None = None
        # the indexes as they were before an open metadata transaction (restored on abort)
        self._indexes_before: tuple[PartitionIndexes, dict[str, uuid.UUID], dict[int, int]] | None = None

    @classmethod
    def of(cls, committed: MetadataState) -> ControllerView:
        """A copy of ``committed`` that later replays do not share.

        A broker registered before ``committed`` was built gets its broker epoch as its
        registration offset (the offset of the batch that registered it; an amended
        registration of the same incarnation is written later, so a broker may be judged
        caught up a few offsets early after a failover -- it is still fenced until its
        heartbeat says it has replayed that far)."""
        b = ViewBuilder(committed)
        while not b.step(1 << 62):
            pass
        return b.view

    def _indexes_of(self, image: Any) -> PartitionIndexes:
        ix = PartitionIndexes.of(((tid, t.name) for tid, (t, _v) in image.topics.items()), ())
        for tid, parts in image.partitions.items():
            ix.add_partitions(tid, ((pid, rec) for pid, (rec, _v) in parts.items()))
        return ix

    def _index_image(self) -> None:
        """Every index computed from the image: once, when the view is made from a state."""
        b = ViewBuilder(None, self)
        while not b.step(1 << 62):
            pass

    def load_snapshot(self, records: Any) -> None:
        super().load_snapshot(records)
        self._indexes_before = None
        self._index_image()

    def index_differences(self) -> list[str]:
        """Where the kept indexes differ from a recomputation over the image (the simulation's
        check after every committed batch); empty when they agree."""
        image = self.image
        out = self.indexes.differences(((tid, t.name) for tid, (t, _v) in image.topics.items()),
                                       ((tid, pid, rec) for tid, parts in image.partitions.items()
                                        for pid, (rec, _v) in parts.items()))
        names = {t.name: tid for tid, (t, _ver) in image.topics.items()}
        if names != self.topics_by_name:
            out.append(f"topics_by_name: kept {sorted(self.topics_by_name)}, image {sorted(names)}")
        return out

    # ------------------------------------------------------------------ replay
    def replay_decoded(self, b: Any, end_offset: int, decoded: list[tuple[int, Any, int]] | None) -> None:
        """Replay batch ``b`` (up to ``end_offset``) from its records as another state decoded
        them -- (offset, message, version); None for a control or application batch, whose header
        says what the view keeps of it -- so that a standby decodes each committed batch once."""
        if decoded is None:
            self.apply(b, end_offset)
            return
        for offset, m, version in decoded:
            if offset < self.next_offset or offset >= end_offset:
                continue
            self.metadata_records += 1
            self._apply(m, offset, version)
        if self.features_changed and self.transaction_start == -1:
            self.features_epoch = min(b.last_offset, end_offset - 1)
            self.features_changed = False
        self.next_offset = max(self.next_offset, min(b.last_offset + 1, end_offset))

    def replay(self, m: Any, version: int, offset: int) -> None:
        """Replay one record at ``offset`` (tests and the simulation feed records this way; the
        shell replays whole batches from the log)."""
        self.metadata_records += 1
        self._apply(m, offset, version)
        self.next_offset = max(self.next_offset, offset + 1)

    def _apply(self, m: Any, offset: int, version: int = 0) -> None:
        image = self.image
        if isinstance(m, (PartitionRecord, PartitionChangeRecord)):
            got = image.partitions.get(m.topic_id, {}).get(m.partition_id)
            super()._apply(m, offset, version)
            new = self.image.partitions.get(m.topic_id, {}).get(m.partition_id)
            if new is not got:
                self.indexes.replace(m.topic_id, m.partition_id, None if got is None else got[0],
                                     None if new is None else new[0])
        elif isinstance(m, RemoveTopicRecord):
            topic = image.topics.get(m.topic_id)
            parts = image.partitions.get(m.topic_id, {})
            super()._apply(m, offset, version)
            if topic is not None:
                self.topics_by_name.pop(topic[0].name, None)
                self.indexes.remove_topic(m.topic_id, topic[0].name, ((pid, rec) for pid, (rec, _v) in parts.items()))
        else:
            self._apply_other(m, offset, version)
        if self.listener is not None:
            self.listener(m, offset)

    def _apply_other(self, m: Any, offset: int, version: int) -> None:
        if isinstance(m, BeginTransactionRecord):
            self._indexes_before = (self.indexes.copy(), dict(self.topics_by_name), dict(self.register_offsets))
        elif isinstance(m, EndTransactionRecord):
            self._indexes_before = None
        elif isinstance(m, AbortTransactionRecord) and self._before_transaction is not None \
                and self._indexes_before is not None:
            self.indexes, self.topics_by_name, self.register_offsets = self._indexes_before
            self._indexes_before = None
        super()._apply(m, offset, version)
        if isinstance(m, RegisterBrokerRecord):
            self.register_offsets[m.broker_id] = offset
        elif isinstance(m, UnregisterBrokerRecord):
            if m.broker_id not in self.image.brokers:
                self.register_offsets.pop(m.broker_id, None)
        elif isinstance(m, TopicRecord):
            self.topics_by_name[m.name] = m.topic_id
            self.indexes.add_topic(m.topic_id, m.name)

    # ------------------------------------------------------------------ queries
    @property
    def mv(self) -> MetadataVersion:
        return MetadataVersion(self.image.features.get("metadata.version", 1))

    def broker(self, broker_id: int) -> RegisterBrokerRecord | None:
        got = self.image.brokers.get(broker_id)
        return None if got is None else got[0]

    def brokers(self) -> dict[int, RegisterBrokerRecord]:
        return {b: reg for b, (reg, _v) in self.image.brokers.items()}

    def is_active(self, broker_id: int) -> bool:
        """ClusterControlManager.isActive: registered, not fenced, not in controlled shutdown."""
        reg = self.broker(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    def has_online_dir(self, broker_id: int, directory: uuid.UUID) -> bool:
        reg = self.broker(broker_id)
        return reg is not None and directory_online(directory, list(reg.log_dirs or []))

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """ClusterControlManager.defaultDir: the broker's only directory, else UNASSIGNED
        (MIGRATING for a registration without directories)."""
        reg = self.broker(broker_id)
        if reg is None:
            return UNASSIGNED_DIR
        dirs = list(reg.log_dirs or [])
        if not dirs:
            return MIGRATING_DIR
        return dirs[0] if len(dirs) == 1 else UNASSIGNED_DIR

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self.topics_by_name.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        t = self.image.topics.get(topic_id)
        return None if t is None else t[0].name

    def partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionRecord]:
        return {p: rec for p, (rec, _v) in self.image.partitions.get(topic_id, {}).items()}

    def partition(self, topic_id: uuid.UUID, partition_id: int) -> PartitionRecord | None:
        got = self.image.partitions.get(topic_id, {}).get(partition_id)
        return None if got is None else got[0]

    def all_partitions(self) -> Iterator[tuple[uuid.UUID, int, PartitionRecord]]:
        for tid, parts in self.image.partitions.items():
            for pid, (rec, _v) in parts.items():
                yield tid, pid, rec

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.image.configs.get((CONFIG_TOPIC, topic), {}))

    def config(self, resource_type: int, name: str) -> dict[str, str]:
        return dict(self.image.configs.get((resource_type, name), {}))


class ViewBuilder:
    """:meth:`ControllerView.of` in steps, so that a standby builds its view of a million
    partitions without stopping its event loop for seconds (fetches, heartbeats): the
    committed state is copied at once (a consistent point; the containers only, about a tenth
    of the work), then the indexes are computed over the copy -- which nothing else touches --
    a bounded number of partitions per :meth:`step`. The view is at the committed state's
    offset of the copy; the caller replays what was committed meanwhile."""

    def __init__(self, committed: MetadataState | None, view: ControllerView | None = None) -> None:
        if view is None:
            view = ControllerView()
            assert committed is not None
            committed.copy_metadata_to(view)
        self.view = view
        image = view.image
        view.register_offsets = {bid: int(reg.broker_epoch) for bid, (reg, _v) in image.brokers.items()}
        view.topics_by_name = {t.name: tid for tid, (t, _ver) in image.topics.items()}
        view.indexes = PartitionIndexes.of(((tid, t.name) for tid, (t, _v) in image.topics.items()), ())
        self._topics = list(image.partitions.items())
        self._next = 0

    def step(self, partitions: int) -> bool:
        """Index about ``partitions`` more partitions (whole topics); True once the view is built."""
        ix = self.view.indexes
        topics, i, done = self._topics, self._next, 0
        while i < len(topics) and done < partitions:
            tid, parts = topics[i]
            ix.add_partitions(tid, ((pid, rec) for pid, (rec, _v) in parts.items()))
            done += len(parts)
            i += 1
        self._next = i
        if i < len(topics):
            return False
        v = self.view
        before = v.image_before_transaction
        if before is not None:
            v._indexes_before = (v._indexes_of(before), {t.name: tid for tid, (t, _v) in before.topics.items()},
                                 dict(v.register_offsets))
        return True
