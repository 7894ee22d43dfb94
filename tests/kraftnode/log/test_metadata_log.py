from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from logtest_helpers import SMALL, batch

from kraftnode.log import (
    InvalidAppendError,
    LogConfig,
    LogError,
    MetadataLog,
    OffsetOutOfRangeError,
)
from kraftnode.log.checkpoint import read_checkpoint
from recordbatch import iter_batches

Opener = Callable[..., MetadataLog]


def offsets(records: memoryview) -> list[tuple[int, int]]:
    return [(v.base_offset, v.last_offset) for v in iter_batches(records)]


def test_layout_and_files(open_log: Opener, tmp_path: Path) -> None:
    log = open_log()
    for i in range(30):
        log.append_as_leader(batch(3, 200, ts=1000 + i), epoch=1)
    assert log.end_offset == 90
    assert log.flush() == 90
    log.close()
    pdir = tmp_path / "__cluster_metadata-0"
    assert (pdir / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert (pdir / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    names = sorted(os.listdir(pdir))
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names
    assert len([n for n in names if n.endswith(".log")]) > 1  # rolled by size
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint", 3) == [["__cluster_metadata", "0", "90"]]
    # index entries: relative offset + position, each pointing at a batch whose last offset it names
    idx = (pdir / "00000000000000000000.index").read_bytes()
    assert len(idx) % 8 == 0 and len(idx) > 0
    data = (pdir / "00000000000000000000.log").read_bytes()
    for i in range(0, len(idx), 8):
        rel = int.from_bytes(idx[i:i + 4], "big")
        pos = int.from_bytes(idx[i + 4:i + 8], "big")
        first = next(iter(iter_batches(data[pos:])))
        assert first.last_offset == rel
    tidx = (pdir / "00000000000000000000.timeindex").read_bytes()
    assert len(tidx) % 12 == 0 and len(tidx) > 0


def test_segment_size_limit_is_respected(open_log: Opener) -> None:
    log = open_log()
    for _ in range(50):
        log.append_as_leader(batch(2, 300), epoch=0)
    for base, nxt, size in log.segments():
        assert size <= SMALL.segment_bytes
        assert nxt > base


def test_roll_by_time(open_log: Opener) -> None:
    cfg = LogConfig(segment_bytes=1 << 20, segment_min_bytes=12, segment_ms=1000)
    log = open_log(cfg)
    log.append_as_leader(batch(1, ts=10_000), epoch=0)
    log.append_as_leader(batch(1, ts=10_500), epoch=0)
    assert len(log.segments()) == 1
    log.append_as_leader(batch(1, ts=11_001), epoch=0)
    assert [s[0] for s in log.segments()] == [0, 2]


def test_segment_bytes_below_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="metadata.log.segment.bytes"):
        LogConfig(segment_bytes=1024)


def test_read_from_every_offset_returns_the_containing_batch(open_log: Opener) -> None:
    log = open_log()
    for _ in range(40):
        log.append_as_leader(batch(3, 150), epoch=2)
    end = log.end_offset
    for off in range(end):
        info = log.read(off, 4096)
        first = next(iter(iter_batches(info.records)))
        assert first.base_offset <= off <= first.last_offset
    assert len(log.read(end, 4096).records) == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(end + 1, 100)


def test_read_respects_byte_limit_with_whole_batches(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=1 << 20, segment_min_bytes=12))
    sizes = [len(log.read(0, 0).records)]
    for _ in range(10):
        log.append_as_leader(batch(3, 100), epoch=0)
    one = len(log.read(0, 1).records)  # min_one_batch: a whole first batch despite the limit
    assert one > 1 and offsets(log.read(0, 1).records) == [(0, 2)]
    assert len(log.read(0, 1, min_one_batch=False).records) == 0
    info = log.read(0, one * 3 + one // 2)
    assert offsets(info.records) == [(0, 2), (3, 5), (6, 8)]
    assert sizes == [0]


def test_follower_append_validation(open_log: Opener) -> None:
    log = open_log()
    log.append_as_follower(batch(2, epoch=3, base=0))
    with pytest.raises(InvalidAppendError, match="does not continue"):
        log.append_as_follower(batch(2, epoch=3, base=5))
    with pytest.raises(InvalidAppendError, match="epoch"):
        log.append_as_follower(batch(2, epoch=2, base=2))
    bad = bytearray(batch(2, epoch=3, base=2))
    bad[-1] ^= 0xFF
    with pytest.raises(InvalidAppendError, match="CRC"):
        log.append_as_follower(bytes(bad))
    assert log.end_offset == 2
    # a partial trailing batch (a fetch cut at its limit) is ignored
    two = batch(2, epoch=4, base=2) + batch(2, epoch=4, base=4)[:30]
    info = log.append_as_follower(two)
    assert (info.first_offset, info.last_offset, log.end_offset) == (2, 3, 4)
    assert log.epoch_entries() == [(3, 0), (4, 2)]


def test_leader_append_assigns_offsets_and_epoch(open_log: Opener) -> None:
    log = open_log()
    raw = batch(2, base=777, epoch=99)
    info = log.append_as_leader([raw, raw], epoch=5)
    assert (info.first_offset, info.last_offset) == (0, 3)
    got = list(iter_batches(log.read(0, 1 << 16).records))
    assert [(v.base_offset, v.partition_leader_epoch, v.is_valid()) for v in got] == [(0, 5, True), (2, 5, True)]
    assert raw == batch(2, base=777, epoch=99)  # caller's bytes untouched
    with pytest.raises(InvalidAppendError):
        log.append_as_leader(raw, epoch=4)
    with pytest.raises(InvalidAppendError, match="partial"):
        log.append_as_leader(raw[:-1], epoch=5)


def test_truncate_to_removes_whole_batches_and_epochs(open_log: Opener, tmp_path: Path) -> None:
    log = open_log()
    for e in (1, 1, 2, 2, 3, 3) * 5:
        log.append_as_leader(batch(3, 200), epoch=e if e >= log.epoch_cache.latest_epoch else log.epoch_cache.latest_epoch)
    for i in range(60):
        log.append_as_leader(batch(3, 200), epoch=4 + i // 20)
    end = log.end_offset
    nsegs = len(log.segments())
    assert log.truncate_to(end + 10) == end
    new_end = log.truncate_to(100)  # 100 is inside batch [99, 101]
    assert new_end == 99 and log.end_offset == 99
    assert len(log.segments()) < nsegs
    assert all(s <= 99 for _, s in log.epoch_entries())
    log.close()
    reopened = MetadataLog(tmp_path, SMALL)
    assert reopened.end_offset == 99
    assert reopened.epoch_entries() == log.epoch_entries()
    reopened.append_as_leader(batch(1), epoch=9)
    assert reopened.end_offset == 100
    reopened.close()


def test_advance_start_offset_deletes_whole_segments_only(open_log: Opener, tmp_path: Path) -> None:
    log = open_log()
    for i in range(60):
        log.append_as_leader(batch(3, 200), epoch=1 + i // 20)
    segs = log.segments()
    target = segs[2][0] + 1  # inside the third segment
    assert log.advance_start_offset(target) == 2
    assert log.start_offset == target
    assert log.segments()[0][0] == segs[2][0]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    assert log.epoch_entries()[0][1] == target
    with pytest.raises(LogError):
        log.advance_start_offset(log.end_offset + 1)
    log.close()
    again = MetadataLog(tmp_path, SMALL)
    assert again.start_offset == target
    again.close()


def test_truncate_fully_and_start_at(open_log: Opener, tmp_path: Path) -> None:
    log = open_log()
    for _ in range(20):
        log.append_as_leader(batch(3, 200), epoch=1)
    log.truncate_fully_and_start_at(1000)
    assert (log.start_offset, log.end_offset, log.epoch_entries()) == (1000, 1000, [])
    log.append_as_follower(batch(1, base=1000, epoch=7))
    log.close()
    again = MetadataLog(tmp_path, SMALL)
    assert (again.start_offset, again.end_offset, again.epoch_entries()) == (1000, 1001, [(7, 1000)])
    assert [n for n in os.listdir(tmp_path / "__cluster_metadata-0") if n.endswith(".log")] == [
        "00000000000000001000.log"]
    again.close()


def test_end_offset_for_epoch_matches_kafka(open_log: Opener) -> None:
    log = open_log()
    for epoch, n in ((1, 3), (3, 2), (6, 4)):
        for _ in range(n):
            log.append_as_leader(batch(2), epoch=epoch)
    end = log.end_offset
    assert log.epoch_entries() == [(1, 0), (3, 6), (6, 10)]
    assert log.end_offset_for_epoch(6) == (6, end)
    assert log.end_offset_for_epoch(3) == (3, 10)
    assert log.end_offset_for_epoch(4) == (3, 10)  # unknown epoch between: previous epoch, next start
    assert log.end_offset_for_epoch(0) == (0, 0)  # below every epoch: itself, first start
    assert log.end_offset_for_epoch(7) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.last_fetched_epoch == 6


def test_group_commit_coalesces_concurrent_flushes(open_log: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(LogConfig(segment_bytes=1 << 24, segment_min_bytes=12))
    real = os.fdatasync
    calls = []

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    lock = threading.Lock()
    results: list[tuple[int, int]] = []

    def worker() -> None:
        for _ in range(25):
            with lock:
                info = log.append_as_leader(batch(1, 50), epoch=0)
            flushed = log.flush()
            results.append((info.last_offset, flushed))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 200
    assert all(flushed > last for last, flushed in results)  # never acknowledged before covered
    assert log.flushed_offset == log.end_offset == 200
    assert len(calls) < 200  # flushes were shared


def test_flush_never_reports_past_what_was_synced(open_log: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    log.append_as_leader(batch(1), epoch=0)
    assert log.flush() == 1

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    log.append_as_leader(batch(1), epoch=0)
    with pytest.raises(OSError):
        log.flush()
    assert log.flushed_offset == 1
    with pytest.raises(LogError, match="offline"):
        log.append_as_leader(batch(1), epoch=0)
    log.close()


def test_read_stops_below_max_offset(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=1 << 20, segment_min_bytes=12))
    for _ in range(5):
        log.append_as_leader(batch(3, 50), epoch=0)
    assert offsets(log.read(0, 1 << 16, max_offset=9).records) == [(0, 2), (3, 5), (6, 8)]
    assert offsets(log.read(0, 1 << 16, max_offset=8).records) == [(0, 2), (3, 5)]
    assert len(log.read(9, 1 << 16, max_offset=9).records) == 0
    assert len(log.read(0, 1, max_offset=2).records) == 0  # min_one_batch never crosses max_offset


def test_truncation_concurrent_with_group_commit_does_not_deadlock(open_log: Opener) -> None:
    log = open_log()
    stop = threading.Event()
    errors: list[BaseException] = []
    lock = threading.Lock()
    truncations = [0]

    def appender() -> None:
        try:
            while not stop.is_set():
                with lock:
                    log.append_as_leader(batch(1, 50), epoch=0)
                log.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def flusher() -> None:
        # a flush never reports more durable than the log holds; a truncation between the
        # flush and the look at the end offset lowers the end after the fact (the look is
        # skipped then: the check is the flush's, not the truncation's)
        try:
            while not stop.is_set():
                with lock:
                    before = truncations[0]
                flushed = log.flush()
                with lock:
                    if truncations[0] == before:
                        assert flushed <= log.end_offset
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=appender), threading.Thread(target=flusher),
               threading.Thread(target=flusher)]
    for t in threads:
        t.start()
    for _ in range(30):
        with lock:
            end = log.end_offset
            if end > 4:
                assert log.truncate_to(end // 2) <= end // 2
                truncations[0] += 1
    stop.set()
    for t in threads:
        t.join(timeout=20)
        assert not t.is_alive(), "deadlock"
    assert not errors
    assert log.flush() == log.end_offset


def test_segments_parse_with_kafka_python(open_log: Opener, tmp_path: Path) -> None:
    """An independent implementation (kafka-python) reads our segment files batch by batch."""
    from kafka.record import MemoryRecords

    log = open_log()
    for i in range(40):
        log.append_as_leader(batch(2, 120, ts=5000 + i), epoch=1 + i // 10)
    log.close()
    seen: list[tuple[int, int]] = []
    for seg in sorted((tmp_path / "__cluster_metadata-0").glob("*.log")):
        mr = MemoryRecords(seg.read_bytes())
        while (b := mr.next_batch()) is not None:
            assert b.validate_crc()
            seen.extend((r.offset, r.timestamp) for r in b)
    assert [o for o, _ in seen] == list(range(80))
    assert seen[2][1] == 5001


def test_log_dir_is_locked_while_open(open_log: Opener, tmp_path: Path) -> None:
    log = open_log()
    assert (tmp_path / ".lock").exists()
    with pytest.raises(LogError, match="locked"):
        MetadataLog(tmp_path, SMALL)
    log.close()
    MetadataLog(tmp_path, SMALL).close()


def test_batches_iterates_across_segments(open_log: Opener) -> None:
    log = open_log()
    for i in range(40):
        log.append_as_leader(batch(3, 150), epoch=1 + i // 10)
    assert len(log.segments()) > 2
    got = [(v.base_offset, v.partition_leader_epoch) for v in log.batches(4)]
    assert got[0] == (3, 1) and [b for b, _ in got] == list(range(3, 120, 3))
    assert [v.base_offset for v in log.batches(0, 9)] == [0, 3, 6]
    assert list(log.batches(120)) == []


def test_tail_reads_find_every_batch_without_the_index_scan(open_log: Opener, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The positions a segment remembers for the batches appended since its last index entry
    answer reads of the tail (what caught-up followers fetch) with no header scan, and agree
    with the scan after truncations, across a reopen and in every segment."""
    log = open_log(LogConfig(segment_bytes=192 * 1024, segment_min_bytes=12))
    for i in range(1400):      # several segments, each past the batches it remembers
        log.append_as_leader(batch(1 + i % 3, 60), epoch=1)

    def every_offset_reads_its_batch(lg: MetadataLog) -> None:
        for off in range(lg.start_offset, lg.end_offset):
            first = next(iter(iter_batches(lg.read(off, 1).records)))
            assert first.base_offset <= off <= first.last_offset

    every_offset_reads_its_batch(log)
    preads = 0
    real_pread = os.pread

    def counting_pread(fd: int, n: int, pos: int) -> bytes:
        nonlocal preads
        preads += 1
        return real_pread(fd, n, pos)

    monkeypatch.setattr(os, "pread", counting_pread)
    end = log.end_offset
    for off in range(end - 20, end):
        log.read(off, 1 << 20)
    # one pread of the records per read, no header scan; the read at the first offset of the
    # last append comes from that append's bytes (test_a_read_of_the_last_leader_append_...)
    assert preads == 19
    monkeypatch.undo()
    log.truncate_to(end - 7)
    for _ in range(5):
        log.append_as_leader(batch(2, 60), epoch=2)
    every_offset_reads_its_batch(log)
    log.close()
    reopened = open_log(LogConfig(segment_bytes=192 * 1024, segment_min_bytes=12))
    every_offset_reads_its_batch(reopened)
    reopened.append_as_leader(batch(3, 60), epoch=3)
    every_offset_reads_its_batch(reopened)


def test_a_read_of_the_last_leader_append_needs_no_file_read(open_log: Opener, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A caught-up follower's Fetch reads exactly the leader's last append: served from the
    bytes just written, the same as the file gives, and never once anything changed the tail."""
    log = open_log()
    log.append_as_leader([batch(2, 50)], epoch=1)
    info = log.append_as_leader([batch(3, 50), batch(1, 50)], epoch=1)
    real_pread = os.pread
    preads = 0

    def counting_pread(fd: int, n: int, pos: int) -> bytes:
        nonlocal preads
        preads += 1
        return real_pread(fd, n, pos)

    monkeypatch.setattr(os, "pread", counting_pread)
    fast = log.read(info.first_offset, 1 << 20)
    assert preads == 0
    assert fast.records.readonly
    monkeypatch.undo()
    log.flush()
    with open(log.dir / "00000000000000000000.log", "rb") as f:
        on_disk = f.read()
    assert bytes(fast.records) == on_disk[fast.position:]
    assert offsets(fast.records) == [(2, 4), (5, 5)]
    # what the slow path answers otherwise: a byte limit below the append, a max offset
    assert offsets(log.read(info.first_offset, 10).records) == [(2, 4)]
    assert offsets(log.read(info.first_offset, 1 << 20, max_offset=5).records) == [(2, 4)]
    # truncated and refilled by a follower append at the same offsets: the new bytes
    log.truncate_to(info.first_offset)
    other = batch(4, 70, epoch=2, base=info.first_offset)
    log.append_as_follower(other)
    assert log.end_offset == info.last_offset + 1
    assert bytes(log.read(info.first_offset, 1 << 20).records) == other
    # a later append: the earlier one is read from the file again
    newer = log.append_as_leader([batch(1, 10)], epoch=2)
    assert offsets(log.read(info.first_offset, 1 << 20).records) == [(2, 5), (6, 6)]
    assert offsets(log.read(newer.first_offset, 1 << 20).records) == [(6, 6)]
    # emptied and restarted (a snapshot installed) at the same end: nothing of the old tail
    log.append_as_leader([batch(2, 10)], epoch=2)
    log.truncate_fully_and_start_at(9)
    log.append_as_follower(batch(1, 10, epoch=3, base=9))
    assert offsets(log.read(9, 1 << 20).records) == [(9, 9)]
