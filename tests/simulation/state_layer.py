"""The REAL state machine inside the raft simulation (issue 14, must-show 4).

Every simulated node applies its committed log to kraftnode's default state machine
(:class:`~kraftnode.metadata.state.MetadataState`, through the real
:class:`~kraftnode.metadata.state_machine.StateMachineRunner`). The simulation's records are
integers; each one stands for one real record, decoded deterministically by
:func:`record_for` (metadata records -- topics, partitions, partition changes, configs,
topic removals, metadata.version -- and keyed / unkeyed application records) and applied as
a real v2 batch.

Snapshots are real: a ``snapshot`` event makes a node capture its state at the offset it
has applied (a batch boundary, committed, flushed), write it as a real snapshot file
(kraftnode's ``write_state_snapshot``: header with LastContainedLogTimestamp, the voters in
force in a dynamic quorum, records, footer, fsync, rename) in that node's real directory,
and only then clean its log (``compact``: the log start offset advances, the batches below
are deleted) and delete its older snapshot files. The write may crash in the middle (the
node dies; a ``.part`` file is left, as after a real crash). FetchSnapshot between
simulated nodes carries those snapshot bytes in chunks through the raft core; the follower
stores them as its own snapshot file, validates it and loads its state machine from it.
Alongside the real bytes the transfer carries the checker's shadow of the log prefix (the
raft-level invariants compare committed entries below a snapshot), which the state never
reads. A restarted node rebuilds its state from its newest snapshot file at its log start
offset and replays the log after it (``.part`` leftovers are deleted), as at start-up.

Invariants, after every simulation event (:meth:`StateLayer.check`):

* every node's state at the offset it has applied equals the state implied by the global
  committed log up to that offset (a reference MetadataState fed every committed record);
* every snapshot a node writes or installs holds exactly the state implied at its id;
* cleaning never removed a record that a kept snapshot does not cover: a node (running or
  crashed) whose log starts above 0 has a valid, durable snapshot file ending there;
* the group coordinator's committed offsets never go backwards for a generation
  (:class:`GroupWatch`): some simulated records are the group coordinator's own records
  (OffsetCommit: the committed offset is the record's log offset, the generation its
  leader epoch; GroupMetadata of that generation), and whenever a leader could serve groups
  (it has applied its whole committed log, its epoch's first entry included) a real
  :class:`~kraftnode.groups.GroupCoordinator` rebuilt from its state machine's records must
  serve, for every group, a (generation, offset) no older than any leader served before --
  across leader changes, snapshots, FetchSnapshot and crashes.

The plant :data:`DELETE_BEFORE_SNAPSHOT_DURABLE` (defined here, in the tests; the core is
untouched) cleans the log as soon as the snapshot is captured, before the file is durable: a
crash in the middle of that write leaves a log whose prefix no snapshot covers.

:mod:`tests.simulation.snapshot_sim` stays as the disk-level companion (two replicas on real
``MetadataLog`` directories with the real ``SnapshotManager`` and retention): both use the
same state comparison (:func:`state_records`) and the same plant name.
"""

from __future__ import annotations

import bisect
import os
import pickle
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from kraftnode.groups import GroupConfig, GroupCoordinator
from kraftnode.groups import records as group_records
from kraftnode.groups.records import RECORD_KEY_PREFIX
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.log.snapshot import (
    PARTIAL_SUFFIX,
    SnapshotError,
    SnapshotId,
    SnapshotWriter,
    list_snapshots,
    read_snapshot_batches,
    snapshot_file_name,
    validate_snapshot,
)
from kraftnode.metadata.state import MetadataState
from kraftnode.metadata.state_machine import StateMachineRunner, snapshot_data_records
from kraftnode.protocol.generated.groups import GroupMetadataValue
from kraftnode.protocol.generated.metadata import (
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kraftnode.raft.batches import Batch, ControlRecord
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.server.controller_io.snapshot_manager import (
    clean_leftovers,
    snapshot_timestamp,
    voters_at,
    write_state_snapshot,
)
from recordbatch import BatchView, CorruptBatchError, Record, build_batch, iter_batches
from tests.simulation.model import SimLog

if TYPE_CHECKING:
    from tests.simulation.sim import SimNode, Simulation

#: Test-level plant (never passed to the raft core).
DELETE_BEFORE_SNAPSHOT_DURABLE = "delete_before_snapshot_durable"
PLANTS: dict[str, str] = {
    DELETE_BEFORE_SNAPSHOT_DURABLE: "the log is cleaned below a snapshot before the snapshot file is durable",
}
#: Probability that a snapshot write crashes in the middle (seeds with crash faults only).
MID_SNAPSHOT_CRASH_P = 0.25
TOPICS = 6


class Crash(Exception):
    """The process dies in the middle of writing a snapshot."""


def state_records(sm: MetadataState) -> list[tuple[bytes | None, bytes | None]]:
    """A state machine's state as its sorted snapshot records (comparable across replicas)."""
    return sorted(sm.snapshot()(), key=lambda kv: (kv[0] or b"", kv[1] or b""))


def digest(sm: MetadataState) -> int:
    return hash(tuple(state_records(sm)))


def record_for(n: int, offset: int = 0, epoch: int = 0) -> tuple[bytes | None, bytes | None]:
    """The real record simulated record ``n`` stands for (key, value), at log ``offset`` in
    leader ``epoch`` (the group records carry both: see :class:`GroupWatch`)."""
    kind, rest = n % 20, n // 20
    if kind == 16:   # the group coordinator commits offset = this log offset, generation = epoch
        return group_records.offset_commit(f"g{rest % 3}", "t", 0, offset, epoch, "", 1_000_000 + offset)
    if kind == 17:   # the group's generation record
        return group_records.group_metadata(f"g{rest % 3}", GroupMetadataValue(
            protocol_type="consumer", generation=epoch, protocol=None, leader=None,
            current_state_timestamp=-1, members=[]))
    t = rest % TOPICS
    tid = uuid.UUID(int=t + 1)
    m: Any = None
    if kind <= 1:
        m = TopicRecord(name=f"t{t}", topic_id=tid)
    elif kind == 2:
        m = PartitionRecord(partition_id=rest % 2, topic_id=tid, replicas=[1, 2], isr=[1, 2], leader=1)
    elif kind == 3:
        m = PartitionChangeRecord(partition_id=rest % 2, topic_id=tid, leader=rest % 3 - 1)
    elif kind == 4:
        m = ConfigRecord(resource_type=2, resource_name=f"t{t}", name="retention.ms",
                         value=None if rest % 3 == 0 else str(n))
    elif kind == 5:
        m = RemoveTopicRecord(topic_id=tid)
    elif kind == 6:
        m = FeatureLevelRecord(name="metadata.version", feature_level=20 + rest % 2)
    if m is not None:
        return None, encode_metadata_record(m, 0)
    if kind <= 17:
        return f"k{n % 13}".encode(), (None if n % 7 == 0 else f"v{n}".encode())
    return None, f"unkeyed-{n}".encode()


_VIEWS: dict[tuple[int, int, tuple[object, ...]], list[BatchView]] = {}


def as_views(batch: Batch) -> list[BatchView]:
    """:func:`_as_views`, memoized (every node applies the same committed batches)."""
    key = (batch.base_offset, batch.epoch, tuple(batch.records))
    views = _VIEWS.get(key)
    if views is None:
        if len(_VIEWS) > 50_000:
            _VIEWS.clear()
        views = _VIEWS[key] = _as_views(batch)
    return views


def _as_views(batch: Batch) -> list[BatchView]:
    """A simulated data batch as real v2 batches, one per record (a record's kind decides
    how MetadataState reads its batch, so each record gets its own)."""
    out = []
    for i, rec in enumerate(batch.records):
        assert isinstance(rec, int)
        offset = batch.base_offset + i
        k, v = record_for(rec, offset, batch.epoch)
        data = build_batch([Record(k, v)], base_offset=offset, partition_leader_epoch=batch.epoch,
                           now_ms=1_000_000 + offset)
        out.extend(iter_batches(data))
    return out


class StateSimLog(SimLog):
    """A SimLog whose snapshots are real snapshot files' bytes (plus the checker's shadow
    of the prefix); ``on_install`` hands an installed snapshot's bytes to the node."""

    def __init__(self) -> None:
        super().__init__()
        self.real_snapshot = b""
        self.on_install: Any = None

    def compact_with(self, offset: int, real: bytes) -> OffsetAndEpoch:
        self.real_snapshot = real
        return self.compact(offset)

    def compact(self, offset: int) -> OffsetAndEpoch:
        sid = super().compact(offset)
        self._snapshot_bytes = pickle.dumps((self.snapshot_batches, self.real_snapshot))
        return sid

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> Sequence[ControlRecord]:
        assert self._download is not None and self._download[0] == snapshot_id
        shadow, real = pickle.loads(bytes(self._download[1]))
        self._download = (snapshot_id, bytearray(pickle.dumps(shadow)))
        records = super().install_snapshot(snapshot_id)   # the shadow, for the raft-level checks
        self._snapshot_bytes = pickle.dumps((self.snapshot_batches, real))
        self.real_snapshot = real
        if self.on_install is not None:
            self.on_install(snapshot_id, real)
        return records


class GroupWatch:
    """What the group coordinator of each leader could serve: a real GroupCoordinator
    rebuilt from the leader's state machine records (what kraftnode.server.handlers.groups
    does when a leader starts coordinating). Per group, the served (generation, committed
    offset) never goes backwards."""

    def __init__(self) -> None:
        self.served: dict[str, tuple[int, int]] = {}
        self.observations = 0

    _views: dict[tuple[tuple[bytes, bytes], ...], dict[str, tuple[int, int]]] = {}

    @staticmethod
    def view(sm: MetadataState) -> dict[str, tuple[int, int]]:
        items = tuple(sorted((k, v) for k, v in sm.app.items() if k.startswith(RECORD_KEY_PREFIX)))
        got = GroupWatch._views.get(items)
        if got is None:   # memoized: the same group records give the same coordinator state
            if len(GroupWatch._views) > 10_000:
                GroupWatch._views.clear()
            got = GroupWatch._views[items] = GroupWatch._build(items)
        return got

    @staticmethod
    def _build(items: tuple[tuple[bytes, bytes], ...]) -> dict[str, tuple[int, int]]:
        c = GroupCoordinator(GroupConfig(), dict)
        c.replay_all(items)
        out = {}
        for group, offsets in c.offsets.items():
            o = offsets.get(("t", 0))
            if o is not None:
                out[group] = (o[1], o[0])   # (generation = the commit's epoch, offset)
        return out

    def observe(self, who: str, view: dict[str, tuple[int, int]]) -> None:
        from tests.simulation.sim import Violation
        self.observations += 1
        for group, now in view.items():
            before = self.served.get(group)
            if before is not None and now < before:
                raise Violation(f"{who} serves group {group} at (generation, offset) {now}, behind "
                                f"{before} served before: a committed offset went backwards")
            self.served[group] = now
        lost = set(self.served) - set(view)
        if lost:
            raise Violation(f"{who} has lost the committed offsets of groups {sorted(lost)}")


class NodeState:
    """One node's state machine and snapshot directory."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        root.mkdir(parents=True, exist_ok=True)
        self.runner = StateMachineRunner(MetadataState())
        self.checked_at = -1


class StateLayer:
    def __init__(self, sim: Simulation, plant: str | None) -> None:
        self.sim = sim
        self.plant = plant
        self.root = Path(tempfile.mkdtemp(prefix=f"kraftnode-sim-{sim.seed}-"))
        self.nodes: dict[int, NodeState] = {}
        self.ref = MetadataState()
        self.ref_digests: list[int] = [digest(self.ref)]   # state digest at each offset
        self.snapshots_written = self.snapshots_installed = self.mid_write_crashes = 0
        self.groups = GroupWatch()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ node life
    def on_start(self, node: SimNode) -> None:
        """Start-up: leftovers cleaned, the snapshot at the log start loaded, the log replayed
        after it (by :meth:`advance`)."""
        st = self.nodes.get(node.node_id)
        if st is None:
            st = self.nodes[node.node_id] = NodeState(self.root / f"n{node.node_id}")
        log = node.log
        assert isinstance(log, StateSimLog)
        log.on_install = lambda sid, real, n=node: self._installed(n, sid, real)
        clean_leftovers(st.dir)
        st.runner = StateMachineRunner(MetadataState())
        st.checked_at = -1
        start = log.start_offset
        if start > 0:
            path = self._snapshot_path(node, start)
            if path is None:
                from tests.simulation.sim import Violation
                raise Violation(f"node {node.node_id} restarts with its log starting at {start}, but no durable "
                                f"snapshot ends there: the records below it are lost")
            self._load(st, path, start)

    def _snapshot_path(self, node: SimNode, offset: int) -> Path | None:
        st = self.nodes[node.node_id]
        for sid in list_snapshots(st.dir):
            if sid.offset == offset:
                return st.dir / snapshot_file_name(sid)
        return None

    def _load(self, st: NodeState, path: Path, offset: int) -> None:
        try:
            validate_snapshot(path)
        except (SnapshotError, CorruptBatchError, ValueError) as e:
            from tests.simulation.sim import Violation
            raise Violation(f"snapshot {path.name} is not valid: {e}") from None
        st.runner.load_snapshot(snapshot_data_records(read_snapshot_batches(path)), offset, snapshot_timestamp(path))
        self._check_state(st, offset, f"snapshot {path.name}")

    def _installed(self, node: SimNode, sid: OffsetAndEpoch, real: bytes) -> None:
        """FetchSnapshot finished: store the leader's snapshot as this node's file, load it."""
        st = self.nodes[node.node_id]
        name = snapshot_file_name(SnapshotId(sid.offset, sid.epoch))
        part = st.dir / (name + PARTIAL_SUFFIX)
        with open(part, "wb") as f:
            f.write(real)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, st.dir / name)
        self._load(st, st.dir / name, sid.offset)
        self._delete_older(st, sid.offset)
        self.snapshots_installed += 1

    @staticmethod
    def _delete_older(st: NodeState, offset: int) -> None:
        for s in list_snapshots(st.dir):
            if s.offset < offset:
                os.unlink(st.dir / snapshot_file_name(s))

    # ------------------------------------------------------------------ applying
    def _advance_ref(self) -> None:
        committed = self.sim.committed
        while len(self.ref_digests) <= len(committed):
            offset = len(self.ref_digests) - 1
            epoch, rec = committed[offset]
            if isinstance(rec, int):
                k, v = record_for(rec, offset, epoch)
                view = next(iter_batches(build_batch([Record(k, v)], base_offset=offset, now_ms=0)))
                self.ref.apply(view, offset + 1)
            self.ref_digests.append(digest(self.ref))

    def advance(self, node: SimNode) -> None:
        """Apply the committed batches this node has (whole batches below its HW)."""
        core = node.core
        st = self.nodes[node.node_id]
        if core is None:
            return
        r = st.runner
        hw = core.high_watermark
        log = node.log
        if r.next_offset >= hw:
            return
        if r.next_offset < log.start_offset:
            from tests.simulation.sim import Violation
            raise Violation(f"node {node.node_id} applied up to {r.next_offset} but its log starts at "
                            f"{log.start_offset} and no snapshot was loaded")
        first = max(0, bisect.bisect_right(log._bases, r.next_offset) - 1)
        for b in log.batches[first:]:
            if b.last_offset < r.next_offset:
                continue
            if b.last_offset >= hw:
                break
            if b.is_control:
                r.next_offset = b.last_offset + 1
            else:
                r.apply_batches(as_views(b), b.last_offset + 1)

    def _check_state(self, st: NodeState, offset: int, what: str) -> None:
        self._advance_ref()
        if offset >= len(self.ref_digests):
            from tests.simulation.sim import Violation
            raise Violation(f"{what}: state at offset {offset}, beyond the committed log ({len(self.sim.committed)})")
        assert isinstance(st.runner.sm, MetadataState)
        if digest(st.runner.sm) != self.ref_digests[offset]:
            from tests.simulation.sim import Violation
            raise Violation(f"{what}: the state at offset {offset} differs from the state the committed log implies")

    def check(self) -> None:
        from tests.simulation.sim import Violation
        for node in self.sim.nodes.values():
            st = self.nodes.get(node.node_id)
            if st is None:
                continue
            if node.core is not None:
                self.advance(node)
                off = st.runner.next_offset
                if off != st.checked_at:
                    self._check_state(st, off, f"node {node.node_id}")
                    st.checked_at = off
                    start = node.core.epoch_start_offset()
                    if start is not None and off >= node.core.high_watermark > start:
                        # a leader that would coordinate groups now
                        assert isinstance(st.runner.sm, MetadataState)
                        self.groups.observe(f"leader {node.node_id} at offset {off}", GroupWatch.view(st.runner.sm))
            start = node.log.start_offset
            sid = node.log.latest_snapshot_id()
            if start > 0 and (sid is None or sid.offset != start or not os.path.exists(
                    st.dir / snapshot_file_name(SnapshotId(sid.offset, sid.epoch)))):
                raise Violation(f"node {node.node_id}{' (crashed)' if node.core is None else ''}: its log starts "
                                f"at {start} but no durable snapshot ends there: cleaning removed records no "
                                f"kept snapshot covers")

    # ------------------------------------------------------------------ snapshots
    def snapshot(self, node: SimNode) -> None:
        """Generate a snapshot at what the node has applied, then clean (see the module doc)."""
        core = node.core
        assert core is not None
        st = self.nodes[node.node_id]
        self.advance(node)
        log = node.log
        assert isinstance(log, StateSimLog)
        r = st.runner
        cut = r.next_offset
        if not (log.start_offset < cut <= min(core.high_watermark, log.flushed_offset)):
            return
        b = log.batch_at(cut - 1)
        if b is None or b.last_offset != cut - 1:
            return
        sid = SnapshotId(cut, b.epoch)
        writer = r.sm.snapshot()
        kraft_version, voters = voters_at(core, cut - 1)
        ts = r.last_timestamp
        sim = self.sim
        crash = (sim.faults_on and sim.profile.crash_interval_ms is not None
                 and sim.state_rng.random() < MID_SNAPSHOT_CRASH_P)
        if self.plant == DELETE_BEFORE_SNAPSHOT_DURABLE:
            log.compact_with(cut, b"")   # planted: cleaned before the snapshot is durable
        if crash:
            def dies(_self: SnapshotWriter) -> Path:
                raise Crash()
            with mock.patch.object(SnapshotWriter, "freeze", dies), \
                    mock.patch.object(SnapshotWriter, "close", lambda _self: None):
                try:
                    write_state_snapshot(st.dir, sid, writer, last_timestamp=ts, kraft_version=kraft_version,
                                         voters=voters, now_ms=1)
                except Crash:
                    pass
            self.mid_write_crashes += 1
            sim._crash(node)
            return
        path = write_state_snapshot(st.dir, sid, writer, last_timestamp=ts, kraft_version=kraft_version,
                                    voters=voters, now_ms=1)
        validate_snapshot(path)
        check = NodeState.__new__(NodeState)
        check.runner = StateMachineRunner(MetadataState())
        check.runner.load_snapshot(snapshot_data_records(read_snapshot_batches(path)), cut)
        self._check_state(check, cut, f"node {node.node_id} snapshot {path.name}")
        self.snapshots_written += 1
        # durable: now the log is cleaned below it, and older snapshots go
        if self.plant != DELETE_BEFORE_SNAPSHOT_DURABLE:
            log.compact_with(cut, path.read_bytes())
        else:
            log.real_snapshot = path.read_bytes()
            log._snapshot_bytes = pickle.dumps((log.snapshot_batches, log.real_snapshot))
        self._delete_older(st, cut)
