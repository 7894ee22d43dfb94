"""The on-disk ``MetadataLog`` seen through the Raft core's ``RaftLog`` protocol.

Batches stay bytes on this path: data batches are carried as zero-copy views of
what was read from a segment or received in a Fetch response, and only control
batches are decoded (the core must see LeaderChange, Voters and KRaftVersion).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kraftnode.log.metadata_log import AppendInfo, MetadataLog
from kraftnode.log.snapshot import (
    SnapshotId,
    list_snapshots,
    read_snapshot_batches,
    snapshot_file_name,
)
from kraftnode.raft.batches import (
    Batch,
    ControlRecord,
    KRaftVersionControlRecord,
    LeaderChangeRecord,
    VotersControlRecord,
)
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet
from kraftnode.server.metrics import latency_trace
from recordbatch import BatchView, Record, build_batch, iter_batches
from recordbatch.control import build_kraft_control_batch, decode_control_record
from recordbatch.generated import KRaftVersionRecord, LeaderChangeMessage, VotersRecord

if TYPE_CHECKING:
    from kraftnode.server.metrics.recording import RaftMetrics

_log = logging.getLogger("kraftnode.log")

_Bytes = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class DiskBatch(Batch):
    """A batch together with its exact v2 bytes (a view into a segment or a frame)."""

    raw: bytes | memoryview = b""
    span: memoryview | None = None   # the read buffer ``raw`` is a slice of (for zero-copy responses)
    span_pos: int = 0


class RawBatches:
    """Application payload for :meth:`DiskRaftLog.append_as_leader`: complete v2 batches
    (as a producer sent them) to be appended with offsets and epoch assigned."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = data


# ------------------------------------------------------------------ control records
def to_control_messages(records: Sequence[object]) -> list[Any]:
    out: list[Any] = []
    for r in records:
        if isinstance(r, LeaderChangeRecord):
            out.append(LeaderChangeMessage(
                version_=0, leader_id=r.leader_id,
                voters=[LeaderChangeMessage.Voter(voter_id=k.id) for k in r.voters],
                granting_voters=[LeaderChangeMessage.Voter(voter_id=k.id) for k in r.granting_voters]))
        elif isinstance(r, VotersControlRecord):
            out.append(VotersRecord(version_=0, voters=[
                VotersRecord.Voter(
                    voter_id=n.key.id, voter_directory_id=n.key.wire_directory_id(),
                    endpoints=[VotersRecord.Endpoint(name=e.name, host=e.host, port=e.port)
                               for e in n.endpoints],
                    kraft_version_feature=VotersRecord.KRaftVersionFeature(
                        min_supported_version=n.min_kraft_version,
                        max_supported_version=n.max_kraft_version))
                for n in r.voters]))
        elif isinstance(r, KRaftVersionControlRecord):
            out.append(KRaftVersionRecord(version_=0, kraft_version=r.kraft_version))
        else:
            raise TypeError(f"not a KRaft control record: {r!r}")
    return out


def from_control_message(value: Any) -> ControlRecord | None:
    if isinstance(value, LeaderChangeMessage):
        return LeaderChangeRecord(
            leader_id=value.leader_id,
            voters=tuple(ReplicaKey.of(v.voter_id, v.voter_directory_id) for v in value.voters),
            granting_voters=tuple(ReplicaKey.of(v.voter_id, v.voter_directory_id)
                                  for v in value.granting_voters))
    if isinstance(value, VotersRecord):
        return VotersControlRecord(VoterSet.of(
            VoterNode(ReplicaKey.of(v.voter_id, v.voter_directory_id),
                      tuple(Endpoint(e.name, e.host, e.port) for e in v.endpoints),
                      v.kraft_version_feature.min_supported_version,
                      v.kraft_version_feature.max_supported_version)
            for v in value.voters))
    if isinstance(value, KRaftVersionRecord):
        return KRaftVersionControlRecord(value.kraft_version)
    return None


def batch_from_view(v: BatchView, span: memoryview | None = None, span_pos: int = 0) -> DiskBatch:
    records: tuple[object, ...] = ()
    if v.is_control:
        decoded = []
        for rec in v.records():
            cr = from_control_message(decode_control_record(rec)[1])
            if cr is not None:
                decoded.append(cr)
        records = tuple(decoded)
    return DiskBatch(v.base_offset, v.last_offset, v.partition_leader_epoch, records,
                     v.is_control, v.size_in_bytes, raw=v.buffer, span=span, span_pos=span_pos)


def batches_from_records(data: bytes | memoryview | None) -> list[DiskBatch]:
    """Parse a Fetch response's records (a trailing partial batch is dropped, as Kafka does)."""
    if not data:
        return []
    return [batch_from_view(v) for v in iter_batches(data)]


def records_from_batches(batches: Sequence[Batch]) -> bytes | memoryview:
    """The wire ``Records`` for batches read from this log: one zero-copy view when
    they are consecutive pieces of one read buffer (the normal case), else joined."""
    disk = [b for b in batches if isinstance(b, DiskBatch)]
    if not disk:
        return b""
    first, last = disk[0], disk[-1]
    if first.span is not None and all(
        b.span is first.span and b.span_pos == a.span_pos + a.size_bytes
        for a, b in zip(disk, disk[1:], strict=False)
    ):
        return first.span[first.span_pos:last.span_pos + last.size_bytes]
    return b"".join(b.raw for b in disk)


class DiskRaftLog:
    """:class:`kraftnode.raft.log.RaftLog` over :class:`MetadataLog`."""

    def __init__(self, log: MetadataLog, partition_dir: Path,
                 on_append: Any = None, on_truncate: Any = None) -> None:
        self.log = log
        self.partition_dir = partition_dir
        # observers of appended batch headers / truncations (producer state)
        self.on_append = on_append
        self.on_truncate = on_truncate
        #: records appended / fetched, for append-records-rate and fetch-records-rate
        self.metrics: RaftMetrics | None = None

    @property
    def start_offset(self) -> int:
        return self.log.start_offset

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def last_fetched_epoch(self) -> int:
        if self.log.end_offset == self.log.start_offset:
            snap = self.latest_snapshot_id()
            if snap is not None:
                return snap.epoch
        return self.log.last_fetched_epoch

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        e, off = self.log.end_offset_for_epoch(epoch)
        return OffsetAndEpoch(e, off)

    def append_as_leader(self, records: Sequence[object], epoch: int, is_control: bool = False) -> Batch:
        now = int(time.time() * 1000)
        if is_control:
            data: bytes | bytearray | memoryview | list[bytes] = build_kraft_control_batch(
                to_control_messages(records), base_offset=0, partition_leader_epoch=epoch,
                timestamp=now)
        else:
            parts: list[bytes] = []
            loose: list[Record] = []
            for r in records:
                if isinstance(r, RawBatches):
                    if loose:
                        parts.append(build_batch(loose, now_ms=now))
                        loose = []
                    parts.append(bytes(r.data))
                else:
                    # anything else is one record's value (bytes-like) or None
                    loose.append(Record(None, None if r is None else bytes(cast(_Bytes, r))))
            if loose:
                parts.append(build_batch(loose, now_ms=now))
            data = parts
        if latency_trace.ON:
            latency_trace.mark("log.start", self.log.end_offset)
        info = self.log.append_as_leader(data, epoch)
        if latency_trace.ON:
            latency_trace.mark("log.end", self.log.end_offset)
        if self.metrics is not None:
            self.metrics.append_records.record(info.last_offset - info.first_offset + 1, now)
        if self.on_append is not None and not is_control:
            self._notify(info)
        return Batch(info.first_offset, info.last_offset, epoch, tuple(records), is_control,
                     info.size_in_bytes)

    def append_as_follower(self, batches: Sequence[Batch]) -> None:
        raws = [b.raw for b in batches if isinstance(b, DiskBatch)]
        if len(raws) != len(batches):
            raise TypeError("followers append batches parsed from Fetch responses")
        if raws:
            if latency_trace.ON:
                latency_trace.mark("log.start", self.log.end_offset)
            info = self.log.append_as_follower(raws[0] if len(raws) == 1 else b"".join(raws))
            if latency_trace.ON:
                latency_trace.mark("log.end", self.log.end_offset)
            if self.metrics is not None:
                self.metrics.fetch_records.record(info.last_offset - info.first_offset + 1,
                                                  int(time.time() * 1000))
            if self.on_append is not None:
                self._notify(info)

    def _notify(self, info: AppendInfo) -> None:
        """Hand the headers of the batches just appended (the views the log appended
        them from; no re-read, no records decoded) to ``on_append``."""
        if info.views:
            self.on_append(info.views)

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.end_offset:
            before = self.log.end_offset
            self.log.truncate_to(offset)
            _log.info("truncated the log to offset %d (end offset was %d; the leader's log "
                      "diverges there)", self.log.end_offset, before)
            if self.on_truncate is not None:
                self.on_truncate(offset)

    def read(self, from_offset: int, max_bytes: int) -> list[Batch]:
        span = self.log.read(from_offset, max_bytes).records
        out: list[Batch] = []
        pos = 0
        for v in iter_batches(span):
            out.append(batch_from_view(v, span, pos))
            pos += v.size_in_bytes
        return out

    def control_batches(self, from_offset: int) -> Iterable[Batch]:
        for v in self.log.batches(from_offset):
            if v.is_control:
                yield batch_from_view(v)

    _snapshot_cache: tuple[OffsetAndEpoch | None] | None = None

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        # asked on every Fetch: cached, and refreshed when a snapshot is installed
        if self._snapshot_cache is None:
            snaps = list_snapshots(self.partition_dir)
            best = max(snaps, key=lambda x: (x.offset, x.epoch)) if snaps else None
            self._snapshot_cache = (None if best is None else OffsetAndEpoch(best.epoch, best.offset),)
        return self._snapshot_cache[0]

    def snapshots_changed(self) -> None:
        self._snapshot_cache = None

    def latest_snapshot_control_records(self) -> Sequence[ControlRecord]:
        sid = self.latest_snapshot_id()
        if sid is None:
            return ()
        path = self.partition_dir / snapshot_file_name(SnapshotId(sid.offset, sid.epoch))
        return [cr for v in read_snapshot_batches(path) if v.is_control
                for cr in batch_from_view(v).records
                if isinstance(cr, VotersControlRecord | KRaftVersionControlRecord)]

    def flush(self) -> None:
        self.log.flush()



class DiskSnapshotStore:
    """:class:`kraftnode.raft.snapshots.SnapshotStore` over ``<offset>-<epoch>.checkpoint``
    files: serves chunks to lagging replicas and installs a downloaded snapshot
    (``.checkpoint.part``, fsync, rename, then the log restarts at its end offset)."""

    def __init__(self, rlog: DiskRaftLog) -> None:
        self.rlog = rlog
        self._writer: Any = None

    def _path(self, sid: OffsetAndEpoch) -> Path:
        return self.rlog.partition_dir / snapshot_file_name(SnapshotId(sid.offset, sid.epoch))

    def read_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int,
                            max_bytes: int) -> tuple[bytes, int] | None:
        from kraftnode.log.snapshot import SnapshotError, SnapshotReader

        path = self._path(snapshot_id)
        if not path.exists():
            return None
        reader = SnapshotReader(path)
        try:
            return reader.read(position, max_bytes), reader.size
        except SnapshotError:
            return None
        finally:
            reader.close()

    def begin_snapshot_download(self, snapshot_id: OffsetAndEpoch) -> None:
        from kraftnode.log.snapshot import SnapshotWriter, delete_snapshot

        if self._writer is not None:
            self._writer.close()
        sid = SnapshotId(snapshot_id.offset, snapshot_id.epoch)
        delete_snapshot(self.rlog.partition_dir, sid)
        self._writer = SnapshotWriter(self.rlog.partition_dir, sid)

    def write_snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, data: bytes) -> None:
        w = self._writer
        if w is None or w.id != SnapshotId(snapshot_id.offset, snapshot_id.epoch) or position != w.size:
            raise ValueError(f"snapshot chunk at {position} does not continue the download")
        w.append(data)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> Sequence[ControlRecord]:
        from kraftnode.log.snapshot import validate_snapshot

        w = self._writer
        if w is None:
            raise ValueError("no snapshot download in progress")
        path = w.freeze()
        self._writer = None
        validate_snapshot(path)
        self.rlog.log.truncate_fully_and_start_at(snapshot_id.offset)
        # older snapshots are below the new log start: forget them (KafkaMetadataLog's
        # truncateToLatestSnapshot removes them too)
        from kraftnode.log.snapshot import delete_snapshot, list_snapshots

        for old in list_snapshots(self.rlog.partition_dir):
            if old.offset < snapshot_id.offset:
                delete_snapshot(self.rlog.partition_dir, old)
        self.rlog.snapshots_changed()
        _log.info("installed snapshot %s; the log restarts at offset %d", path.name, snapshot_id.offset)
        return self.rlog.latest_snapshot_control_records()
