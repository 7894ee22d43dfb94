"""``kraftnode audit LOGDIR... --out DIR``: the quorum audit on a local Spark session.

Runs the same job as ``tools/pipelines/quorum_audit.py`` (logic in
``kraftnode.spark.audit``): Parquet tables, ``summary.json`` and a self-contained
``report.html`` under ``--out``.  Exit 0 when no safety violation is found, 1 when
one is, 2 (one line on stderr) for bad input such as a path that is not a log dir.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kraftnode.cli import UsageError

NAME = "audit"
HELP = "audit the metadata logs of every replica with Spark: consistency, leaders, voters, rates"
EXAMPLES = """\
  kraftnode audit /tmp/dev/node1/metadata /tmp/dev/node2/metadata /tmp/dev/node3/metadata --out audit
  kraftnode audit '/tmp/dev/node*/metadata' --out audit --master 'local[2]'
Needs the spark extra: pip install 'kraftnode[spark]'.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log_dirs", nargs="+", metavar="LOGDIR",
                   help="metadata log dirs (or directories above them, segment files, globs)")
    p.add_argument("--out", required=True, metavar="DIR", help="where to write the tables and report.html")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")


def run(args: argparse.Namespace) -> int:
    try:
        from kraftnode.spark.paths import PathError, discover
    except ImportError as e:
        raise UsageError(f"the audit needs the spark extra (pip install 'kraftnode[spark]'): {e}") from None
    try:
        files = discover(args.log_dirs)
    except PathError as e:
        raise UsageError(str(e)) from None
    if not any(f.file_type == "segment" for f in files):
        raise UsageError(f"no log segment found under {' '.join(args.log_dirs)}")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot create: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise UsageError(f"--out {out}: not writable")

    from pyspark.sql import SparkSession

    from kraftnode.spark import local_session
    from kraftnode.spark.audit import run_audit

    existing = SparkSession.getActiveSession()  # embedded use: leave the caller's session running
    spark = local_session(args.master, "kraftnode-audit")
    try:
        res = run_audit(spark, list(args.log_dirs), out)
    finally:
        if existing is None:
            spark.stop()
    print(f"replicas {res.replicas}; committed floor {res.committed_floor}; {len(res.leadership)} epochs; "
          f"{len(res.violations)} safety violations; {res.invalid_count} invalid rows")
    for p in res.pairs:
        where = f" at offset {p['first_divergence']}: {p['reason']}" if p.get("first_divergence") is not None else ""
        print(f"  replicas {p['replica_a']} and {p['replica_b']}: {p['verdict']}{where}")
    print(f"report: {res.report}")
    return 0 if res.ok else 1
