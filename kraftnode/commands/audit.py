"""``kraftnode audit LOGDIR... --out DIR``: the quorum audit on a Spark session (local, or
``--master`` of a cluster; the logs on local disk or any filesystem Spark reads, docs/spark.md).

Runs the same job as ``tools/pipelines/quorum_audit.py`` (logic in
``kraftnode.spark.audit``): Parquet tables, ``summary.json`` and a self-contained
``report.html`` under ``--out``.  The headline is the first line on stdout; the
progress lines, one per stage, go to stderr. Exit 0 when the logs are clean, 1 when a safety
violation is found or a replica has lost committed data (a batch below the committed
floor that fails its CRC or cannot be read), 2 (one line on stderr) for bad input such
as a path that is not a log dir.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kraftnode.errors import UsageError

# kraftnode.spark and pyspark are imported inside run() and its helpers, on purpose: the CLI
# imports every command module to list them, and the spark extra is optional (run() turns its
# absence into one line and exit 2).

NAME = "audit"
HELP = "audit the metadata logs of every replica with Spark: consistency, leaders, voters, rates"
EXAMPLES = """\
  kraftnode audit /tmp/dev/node1/metadata /tmp/dev/node2/metadata /tmp/dev/node3/metadata --out audit
  kraftnode audit '/tmp/dev/node*/metadata' --out audit --master 'local[2]'
  kraftnode audit 'hdfs://namenode:8020/kraft/node*/metadata' --out audit --master spark://host:7077
Needs the spark extra: pip install 'kraftnode[spark]'.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log_dirs", nargs="+", metavar="LOGDIR",
                   help="metadata log dirs (or directories above them, segment files, globs): local "
                        "paths (relative ones resolved here) or any URI Spark reads (hdfs://, s3a://, file://...)")
    p.add_argument("--out", required=True, metavar="DIR", help="where to write the tables and report.html")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")


def audit_conf(log_bytes: int, extra_java: Sequence[str] = ()) -> dict[str, str]:
    """Spark settings for an audit over ``log_bytes`` of log files (``extra_java``: more
    driver JVM options, e.g. the quiet log4j2 configuration).

    Why: the audit runs about ten small jobs; on a log of a few MB each one's cost is
    Spark's per-task and per-stage overhead, not data, so shuffles get one partition
    per 64 MB of log (at least 1), small logs skip the JIT's slow tier, and no console
    progress bars interleave with the audit's own progress lines.
    """
    from kraftnode.spark.audit import DRIVER_READ_MAX_BYTES

    conf = {"spark.sql.shuffle.partitions": str(max(1, min(64, log_bytes // (64 << 20)))),
            "spark.ui.showConsoleProgress": "false"}
    java = list(extra_java)
    if log_bytes <= DRIVER_READ_MAX_BYTES:
        # a short run: the JVM's optimising compiler (C2) would spend more CPU than it saves
        # (measured: about half the CPU of the session start and the audit jobs)
        java += ["-XX:TieredStopAtLevel=1", *class_data_sharing()]
    if java:
        conf["spark.driver.extraJavaOptions"] = " ".join(java)
    return conf


def class_data_sharing(cache: Path | None = None) -> list[str]:
    """JVM options that load Spark's classes from a class-data-sharing archive (JDK 13+
    dynamic CDS) kept in ``~/.cache/kraftnode`` (``$XDG_CACHE_HOME``), or record one.

    Why: loading and verifying Spark's ~10,000 classes is most of a session's start;
    mapped from an archive, the session start took 3.5 instead of 6 CPU seconds and the
    first audit 10.7 instead of 14.
    The first run records the archive as its JVM exits (about 190 MB, under a temporary
    name, adopted by a later run once it is a minute old); one archive per pyspark
    version and JVM, and the JVM itself ignores an archive that does not match its class
    path.  ``KRAFTNODE_SPARK_CDS=0`` turns this off.
    """
    if os.environ.get("KRAFTNODE_SPARK_CDS", "1") == "0":
        return []
    import pyspark

    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") \
        else shutil.which("java") or "java"
    key = hashlib.sha256(f"{pyspark.__version__}|{os.path.realpath(java)}|{pyspark.__file__}".encode()).hexdigest()
    root = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kraftnode"
    final = root / f"spark-cds-{key[:16]}.jsa"
    quiet = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    try:
        root.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for tmp in root.glob(f"{final.name}.*.tmp"):
            if now - tmp.stat().st_mtime > 60:  # written by a JVM that has exited
                if final.exists():
                    tmp.unlink()
                else:
                    os.replace(tmp, final)
        if final.exists():
            return [f"-XX:SharedArchiveFile={final}", *quiet]
        if any(root.glob(f"{final.name}.*.tmp")):
            return []  # another run is recording it
        return [f"-XX:ArchiveClassesAtExit={final}.{os.getpid()}.tmp", *quiet]
    except OSError:
        return []  # no writable cache: start without the archive


def run(args: argparse.Namespace) -> int:
    try:
        from kraftnode.spark.paths import PathError, discover
    except ImportError as e:
        raise UsageError(f"the audit needs the spark extra (pip install 'kraftnode[spark]'): {e}") from None
    from kraftnode.spark.paths import needs_jvm

    remote = needs_jvm(list(args.log_dirs))
    # local paths: checked before Spark starts (hdfs://... is listed by Spark's JVM)
    files: list[Any] = [] if remote else _segments(args.log_dirs, discover)
    out = _out_dir(args.out)

    t0 = time.monotonic()

    def progress(line: str) -> None:
        # on stderr: stdout's first line is the headline (issue 41), whatever came before
        print(f"[{time.monotonic() - t0:5.1f} s] {line}", file=sys.stderr, flush=True)

    total = sum(f.size for f in files)
    progress(f"{len(files)} files, {total / 1e6:.1f} MB; starting Spark ({args.master})" if not remote
             else f"starting Spark ({args.master}) to list {' '.join(args.log_dirs)}")
    from pyspark.sql import SparkSession

    from kraftnode.spark.audit import run_audit

    existing = SparkSession.getActiveSession()  # embedded use: leave the caller's session running
    spark = _session(args.master, total, progress)
    try:
        if remote:
            files = _segments(list(args.log_dirs), lambda dirs: discover(dirs, spark))
            total = sum(f.size for f in files)
            spark.conf.set("spark.sql.shuffle.partitions", audit_conf(total)["spark.sql.shuffle.partitions"])
            progress(f"{len(files)} files, {total / 1e6:.1f} MB")
        try:
            # on a cluster the executors read the files (the driver may be a small gateway
            # machine, and the files are where the cluster is); locally small logs are
            # decoded on the driver (see run_audit)
            on_cluster = not str(args.master).startswith("local")
            res = run_audit(spark, list(args.log_dirs), out, progress=progress,
                            **({"driver_read_max_bytes": -1} if on_cluster else {}))
        except PathError as e:  # e.g. an executor cannot read a file the driver listed
            raise UsageError(str(e)) from None
    finally:
        if existing is None:
            spark.stop()
    _print_result(res)
    return 0 if res.ok else 1


def _segments(log_dirs: Any, discover: Any) -> list[Any]:
    """The files ``discover`` finds under ``log_dirs``; UsageError when none is a segment."""
    from kraftnode.spark.paths import PathError

    try:
        files: list[Any] = discover(log_dirs)
    except PathError as e:
        raise UsageError(str(e)) from None
    if not any(f.file_type == "segment" for f in files):
        raise UsageError(f"no log segment found under {' '.join(log_dirs)}")
    return files


def _out_dir(path: str) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot create: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise UsageError(f"--out {out}: not writable")
    return out


def _session(master: str, total: int, progress: Any) -> Any:
    """The Spark session, the JVM's start-up noise dropped and its errors kept."""
    from kraftnode.spark import local_session
    from kraftnode.spark.quiet import filtered_stderr, log4j2_options

    t = time.monotonic()
    java, log4j2_file = log4j2_options()
    try:
        with filtered_stderr():
            spark = local_session(master, "kraftnode-audit", **audit_conf(total, java))
    finally:
        if log4j2_file is not None:
            log4j2_file.unlink(missing_ok=True)
    progress(f"Spark session ready ({time.monotonic() - t:.1f} s)")
    return spark


def _print_result(res: Any) -> None:
    print(res.headline())
    print(f"replicas {res.replicas}; committed floor {res.committed_floor}; {len(res.leadership)} epochs; "
          f"{len(res.violations)} safety violations; {len({b['replica'] for b in res.lost})} replica(s) with lost "
          f"data; {res.invalid_count} invalid rows")
    for p in res.pairs:
        where = (f" at offset {p['first_divergence']}: {p['reason']}" if p.get("first_divergence") is not None
                 else "" if p["verdict"] == "consistent" else f": {p['reason']}")
        print(f"  replicas {p['replica_a']} and {p['replica_b']}: {p['verdict']}{where}")
    print(f"report: {res.report}")
