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
* A batch of a segment that cannot be read -- its CRC does not match its bytes, it cannot
  be decoded, or its header is damaged so that the rest of the file cannot be walked -- is
  data that replica has **lost**: it can neither serve those offsets nor prove what it held
  there. Below F it is lost *committed* data; at or above F the damage may itself hide the
  proof (a damaged newest-epoch tail leaves fewer replicas holding it), so it is reported as
  lost data the logs no longer prove committed. Either way it is named in the headline
  (replica and offsets), fails the audit (exit code 1) and marks every pair with that
  replica inconsistent. Only an *incomplete* last batch -- the file ends inside it, the
  signature of a crash during an unflushed write, which Kafka's recovery truncates and which
  the replica never acknowledged -- is not lost data; it is listed with the invalid rows.

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftnode.log.snapshot import parse_snapshot_file_name
from kraftnode.spark.record_json import NOT_METADATA

# pyspark, pyarrow and matplotlib (the spark extra, each slow to import) are imported inside the
# functions that use them, on purpose: the audit's pure parts need none of them.

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
    #: unreadable segment batches (not an incomplete last batch), one row per batch: replica,
    #: file, position, first_offset, last_offset (None: the rest of the file), epoch,
    #: committed (first_offset below the committed floor), error
    lost: list[dict[str, Any]] = field(default_factory=list)
    #: records that are not KRaft metadata records (application records: Produce, groups, the
    #: embedding API), distinct offsets over every replica's segments, and the first of them:
    #: no Kafka broker or controller can replay a log that holds any
    application_records: int = 0
    first_application_offset: int | None = None

    @property
    def ok(self) -> bool:
        return not self.violations and not self.lost

    def lost_ranges(self, committed: bool = True) -> dict[int, list[tuple[int, int | None]]]:
        """Per replica, the offset ranges (first, last) it has lost, merged: below the committed
        floor (``committed``) or at and above it; last None: to the end of the file."""
        out: dict[int, list[tuple[int, int | None]]] = {}
        floor = self.committed_floor
        for r in sorted(self.lost, key=lambda r: (r["replica"], r["first_offset"])):
            first, last = r["first_offset"], r["last_offset"]
            if committed:
                if first >= floor:
                    continue
                last = floor - 1 if last is None else min(last, floor - 1)
            else:
                if last is not None and last < floor:
                    continue
                first = max(first, floor)
            ranges = out.setdefault(r["replica"], [])
            prev = ranges[-1] if ranges else None
            if prev is not None and prev[1] is not None and first <= prev[1] + 1:
                ranges[-1] = (prev[0], None if last is None else max(prev[1], last))
            elif prev is None or prev[1] is not None:
                ranges.append((first, last))
        return out

    def headline(self) -> str:
        """One line a person reads first: what the audit found, worst first."""
        def where(ranges: list[tuple[int, int | None]]) -> str:
            return ", ".join(f"{a} and after" if b is None else f"{a}-{b}" if a != b else str(a)
                             for a, b in ranges)

        parts = []
        for replica, ranges in self.lost_ranges().items():
            count = sum(b - a + 1 for a, b in ranges if b is not None)
            parts.append(f"replica {replica} lost committed data: offsets {where(ranges)} ({count} record"
                         f"{'s' if count != 1 else ''} in batches that fail their CRC or cannot be read)")
        for replica, ranges in self.lost_ranges(committed=False).items():
            parts.append(f"replica {replica} lost data the logs no longer prove committed: offsets "
                         f"{where(ranges)} (batches that fail their CRC or cannot be read)")
        if self.violations:
            parts.append(f"{len(self.violations)} safety violation(s)")
        poisoned = (f"{self.application_records} application record(s) from offset {self.first_application_offset} "
                    "are not KRaft metadata records: no Kafka broker or controller can replay this log "
                    "(kraftnode.application.records.enable)") if self.application_records else None
        if not parts:
            clean = "No safety violation found; every replica can read its committed records."
            return clean if poisoned is None else f"{clean[:-1]}; but {poisoned}."
        if poisoned is not None:
            parts.append(poisoned)
        text = "; ".join(parts)
        return text[0].upper() + text[1:] + "."


def _rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


# the columns of the kraft-log source the audit uses (Spark copies every column a Python
# source yields, so naming them saves work)
_AUDIT_COLUMNS = ("replica INT, file STRING, file_type STRING, position BIGINT, offset BIGINT, "
                  "batch_base_offset BIGINT, batch_last_offset BIGINT, partition_leader_epoch INT, timestamp BIGINT, control_type STRING, "
                  "key BINARY, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>, batch_crc BIGINT, "
                  "batch_crc_valid BOOLEAN, batch_size INT, batch_records INT, record_size INT, record_type STRING, "
                  "record_json STRING, record_error STRING, error STRING")


class _Stages:
    """Reports each stage of the audit (what is done and how long it took) to ``progress``."""

    def __init__(self, progress: Callable[[str], None] | None) -> None:
        self.progress = progress
        self.t0 = time.monotonic()
        self.timings: dict[str, float] = {}

    def __call__(self, name: str, detail: str = "") -> None:
        now = time.monotonic()
        self.timings[name] = now - self.t0
        if self.progress is not None:
            self.progress(f"{name}{': ' + detail if detail else ''} ({self.timings[name]:.1f} s)")
        self.t0 = now


def _driver_read(spark: Any, files: list[Any]) -> Any:
    """The audit's columns of ``files``, decoded in this process by the decoder the
    ``kraft-log`` source runs in Spark's Python workers, handed to Spark as Arrow."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    from kraftnode.spark.decode import decode_file

    spark_schema = StructType.fromDDL(_AUDIT_COLUMNS)
    assert isinstance(spark_schema, StructType)  # a column list parses as a struct
    schema = to_arrow_schema(spark_schema)
    names = spark_schema.fieldNames()
    batches = [b.select(names).cast(schema) for f in files
               for b in decode_file(f.path, replica=f.replica, file_type=f.file_type)]
    return spark.createDataFrame(pa.Table.from_batches(batches, schema=schema), schema=spark_schema)


# logs up to this size are decoded on the driver: starting Python workers for the
# kraft-log source costs more than decoding a few MB (see docs/spark.md)
DRIVER_READ_MAX_BYTES = 32 << 20


def run_audit(spark: Any, log_dirs: list[str], out_dir: str | os.PathLike[str],
              progress: Callable[[str], None] | None = None,
              driver_read_max_bytes: int = DRIVER_READ_MAX_BYTES) -> AuditResult:
    """Audit the logs under ``log_dirs`` into ``out_dir``; ``progress`` gets one line per stage.

    Logs of at most ``driver_read_max_bytes`` are decoded on the driver and handed to
    Spark as Arrow; larger ones are read by the ``kraft-log`` source in Spark's workers.
    Every analysis step after the read is the same Spark job either way."""
    t = _Tables(Path(out_dir).resolve())  # Spark's executors write tables here: never relative to their cwd
    stage = _Stages(progress)
    read = _read(spark, log_dirs, t, driver_read_max_bytes)
    stage("read", read.summary)
    floor, committed, violations, lost = _committed(read, t)
    stage("committed floor and violations", f"floor {floor}, {len(violations)} violations, "
                                            f"{len(lost)} unreadable batches")
    pairs, disagreeing = _pairs(read.entries, committed, floor, lost, t)
    stage("pairwise divergence", f"{len(pairs)} replica pairs, {disagreeing} offsets where replicas disagree")
    uniq, epochs_df, epochs, first_ts, max_ts = _epochs(read.entries, t)
    leadership = _leadership(read.seg, epochs_df, max_ts, t)
    stage("epochs and leadership", f"{len(epochs)} epochs, {len(leadership)} LeaderChange records")
    voters = _voters(read.rows, t)
    rate, bucket = _write_rate(uniq, first_ts, max_ts, t)
    stage("voter sets and write rate", f"{len(voters)} voter/kraft.version records, {len(rate)} rate buckets")
    invalid, invalid_count, application_records, first_application_offset = _invalid(read.rows, t)
    read.entries.unpersist()
    read.rows.unpersist()
    stage("invalid rows", f"{invalid_count}")

    result = AuditResult(t.out, read.replicas, floor, pairs, violations, leadership, voters, epochs, rate,
                         invalid, invalid_count, t.out / "report.html", t.tables, int(bucket),
                         lost=lost, application_records=application_records,
                         first_application_offset=first_application_offset)
    _write_report(result, read.replica_rows, log_dirs)
    stage("report", str(result.report))
    return result


class _Tables:
    """The audit's tables, written as Parquet under ``out/tables``."""

    def __init__(self, out: Path) -> None:
        self.out = out
        (out / "tables").mkdir(parents=True, exist_ok=True)
        self.tables: dict[str, Path] = {}

    def save(self, name: str, df: Any, keep: int) -> tuple[list[dict[str, Any]], int]:
        """Tables that can be as large as the log: written by Spark, then the first ``keep``
        rows and the row count read back from the Parquet files (no second Spark job)."""
        import pyarrow.parquet as pq

        path = self.out / "tables" / name
        df.write.mode("overwrite").parquet(str(path))
        self.tables[name] = path
        files = sorted(path.glob("part-*.parquet"))
        total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        first: list[dict[str, Any]] = []
        for f in files:
            if len(first) >= keep:
                break
            first.extend(pq.read_table(f).slice(0, keep - len(first)).to_pylist())
        return first, total

    def save_collected(self, name: str, df: Any) -> list[dict[str, Any]]:
        """Small tables (a row per epoch, pair, bucket...): collected once and written by
        the driver, instead of computing them twice (one job to write, one to collect)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        return self.write_rows(name, _rows(df), to_arrow_schema(df.schema))

    def write_rows(self, name: str, collected: list[dict[str, Any]], schema: Any) -> list[dict[str, Any]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.out / "tables" / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(collected, schema=schema), path / "part-00000.parquet")
        self.tables[name] = path
        return collected


@dataclass
class _Read:
    """The log files as rows, cached: every row, the segments', one entry per (replica, offset)."""

    rows: Any
    seg: Any
    entries: Any
    replica_rows: list[dict[str, Any]]
    replicas: list[int]
    snap_floor: int
    summary: str

    @property
    def majority(self) -> int:
        return len(self.replicas) // 2 + 1


def _read(spark: Any, log_dirs: list[str], t: _Tables, driver_read_max_bytes: int) -> _Read:
    from pyspark.sql import functions as F

    from kraftnode.spark.fs_read import read_files, unreadable_path
    from kraftnode.spark.paths import discover, is_local, local_path

    files = discover(log_dirs, spark)  # fails naming a bad path, before any Spark job
    snap_floor = -1  # snapshots hold committed records only: their end offset is committed
    for f in files:
        if f.file_type == "snapshot":
            sid = parse_snapshot_file_name(os.path.basename(f.path))
            if sid is not None:
                snap_floor = max(snap_floor, sid.offset)
    log_bytes = sum(f.size for f in files)
    local = all(is_local(f.path) for f in files)
    # the first job reads the files: a file gone since the listing, or that no executor can
    # read, is one line naming it
    try:
        if not local:
            how = "binaryFile source"  # Spark's/Hadoop's filesystem layer on the executors
            rows = read_files(spark, files, _AUDIT_COLUMNS).cache()
        elif log_bytes <= driver_read_max_bytes:
            how = "on the driver"
            rows = _driver_read(spark, files).cache()
        else:
            how = "kraft-log source"
            rows = (spark.read.format("kraft-log").schema(_AUDIT_COLUMNS)
                    .load([local_path(p) for p in log_dirs]).cache())
        seg = rows.filter(F.col("file_type") == "segment")
        ok = seg.filter(F.col("error").isNull() & F.col("offset").isNotNull())
        entries = (ok.select("replica", "offset", F.col("partition_leader_epoch").alias("epoch"),
                             F.xxhash64("key", "value", "headers", "timestamp").alias("hash"),
                             "timestamp", "record_size", "batch_base_offset", "batch_size", "batch_crc",
                             "batch_records", "batch_crc_valid")
                   .dropDuplicates(["replica", "offset"]).cache())

        replica_df = (rows.groupBy("replica", "file_type").agg(
            F.countDistinct("file").alias("files"), F.count("offset").alias("records"),
            F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
            F.sum(F.when(F.col("error").isNotNull(), 1).otherwise(0)).alias("error_rows"),
            F.sum(F.when(~F.col("batch_crc_valid"), 1).otherwise(0)).alias("crc_invalid_rows"))
            .orderBy("replica", "file_type"))
        replica_rows = t.save_collected("replicas", replica_df)
    except Exception as e:
        bad = unreadable_path(e, files)
        if bad is not None:
            raise bad from None
        raise
    replicas = sorted({r["replica"] for r in replica_rows if r["file_type"] == "segment" and r["replica"] is not None})
    summary = (f"{len(files)} files ({log_bytes / 1e6:.1f} MB, "
               f"{how}) "
               f"of replicas {replicas}, "
               f"{sum(r['records'] for r in replica_rows if r['file_type'] == 'segment')} segment records")
    return _Read(rows, seg, entries, replica_rows, replicas, snap_floor, summary)


def _committed(read: _Read, t: _Tables) -> tuple[int, Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """(the committed floor, the committed entries below it, the safety violations, the
    unreadable batches)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    entries, majority, snap_floor = read.entries, read.majority, read.snap_floor
    agree = entries.groupBy("offset", "epoch", "hash").agg(F.countDistinct("replica").alias("holders"))
    newest = entries.agg(F.max("epoch").alias("newest_epoch"))
    floor_row = (agree.filter(F.col("holders") >= majority)
                 .join(newest, F.col("epoch") == F.col("newest_epoch"))
                 .agg(F.max("offset")).first()[0])
    committed_floor = -1 if floor_row is None else int(floor_row) + 1
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
    violations, _ = t.save("violations", violations_df, 1000)

    lost = _lost_batches(read.seg, committed_floor, F)
    t.write_rows("lost_batches", lost, pa.schema([
        ("replica", pa.int32()), ("file", pa.string()), ("position", pa.int64()), ("first_offset", pa.int64()),
        ("last_offset", pa.int64()), ("epoch", pa.int32()), ("committed", pa.bool_()), ("error", pa.string())]))
    return committed_floor, committed, violations, lost


def _pairs(entries: Any, committed: Any, committed_floor: int, lost: list[dict[str, Any]],
           t: _Tables) -> tuple[list[dict[str, Any]], int]:
    """Each pair of replicas' first divergence, classified; (the pairs, how many offsets
    some replicas disagree on)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    a = entries.select(F.col("replica").alias("replica_a"), "offset", F.col("epoch").alias("epoch_a"),
                       F.col("hash").alias("hash_a"))
    b = entries.select(F.col("replica").alias("replica_b"), "offset", F.col("epoch").alias("epoch_b"),
                       F.col("hash").alias("hash_b"))
    joined = a.join(b, "offset").filter(F.col("replica_a") < F.col("replica_b"))
    mismatch = (F.col("epoch_a") != F.col("epoch_b")) | (F.col("hash_a") != F.col("hash_b"))
    # the first mismatching offset of each pair with both sides' entries: min of a struct led by the offset
    pair_stats = joined.groupBy("replica_a", "replica_b").agg(
        F.count("*").alias("common_offsets"),
        F.sum(F.when(mismatch, 1).otherwise(0)).alias("mismatched_offsets"),
        F.min(F.when(mismatch, F.struct("offset", "epoch_a", "epoch_b", "hash_a", "hash_b"))).alias("f"))
    pairs_df = (pair_stats.join(committed, F.col("f.offset") == F.col("offset"), "left")
                .select("replica_a", "replica_b", "common_offsets", "mismatched_offsets",
                        F.col("f.offset").alias("first_divergence"), "f.epoch_a", "f.epoch_b", "f.hash_a",
                        "f.hash_b", "c_epoch", "c_hash")
                .orderBy("replica_a", "replica_b"))
    lost_by_replica: dict[int, list[dict[str, Any]]] = {}
    for batch in lost:
        lost_by_replica.setdefault(batch["replica"], []).append(batch)
    pairs: list[dict[str, Any]] = []
    for r in _rows(pairs_df):
        verdict, reason = "consistent", "every common offset agrees"
        if r["first_divergence"] is not None:
            verdict, reason = _classify({**r, "offset": r["first_divergence"]}, committed_floor)
        if verdict != "SAFETY VIOLATION":
            # offsets one side cannot read are no common offsets: the comparison above cannot
            # see them, but the pair does not hold the same committed log
            gone = [(rep, x) for rep in (r["replica_a"], r["replica_b"]) for x in lost_by_replica.get(rep, [])]
            if gone:
                rep, x = min(gone, key=lambda g: g[1]["first_offset"])
                what = "committed offset" if x["committed"] else "offset"
                verdict = "INCONSISTENT: LOST " + ("COMMITTED DATA" if x["committed"] else "DATA")
                reason = (f"replica {rep} cannot read {what} {x['first_offset']} and after "
                          f"({x['file']}, batch at byte {x['position']}: {x['error']})")
        del r["c_epoch"], r["c_hash"]
        r["verdict"] = verdict
        r["reason"] = reason
        pairs.append(r)

    t.write_rows("pair_divergence", pairs, pa.schema([
        ("replica_a", pa.int32()), ("replica_b", pa.int32()), ("common_offsets", pa.int64()),
        ("mismatched_offsets", pa.int64()), ("first_divergence", pa.int64()), ("epoch_a", pa.int32()),
        ("epoch_b", pa.int32()), ("hash_a", pa.int64()), ("hash_b", pa.int64()), ("verdict", pa.string()),
        ("reason", pa.string())]))
    disagreements = (entries.groupBy("offset")
                     .agg(F.countDistinct("epoch", "hash").alias("versions"),
                          F.sort_array(F.collect_list(F.struct("replica", "epoch", "hash"))).alias("entries"))
                     .filter(F.col("versions") > 1).orderBy("offset"))
    _, disagreeing = t.save("disagreements", disagreements, 0)
    return pairs, disagreeing


def _epochs(entries: Any, t: _Tables) -> tuple[Any, Any, list[dict[str, Any]], Any, Any]:
    """Per-epoch statistics: (the distinct entries, the epochs' DataFrame and rows, the first
    and the newest timestamp)."""
    from pyspark.sql import functions as F

    uniq = entries.dropDuplicates(["offset", "epoch", "hash"])
    batches = (entries.dropDuplicates(["epoch", "batch_base_offset", "batch_crc"])
               .groupBy("epoch").agg(F.count("*").alias("batches"), F.sum("batch_size").alias("disk_bytes")))
    epochs_df = (uniq.groupBy("epoch").agg(F.count("*").alias("records"), F.sum("record_size").alias("record_bytes"),
                                           F.min("timestamp").alias("first_time"), F.max("timestamp").alias("last_time"))
                 .join(batches, "epoch")
                 .withColumn("compression_ratio",
                             (F.col("record_bytes") + F.col("batches") * 61) / F.col("disk_bytes"))
                 .orderBy("epoch"))
    epochs = t.save_collected("epoch_stats", epochs_df)
    first_ts = min((r["first_time"] for r in epochs if r["first_time"] is not None), default=None)
    max_ts = max((r["last_time"] for r in epochs if r["last_time"] is not None), default=None)
    return uniq, epochs_df, epochs, first_ts, max_ts


def _leadership(seg: Any, epochs_df: Any, max_ts: Any, t: _Tables) -> list[dict[str, Any]]:
    """The leadership timeline, from the LeaderChange records."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    lc = (seg.filter(F.col("control_type") == "LEADER_CHANGE")
          .select(F.col("partition_leader_epoch").alias("epoch"), "offset", "timestamp", "replica",
                  F.from_json("record_json", LEADER_CHANGE_JSON).alias("m")))
    w = Window.partitionBy("epoch").orderBy("offset", "replica")
    lc = lc.withColumn("rn", F.row_number().over(w)).filter("rn = 1").drop("rn")
    epoch_counts = epochs_df.select("epoch", "records")
    ordered = Window.orderBy("epoch")
    leadership_df = (lc.join(epoch_counts, "epoch", "left")
                     .select("epoch", F.col("m.leaderId").alias("leader"),
                             F.expr("transform(m.voters, v -> v.voterId)").alias("voters"),
                             F.expr("transform(m.grantingVoters, v -> v.voterId)").alias("granting_voters"),
                             F.col("offset").alias("start_offset"), F.col("timestamp").alias("start_time"),
                             F.coalesce("records", F.lit(0)).alias("records"))
                     # the last epoch has no end in the logs: its leader may lead still, or
                     # have led long after its last record (a quiet leader appends nothing), so
                     # its tenure is a lower bound, up to the newest record, and says so
                     # (issue 41: it read "0 ms" for a leader that ran ~4 s)
                     .withColumn("end_time", F.lead("start_time").over(ordered))
                     .withColumn("ongoing", F.col("end_time").isNull())
                     .withColumn("tenure_ms", F.coalesce("end_time", F.lit(max_ts).cast("long"))
                                 - F.col("start_time"))
                     .orderBy("epoch"))
    return t.save_collected("leadership", leadership_df)


def _voters(rows: Any, t: _Tables) -> list[dict[str, Any]]:
    """The voter-set history (KRaftVoters and KRaftVersion records)."""
    from pyspark.sql import functions as F

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
    return t.save_collected("voters_history", voters_df)


def _write_rate(uniq: Any, first_ts: Any, max_ts: Any, t: _Tables) -> tuple[list[dict[str, Any]], int]:
    """Records and bytes per second in about 60 buckets of whole seconds: (the rows, the bucket in ms)."""
    from pyspark.sql import functions as F

    span_ms = (max_ts - first_ts) if first_ts is not None and max_ts is not None else 0
    bucket = max(1000, span_ms // 60 // 1000 * 1000)
    rate_df = (uniq.groupBy((F.floor(F.col("timestamp") / bucket) * bucket).cast("long").alias("bucket_start"))
               .agg(F.count("*").alias("records"), F.sum("record_size").alias("bytes"))
               .withColumn("records_per_s", F.col("records") / (bucket / 1000.0))
               .withColumn("bytes_per_s", F.col("bytes") / (bucket / 1000.0))
               .orderBy("bucket_start"))
    return t.save_collected("write_rate", rate_df), bucket


def _invalid(rows: Any, t: _Tables) -> tuple[list[dict[str, Any]], int, int, int | None]:
    """(the first invalid rows, their count, the application records, the first one's offset)."""
    from pyspark.sql import functions as F

    invalid_df = rows.filter(F.col("error").isNotNull() | (F.col("record_error").isNotNull()
                                                            & (F.col("record_error") != NOT_METADATA)))
    invalid_df = invalid_df.select("replica", "file", "file_type", "position", "offset", "batch_crc_valid",
                                   "record_type", "record_error", "error")
    invalid, invalid_count = t.save("invalid_rows", invalid_df, 200)
    app = (rows.filter((F.col("file_type") != "bootstrap") & F.col("error").isNull() & F.col("offset").isNotNull()
                       & (F.col("record_error") == NOT_METADATA))
           .agg(F.countDistinct("offset").alias("n"), F.min("offset").alias("first")).first())
    application_records = int(app["n"] or 0) if app is not None else 0
    first_application_offset = None if app is None or app["first"] is None else int(app["first"])
    return invalid, invalid_count, application_records, first_application_offset


def _write_report(result: AuditResult, replica_rows: list[dict[str, Any]], log_dirs: list[str]) -> None:
    """report.html and summary.json."""
    out = result.out_dir
    result.report.write_text(_report_html(result, replica_rows, log_dirs), encoding="utf-8")
    (out / "summary.json").write_text(json.dumps({
        "ok": result.ok, "headline": result.headline(), "application_records": result.application_records,
        "replicas": result.replicas, "committed_floor": result.committed_floor, "violations": len(result.violations),
        "lost_committed": {str(k): v for k, v in result.lost_ranges().items()},
        "lost_not_proven_committed": {str(k): v for k, v in result.lost_ranges(committed=False).items()},
        "pairs": result.pairs, "leadership_epochs": len(result.leadership), "invalid_rows": result.invalid_count,
    }, indent=2, default=str), encoding="utf-8")


def _lost_batches(seg: Any, committed_floor: int, F: Any) -> list[dict[str, Any]]:
    """Unreadable batches of the segments, an incomplete last batch (a crash's torn write)
    excepted.

    The decoder gives a batch whose CRC fails or that cannot be decoded its header's offsets
    (each of its records as a row with ``error`` set, or one row for the batch); a header it
    cannot walk past (a damaged length or magic) is a row with a byte position only, and
    nothing after it in that file can be read: its first lost offset is one past the last
    offset read before it (the segment's base offset, from its name, when nothing was)."""
    bad = (seg.filter(F.col("error").isNotNull() & ~F.col("error").contains(": incomplete batch at byte "))
           .groupBy("replica", "file", "position")
           .agg(F.min(F.coalesce("offset", "batch_base_offset")).alias("first_offset"),
                F.max(F.coalesce("batch_last_offset", "offset")).alias("last_offset"),
                F.first("partition_leader_epoch", ignorenulls=True).alias("epoch"),
                F.first("error").alias("error"))
           .orderBy("replica", "file", "position"))
    out: list[dict[str, Any]] = []
    for r in _rows(bad):
        if r["first_offset"] is None:
            before = (seg.filter((F.col("replica") == r["replica"]) & (F.col("file") == r["file"])
                                 & (F.col("position") < r["position"]) & F.col("offset").isNotNull())
                      .agg(F.max("offset")).first()[0])
            name = os.path.basename(r["file"]).split(".")[0]
            r["first_offset"] = int(before) + 1 if before is not None else int(name) if name.isdigit() else 0
            r["last_offset"] = None  # the rest of the file
        r["committed"] = r["first_offset"] < committed_floor
        r["error"] = str(r["error"]).split(": ", 1)[-1]  # the path is in the file column
        out.append(r)
    return out


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
        out["leadership"] = _png(_leadership_figure(res.leadership))
    if res.epochs:
        fig, ax = plt.subplots(figsize=(9, 2.8))
        labels = [f"epoch {r['epoch']}" for r in res.epochs]
        ax.bar(labels, [r["records"] for r in res.epochs])
        ax2 = ax.twinx()
        ax2.plot(labels, [r["compression_ratio"] for r in res.epochs], "o-", color="tab:red")
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
        ax.set_xlabel(f"seconds since {_time(t0)} ({step / 1000:g} s buckets)")
        ax.set_ylabel("records/s")
        ax.set_title("Write rate")
        out["rate"] = _png(fig)
    return out


def _leadership_figure(leadership: list[dict[str, Any]]) -> Any:
    """One bar per epoch at its leader's node id (integer ticks only), labelled "epoch N"."""
    import matplotlib.pyplot as plt

    leaders = sorted({int(r["leader"]) for r in leadership if r["leader"] is not None})
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.55 * max(len(leaders), 1)))
    t0 = min(r["start_time"] for r in leadership)
    for r in leadership:
        if r["leader"] is None:
            continue
        start = (r["start_time"] - t0) / 1000
        ax.barh(r["leader"], max((r["tenure_ms"] or 0) / 1000, 0.05), left=start, height=0.5)
        ax.annotate(f"epoch {r['epoch']}", (start, r["leader"] + 0.27), fontsize=8, va="bottom")
    ax.set_yticks(leaders, [f"node {n}" for n in leaders])
    ax.set_ylim(min(leaders, default=0) - 0.6, max(leaders, default=0) + 0.8)
    ax.set_xlabel(f"seconds since the first LeaderChange ({_time(t0)})")
    ax.set_title("Leadership timeline (bar = tenure of the epoch's leader)")
    return fig


def _time(ms: int) -> str:
    """Epoch milliseconds as a UTC time a person reads."""
    import datetime

    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d} UTC"


def _duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.2f} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m:.0f} min {s:.0f} s"
    h, m = divmod(m, 60)
    return f"{h:.0f} h {m:.0f} min"


_TIME_COLUMNS = {"start_time", "end_time", "first_time", "last_time", "timestamp", "bucket_start"}
_HEADINGS = {"tenure_ms": "tenure"}


def _cell(col: str, v: Any) -> str:
    """One table cell as a person reads it: nothing for null, times in UTC, durations in units."""
    if v is None:
        return ""
    if col in _TIME_COLUMNS and isinstance(v, int):
        return _time(v)
    if col == "tenure_ms" and isinstance(v, (int, float)):
        return _duration(v)
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_cell(col, x) for x in v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _row_cell(r: dict[str, Any], col: str) -> str:
    """A cell that needs its row: the last epoch's tenure is a lower bound (see ``ongoing``)."""
    text = _cell(col, r.get(col))
    if col == "tenure_ms" and r.get("ongoing") and text:
        return f"at least {text} (its last record; no later epoch in the logs)"
    if col == "end_time" and r.get("ongoing") and not text:
        return "none in the logs"
    return text


def _table(rows: list[dict[str, Any]], columns: list[str] | None = None, limit: int = 200) -> str:
    if not rows:
        return "<p><i>none</i></p>"
    cols = columns or list(rows[0].keys())
    head = "".join(f"<th>{html.escape(_HEADINGS.get(c, c))}</th>" for c in cols)
    body = []
    for r in rows[:limit]:
        verdict = str(r.get("verdict", ""))
        cls = ' class="bad"' if "VIOLATION" in verdict or "INCONSISTENT" in verdict \
            or "verdict" not in r and (r.get("reason") or r.get("error")) else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_row_cell(r, c))}</td>" for c in cols) + "</tr>")
    more = f"<p>... {len(rows) - limit} more rows in the Parquet table</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def _report_html(res: AuditResult, replica_rows: list[dict[str, Any]], log_dirs: list[str]) -> str:
    plots = _plots(res)
    verdict = f"<p class='{'good' if res.ok else 'bad'}'><b>{html.escape(res.headline())}</b></p>"
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
             "font-size:13px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
             "th{background:#eee}.bad{color:#b00;background:#fee}.good{color:#070}")
    tables = ", ".join(f"<code>{html.escape(str(p.relative_to(res.out_dir)))}</code>" for p in res.tables.values())
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>KRaft quorum audit</title>
<style>{style}</style></head><body>
<h1>KRaft quorum audit</h1>
<p>Log dirs: {html.escape(", ".join(log_dirs))}<br>Replicas: {", ".join(map(str, res.replicas))};
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
<h3>Lost data (batches that fail their CRC or cannot be read)</h3>{_table(res.lost)}
<h2>2. Leadership timeline</h2>{plots.get("leadership", "")}
{_table(res.leadership)}
<h2>3. Voter-set history</h2>{_table(res.voters)}
<h2>4. Per-epoch records, bytes, compression; write rate</h2>{plots.get("epochs", "")}
{_table(res.epochs)}{plots.get("rate", "")}
<h2>Invalid rows ({res.invalid_count})</h2>{_table(res.invalid)}
<p>Parquet tables: {tables}</p>
</body></html>
"""
