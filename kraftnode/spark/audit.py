"""The quorum audit: consistency, leadership, voter history and write statistics of
the metadata logs of every replica, as Parquet tables and one HTML report.

Used by ``tools/pipelines/quorum_audit.py`` (spark-submit) and ``kraftnode audit``.

The consistency rule (Raft's Log Matching and Leader Completeness, applied to what
the logs alone can prove):

* An entry is (offset, epoch, checksum) where the checksum is xxhash64 of the
  record's key, value, headers and timestamp.  Only segment files are compared.
* Two replicas holding the same offset with the same epoch but different records
  is always a **safety violation** (a leader writes one entry per offset per
  epoch, so Log Matching forbids it).
* The committed floor F is the largest offset the logs prove committed: one past
  the last offset whose entry is held identically by a majority of the replicas
  *and* belongs to the newest epoch found in any log (an entry of the newest
  epoch on a majority was replicated by that epoch's leader, so it is committed,
  and with it every earlier entry of those logs), or a snapshot's end offset
  (snapshots are taken of committed records only), whichever is larger.
* Below F, the committed entry at each offset is the majority's.  A replica whose
  entry there differs is legal only if its entry has a *lower* epoch (a stale,
  never-committed tail the replica has not truncated yet, e.g. a deposed leader's);
  the same or a higher epoch there is a safety violation.
* At or above F, differing entries of different epochs are a legal uncommitted tail.

The audit therefore expects the log dirs of all voters; with fewer, F is computed
over the replicas given and is only as strong as they are.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftnode.log.snapshot import parse_snapshot_file_name
from kraftnode.spark.record_json import NOT_METADATA

__all__ = ["AuditResult", "run_audit"]

LEADER_CHANGE_JSON = ("leaderId INT, voters ARRAY<STRUCT<voterId: INT>>, "
                      "grantingVoters ARRAY<STRUCT<voterId: INT>>")
VOTERS_JSON = ("voters ARRAY<STRUCT<voterId: INT, voterDirectoryId: STRING, "
               "endpoints: ARRAY<STRUCT<name: STRING, host: STRING, port: INT>>>>")
KRAFT_VERSION_JSON = "kRaftVersion INT"


@dataclass
class AuditResult:
    out_dir: Path
    replicas: list[int]
    committed_floor: int
    pairs: list[dict[str, Any]]
    violations: list[dict[str, Any]]
    leadership: list[dict[str, Any]]
    voters: list[dict[str, Any]]
    epochs: list[dict[str, Any]]
    rate: list[dict[str, Any]]
    invalid: list[dict[str, Any]]
    invalid_count: int
    report: Path
    tables: dict[str, Path] = field(default_factory=dict)
    rate_bucket_ms: int = 1000

    @property
    def ok(self) -> bool:
        return not self.violations


def _rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def run_audit(spark: Any, log_dirs: list[str], out_dir: str | os.PathLike[str]) -> AuditResult:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    tables: dict[str, Path] = {}

    def save(name: str, df: Any) -> None:
        """Tables that can be as large as the log: written by Spark."""
        path = out / "tables" / name
        df.write.mode("overwrite").parquet(str(path))
        tables[name] = path

    def save_collected(name: str, df: Any) -> list[dict[str, Any]]:
        """Small tables (a row per epoch, pair, bucket...): collected once and written by
        the driver, instead of computing them twice (one job to write, one to collect)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        collected = _rows(df)
        schema = to_arrow_schema(df.schema)
        path = out / "tables" / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(collected, schema=schema), path / "part-00000.parquet")
        tables[name] = path
        return collected

    rows = spark.read.format("kraft-log").load(log_dirs).cache()
    seg = rows.filter(F.col("file_type") == "segment")
    ok = seg.filter(F.col("error").isNull() & F.col("offset").isNotNull())
    entries = (ok.select("replica", "offset", F.col("partition_leader_epoch").alias("epoch"),
                         F.xxhash64("key", "value", "headers", "timestamp").alias("hash"),
                         "timestamp", "record_size", "batch_base_offset", "batch_size", "batch_crc",
                         "batch_records", "batch_crc_valid")
               .dropDuplicates(["replica", "offset"]).cache())
    replicas = sorted(r["replica"] for r in seg.select("replica").distinct().collect() if r["replica"] is not None)
    n = len(replicas)
    majority = n // 2 + 1

    # ---------------------------------------------------------------- committed floor
    agree = entries.groupBy("offset", "epoch", "hash").agg(F.countDistinct("replica").alias("holders"))
    newest = entries.agg(F.max("epoch")).first()[0]
    floor_row = (agree.filter((F.col("holders") >= majority) & (F.col("epoch") == newest))
                 .agg(F.max("offset")).first()[0])
    committed_floor = -1 if floor_row is None else int(floor_row) + 1
    snap_floor = -1
    for r in rows.filter(F.col("file_type") == "snapshot").select("file").distinct().collect():
        sid = parse_snapshot_file_name(os.path.basename(r["file"]))
        if sid is not None:
            snap_floor = max(snap_floor, sid.offset)
    committed_floor = max(committed_floor, snap_floor, 0)

    committed = (agree.filter((F.col("holders") >= majority) & (F.col("offset") < committed_floor))
                 .select("offset", F.col("epoch").alias("c_epoch"), F.col("hash").alias("c_hash")))
    # violations 1: same offset and epoch, different records (anywhere)
    same_epoch = (entries.groupBy("offset", "epoch").agg(F.countDistinct("hash").alias("versions"))
                  .filter(F.col("versions") > 1).select("offset", "epoch"))
    v1 = (entries.join(same_epoch, ["offset", "epoch"])
          .select("offset", "replica", "epoch", "hash",
                  F.lit("same offset and epoch as another replica, different record (Log Matching)").alias("reason")))
    # violations 2: below the committed floor, an entry of the same or a higher epoch than the committed one
    v2 = (entries.join(committed, "offset")
          .filter((F.col("hash") != F.col("c_hash")) & (F.col("epoch") >= F.col("c_epoch")))
          .select("offset", "replica", "epoch", "hash",
                  F.concat(F.lit("differs from the committed entry (epoch "), F.col("c_epoch").cast("string"),
                           F.lit(") below the committed floor")).alias("reason")))
    violations_df = v1.unionByName(v2).dropDuplicates(["offset", "replica"]).orderBy("offset", "replica")
    save("violations", violations_df)
    violations = _rows(violations_df.limit(1000))

    # ---------------------------------------------------------------- pairwise first divergence
    a = entries.select(F.col("replica").alias("replica_a"), "offset", F.col("epoch").alias("epoch_a"),
                       F.col("hash").alias("hash_a"))
    b = entries.select(F.col("replica").alias("replica_b"), "offset", F.col("epoch").alias("epoch_b"),
                       F.col("hash").alias("hash_b"))
    joined = a.join(b, "offset").filter(F.col("replica_a") < F.col("replica_b"))
    mismatch = (F.col("epoch_a") != F.col("epoch_b")) | (F.col("hash_a") != F.col("hash_b"))
    pair_stats = joined.groupBy("replica_a", "replica_b").agg(
        F.count("*").alias("common_offsets"),
        F.sum(F.when(mismatch, 1).otherwise(0)).alias("mismatched_offsets"),
        F.min(F.when(mismatch, F.col("offset"))).alias("first_divergence"))
    first = (joined.join(pair_stats.select("replica_a", "replica_b", F.col("first_divergence").alias("offset")),
                         ["replica_a", "replica_b", "offset"])
             .join(committed, "offset", "left"))
    firsts = {(r["replica_a"], r["replica_b"]): r for r in _rows(first)}
    pairs: list[dict[str, Any]] = []
    for r in _rows(pair_stats.orderBy("replica_a", "replica_b")):
        key = (r["replica_a"], r["replica_b"])
        f = firsts.get(key)
        verdict, reason = "consistent", "every common offset agrees"
        if f is not None:
            r.update(epoch_a=f["epoch_a"], epoch_b=f["epoch_b"], hash_a=f["hash_a"], hash_b=f["hash_b"])
            verdict, reason = _classify(f, committed_floor)
        r["verdict"] = verdict
        r["reason"] = reason
        pairs.append(r)
    pairs_schema = ("replica_a INT, replica_b INT, common_offsets BIGINT, mismatched_offsets BIGINT, "
                    "first_divergence BIGINT, epoch_a INT, epoch_b INT, hash_a BIGINT, hash_b BIGINT, "
                    "verdict STRING, reason STRING")
    cols = [c.split(" ")[0] for c in pairs_schema.split(", ")]
    save_collected("pair_divergence", spark.createDataFrame([tuple(p.get(c) for c in cols) for p in pairs],
                                                            pairs_schema))
    disagreements = (entries.groupBy("offset")
                     .agg(F.countDistinct("epoch", "hash").alias("versions"),
                          F.sort_array(F.collect_list(F.struct("replica", "epoch", "hash"))).alias("entries"))
                     .filter(F.col("versions") > 1).orderBy("offset"))
    save("disagreements", disagreements)

    # ---------------------------------------------------------------- leadership timeline
    lc = (seg.filter(F.col("control_type") == "LEADER_CHANGE")
          .select(F.col("partition_leader_epoch").alias("epoch"), "offset", "timestamp", "replica",
                  F.from_json("record_json", LEADER_CHANGE_JSON).alias("m")))
    w = Window.partitionBy("epoch").orderBy("offset", "replica")
    lc = lc.withColumn("rn", F.row_number().over(w)).filter("rn = 1").drop("rn")
    epoch_counts = (entries.dropDuplicates(["offset", "epoch", "hash"]).groupBy("epoch")
                    .agg(F.count("*").alias("records"), F.max("timestamp").alias("last_ts")))
    max_ts = entries.agg(F.max("timestamp")).first()[0]
    ordered = Window.orderBy("epoch")
    leadership_df = (lc.join(epoch_counts, "epoch", "left")
                     .select("epoch", F.col("m.leaderId").alias("leader"),
                             F.expr("transform(m.voters, v -> v.voterId)").alias("voters"),
                             F.expr("transform(m.grantingVoters, v -> v.voterId)").alias("granting_voters"),
                             F.col("offset").alias("start_offset"), F.col("timestamp").alias("start_time"),
                             F.coalesce("records", F.lit(0)).alias("records"))
                     .withColumn("end_time", F.coalesce(F.lead("start_time").over(ordered), F.lit(max_ts)))
                     .withColumn("tenure_ms", F.col("end_time") - F.col("start_time"))
                     .orderBy("epoch"))
    leadership = save_collected("leadership", leadership_df)

    # ---------------------------------------------------------------- voter-set history
    vr = rows.filter(F.col("control_type").isin("KRAFT_VOTERS", "KRAFT_VERSION") & F.col("error").isNull())
    voters_df = (vr.select("file_type", "offset", F.col("partition_leader_epoch").alias("epoch"), "timestamp",
                           "control_type",
                           F.from_json("record_json", KRAFT_VERSION_JSON)["kRaftVersion"].alias("kraft_version"),
                           F.from_json("record_json", VOTERS_JSON)["voters"].alias("v"))
                 .dropDuplicates(["file_type", "offset", "control_type"])
                 .select("file_type", "offset", "epoch", "timestamp", "control_type", "kraft_version",
                         F.expr("transform(v, x -> x.voterId)").alias("voters"),
                         F.expr("transform(v, x -> concat(x.voterId, '@', x.endpoints[0].host, ':', "
                                "x.endpoints[0].port))").alias("endpoints"))
                 .orderBy(F.when(F.col("file_type") == "segment", 1).otherwise(0), "offset", "control_type"))
    voters = save_collected("voters_history", voters_df)

    # ---------------------------------------------------------------- per-epoch statistics, write rate
    uniq = entries.dropDuplicates(["offset", "epoch", "hash"])
    batches = (entries.dropDuplicates(["epoch", "batch_base_offset", "batch_crc"])
               .groupBy("epoch").agg(F.count("*").alias("batches"), F.sum("batch_size").alias("disk_bytes")))
    epochs_df = (uniq.groupBy("epoch").agg(F.count("*").alias("records"), F.sum("record_size").alias("record_bytes"),
                                           F.min("timestamp").alias("first_time"), F.max("timestamp").alias("last_time"))
                 .join(batches, "epoch")
                 .withColumn("compression_ratio",
                             (F.col("record_bytes") + F.col("batches") * 61) / F.col("disk_bytes"))
                 .orderBy("epoch"))
    epochs = save_collected("epoch_stats", epochs_df)
    span = uniq.agg(F.min("timestamp"), F.max("timestamp")).first()
    bucket = max(1000, ((span[1] or 0) - (span[0] or 0)) // 60 // 1000 * 1000) if span[0] is not None else 1000
    rate_df = (uniq.groupBy((F.floor(F.col("timestamp") / bucket) * bucket).cast("long").alias("bucket_start"))
               .agg(F.count("*").alias("records"), F.sum("record_size").alias("bytes"))
               .withColumn("records_per_s", F.col("records") / (bucket / 1000.0))
               .withColumn("bytes_per_s", F.col("bytes") / (bucket / 1000.0))
               .orderBy("bucket_start"))
    rate = save_collected("write_rate", rate_df)

    # ---------------------------------------------------------------- invalid rows
    invalid_df = rows.filter(F.col("error").isNotNull() | (F.col("record_error").isNotNull()
                                                            & (F.col("record_error") != NOT_METADATA)))
    invalid_df = invalid_df.select("replica", "file", "file_type", "position", "offset", "batch_crc_valid",
                                   "record_type", "record_error", "error")
    save("invalid_rows", invalid_df)
    invalid_count = invalid_df.count()
    invalid = _rows(invalid_df.limit(200))

    replica_df = (rows.groupBy("replica", "file_type").agg(
        F.countDistinct("file").alias("files"), F.count("offset").alias("records"),
        F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
        F.sum(F.when(F.col("error").isNotNull(), 1).otherwise(0)).alias("error_rows"),
        F.sum(F.when(~F.col("batch_crc_valid"), 1).otherwise(0)).alias("crc_invalid_rows"))
        .orderBy("replica", "file_type"))
    replica_rows = save_collected("replicas", replica_df)
    entries.unpersist()
    rows.unpersist()

    result = AuditResult(out, replicas, committed_floor, pairs, violations, leadership, voters, epochs, rate,
                         invalid, invalid_count, out / "report.html", tables, int(bucket))
    result.report.write_text(_report_html(result, replica_rows, log_dirs), encoding="utf-8")
    (out / "summary.json").write_text(json.dumps({
        "replicas": replicas, "committed_floor": committed_floor, "violations": len(violations),
        "pairs": pairs, "leadership_epochs": len(leadership), "invalid_rows": invalid_count,
    }, indent=2, default=str), encoding="utf-8")
    return result


def _classify(f: dict[str, Any], committed_floor: int) -> tuple[str, str]:
    o, ea, eb = f["offset"], f["epoch_a"], f["epoch_b"]
    if ea == eb:
        return ("SAFETY VIOLATION", f"offset {o}: both replicas hold epoch {ea} with different records "
                                    "(Log Matching forbids two entries per offset and epoch)")
    if o >= committed_floor:
        return ("legal uncommitted tail", f"offset {o} is at or above the committed floor {committed_floor}; "
                                          f"epochs {ea} vs {eb}: the older-epoch side will truncate")
    c_epoch, c_hash = f.get("c_epoch"), f.get("c_hash")
    if c_epoch is None:
        return ("SAFETY VIOLATION", f"offset {o} is below the committed floor {committed_floor} but no majority "
                                    "agrees on its entry")
    for side, e, h in (("a", ea, f["hash_a"]), ("b", eb, f["hash_b"])):
        if (e, h) != (c_epoch, c_hash) and e >= c_epoch:
            return ("SAFETY VIOLATION", f"offset {o}: replica {f['replica_' + side]} holds epoch {e} over the "
                                        f"committed epoch-{c_epoch} entry (below floor {committed_floor})")
    return ("legal uncommitted tail", f"offset {o}: the replica with epoch {min(ea, eb)} holds a stale tail "
                                      f"that the committed epoch-{c_epoch} entry replaced; it truncates on fetch")


# -------------------------------------------------------------------- HTML report
def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _plots(res: AuditResult) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    if res.leadership:
        fig, ax = plt.subplots(figsize=(9, 2.8))
        t0 = min(r["start_time"] for r in res.leadership)
        for r in res.leadership:
            start = (r["start_time"] - t0) / 1000
            ax.barh(r["leader"], max((r["tenure_ms"] or 0) / 1000, 0.05), left=start, height=0.6)
            ax.text(start, r["leader"] + 0.35, f"e{r['epoch']}", fontsize=8)
        ax.set_xlabel("seconds since the first LeaderChange")
        ax.set_ylabel("leader (node id)")
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title("Leadership timeline (bar = tenure)")
        out["leadership"] = _png(fig)
    if res.epochs:
        fig, ax = plt.subplots(figsize=(9, 2.8))
        ax.bar([str(r["epoch"]) for r in res.epochs], [r["records"] for r in res.epochs])
        ax2 = ax.twinx()
        ax2.plot([str(r["epoch"]) for r in res.epochs], [r["compression_ratio"] for r in res.epochs],
                 "o-", color="tab:red")
        ax.set_xlabel("epoch")
        ax.set_ylabel("records")
        ax2.set_ylabel("compression ratio", color="tab:red")
        ax.set_title("Records and compression ratio per epoch")
        out["epochs"] = _png(fig)
    if res.rate:
        fig, ax = plt.subplots(figsize=(9, 2.8))
        t0 = res.rate[0]["bucket_start"]
        step = res.rate_bucket_ms
        by_start = {r["bucket_start"]: r["records_per_s"] for r in res.rate}
        starts = list(range(t0, res.rate[-1]["bucket_start"] + 2 * step, step))  # idle buckets show as 0
        ax.step([(x - t0) / 1000 for x in starts], [by_start.get(x, 0) for x in starts], where="post")
        ax.set_xlabel("seconds since the first record")
        ax.set_ylabel("records/s")
        ax.set_title("Write rate")
        out["rate"] = _png(fig)
    return out


def _table(rows: list[dict[str, Any]], columns: list[str] | None = None, limit: int = 200) -> str:
    if not rows:
        return "<p><i>none</i></p>"
    cols = columns or list(rows[0].keys())
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows[:limit]:
        cls = ' class="bad"' if "VIOLATION" in str(r.get("verdict", "")) or r.get("reason") and "verdict" not in r \
            else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(r.get(c)))}</td>" for c in cols) + "</tr>")
    more = f"<p>... {len(rows) - limit} more rows in the Parquet table</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def _report_html(res: AuditResult, replica_rows: list[dict[str, Any]], log_dirs: list[str]) -> str:
    plots = _plots(res)
    verdict = ("<p class='good'>No safety violation found.</p>" if res.ok else
               f"<p class='bad'>{len(res.violations)} safety violation(s) found.</p>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
             "font-size:13px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
             "th{background:#eee}.bad{color:#b00;background:#fee}.good{color:#070}")
    tables = ", ".join(f"<code>{html.escape(str(p.relative_to(res.out_dir)))}</code>" for p in res.tables.values())
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>KRaft quorum audit</title>
<style>{style}</style></head><body>
<h1>KRaft quorum audit</h1>
<p>Log dirs: {html.escape(", ".join(log_dirs))}<br>Replicas: {res.replicas};
committed floor (proven from the logs): offset {res.committed_floor}</p>
{verdict}
<h2>Replicas</h2>{_table(replica_rows)}
<h2>1. Cross-replica consistency</h2>
<p>Rule: same offset and epoch with different records is always a violation; below the committed
floor an entry must match the majority's or be of an older epoch (a stale tail); above it,
differing epochs are a legal uncommitted tail.</p>
{_table(res.pairs, ["replica_a", "replica_b", "common_offsets", "mismatched_offsets", "first_divergence",
                    "epoch_a", "epoch_b", "verdict", "reason"])}
<h3>Violations</h3>{_table(res.violations)}
<h2>2. Leadership timeline</h2>{plots.get("leadership", "")}
{_table(res.leadership)}
<h2>3. Voter-set history</h2>{_table(res.voters)}
<h2>4. Per-epoch records, bytes, compression; write rate</h2>{plots.get("epochs", "")}
{_table(res.epochs)}{plots.get("rate", "")}
<h2>Invalid rows ({res.invalid_count})</h2>{_table(res.invalid)}
<p>Parquet tables: {tables}</p>
</body></html>
"""
