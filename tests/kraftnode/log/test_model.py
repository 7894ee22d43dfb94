"""Random operation sequences against a plain in-memory model of the log.

After every operation, and after every re-open, the log must hold exactly the
model's batches (bytes, offsets, epochs), its epoch cache must agree with every
visible batch, and epoch queries must follow Kafka's ``endOffsetFor`` rules.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kraftnode.log import LogConfig, MetadataLog
from recordbatch import Record, build_batch, iter_batches

CFG = LogConfig(segment_bytes=3000, segment_min_bytes=12, index_interval_bytes=300)


def model_end_offset_for(entries: list[tuple[int, int]], epoch: int, end: int) -> tuple[int, int]:
    if epoch < 0:
        return -1, -1
    if entries and entries[-1][0] == epoch:
        return epoch, end
    higher = [(e, s) for e, s in entries if e > epoch]
    if not higher:
        return -1, -1
    lower = [(e, s) for e, s in entries if e <= epoch]
    return (lower[-1][0] if lower else epoch), higher[0][1]


def check(log: MetadataLog, model: list[tuple[int, int, int, bytes]], start: int) -> None:
    end = model[-1][1] + 1 if model else start
    assert (log.start_offset, log.end_offset) == (start, end)
    got: list[tuple[int, int, int, bytes]] = []
    off = start
    while off < end:
        for v in iter_batches(log.read(off, 700).records):
            if v.base_offset >= off or not got:
                got.append((v.base_offset, v.last_offset, v.partition_leader_epoch, bytes(v.buffer)))
            off = v.next_offset
    assert [g[:3] for g in got] == [m[:3] for m in model if m[1] >= start]
    assert [g[3] for g in got] == [m[3] for m in model if m[1] >= start]
    # epoch cache: consistent with every visible batch, and queries follow Kafka's rules on it
    visible = [m for m in model if m[1] >= start]
    entries = log.epoch_entries()
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:], strict=False))
    for base, _, epoch, _ in visible:
        assert log.epoch_cache.epoch_for_offset(max(base, start)) == epoch
    if visible:
        assert entries[-1][0] == visible[-1][2]
        assert log.end_offset_for_epoch(visible[-1][2]) == (visible[-1][2], end)
    for q in range(-1, 12):
        assert log.end_offset_for_epoch(q) == model_end_offset_for(entries, q, end)


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_match_the_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    log = MetadataLog(tmp_path, CFG)
    model: list[tuple[int, int, int, bytes]] = []
    start = 0
    epoch = 0
    for step in range(150):
        end = model[-1][1] + 1 if model else start
        op = rng.random()
        if op < 0.55:
            if rng.random() < 0.1:
                epoch += 1
            n = rng.randrange(1, 4)
            data = build_batch([Record(None, rng.randbytes(rng.randrange(1, 300)), (), step) for _ in range(n)],
                               base_offset=end, partition_leader_epoch=epoch, now_ms=step)
            if rng.random() < 0.5:
                info = log.append_as_leader(data, epoch)
            else:
                info = log.append_as_follower(data)
            assert info.first_offset == end
            model.append((end, end + n - 1, epoch, data))
        elif op < 0.65 and model:
            target = rng.randrange(start, end + 1)
            cut = [m for m in model if m[1] >= target]
            new_end = cut[0][0] if cut else end
            if new_end < start:  # the containing batch straddles the start: restart empty
                assert log.truncate_to(target) == target
                model, start = [], target
            else:
                assert log.truncate_to(target) == new_end
                model = [m for m in model if m[0] < new_end]
                epoch = max([m[2] for m in model], default=epoch)
        elif op < 0.7 and model:
            target = rng.randrange(start, end + 1)
            log.advance_start_offset(target)
            start = max(start, target)
        elif op < 0.72:
            target = end + rng.randrange(0, 50)
            log.truncate_fully_and_start_at(target)
            model, start = [], target
        elif op < 0.85:
            log.flush()
        else:
            log.close()
            log = MetadataLog(tmp_path, CFG)
        check(log, model, start)
    log.close()
    log = MetadataLog(tmp_path, CFG)
    check(log, model, start)
    log.close()
