"""Benchmark of recordbatch against kafka-python and aiokafka, measured in one run.

(a) Replication path: iterate 1 MiB batches in a buffer and validate each CRC
    (``iter_batches`` + ``BatchView.is_valid``), reported in GB/s.  Target >= 5 GB/s.
(b) Producer/consumer path: per-record encode and decode throughput (records/s) for
    100-byte values with 10-byte keys, uncompressed, lz4 and zstd, with ratios against
    kafka-python (pure Python) and aiokafka (C extension when installed).
    Target >= 2x kafka-python.

What is timed.  ``encode``: the full build of each batch from the same
``recordbatch.Record`` objects, handed to every implementation, to finished batch
bytes -- record encoding, compression, header and CRC-32C (ours: ``build_batch``;
theirs: builder creation, one ``append`` per record, ``build()``).  ``enc+rec``
additionally times constructing the Record objects from (key, value) pairs, which
kafka-python's and aiokafka's builders do not need: their ``append`` takes the pairs
directly.  This is the cost of our Record-based API to a caller who starts from raw
pairs, and includes the garbage collections that 1000 live Record objects per batch
trigger.  ``decode``: the batch bytes to record objects (ours: ``iter_batches`` +
``decode_records``; theirs: iterating ``DefaultRecordBatch``).

Compression settings are the same for everyone: zstd level 3 (kafka-python calls
``zstandard.ZstdCompressor()``, whose default level is 3; aiokafka and we pass 3),
and our zstd and uncompressed batches come out byte-identical to kafka-python's
(checked and printed on every run).

Every figure is the median of ``--reps`` repetitions; in (b) the implementations run
back to back within each repetition and ratios are medians of per-repetition ratios,
so that load from other processes does not favour one side.  Inputs are identical for all
implementations: deterministic, mildly compressible text values (random bytes would
make kafka-python silently fall back to an uncompressed batch).

Usage: python tools/bench/records.py [--reps 7] [--records 20000] [--batch 1000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# Run as a file, sys.path[0] is tools/bench; make the checkout's packages importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import recordbatch  # noqa: E402
from recordbatch import Record, build_batch, iter_batches  # noqa: E402

CODEC_IDS = {"none": 0, "lz4": 3, "zstd": 4}
WORDS = (
    b"alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
    b"november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()
TS0 = 1_700_000_000_000


def make_values(n: int, size: int = 100, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = b"%08d " % i + b" ".join(rng.choice(WORDS) for _ in range(size // 4))
        out.append(text[:size].ljust(size, b"."))
    return out


def median_time(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired_times(fns: dict[str, Callable[[], Any]], reps: int) -> dict[str, list[float]]:
    """Time every implementation once per repetition, back to back, so that load
    from other processes hits them alike; ratios are then taken per repetition."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


# --------------------------------------------------------------------------- (a)


def bench_scan(reps: int, batches: int = 32) -> tuple[float, int]:
    values = make_values(9000)
    recs = [Record(b"key-%06d" % i, v, (), TS0 + i) for i, v in enumerate(values)]
    # ~1 MiB per batch: 9000 records of ~118 bytes on the wire.
    one = bytearray(build_batch(recs))
    buf = bytearray()
    for i in range(batches):
        recordbatch.set_base_offset_and_epoch(one, i * len(recs), 1)
        buf += one
    data = bytes(buf)

    def scan() -> None:
        n = 0
        for batch in iter_batches(data):
            if not batch.is_valid():
                raise SystemExit("CRC failure in benchmark data")
            n += 1
        assert n == batches

    scan()
    t = median_time(scan, reps)
    return len(data) / t / 1e9, len(one)


# --------------------------------------------------------------------------- (b)


Chunks = list[list[tuple[bytes, bytes]]]
RecordChunks = list[list[Record]]


def make_records(chunks: Chunks) -> RecordChunks:
    """One batch's Records per chunk: record i of a batch is stamped TS0 + i."""
    return [[Record(k, v, (), TS0 + i) for i, (k, v) in enumerate(chunk)] for chunk in chunks]


def ours_encode(rec_chunks: RecordChunks, codec: str) -> list[bytes]:
    return [build_batch(recs, compression=codec, now_ms=TS0) for recs in rec_chunks]


def ours_encode_with_records(chunks: Chunks, codec: str) -> list[bytes]:
    """``enc+rec``: build the Record objects from the pairs, then the batch."""
    out = []
    for chunk in chunks:
        recs = [Record(k, v, (), TS0 + i) for i, (k, v) in enumerate(chunk)]
        out.append(build_batch(recs, compression=codec, now_ms=TS0))
    return out


def ours_decode(batches: list[bytes]) -> int:
    n = 0
    for data in batches:
        for batch in iter_batches(data):
            n += len(batch.decode_records())
    return n


def builder_encode(cls: Any, rec_chunks: RecordChunks, codec: str) -> list[bytes]:
    """Their builder fed from the same Record objects (which carry no headers: the
    empty list is the headers argument both builders accept)."""
    cid = CODEC_IDS[codec]
    out = []
    for recs in rec_chunks:
        b = cls(2, cid, 0, -1, -1, -1, 1 << 30)
        append = b.append
        for i, r in enumerate(recs):
            append(i, r.timestamp, r.key, r.value, [])
        out.append(bytes(b.build()))
    return out


def builder_encode_pairs(cls: Any, chunks: Chunks, codec: str) -> list[bytes]:
    """``enc+rec`` for their builders: straight from the (key, value) pairs."""
    cid = CODEC_IDS[codec]
    out = []
    for chunk in chunks:
        b = cls(2, cid, 0, -1, -1, -1, 1 << 30)
        append = b.append
        for i, (k, v) in enumerate(chunk):
            append(i, TS0 + i, k, v, [])
        out.append(bytes(b.build()))
    return out


def reader_decode(cls: Any, batches: list[bytes]) -> int:
    n = 0
    for data in batches:
        for _rec in cls(data):
            n += 1
    return n


def print_row(codec: str, op: str, times: dict[str, list[float]], n: int, names: list[str]) -> None:
    row = f"{codec:6} {op:7} {n / statistics.median(times['ours']):12,.0f}"
    for name in names:
        ratios = [t / o for t, o in zip(times[name], times["ours"], strict=True)]
        row += f" {n / statistics.median(times[name]):14,.0f} {statistics.median(ratios):6.2f}x"
    print(row)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7, help="repetitions per figure (median)")
    ap.add_argument("--records", type=int, default=20000, help="records per measurement")
    ap.add_argument("--batch", type=int, default=1000, help="records per batch")
    ap.add_argument("--scan-batches", type=int, default=32, help="1 MiB batches to scan in (a)")
    args = ap.parse_args(argv)

    impls: dict[str, tuple[Any, Any]] = {}
    try:
        from kafka.record.default_records import DefaultRecordBatch as KR
        from kafka.record.default_records import DefaultRecordBatchBuilder as KB

        impls["kafka-python"] = (KB, KR)
    except ImportError:
        print("kafka-python not installed: skipping its column", file=sys.stderr)
    try:
        from aiokafka.record.default_records import DefaultRecordBatch as AR
        from aiokafka.record.default_records import DefaultRecordBatchBuilder as AB

        impls["aiokafka"] = (AB, AR)
    except ImportError:
        print("aiokafka not installed: skipping its column", file=sys.stderr)

    print(f"python {sys.version.split()[0]}; median of {args.reps} repetitions")
    if "aiokafka" in impls:
        print(f"aiokafka implementation: {impls['aiokafka'][0].__module__}")

    gbps, size = bench_scan(args.reps, args.scan_batches)
    print(f"\n(a) iter_batches + CRC-32C validation, {size / 2**20:.2f} MiB batches:"
          f" {gbps:.2f} GB/s (target >= 5)")

    values = make_values(args.records)
    pairs = [(b"key-%06d" % i, v) for i, v in enumerate(values)]
    chunks = [pairs[i : i + args.batch] for i in range(0, len(pairs), args.batch)]
    n = len(pairs)
    print(f"\n(b) {n} records of 10-byte key + 100-byte value, {args.batch} per batch; records/s")
    header = f"{'codec':6} {'op':7} {'ours':>12}"
    for name in impls:
        header += f" {name:>14} {'ratio':>7}"
    print(header)
    rec_chunks = make_records(chunks)
    assert not any(r.headers for recs in rec_chunks for r in recs)
    identical: dict[str, bool] = {}
    for codec in ("none", "lz4", "zstd"):
        our_batches = ours_encode(rec_chunks, codec)
        assert ours_decode(our_batches) == n
        enc: dict[str, Callable[[], Any]] = {"ours": partial(ours_encode, rec_chunks, codec)}
        enc_rec: dict[str, Callable[[], Any]] = {
            "ours": partial(ours_encode_with_records, chunks, codec)
        }
        dec: dict[str, Callable[[], Any]] = {"ours": partial(ours_decode, our_batches)}
        for name, (builder, reader) in impls.items():
            their_batches = builder_encode(builder, rec_chunks, codec)
            assert their_batches == builder_encode_pairs(builder, chunks, codec)
            assert reader_decode(reader, their_batches) == n
            assert reader_decode(reader, our_batches) == n
            if name == "kafka-python":
                identical[codec] = their_batches == our_batches
            enc[name] = partial(builder_encode, builder, rec_chunks, codec)
            enc_rec[name] = partial(builder_encode_pairs, builder, chunks, codec)
            dec[name] = partial(reader_decode, reader, their_batches)
        for op, fns in (("encode", enc), ("enc+rec", enc_rec), ("decode", dec)):
            print_row(codec, op, paired_times(fns, args.reps), n, list(impls))
    if identical:
        print(
            "\nour batches byte-identical to kafka-python's: "
            + ", ".join(f"{c} {'yes' if same else 'no'}" for c, same in identical.items())
            + " (zstd level 3 on both sides; lz4 frame settings differ)"
        )
    print("\nratio = median over repetitions of (their time / our time); >1 means we are faster")
    print("encode: Record objects -> batch bytes (CRC included), the same objects for everyone;")
    print("enc+rec: also constructing our Records from the (key, value) pairs their append() takes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
