"""What one raft append's fdatasync costs, by how the segment file is laid out (issue 28).

A voter appends one small batch (~170 bytes at 1 outstanding) and fdatasyncs it before it
answers. When the append grows the file, ext4 must journal the new size on every sync; when the
file already has its final size (pre-zeroed, or fallocate'd as Kafka's ``log.preallocate``
does), most syncs only write data: one block conversion per ~24 appends. This measures the
median ``fdatasync`` of each layout alone and with three files syncing at once (three voters on
one disk, as in ``quorum.py``), in alternated rounds, in a temporary directory of ``--dir``
(default: the system's temp dir, where the benches put their quorums).

Usage: python tools/bench/fsync_modes.py [--writes 1500] [--rounds 2] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time

MODES = ("append", "prezeroed", "fallocated")
BATCH = b"x" * 170


def _one_file(path: str, mode: str, writes: int, go: threading.Event, out: list[float]) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        size = writes * len(BATCH) + 4096
        if mode == "prezeroed":
            os.write(fd, b"\0" * size)
            os.fsync(fd)
        elif mode == "fallocated":
            os.posix_fallocate(fd, 0, size)
            os.fsync(fd)
        go.wait()
        lat = []
        for i in range(writes):
            os.pwrite(fd, BATCH, i * len(BATCH))
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t)
            time.sleep(0.0005)   # a commit's round trip between two appends
        out.append(statistics.median(lat) * 1e3)
    finally:
        os.close(fd)


def measure(root: str, mode: str, files: int, writes: int) -> list[float]:
    """Median fdatasync (ms) of each of ``files`` files appended to at once."""
    go, out = threading.Event(), []
    threads = [threading.Thread(target=_one_file,
                                args=(os.path.join(root, f"{mode}-{files}-{j}-{time.monotonic_ns()}"),
                                      mode, writes, go, out)) for j in range(files)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    go.set()
    for t in threads:
        t.join()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=1500, help="appends per file (default 1500)")
    ap.add_argument("--rounds", type=int, default=2, help="alternated rounds (default 2)")
    ap.add_argument("--dir", default=None, help="where to write (default: the temp dir)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    if args.writes < 1 or args.rounds < 1:
        ap.error("--writes and --rounds must be at least 1")
    root = tempfile.mkdtemp(prefix="fsync-modes-", dir=args.dir)
    medians: dict[str, dict[int, list[float]]] = {m: {1: [], 3: []} for m in MODES}
    try:
        for _ in range(args.rounds):
            for mode in MODES:
                for files in (1, 3):
                    medians[mode][files].extend(measure(root, mode, files, args.writes))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {m: {f"{f}_at_once_p50_ms": round(statistics.median(v), 3) for f, v in per.items()}
              for m, per in medians.items()}
    for files in (1, 3):
        key = f"{files}_at_once_p50_ms"
        result[f"prezeroed_vs_append_{files}_at_once"] = round(
            result["prezeroed"][key] / result["append"][key], 3)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"fdatasync after a {len(BATCH)}-byte write, median ms ({args.writes} writes per file, "
          f"{args.rounds} rounds)")
    print(f"{'layout':12s} {'1 file':>8s} {'3 at once':>10s}")
    for m in MODES:
        print(f"{m:12s} {result[m]['1_at_once_p50_ms']:8.3f} {result[m]['3_at_once_p50_ms']:10.3f}")
    print(f"prezeroed / append: {result['prezeroed_vs_append_1_at_once']:.2f}x alone, "
          f"{result['prezeroed_vs_append_3_at_once']:.2f}x three at once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
