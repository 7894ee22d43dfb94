"""Quorum audit job: ``spark-submit tools/pipelines/quorum_audit.py LOGDIR... --out DIR``.

Reads the metadata log dirs of every replica with the ``kraft-log`` source and
writes Parquet tables (``DIR/tables/*``), ``DIR/summary.json`` and one
self-contained ``DIR/report.html`` (plots inlined as PNG): cross-replica
consistency with each pair's first divergence classified as a legal uncommitted
tail or a safety violation, the leadership timeline, the voter-set history, and
per-epoch records/bytes/compression with the write rate.  The logic and the
consistency rule live in ``kraftnode.spark.audit``; ``kraftnode audit`` runs the
same job in-process.  Exit status: 0 clean, 1 a safety violation found or committed data
lost on a replica (a batch below the committed floor that fails its CRC or cannot be read),
2 bad input. The headline is the first line on stdout; progress lines go to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log_dirs", nargs="+", metavar="LOGDIR")
    ap.add_argument("--out", required=True)
    ap.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    args = ap.parse_args(argv)

    from kraftnode.spark.audit import run_audit
    from kraftnode.spark.paths import PathError, discover, needs_jvm

    if not needs_jvm(args.log_dirs):  # local paths: checked before Spark starts; URIs are listed by its JVM
        try:
            discover(args.log_dirs)
        except PathError as e:
            print(f"quorum_audit: {e}", file=sys.stderr)
            return 2
    from pyspark import SparkConf, SparkContext

    from kraftnode.spark import local_session

    master = args.master
    if master is None:  # spark-submit's --master (a system property of the JVM it started), else local
        SparkContext._ensure_initialized()
        master = SparkConf().get("spark.master", "local[*]")
    spark = local_session(master, "kraftnode-quorum-audit")
    t0 = time.monotonic()
    try:
        res = run_audit(spark, args.log_dirs, args.out,
                        progress=lambda line: print(f"[{time.monotonic() - t0:5.1f} s] {line}", file=sys.stderr,
                                                    flush=True),
                        **({} if master.startswith("local") else {"driver_read_max_bytes": -1}))
    except PathError as e:
        print(f"quorum_audit: {e}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    print(res.headline())
    print(f"replicas {res.replicas}; committed floor {res.committed_floor}; "
          f"{len(res.leadership)} epochs; {len(res.violations)} violations; "
          f"{len({b['replica'] for b in res.lost})} replica(s) with lost data; report {res.report}")
    for p in res.pairs:
        print(f"  {p['replica_a']} vs {p['replica_b']}: {p['verdict']}"
              + (f" at offset {p['first_divergence']} ({p['reason']})" if p.get("first_divergence") is not None
                 else "" if p["verdict"] == "consistent" else f" ({p['reason']})"))
    return 0 if res.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
