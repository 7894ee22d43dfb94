"""Crash consistency: SIGKILL a writer at random points, at least 200 times.

A forked child appends batches as leader (two threads: the appender flushes now and
then, a second thread flushes in a loop, so group commits overlap appends and
rolls), now and then truncates its tail as a diverging follower would, and reports
each batch over a pipe only AFTER ``flush()`` has returned an offset covering it
(and each truncation before it starts and after it returns).  The parent kills the child at a random moment, re-opens the
log (crash recovery) and checks that every batch ever reported is present and
byte-identical, that the log holds only whole, valid batches with contiguous
offsets, and that the files end exactly where the log does.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from kraftnode.log import LogConfig, MetadataLog
from recordbatch import Record, build_batch, iter_batches

KILLS = int(os.environ.get("KRAFTNODE_CRASH_KILLS", "200"))
CONFIG = LogConfig(segment_bytes=96 * 1024, segment_min_bytes=12, index_interval_bytes=1024)


def _child(directory: Path, wfd: int, seed: int) -> None:
    rng = random.Random(seed)
    log = MetadataLog(directory, CONFIG)
    epoch = max(log.epoch_cache.latest_epoch, 1) + rng.randrange(2)
    pending: list[tuple[int, int, int, str]] = []
    lock = threading.Lock()
    gen = [0]  # bumped by each truncation: flushes started before it report nothing
    os.write(wfd, b"R\n")

    def report(flushed: int, g: int) -> None:
        with lock:
            if g != gen[0]:
                return
            done = [p for p in pending if p[1] < flushed]
            pending[:] = [p for p in pending if p[1] >= flushed]
            if done:
                os.write(wfd, "".join(f"B {b} {last} {n} {h}\n" for b, last, n, h in done).encode())

    def flush_and_report() -> int:
        with lock:
            g = gen[0]
        f = log.flush()
        report(f, g)
        return f

    def flusher() -> None:
        last = -1
        while True:
            f = flush_and_report()
            if f == last:
                time.sleep(0.0003)
            last = f

    threading.Thread(target=flusher, daemon=True).start()
    while True:
        base = log.end_offset
        n = rng.randrange(1, 6)
        recs = [Record(None, rng.randbytes(rng.randrange(10, 400))) for _ in range(n)]
        data = build_batch(recs, base_offset=base, partition_leader_epoch=epoch)
        info = log.append_as_leader(data, epoch)
        assert info.first_offset == base
        with lock:
            pending.append((base, info.last_offset, len(data), hashlib.sha1(data).hexdigest()))
        if rng.random() < 0.2:
            flush_and_report()
        if rng.random() < 0.01:
            epoch += 1
        if rng.random() < 0.005:  # a divergence: truncate the tail, flushed or not
            end = log.end_offset
            target = rng.randrange(max(log.start_offset, end - 60), end)
            with lock:
                os.write(wfd, f"I {target}\n".encode())
                new_end = log.truncate_to(target)
                gen[0] += 1
                pending[:] = [p for p in pending if p[0] < new_end]
                os.write(wfd, f"T {target} {new_end}\n".encode())


def _run_child(directory: Path, seed: int, kill_after: float) -> tuple[list[str], bool]:
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(rfd)
        try:
            _child(directory, wfd, seed)
        finally:
            os._exit(3)
    os.close(wfd)
    buf = b""
    # wait for "ready" so the kill lands in the append/flush phase, not at start-up
    while b"R\n" not in buf:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        buf += chunk
    time.sleep(kill_after)
    os.kill(pid, signal.SIGKILL)
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        buf += chunk
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    lines = buf.decode().split("\n")
    return [ln for ln in lines[:-1] if ln[:2] in ("B ", "I ", "T ")], killed  # last piece may be torn


def _verify(directory: Path, reported: dict[int, tuple[int, int, str]], intent: int | None) -> set[int]:
    """Re-open (recovery) and scan the whole log once: every batch must be whole, valid
    and contiguous, and every batch ever reported flushed must be found byte-identical --
    except those at or after a truncation the child had begun when it was killed."""
    with MetadataLog(directory, CONFIG) as log:
        start, end = log.start_offset, log.end_offset
        assert start == 0
        found: set[int] = set()
        offset = start
        while offset < end:
            info = log.read(offset, 1 << 20)
            it = iter_batches(info.records)
            n = 0
            for v in it:
                assert v.is_valid(), f"invalid batch at {v.base_offset}"
                assert v.base_offset == offset, f"gap or overlap at {offset}: {v.base_offset}"
                want = reported.get(v.base_offset)
                if want is not None:
                    last, size, digest = want
                    assert (v.last_offset, v.size_in_bytes) == (last, size), f"batch {offset} changed shape"
                    assert hashlib.sha1(v.buffer).hexdigest() == digest, f"batch {offset} bytes differ"
                    found.add(v.base_offset)
                offset = v.next_offset
                n += 1
            assert not it.incomplete and it.position == len(info.records), "partial batch exposed"
            assert n > 0
        assert offset == end
        missing = [b for b, (last, _, _) in reported.items()
                   if b not in found and (intent is None or last < intent)]
        assert not missing, f"reported batches lost: {sorted(missing)[:5]} (end {end})"
        # on disk, the last segment ends exactly at the last whole batch
        base, _, size = log.segments()[-1]
        assert (directory / "__cluster_metadata-0" / f"{base:020d}.log").stat().st_size == size
        return found


@pytest.mark.slow
def test_sigkill_during_append_and_flush_never_loses_flushed_batches(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("KRAFTNODE_CRASH_SEED", "20261122")))
    reported: dict[int, tuple[int, int, str]] = {}
    kills = truncations = interrupted = 0
    t0 = time.monotonic()
    for _ in range(KILLS):
        lines, killed = _run_child(tmp_path, rng.randrange(1 << 30), rng.uniform(0.0, 0.08))
        kills += killed
        intent: int | None = None
        for ln in lines:
            kind, *fields = ln.split()
            if kind == "B":
                b, last, n, h = fields
                reported[int(b)] = (int(last), int(n), h)
            elif kind == "I":
                intent = int(fields[0])
            else:
                new_end = int(fields[1])
                for gone in [k for k in reported if k >= new_end]:
                    del reported[gone]
                truncations += 1
                intent = None
        found = _verify(tmp_path, reported, intent)
        if intent is not None:  # killed mid-truncation: what is gone was truncated
            interrupted += 1
            for gone in [k for k in reported if k not in found]:
                del reported[gone]
        if time.monotonic() - t0 > 170:
            break
    segs = len(list((tmp_path / "__cluster_metadata-0").glob("*.log")))
    print(f"\ncrash-consistency: {kills} SIGKILLs survived, {len(reported)} flushed batches "
          f"verified after every restart, {truncations} truncations ({interrupted} killed midway), "
          f"{segs} segments, {time.monotonic() - t0:.1f}s")
    assert kills >= min(KILLS, 200)
