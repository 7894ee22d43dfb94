"""Damaged files on open: torn tail, flipped bits, truncated or missing indexes, garbage state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from logtest_helpers import SMALL, batch

from kraftnode.log import MetadataLog, QuorumStateError, QuorumStateStore
from recordbatch import iter_batches

PDIR = "__cluster_metadata-0"


def fill(tmp_path: Path, n: int = 60) -> tuple[int, list[tuple[int, int, int]]]:
    log = MetadataLog(tmp_path, SMALL)
    for i in range(n):
        log.append_as_leader(batch(3, 150, ts=1000 + i), epoch=1 + i // 20)
    end, segs = log.end_offset, log.segments()
    log.close()
    return end, segs


def all_batches(log: MetadataLog) -> list[tuple[int, int, bool]]:
    out = []
    off = log.start_offset
    while off < log.end_offset:
        info = log.read(off, 1 << 20)
        for v in iter_batches(info.records):
            out.append((v.base_offset, v.last_offset, v.is_valid()))
            off = v.next_offset
    return out


def seg_path(tmp_path: Path, base: int, suffix: str = ".log") -> Path:
    return tmp_path / PDIR / f"{base:020d}{suffix}"


def test_torn_tail_is_truncated_at_the_last_whole_batch(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    last = seg_path(tmp_path, segs[-1][0])
    size = last.stat().st_size
    with open(last, "ab") as f:
        f.write(batch(3, 150, base=end)[:70])  # half a batch: a write torn by a crash
    log = MetadataLog(tmp_path, SMALL)
    assert log.end_offset == end
    assert log.truncated_on_open == 70
    assert last.stat().st_size == size
    assert all(ok for *_, ok in all_batches(log))
    log.append_as_leader(batch(1), epoch=3)
    assert log.end_offset == end + 1
    log.close()


def test_flipped_bits_mid_last_segment_truncate_from_the_damaged_batch(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    base = segs[-1][0]
    last = seg_path(tmp_path, base)
    data = bytearray(last.read_bytes())
    views = list(iter_batches(bytes(data)))
    victim = len(views) // 2
    pos = sum(v.size_in_bytes for v in views[:victim])
    data[pos + 100] ^= 0x10  # inside the records: only the CRC can tell
    last.write_bytes(bytes(data))
    log = MetadataLog(tmp_path, SMALL)
    assert log.end_offset == views[victim].base_offset
    assert last.stat().st_size == pos
    got = all_batches(log)
    assert got[-1][1] == views[victim].base_offset - 1 and all(ok for *_, ok in got)
    assert log.epoch_entries()[-1][1] < log.end_offset
    log.close()


def test_impossible_header_in_last_segment(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    last = seg_path(tmp_path, segs[-1][0])
    data = bytearray(last.read_bytes())
    first = next(iter(iter_batches(bytes(data))))
    data[first.size_in_bytes + 8:first.size_in_bytes + 12] = (2**31 - 1).to_bytes(4, "big")  # length
    last.write_bytes(bytes(data))
    log = MetadataLog(tmp_path, SMALL)
    assert log.end_offset == first.next_offset
    log.close()


def test_truncated_index_is_rebuilt(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    idx = seg_path(tmp_path, segs[0][0], ".index")
    original = idx.read_bytes()
    assert len(original) >= 16
    with open(idx, "r+b") as f:
        f.truncate(len(original) - 3)
    log = MetadataLog(tmp_path, SMALL)
    assert log.end_offset == end
    log.close()
    assert idx.read_bytes() == original


def test_missing_indexes_are_rebuilt(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    idx = seg_path(tmp_path, segs[1][0], ".index")
    tidx = seg_path(tmp_path, segs[1][0], ".timeindex")
    originals = idx.read_bytes(), tidx.read_bytes()
    idx.unlink()
    tidx.unlink()
    log = MetadataLog(tmp_path, SMALL)
    assert log.end_offset == end
    assert [b[0] for b in all_batches(log)] == list(range(0, end, 3))
    log.close()
    assert (idx.read_bytes(), tidx.read_bytes()) == originals


def test_index_pointing_past_the_log_is_rebuilt(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    idx = seg_path(tmp_path, segs[0][0], ".index")
    original = idx.read_bytes()
    idx.write_bytes(original[:-4] + (10**6).to_bytes(4, "big"))
    log = MetadataLog(tmp_path, SMALL)
    for off in range(0, end, 7):
        v = next(iter(iter_batches(log.read(off, 1000).records)))
        assert v.base_offset <= off <= v.last_offset
    log.close()
    assert idx.read_bytes() == original


def test_corrupt_older_segment_found_while_rebuilding_drops_everything_after(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    seg1 = seg_path(tmp_path, segs[1][0])
    data = bytearray(seg1.read_bytes())
    data[200] ^= 0x01
    seg1.write_bytes(bytes(data))
    seg_path(tmp_path, segs[1][0], ".index").unlink()  # forces a re-scan of that segment
    log = MetadataLog(tmp_path, SMALL)
    assert log.end_offset < segs[1][1]
    assert len(log.segments()) == 2
    assert not seg_path(tmp_path, segs[2][0]).exists()
    assert all(ok for *_, ok in all_batches(log))
    log.close()


def test_leftover_orphan_index_files_are_removed(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    orphan = seg_path(tmp_path, 999_999, ".index")
    orphan.write_bytes(b"\0" * 8)
    MetadataLog(tmp_path, SMALL).close()
    assert not orphan.exists()


def test_garbage_epoch_checkpoint_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    end, segs = fill(tmp_path)
    ck = tmp_path / PDIR / "leader-epoch-checkpoint"
    good = ck.read_text()
    ck.write_text("0\n7\nnonsense\n")
    log = MetadataLog(tmp_path, SMALL)
    log.close()
    assert ck.read_text() == good == "0\n3\n1 0\n2 60\n3 120\n"


@pytest.mark.parametrize("garbage", [
    b"", b"not json", b'{"leaderId":1}', b"[1,2,3]", b'{"data_version":7,"leaderId":1}',
    b'{"leaderId":"x","leaderEpoch":1,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}',
    b'{"leaderId":1,"leaderEpoch":1,"votedId":-1,"votedDirectoryId":"short","data_version":1}',
    b"\xff\xfe\x00garbage",
])
def test_garbage_quorum_state_is_a_clear_error_and_left_untouched(tmp_path: Path, garbage: bytes) -> None:
    store = QuorumStateStore(tmp_path)
    store.path.write_bytes(garbage)
    with pytest.raises(QuorumStateError, match="quorum-state"):
        store.read()
    assert store.path.read_bytes() == garbage
    assert not os.path.exists(str(store.path) + ".tmp")


def test_missing_or_short_index_files_are_rebuilt_with_one_line_per_segment(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Index files missing (an older kraftnode created them lazily) or cut mid-entry (a crash)
    are rebuilt at start-up, each segment with exactly one log line, no batch lost, and the
    rebuilt files equal the ones the segments had."""
    end, segs = fill(tmp_path, 90)
    assert len(segs) >= 5
    pdir = tmp_path / PDIR
    logs = {b: seg_path(tmp_path, b).read_bytes() for b, *_ in segs}
    originals = {b: (seg_path(tmp_path, b, ".index").read_bytes(),
                     seg_path(tmp_path, b, ".timeindex").read_bytes()) for b, *_ in segs}
    b0, b1, b2, b3, last = segs[0][0], segs[1][0], segs[2][0], segs[3][0], segs[-1][0]
    seg_path(tmp_path, b0, ".index").unlink()                      # missing offset index
    with open(seg_path(tmp_path, b1, ".timeindex"), "r+b") as f:   # cut mid-entry
        f.truncate(len(originals[b1][1]) - 5)
    seg_path(tmp_path, b2, ".index").unlink()                      # both missing
    seg_path(tmp_path, b2, ".timeindex").unlink()
    seg_path(tmp_path, last, ".index").unlink()                    # the last segment's too
    caplog.set_level("INFO", logger="kraftnode.log")
    log = MetadataLog(tmp_path, SMALL)
    try:
        assert log.end_offset == end and log.truncated_on_open == 0
        assert [b[0] for b in all_batches(log)] == list(range(0, end, 3))
    finally:
        log.close()
    lines = [r.getMessage() for r in caplog.records if "rebuilding index files" in r.getMessage()]
    for b in (b0, b1, b2, last):
        mine = [ln for ln in lines if f"{b:020d}.log" in ln]
        assert len(mine) == 1, (b, lines)
    assert len(lines) == 4, lines
    assert not any(f"{b3:020d}.log" in ln for ln in lines)
    assert "Could not find offset index" in next(ln for ln in lines if f"{b0:020d}.log" in ln)
    assert "Found a corrupted index file" in next(ln for ln in lines if f"{b1:020d}.log" in ln)
    assert {b: seg_path(tmp_path, b).read_bytes() for b, *_ in segs} == logs
    for b, *_ in segs:
        assert (seg_path(tmp_path, b, ".index").read_bytes(),
                seg_path(tmp_path, b, ".timeindex").read_bytes()) == originals[b], b
    assert sorted(p.name for p in pdir.glob("*.index")) == sorted(f"{b:020d}.index" for b, *_ in segs)
    # a second start finds nothing to rebuild
    caplog.clear()
    MetadataLog(tmp_path, SMALL).close()
    assert not [r for r in caplog.records if "rebuilding index files" in r.getMessage()]


def test_a_new_segment_has_both_index_files_from_its_creation(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path, SMALL)
    try:
        for i in range(80):
            log.append_as_leader(batch(3, 150, ts=1000 + i), epoch=1)
            for b, _, _ in log.segments():
                assert seg_path(tmp_path, b, ".index").exists() and seg_path(tmp_path, b, ".timeindex").exists()
        assert len(log.segments()) >= 3
    finally:
        log.close()
    # the last segment, closed cleanly, ends its time index with the final entry
    b = log.segments()[-1][0]
    tidx = seg_path(tmp_path, b, ".timeindex").read_bytes()
    assert tidx and int.from_bytes(tidx[-12:-4], "big") == 1000 + 79 + 2  # the last batch's max timestamp
