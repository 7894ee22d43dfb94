"""Snapshot generation, start-up loading and KafkaMetadataLog-style cleaning on a real log dir."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import anyio
import pytest

from kraftnode.log.metadata_log import LogConfig, MetadataLog
from kraftnode.log.snapshot import (
    SnapshotId,
    list_snapshots,
    read_snapshot_batches,
    snapshot_file_name,
    validate_snapshot,
)
from kraftnode.metadata.state import MetadataState
from kraftnode.metadata.state_machine import (
    KeyValueStateMachine,
    StateMachineRunner,
    snapshot_data_records,
)
from kraftnode.server.controller_io.snapshot_manager import (
    SnapshotConfig,
    SnapshotManager,
    prepare_storage,
)
from recordbatch import Record, build_batch

SMALL = LogConfig(segment_bytes=4096, segment_min_bytes=12, index_interval_bytes=512)


def kv_batch(i: int, n: int = 10) -> bytes:
    return build_batch([Record(f"k{(i * n + j) % 37}".encode(), f"v{i}-{j}".encode() * 5) for j in range(n)])


def fill(mlog: MetadataLog, batches: int, epoch: int = 1, start: int = 0) -> None:
    for i in range(start, start + batches):
        mlog.append_as_leader(kv_batch(i), epoch)
    mlog.flush()


def expected_state(mlog_dir: Path, upto: int) -> dict[bytes, bytes]:
    """The compacted state implied by the whole history (re-derived from scratch)."""
    kv = KeyValueStateMachine()
    for i in range(upto):
        for j in range(10):
            kv.apply_record(f"k{(i * 10 + j) % 37}".encode(), f"v{i}-{j}".encode() * 5)
    return kv.data


def drain(m: SnapshotManager, end: int) -> None:
    """Apply everything below ``end`` (catch_up stops where a snapshot falls due: the
    threshold is lifted meanwhile, so the next snapshot covers all of it)."""
    cfg = m.config
    m.config = dataclasses.replace(cfg, max_bytes_between_snapshots=2**62)
    while m.catch_up(end):
        pass
    m.config = cfg


def manager(mlog: MetadataLog, cfg: SnapshotConfig, sm: object | None = None) -> SnapshotManager:
    runner = StateMachineRunner(sm or MetadataState())  # type: ignore[arg-type]
    prepare_storage(mlog, runner)
    return SnapshotManager(mlog, runner, cfg, lambda _o: (0, None))


def generate(m: SnapshotManager) -> bool:
    async def go() -> bool:
        return await m.maybe_generate()
    return anyio.run(go)


def test_snapshot_generated_at_the_byte_threshold_and_holds_the_state(tmp_path: Path) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        fill(mlog, 20)
        per_batch = mlog.segments()[0][2] // max(1, mlog.segments()[0][1])
        m = manager(mlog, SnapshotConfig(max_bytes_between_snapshots=10**9, retention_bytes=-1))
        drain(m, mlog.end_offset)
        assert not generate(m)  # below the threshold, interval not passed
        m.config = SnapshotConfig(max_bytes_between_snapshots=per_batch, retention_bytes=-1)
        assert generate(m)
        sid = SnapshotId(200, 1)
        assert list_snapshots(mlog.dir) == [sid]
        path = mlog.dir / snapshot_file_name(sid)
        validate_snapshot(path)
        state = dict(snapshot_data_records(read_snapshot_batches(path)))
        assert state == expected_state(tmp_path, 20)
        assert not generate(m)  # nothing new since
        assert not any(n.endswith(".part") for n in os.listdir(mlog.dir))


def test_interval_trigger(tmp_path: Path) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        fill(mlog, 3)
        now = [1_000_000]
        runner = StateMachineRunner(MetadataState())
        m = SnapshotManager(mlog, runner, SnapshotConfig(max_snapshot_interval_ms=1000), lambda _o: (0, None),
                            clock_ms=lambda: now[0])
        drain(m, mlog.end_offset)
        assert not m.due()
        now[0] += 1000
        assert m.due() and generate(m)


def test_an_idle_manager_does_not_list_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run() asks due() 10 times a second: below both triggers it must not read the
    directory; once one fires it lists it (an installed snapshot may already cover the log)."""
    from kraftnode.server.controller_io import snapshot_manager

    with MetadataLog(tmp_path, SMALL) as mlog:
        fill(mlog, 3)
        now = [1_000_000]
        m = SnapshotManager(mlog, StateMachineRunner(MetadataState()),
                            SnapshotConfig(max_snapshot_interval_ms=1000), lambda _o: (0, None),
                            clock_ms=lambda: now[0])
        drain(m, mlog.end_offset)
        listed = [0]

        def counting(d: object, **kw: bool) -> list[SnapshotId]:
            listed[0] += 1
            return list_snapshots(d, **kw)  # type: ignore[arg-type]
        monkeypatch.setattr(snapshot_manager, "list_snapshots", counting)
        for _ in range(10):
            assert not m.due()
        assert listed[0] == 0
        now[0] += 1000
        assert m.due() and listed[0] == 1


def test_start_up_loads_the_latest_snapshot_and_replays_only_the_log_after_it(tmp_path: Path) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        fill(mlog, 20)
        m = manager(mlog, SnapshotConfig(max_bytes_between_snapshots=1, retention_bytes=-1))
        drain(m, mlog.end_offset)
        assert generate(m)
        fill(mlog, 5, start=20)
    with MetadataLog(tmp_path, SMALL) as mlog:
        runner = StateMachineRunner(MetadataState())
        assert prepare_storage(mlog, runner) == SnapshotId(200, 1)
        assert runner.next_offset == 200
        m = SnapshotManager(mlog, runner, SnapshotConfig(), lambda _o: (0, None))
        drain(m, mlog.end_offset)
        assert runner.applied_batches == 5  # only the log after the snapshot was replayed
        assert runner.sm.app == expected_state(tmp_path, 25)  # type: ignore[attr-defined]


def test_retention_deletes_old_snapshots_and_segments_never_the_latest(tmp_path: Path) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        m = manager(mlog, SnapshotConfig(max_bytes_between_snapshots=1, retention_bytes=6000))
        for round_ in range(6):
            fill(mlog, 10, start=round_ * 10)
            drain(m, mlog.end_offset)
            assert generate(m)
            snaps = list_snapshots(mlog.dir)
            # the latest snapshot is always kept, the log starts at the oldest kept one
            assert snaps[-1].offset == mlog.end_offset
            assert mlog.start_offset == snaps[0].offset or (len(snaps) == 1 and mlog.start_offset <= snaps[0].offset)
            # segments wholly below the log start are gone (the active segment always stays)
            assert all(end > mlog.start_offset for _b, end, _s in mlog.segments()[:-1])
        assert mlog.start_offset > 0 and len(mlog.segments()) < 600 // 10
        # every committed record is in the log or folded into the oldest kept snapshot
        oldest = list_snapshots(mlog.dir)[0]
        kv = KeyValueStateMachine()
        kv.load_snapshot(snapshot_data_records(read_snapshot_batches(mlog.dir / snapshot_file_name(oldest))))
        for b in mlog.batches(oldest.offset):
            kv.apply(b, mlog.end_offset)
        assert kv.data == expected_state(tmp_path, 60)


def test_retention_by_time(tmp_path: Path) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        now = [10**12]
        runner = StateMachineRunner(MetadataState())
        m = SnapshotManager(mlog, runner, SnapshotConfig(max_bytes_between_snapshots=1, retention_bytes=-1,
                                                         retention_ms=1000),
                            lambda _o: (0, None), clock_ms=lambda: now[0])
        for i in range(3):
            fill(mlog, 5, start=i * 5)
            drain(m, mlog.end_offset)
            assert generate(m)
        assert len(list_snapshots(mlog.dir)) == 3 and mlog.start_offset == 0
        now[0] = 2 * 10**13  # every snapshot's LastContainedLogTimestamp is now older than 1 s
        assert m.maybe_clean()
        assert list_snapshots(mlog.dir) == [SnapshotId(150, 1)] and mlog.start_offset == 150


def test_leftovers_are_deleted_at_start_up(tmp_path: Path) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        d = mlog.dir
        (d / (snapshot_file_name(SnapshotId(5, 1)) + ".part")).write_bytes(b"half")
        (d / (snapshot_file_name(SnapshotId(3, 1)) + ".deleted")).write_bytes(b"old")
        prepare_storage(mlog, None)
        assert not [n for n in os.listdir(d) if n.endswith((".part", ".deleted"))]


def _corrupt(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    views = list(read_snapshot_batches(path))
    first = views[0].size_in_bytes
    last = views[-1].size_in_bytes
    if how == "crc":
        data[first + 70] ^= 0xFF
    elif how == "no-footer":
        data = data[:-last]
    elif how == "no-header":
        data = data[first:]
    elif how == "truncated":
        data = data[:-7]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["crc", "no-footer", "no-header", "truncated", "name"])
def test_a_bad_snapshot_is_refused_naming_the_file_and_an_older_one_is_used(
        tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        m = manager(mlog, SnapshotConfig(max_bytes_between_snapshots=1, retention_bytes=-1))
        for i in range(2):
            fill(mlog, 10, start=i * 10)
            drain(m, mlog.end_offset)
            assert generate(m)
    newest = tmp_path / "__cluster_metadata-0" / snapshot_file_name(SnapshotId(200, 1))
    if how == "name":
        bad = newest.with_name("00000000000000000200-1.checkpoint")
        newest.rename(bad)
    else:
        _corrupt(newest, how)
        bad = newest
    caplog.set_level(logging.ERROR, "kraftnode.snapshots")
    with MetadataLog(tmp_path, SMALL) as mlog:
        runner = StateMachineRunner(MetadataState())
        assert prepare_storage(mlog, runner) == SnapshotId(100, 1)
        assert str(bad) in caplog.text and "refusing snapshot" in caplog.text
        assert not bad.exists() and bad.with_name(bad.name + ".corrupt").exists()
        assert runner.next_offset == 100
        m = SnapshotManager(mlog, runner, SnapshotConfig(), lambda _o: (0, None))
        drain(m, mlog.end_offset)
        assert runner.sm.app == expected_state(tmp_path, 20)  # type: ignore[attr-defined]


def test_no_valid_snapshot_covers_the_log_start_then_the_log_restarts_for_the_leader(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        m = manager(mlog, SnapshotConfig(max_bytes_between_snapshots=1, retention_bytes=1))
        for i in range(2):
            fill(mlog, 10, start=i * 10)
            drain(m, mlog.end_offset)
            assert generate(m)
        assert mlog.start_offset == 200 and list_snapshots(mlog.dir) == [SnapshotId(200, 1)]
        fill(mlog, 3, start=20)
    _corrupt(tmp_path / "__cluster_metadata-0" / snapshot_file_name(SnapshotId(200, 1)), "crc")
    caplog.set_level(logging.ERROR, "kraftnode.snapshots")
    with MetadataLog(tmp_path, SMALL) as mlog:
        runner = StateMachineRunner(MetadataState())
        assert prepare_storage(mlog, runner) is None
        # never a wrong state: nothing applied, the log is empty and the leader will send a snapshot
        assert mlog.start_offset == mlog.end_offset == 0 and runner.next_offset == 0
        assert "catches up from the leader" in caplog.text


def test_a_forked_writer_writes_the_state_at_the_fork_while_the_node_applies_on(tmp_path: Path) -> None:
    """kraftnode.snapshot.fork.enable: the same snapshot as the worker thread's, of the state
    at the moment of the fork, though the parent applies more batches while the child writes."""
    slow_kv = SlowSnapshotKV()
    with MetadataLog(tmp_path, SMALL) as mlog:
        fill(mlog, 30)
        m = manager(mlog, SnapshotConfig(max_bytes_between_snapshots=10**9, retention_bytes=-1, fork=True),
                    slow_kv)
        drain(m, 200)   # 20 batches applied; 10 more wait in the log

        async def go() -> bool:
            async with anyio.create_task_group() as tg:
                m.config = dataclasses.replace(m.config, max_bytes_between_snapshots=1)
                result: list[bool] = []

                async def gen() -> None:
                    result.append(await m.maybe_generate())
                tg.start_soon(gen)
                await anyio.sleep(0.05)   # forked; the child sleeps before writing
                m.config = dataclasses.replace(m.config, max_bytes_between_snapshots=2**62)
                while m.catch_up(mlog.end_offset):
                    pass
            return result[0]
        assert anyio.run(go)
        assert m.runner.next_offset == 300   # the node applied on
        sid = SnapshotId(200, 1)
        assert list_snapshots(mlog.dir) == [sid]
        path = mlog.dir / snapshot_file_name(sid)
        validate_snapshot(path)
        assert dict(snapshot_data_records(read_snapshot_batches(path))) == expected_state(tmp_path, 20)


def test_a_forked_writer_that_fails_is_logged_and_leaves_no_file(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    with MetadataLog(tmp_path, SMALL) as mlog:
        fill(mlog, 5)
        m = manager(mlog, SnapshotConfig(max_bytes_between_snapshots=1, retention_bytes=-1, fork=True),
                    FailingSnapshotKV())
        drain(m, mlog.end_offset)
        with caplog.at_level(logging.ERROR, "kraftnode.snapshots"):
            assert not generate(m)
        assert "OSError: [Errno 28] No space left on device" in (m.failed or "")
        assert "No space left on device" in caplog.text
        assert list_snapshots(mlog.dir) == []
        assert not any(n.endswith(".part") for n in os.listdir(mlog.dir))
        assert m.in_progress is None   # the next trigger tries again


class SlowSnapshotKV(KeyValueStateMachine):
    """Its writer waits before reading: whatever the parent changes meanwhile must not show."""

    def snapshot(self):  # type: ignore[no-untyped-def]
        writer = super().snapshot()

        def slow():  # type: ignore[no-untyped-def]
            import time
            time.sleep(0.3)
            yield from writer()
        return slow


class FailingSnapshotKV(KeyValueStateMachine):
    def snapshot(self):  # type: ignore[no-untyped-def]
        writer = super().snapshot()

        def failing():  # type: ignore[no-untyped-def]
            yield from list(writer())[:3]
            raise OSError(28, "No space left on device")
        return failing
