"""Benchmark the metadata log: append with fsync per batch vs group commit, and reads.

Every figure is printed next to the raw ``fdatasync`` floor measured in the same run
on the same filesystem, because an fsync-per-batch log can never beat that floor and
group commit is only worth having if it beats it by a wide margin.  Each figure is
the median of ``--repeat`` runs.

    .venv/bin/python tools/bench/log.py [--dir DIR] [--batches N] [--record-bytes B]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kraftnode.log import LogConfig, MetadataLog
from recordbatch import Record, build_batch, iter_batches

CONFIG = LogConfig(segment_bytes=64 * 1024 * 1024, segment_min_bytes=12)


def median_of(repeat: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeat))


def fdatasync_floor(directory: Path, n: int) -> float:
    """Median seconds of one 4 KiB append + fdatasync on a plain file."""
    path = directory / "floor.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    block = b"x" * 4096
    times = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times)


def fresh(directory: Path) -> MetadataLog:
    d = directory / "log"
    shutil.rmtree(d, ignore_errors=True)
    return MetadataLog(d, CONFIG)


def append_fsync_each(directory: Path, batch: bytes, n: int) -> float:
    log = fresh(directory)
    t = time.perf_counter()
    for _ in range(n):
        log.append_as_leader(batch, 1)
        log.flush()
    el = time.perf_counter() - t
    log.close()
    return el


def append_group_commit(directory: Path, batch: bytes, n: int, writers: int) -> float:
    """``writers`` threads each append and then wait for durability (flush), like
    concurrent producers with acks=all; fsyncs are shared between them."""
    log = fresh(directory)
    lock = threading.Lock()
    per = n // writers

    def work() -> None:
        for _ in range(per):
            with lock:
                log.append_as_leader(batch, 1)
            log.flush()

    threads = [threading.Thread(target=work) for _ in range(writers)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    el = time.perf_counter() - t
    log.close()
    return el


def read_all(directory: Path, batch: bytes, n: int, fetch_bytes: int) -> tuple[float, int]:
    log = fresh(directory)
    for _ in range(n):
        log.append_as_leader(batch, 1)
    log.flush()
    total = 0
    t = time.perf_counter()
    off = 0
    end = log.end_offset
    while off < end:
        info = log.read(off, fetch_bytes)
        total += len(info.records)
        # the next fetch starts after the last batch (headers only, no record decoding)
        for v in iter_batches(info.records):
            off = v.next_offset
    el = time.perf_counter() - t
    log.close()
    return el, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None, help="directory on the filesystem to measure (default: a temp dir)")
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--records-per-batch", type=int, default=10)
    ap.add_argument("--record-bytes", type=int, default=100)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kraftnode-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    batch = build_batch([Record(None, os.urandom(args.record_bytes)) for _ in range(args.records_per_batch)])
    size = len(batch)
    n = args.batches
    try:
        floor = statistics.median(fdatasync_floor(base, 200) for _ in range(args.repeat))
        each = median_of(args.repeat, lambda: append_fsync_each(base, batch, n))
        group = median_of(args.repeat, lambda: append_group_commit(base, batch, n, args.writers))
        reads = [read_all(base, batch, n * 10, 1 << 20) for _ in range(args.repeat)]
        read_el = statistics.median(r[0] for r in reads)
        read_total = reads[0][1]
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    mb = 1024 * 1024
    print(f"filesystem dir: {base}   batch: {size} bytes ({args.records_per_batch} x {args.record_bytes} B records)")
    print(f"raw fdatasync floor (4 KiB write + fdatasync): {floor * 1e3:.3f} ms  -> {1 / floor:,.0f} syncs/s")
    print(f"append, fsync per batch : {n / each:10,.0f} batches/s {n * size / each / mb:8.2f} MB/s"
          f"  ({each / n * 1e3:.3f} ms/batch = {each / n / floor:.2f}x the floor)")
    print(f"append, group commit x{args.writers:<3}: {n / group:10,.0f} batches/s {n * size / group / mb:8.2f} MB/s"
          f"  ({each / group:.1f}x fsync-per-batch)")
    print(f"read (1 MiB fetches)    : {read_total / size / read_el:10,.0f} batches/s "
          f"{read_total / read_el / mb:8.2f} MB/s")


if __name__ == "__main__":
    main()
