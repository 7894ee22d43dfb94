"""A seeded simulation of the snapshot lifecycle with the real pieces.

Two replicas (real ``MetadataLog`` directories, the real ``MetadataState`` state machine,
the real ``SnapshotManager``) receive the same committed batches -- metadata records
(topics, partitions, configs, features, transactions, some aborted) and keyed / unkeyed
application records.  Each step is drawn from the seed: append and apply, generate a
snapshot (sometimes crashing in the middle of writing it: the ``.part`` file stays, as
after a real crash), clean, restart (reopen the log, ``prepare_storage``), or wipe a
replica and have it install the other's latest snapshot through the
``DiskSnapshotStore`` chunk path FetchSnapshot uses, with chunk sizes drawn from the seed.

Invariants after every step (``check``):

* every kept snapshot's state equals the state a from-scratch replay of the committed
  log implies at its offset;
* every replica's live state equals the state implied at its applied offset;
* cleaning never removed a record that no kept snapshot covers: the log start offset
  is 0 or the offset of a valid, durable snapshot, and the log holds every batch from
  there to the end.

A *plant* (a deliberately buggy manager, defined here in the tests) advances the log start
offset before the snapshot is durable; a crash in the middle of that snapshot must then be
reported as a violation.

This is the disk-level companion of the raft simulation's state layer
(``tests/simulation/state_layer.py``, which runs the same state machine on every simulated
node with real snapshots, cleaning and FetchSnapshot through the raft core): both compare
states with the same :func:`state_records` and share the plant.
"""

from __future__ import annotations

import random
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from kraftnode.log.metadata_log import LogConfig, MetadataLog
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.log.snapshot import (
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
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kraftnode.raft.log import OffsetAndEpoch
from kraftnode.server.controller_io.snapshot_manager import (
    SnapshotConfig,
    SnapshotManager,
    prepare_storage,
)
from kraftnode.server.raft_io.disk_log import DiskRaftLog, DiskSnapshotStore
from recordbatch import Record, build_batch, iter_batches
from tests.simulation.state_layer import PLANTS as STATE_PLANTS
from tests.simulation.state_layer import state_records

CONFIG = LogConfig(segment_bytes=4096, segment_min_bytes=12, index_interval_bytes=512)
PLANTS = frozenset(STATE_PLANTS)  # the same plant as the raft simulation's state layer


class Violation(Exception):
    pass


class Crash(Exception):
    """The process dies here: nothing after this point runs."""


class EarlyCleaningManager(SnapshotManager):
    """Planted bug: advances the log start offset (deleting segments) as soon as a snapshot
    is captured, before its file is durable."""

    def capture(self) -> tuple[SnapshotId, Callable[[], Path]]:
        sid, write = super().capture()
        self.mlog.advance_start_offset(sid.offset)
        return sid, write


@dataclass
class Replica:
    root: Path
    mlog: MetadataLog
    manager: SnapshotManager

    @property
    def runner(self) -> StateMachineRunner:
        return self.manager.runner


class SnapshotSimulation:
    def __init__(self, seed: int, workdir: Path, plant: str | None = None) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.workdir = workdir
        self.plant = plant
        self.committed: list[bytes] = []      # every committed batch, in order (the model)
        self.ends: list[int] = []             # next offset after each committed batch
        self.topics: list[uuid.UUID] = []
        self.config = SnapshotConfig(max_bytes_between_snapshots=self.rng.choice([300, 1500, 5000]),
                                     retention_bytes=self.rng.choice([2000, 8000, -1]),
                                     retention_ms=-1)
        self.replicas = [self._open(workdir / f"r{i}", fresh=True) for i in range(2)]
        self.steps = 0

    # ------------------------------------------------------------------ replicas
    def _open(self, root: Path, fresh: bool = False) -> Replica:
        if fresh and root.exists():
            shutil.rmtree(root)
        mlog = MetadataLog(root, CONFIG)
        runner = StateMachineRunner(MetadataState())
        prepare_storage(mlog, runner)
        cls = EarlyCleaningManager if self.plant == "delete_before_snapshot_durable" else SnapshotManager
        return Replica(root, mlog, cls(mlog, runner, self.config, lambda _o: (0, None)))

    def _restart(self, i: int) -> None:
        r = self.replicas[i]
        r.mlog.close()
        self.replicas[i] = self._open(r.root)
        # the restarted replica catches up with the committed log it is missing
        self._replicate(self.replicas[i])

    # ------------------------------------------------------------------ workload
    def _metadata_batch(self) -> list[Any]:
        rng = self.rng
        kind = rng.random()
        if kind < 0.3 or not self.topics:
            tid = uuid.UUID(int=rng.getrandbits(128))
            self.topics.append(tid)
            return [TopicRecord(name=f"t{len(self.topics)}", topic_id=tid),
                    PartitionRecord(partition_id=0, topic_id=tid, replicas=[1], isr=[1], leader=1)]
        tid = rng.choice(self.topics)
        if kind < 0.5:
            return [PartitionChangeRecord(partition_id=0, topic_id=tid, leader=rng.choice([-1, 1, 2]))]
        if kind < 0.65:
            return [ConfigRecord(resource_type=2, resource_name=f"t{rng.randint(1, 5)}", name="retention.ms",
                                 value=rng.choice([None, "1", "2"]))]
        if kind < 0.75:
            self.topics.remove(tid)
            return [RemoveTopicRecord(topic_id=tid)]
        if kind < 0.85:
            return [FeatureLevelRecord(name="metadata.version", feature_level=rng.choice([20, 21]))]
        # a metadata transaction, sometimes aborted
        end = EndTransactionRecord() if rng.random() < 0.6 else AbortTransactionRecord(reason="sim")
        tid2 = uuid.UUID(int=rng.getrandbits(128))
        return [BeginTransactionRecord(name="sim"), TopicRecord(name=f"x{tid2.hex[:6]}", topic_id=tid2), end]

    def _append(self) -> None:
        base = self.ends[-1] if self.ends else 0
        if self.rng.random() < 0.4:
            records = [Record(None, encode_metadata_record(m, 0)) for m in self._metadata_batch()]
        else:
            records = [Record(None if self.rng.random() < 0.2 else f"k{self.rng.randint(0, 12)}".encode(),
                              None if self.rng.random() < 0.15 else f"v{self.steps}".encode() * 4)
                       for _ in range(self.rng.randint(1, 6))]
        data = build_batch(records, base_offset=base, partition_leader_epoch=1, now_ms=1_000_000 + self.steps)
        self.committed.append(data)
        self.ends.append(base + len(records))
        for r in self.replicas:
            self._replicate(r)

    def _replicate(self, r: Replica) -> None:
        """Append (as a follower would) every committed batch the replica lacks, flush, apply."""
        missing = [b for b, end in zip(self.committed, self.ends, strict=True) if end > r.mlog.end_offset]
        if missing:
            r.mlog.append_as_follower(b"".join(missing))
            r.mlog.flush()
        while r.manager.catch_up(r.mlog.end_offset):
            pass

    # ------------------------------------------------------------------ snapshots
    def _generate(self, r: Replica, crash: bool) -> None:
        m = r.manager
        if not m.due():
            # replicate what is left to apply first (catch_up stops where a snapshot falls due)
            while m.catch_up(r.mlog.end_offset):
                if m.due():
                    break
            if not m.due():
                return
        sid, write = m.capture()
        if crash:
            def dies(self: SnapshotWriter) -> Path:
                raise Crash()
            with mock.patch.object(SnapshotWriter, "freeze", dies), \
                    mock.patch.object(SnapshotWriter, "close", lambda self: None):
                try:
                    write()
                except Crash:
                    pass
            m.in_progress = None
            i = self.replicas.index(r)
            self.check_replica(i, live=False)   # what the crash left on disk
            self._restart(i)   # the process died: it restarts from what is on disk
            return
        write()
        m.in_progress = None
        m.on_snapshots_changed()
        m.maybe_clean()
        while m.catch_up(r.mlog.end_offset):
            pass

    def _wipe_and_install(self, i: int) -> None:
        """Replica i loses its disk and installs the other's latest snapshot in chunks."""
        src = self.replicas[1 - i]
        snaps = [s for s in list_snapshots(src.mlog.dir) if s.offset > 0]
        if not snaps:
            return
        r = self.replicas[i]
        r.mlog.close()
        r = self.replicas[i] = self._open(r.root, fresh=True)
        sid = snaps[-1]
        oe = OffsetAndEpoch(sid.epoch, sid.offset)
        from_store = DiskSnapshotStore(DiskRaftLog(src.mlog, src.mlog.dir))
        to_store = DiskSnapshotStore(DiskRaftLog(r.mlog, r.mlog.dir))
        to_store.begin_snapshot_download(oe)
        pos = 0
        chunk = self.rng.choice([100, 1000, 1 << 20])
        while True:
            got = from_store.read_snapshot_chunk(oe, pos, chunk)
            assert got is not None
            data, size = got
            to_store.write_snapshot_chunk(oe, pos, data)
            pos += len(data)
            if pos >= size:
                break
        to_store.install_snapshot(oe)
        r.manager.catch_up(r.mlog.end_offset)  # reloads the state from the installed snapshot
        self._replicate(r)

    # ------------------------------------------------------------------ invariants
    def implied(self, offset: int) -> MetadataState:
        ref = MetadataState()
        ref.replay_batches((v for b in self.committed for v in iter_batches(b)), offset)
        return ref

    def check(self) -> None:
        for i in range(len(self.replicas)):
            self.check_replica(i)

    def check_replica(self, i: int, live: bool = True) -> None:
        r = self.replicas[i]
        d = r.mlog.dir
        snaps = list_snapshots(d)
        for s in snaps:
            try:
                validate_snapshot(d / snapshot_file_name(s))
            except SnapshotError as e:
                raise Violation(f"replica {i}: snapshot {s} is invalid: {e}") from None
            if s.offset == 0:
                continue
            loaded = MetadataState()
            loaded.load_snapshot(snapshot_data_records(read_snapshot_batches(d / snapshot_file_name(s))))
            if state_records(loaded) != state_records(self.implied(s.offset)):
                raise Violation(f"replica {i}: snapshot {s} differs from the committed log's state")
        start = r.mlog.start_offset
        if start > 0 and start not in {s.offset for s in snaps}:
            raise Violation(f"replica {i}: the log starts at {start} but no kept snapshot ends there: "
                            f"records below it are lost")
        if live and r.runner.next_offset >= start and state_records(r.runner.sm) != state_records(  # type: ignore[arg-type]
                self.implied(r.runner.next_offset)):
            raise Violation(f"replica {i}: live state at {r.runner.next_offset} differs from the log's")
        expected = start
        for v in r.mlog.batches(start):
            if v.base_offset > expected:
                raise Violation(f"replica {i}: the log has a hole at {expected}")
            expected = v.next_offset

    # ------------------------------------------------------------------ run
    def run(self, steps: int) -> None:
        try:
            for self.steps in range(steps):
                x = self.rng.random()
                i = self.rng.randrange(2)
                if x < 0.6:
                    self._append()
                elif x < 0.8:
                    self._generate(self.replicas[i], crash=self.rng.random() < 0.3)
                elif x < 0.87:
                    self.replicas[i].manager.maybe_clean()
                elif x < 0.95:
                    self._restart(i)
                else:
                    self._wipe_and_install(i)
                self.check()
        finally:
            for r in self.replicas:
                r.mlog.close()
