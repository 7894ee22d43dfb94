"""Benchmark the ``kraft-log`` Spark source: rows/s reading segments into a DataFrame.

Generates N records with V-byte values (default 5,000,000 x 100 B) into a metadata
log with ``MetadataLog`` + ``build_batch`` (batches of ``--batch-records``,
segments of ``--segment-mb`` so Spark gets one input partition per segment),
then, in the same run and over the same files:

* spark: ``spark.read.format("kraft-log").load(dir)`` -> groupBy(epoch) with count,
  sum(length(value)), max(offset) -> collect, on ``--master`` (default local[*]),
  once with every column and once with ``.schema()`` naming only the 3 columns used;
* single: one Python process decoding every file with ``kraftnode.spark.decode``
  (the same decoder, no Spark) and computing the same aggregate with pyarrow.

Prints the median wall time and rows/s of each over ``--repeat`` runs and their
ratio, and checks that both aggregates agree.  Spark start-up (session creation)
is excluded; every Spark run includes planning, file discovery, decoding on the
workers, Arrow transfer to the JVM and the aggregation.

Then it times the whole ``kraftnode audit`` command (a new process: Spark's start-up
included, as a user waits for it) on a small 3-replica quorum (``sample_quorum``
with 2 metadata batches per epoch: a dozen metadata records) ``--repeat`` times,
and once on the generated N-record log, each bounded by ``--audit-timeout``
(a run that does not finish is killed and reported as such).  CPU seconds of the
command and its children (JVM, Python workers) are reported beside wall time,
because wall time on a shared machine moves with the load average, printed too.

With ``--cluster`` it instead measures the source on real clusters (issue 42): a Spark
standalone cluster (pyspark's ``spark-class`` Master and a Worker on loopback) with 1 and
then 2 executors of one core each, reading the generated log from local disk and from
Hadoop's single-process HDFS (``MiniDFSCluster``, a real NameNode and DataNode; the log is
copied in first): the ``kraft-log`` source through ``kraftnode.spark.read_log`` (the
aggregate's 3 columns), against Spark's own ``binaryFile`` reader of the same files (sum of
the content lengths: the bytes moved, nothing decoded) as the floor. Medians of
``--repeat`` runs after one warm-up, MB/s of segment bytes and rows/s, and the ratio.

    .venv/bin/python tools/bench/spark_read.py [--records N] [--compression none|lz4|zstd|...]
    .venv/bin/python tools/bench/spark_read.py --cluster --records 1000000 --value-bytes 200
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a file, sys.path[0] is tools/bench; make the checkout's packages importable.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.log import LogConfig, MetadataLog  # noqa: E402
from kraftnode.spark.schema import COLUMNS as ARROW_COLUMNS  # noqa: E402
from recordbatch import Record, build_batch  # noqa: E402


def generate(log_dir: Path, records: int, value_bytes: int, batch_records: int, compression: str,
             segment_mb: int) -> int:
    config = LogConfig(segment_bytes=segment_mb * 1024 * 1024, segment_min_bytes=1)
    value = (bytes(range(256)) * (value_bytes // 256 + 1))[:value_bytes]
    written = 0
    epoch = 1
    with MetadataLog(log_dir, config) as log:
        while written < records:
            n = min(batch_records, records - written)
            batch = build_batch([Record(None, value, (), timestamp=1_700_000_000_000 + written + i)
                                 for i in range(n)], compression=compression)
            if written and written % (records // 4 + 1) < batch_records:
                epoch += 1  # a few leader epochs, so the aggregate has groups
            log.append_as_leader(batch, epoch)
            written += n
        log.flush()
    return written


PROJECTION = "partition_leader_epoch INT, offset BIGINT, value BINARY"


def spark_run(spark: Any, path: str, projected: bool = False) -> tuple[float, list[tuple[int, int, int, int]]]:
    from pyspark.sql import functions as F

    t = time.perf_counter()
    reader = spark.read.format("kraft-log")
    if projected:  # only the three columns the aggregate needs (Spark cannot prune Python sources)
        reader = reader.schema(PROJECTION)
    df = reader.load(path)
    rows = (df.groupBy("partition_leader_epoch")
            .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"), F.max("offset").alias("last"))
            .collect())
    dt = time.perf_counter() - t
    out = sorted((r["partition_leader_epoch"], r["n"], r["bytes"], r["last"]) for r in rows)
    return dt, out


def single_run(path: str) -> tuple[float, list[tuple[int, int, int, int]]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from kraftnode.spark.decode import decode_file
    from kraftnode.spark.paths import discover

    t = time.perf_counter()
    acc: dict[int, list[int]] = {}
    for f in discover([path]):
        for b in decode_file(f.path, replica=f.replica, file_type=f.file_type):
            tab = pa.Table.from_batches([b]).select(["partition_leader_epoch", "offset", "value"])
            tab = tab.append_column("vlen", pc.binary_length(tab["value"]))
            g = tab.group_by("partition_leader_epoch").aggregate(
                [("offset", "count"), ("vlen", "sum"), ("offset", "max")])
            for e, n, s, m in zip(*(g[c].to_pylist() for c in
                                    ("partition_leader_epoch", "offset_count", "vlen_sum", "offset_max")),
                                  strict=True):
                a = acc.setdefault(e, [0, 0, -1])
                a[0] += n
                a[1] += s
                a[2] = max(a[2], m)
    dt = time.perf_counter() - t
    return dt, sorted((e, a[0], a[1], a[2]) for e, a in acc.items())


def _session_cpu(sid: int, seen: dict[int, float]) -> None:
    """Record the CPU seconds of every live process of session ``sid`` (the audit command,
    its JVM and Python workers) into ``seen``."""
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid:  # field 6 of stat: session id
            seen[int(name)] = (int(fields[11]) + int(fields[12])) / tick


def time_audit(paths: list[str], out: Path, master: str, timeout: float) -> tuple[float | None, float, str]:
    """(wall seconds or None when killed at ``timeout``, CPU seconds of the command and every
    process it started, sampled every 0.2 s; its "read:" progress line) of
    ``kraftnode audit PATHS --out OUT``."""
    import subprocess

    t = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kraftnode", "audit", *paths, "--out", str(out),
                                 "--master", master], stdout=log, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                    p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)})
        cpu: dict[int, float] = {}
        wall: float | None = None
        while True:
            _session_cpu(proc.pid, cpu)
            if proc.poll() is not None:
                wall = time.perf_counter() - t
                break
            if time.perf_counter() - t > timeout:
                os.killpg(proc.pid, 9)  # the JVM too: it is in the command's session
                proc.wait()
                break
            time.sleep(0.2)
        log.seek(0)
        output = log.read()
    if wall is not None and proc.returncode not in (0, 1):
        raise SystemExit(f"kraftnode audit {' '.join(paths)} failed ({proc.returncode}):\n{output[-3000:]}")
    read = [ln for ln in output.splitlines() if "] read:" in ln]
    return wall, sum(cpu.values()), (read[0] if read else output.strip()[-300:])


def bench_audit(root: Path, big_log: Path, big_records: int, repeat: int, master: str, timeout: float) -> None:
    from tools.pipelines.sample_quorum import write_sample_quorum

    small = write_sample_quorum(root / "small-quorum", records_per_epoch=2, tail=1)
    print(f"audit of a small 3-replica quorum (log end offsets {small.end_offsets}), whole command, "
          f"load average {os.getloadavg()[0]:.1f}:", flush=True)
    walls = []
    for i in range(repeat):
        wall, cpu, read = time_audit([str(small.root)], root / "small-audit", master, timeout)
        walls.append(wall if wall is not None else float("inf"))
        print(f"  run {i + 1}: " + (f"{wall:.1f} s wall" if wall is not None else f"killed after {timeout:.0f} s")
              + f", {cpu:.1f} s CPU (load average {os.getloadavg()[0]:.1f}); {read}", flush=True)
    print(f"audit, small quorum: median {statistics.median(walls):.1f} s wall", flush=True)
    wall, cpu, last = time_audit([str(big_log)], root / "big-audit", master, timeout)
    print(f"audit, {big_records:,} records: "
          + (f"{wall:.1f} s wall" if wall is not None else f"did not finish in {timeout:.0f} s (killed)")
          + f", {cpu:.1f} s CPU (load average {os.getloadavg()[0]:.1f}); {last}", flush=True)


def _timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def bench_cluster(root: Path, log_dir: Path, n: int, size: int, repeat: int, executors: tuple[int, ...],
                  compare_local: bool = False) -> int:
    """The cluster and HDFS rows (see the module's doc); 0 when every reader agrees."""
    from pyspark.sql import functions as F

    from kraftnode.spark import local_session
    from kraftnode.spark.fs_read import read_log
    from kraftnode.spark.paths import discover
    from tools.spark_cluster import start_mini_hdfs, start_standalone

    hdfs = start_mini_hdfs(root / "hdfs")
    cluster = None
    rows: list[str] = []
    try:
        uri = hdfs.put(log_dir, "/bench/metadata")
        cluster = start_standalone(root / "standalone", cores=max(executors))
        print(f"mini HDFS {hdfs.uri}, standalone master {cluster.master_url}", flush=True)

        def kraft_log(spark: Any, path: str) -> Any:
            df = read_log(spark, path, columns=PROJECTION)
            return sorted(tuple(r) for r in df.groupBy("partition_leader_epoch").agg(
                F.count("*"), F.sum(F.length("value")), F.max("offset")).collect())

        def kraft_log_binary(spark: Any, path: str) -> Any:
            """The HDFS read path (binaryFile + mapInArrow) on local files: what the mmap
            data source saves on local disk."""
            from kraftnode.spark.fs_read import read_files

            df = read_files(spark, discover([path], spark), columns=PROJECTION)
            return sorted(tuple(r) for r in df.groupBy("partition_leader_epoch").agg(
                F.count("*"), F.sum(F.length("value")), F.max("offset")).collect())

        def binary(spark: Any, path: str) -> Any:
            files = [f.path for f in discover([path], spark)]
            return spark.read.format("binaryFile").load(files).agg(F.sum(F.length("content"))).first()[0]

        results: dict[tuple[int, str, str], float] = {}
        for k in executors:
            spark = local_session(cluster.master_url, f"kraftnode-bench-{k}x1", **{
                "spark.executor.cores": "1", "spark.cores.max": str(k), "spark.executor.memory": "1g",
                "spark.ui.showConsoleProgress": "false",
                "spark.driver.memory": "1g"})
            try:
                for where, path in (("local disk", str(log_dir)), ("HDFS", f"{uri}")):
                    readers = [("kraft-log", kraft_log), ("binaryFile", binary)]
                    if where == "local disk" and compare_local:
                        readers.insert(1, ("kraft-log via binaryFile", kraft_log_binary))
                    for reader, fn in readers:
                        _, expect = _timed(lambda fn=fn, path=path, spark=spark: fn(spark, path))  # warm-up
                        times = []
                        for _ in range(repeat):
                            dt, got = _timed(lambda fn=fn, path=path, spark=spark: fn(spark, path))
                            if got != expect:
                                print(f"MISMATCH {reader} {where}: {got} != {expect}", file=sys.stderr)
                                return 1
                            times.append(dt)
                        med = statistics.median(times)
                        results[(k, where, reader)] = med
                        line = (f"{k} executor{'s' if k > 1 else ''} x 1 core, {where:10s}, {reader:24s}: median "
                                f"{med:.2f} s = {size / 1e6 / med:,.1f} MB/s, {n / med:,.0f} rows/s "
                                f"(runs {', '.join(f'{t:.2f}' for t in times)}; load average "
                                f"{os.getloadavg()[0]:.1f})")
                        rows.append(line)
                        print(line, flush=True)
            finally:
                spark.stop()
        for k in executors:
            for where in ("local disk", "HDFS"):
                kl, bf = results[(k, where, "kraft-log")], results[(k, where, "binaryFile")]
                print(f"ratio kraft-log / binaryFile floor, {k} executor(s), {where}: {kl / bf:.2f}x the time "
                      f"({bf / kl:.0%} of the floor's throughput)")
        for where in ("local disk", "HDFS"):
            if len(executors) > 1:
                a, b = results[(executors[0], where, "kraft-log")], results[(executors[-1], where, "kraft-log")]
                print(f"kraft-log {where}: {executors[-1]} executors vs {executors[0]}: {a / b:.2f}x the throughput")
        return 0
    finally:
        if cluster is not None:
            cluster.stop()
        hdfs.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--batch-records", type=int, default=1000)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--dir", help="where to generate the log (default: a temporary directory)")
    ap.add_argument("--audit-timeout", type=float, default=900.0,
                    help="seconds before an audit run is killed (default 900)")
    ap.add_argument("--no-audit", action="store_true", help="skip timing the audit command")
    ap.add_argument("--cluster", action="store_true",
                    help="the standalone-cluster and HDFS rows instead (1 and 2 executors; see above)")
    ap.add_argument("--executors", default="1,2", help="executor counts for --cluster (default 1,2)")
    ap.add_argument("--compare-local", action="store_true",
                    help="with --cluster: also read local disk the HDFS way (binaryFile + mapInArrow)")
    args = ap.parse_args(argv)

    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kraft-spark-bench-"))
    try:
        log_dir = root / "metadata"
        t = time.perf_counter()
        n = generate(log_dir, args.records, args.value_bytes, args.batch_records, args.compression,
                     args.segment_mb)
        files = sorted((log_dir / "__cluster_metadata-0").glob("*.log"))
        size = sum(f.stat().st_size for f in files)
        print(f"generated {n:,} records of {args.value_bytes} B ({args.compression}, "
              f"{args.batch_records}/batch) in {len(files)} segments, {size / 1e6:.0f} MB, "
              f"in {time.perf_counter() - t:.1f} s", flush=True)
        if args.cluster:
            return bench_cluster(root, log_dir, n, size, args.repeat,
                                 tuple(int(x) for x in args.executors.split(",")), args.compare_local)

        from kraftnode.spark import local_session

        spark = local_session(args.master, "kraftnode-bench")
        try:
            spark_run(spark, str(log_dir))  # warm-up: JVM JIT, worker start-up
            spark_times, proj_times, single_times = [], [], []
            spark_out = proj_out = single_out = None
            for i in range(args.repeat):
                dt, spark_out = spark_run(spark, str(log_dir))
                spark_times.append(dt)
                dt1, proj_out = spark_run(spark, str(log_dir), projected=True)
                proj_times.append(dt1)
                dt2, single_out = single_run(str(log_dir))
                single_times.append(dt2)
                print(f"  run {i + 1}: spark all columns {dt:.2f} s ({n / dt:,.0f} rows/s), "
                      f"spark 3 columns {dt1:.2f} s ({n / dt1:,.0f} rows/s), "
                      f"single process {dt2:.2f} s ({n / dt2:,.0f} rows/s)", flush=True)
        finally:
            spark.stop()
        if not spark_out == proj_out == single_out:
            print(f"MISMATCH: spark {spark_out} / {proj_out} != single {single_out}", file=sys.stderr)
            return 1
        if not args.no_audit:
            bench_audit(root, log_dir, n, args.repeat, args.master, args.audit_timeout)
        sm, jm, pm = (statistics.median(x) for x in (spark_times, proj_times, single_times))
        cores = os.cpu_count()
        print(f"spark ({args.master}, {cores} cores), all {len(ARROW_COLUMNS)} columns: "
              f"median {sm:.2f} s = {n / sm:,.0f} rows/s")
        print(f"spark ({args.master}, {cores} cores), .schema(3 columns):  median {jm:.2f} s = {n / jm:,.0f} rows/s")
        print(f"single-process decode (all columns):          median {pm:.2f} s = {n / pm:,.0f} rows/s")
        print(f"ratio spark / single: all columns {pm / sm:.2f}x, 3 columns {pm / jm:.2f}x; "
              f"aggregate (epoch, rows, value bytes, last offset): {spark_out}")
        return 0
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
