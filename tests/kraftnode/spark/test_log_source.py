"""The ``kraft-log`` source: bulk decode equals the reference decoder for every codec
and record shape, bad input is flagged or refused naming the file, and Spark reads
one partition per file of one or many replicas."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import recordbatch as rb
from kraftnode.log import LogConfig, MetadataLog
from kraftnode.log.meta_properties import MetaProperties, write_meta_properties
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.log.snapshot import SnapshotId, write_snapshot
from kraftnode.protocol.generated.metadata import FeatureLevelRecord, TopicRecord
from kraftnode.spark.decode import DecodeOptions, decode_file
from kraftnode.spark.paths import PathError, discover
from kraftnode.spark.schema import ARROW_SCHEMA
from recordbatch.generated import LeaderChangeMessage
from tools.pipelines.sample_quorum import write_sample_quorum

CONFIG = LogConfig(segment_bytes=8 * 1024, segment_min_bytes=1)


def _table(path: Path, **kw: Any) -> pa.Table:
    return pa.Table.from_batches(list(decode_file(str(path), **kw)), schema=ARROW_SCHEMA)


def _segments(log_dir: Path) -> list[Path]:
    return sorted((log_dir / "__cluster_metadata-0").glob("*.log"))


def _mixed_log(log_dir: Path) -> list[bytes]:
    """Every codec, null/non-null keys and values, headers, LogAppendTime, control batches,
    varied sizes (1- and 2-byte varints), and real metadata records."""
    write_meta_properties(log_dir, MetaProperties(cluster_id="c1", node_id=7, directory_id=uuid.uuid4()))
    batches = [rb.leader_change_batch(LeaderChangeMessage(leader_id=7, voters=[LeaderChangeMessage.Voter(voter_id=7)],
                                                          granting_voters=[LeaderChangeMessage.Voter(voter_id=7)]),
                                      base_offset=0, partition_leader_epoch=1, timestamp=1000)]
    i = 0
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        for shape in range(4):
            recs = []
            for j in range(70 if shape == 0 else 5):
                i += 1
                key = None if j % 3 == 0 else b"k" * (j % 20)
                value = None if (shape == 1 and j == 2) else bytes([i % 256]) * ((j * 37) % 300)
                headers = [("h1", b"x"), ("h2", None)] if shape == 2 else ()
                recs.append(rb.Record(key, value, headers, timestamp=1_000_000 + i * 1000 * (j % 7)))
            if shape == 3:
                recs = [rb.Record(None, encode_metadata_record(TopicRecord(name=f"t{i}", topic_id=uuid.UUID(int=i + 1)),
                                                               0)),
                        rb.Record(None, encode_metadata_record(FeatureLevelRecord(name="metadata.version",
                                                                                  feature_level=21), 0))]
            batches.append(rb.build_batch(recs, base_offset=0, partition_leader_epoch=1, compression=codec,
                                          now_ms=5_000_000))
    with MetadataLog(log_dir, CONFIG) as log:
        for b in batches:
            log.append_as_leader(b, 1)
        log.flush()
    return batches


def test_bulk_decode_matches_the_reference_decoder(tmp_path: Path) -> None:
    _mixed_log(tmp_path)
    segs = _segments(tmp_path)
    assert len(segs) >= 2  # small segments: the log rolled
    for seg in segs:
        t = _table(seg, replica=7)
        ref = []
        for v in rb.iter_batches(seg.read_bytes()):
            for r in v.records():
                ref.append((r.offset, r.timestamp, r.key, r.value, [{"key": k, "value": hv} for k, hv in r.headers],
                            v.partition_leader_epoch, v.compression, v.is_control))
        got = list(zip(*(t[c].to_pylist() for c in ("offset", "timestamp", "key", "value", "headers",
                                                      "partition_leader_epoch", "compression", "is_control")),
                       strict=True))
        assert [tuple(g) for g in got] == ref
        assert set(t["replica"].to_pylist()) == {7}
        assert set(t["error"].to_pylist()) == {None}
        assert all(t["batch_crc_valid"].to_pylist())


def test_record_types_and_json(tmp_path: Path) -> None:
    _mixed_log(tmp_path)
    t = pa.Table.from_batches([b for s in _segments(tmp_path) for b in decode_file(str(s))])
    rows = t.to_pylist()
    lc = [r for r in rows if r["control_type"] == "LEADER_CHANGE"]
    assert len(lc) == 1 and json.loads(lc[0]["record_json"])["leaderId"] == 7
    topics = [r for r in rows if r["record_type"] == "TOPIC_RECORD"]
    assert len(topics) == 5 and all(json.loads(r["record_json"])["name"].startswith("t") for r in topics)
    assert {r["record_error"] for r in rows if r["record_type"] is None and not r["is_control"]} == \
        {"not a metadata record"}
    sizes = {r["record_size"] for r in rows}
    assert None not in sizes and min(sizes) >= 7


def test_unknown_metadata_record_type_is_flagged(tmp_path: Path) -> None:
    bad = b"\x01" + bytes([120]) + b"\x00" + b"payload"  # frame 1, api key 120 (unknown), version 0
    with MetadataLog(tmp_path, CONFIG) as log:
        log.append_as_leader(rb.build_batch([rb.Record(None, bad)], compression="none"), 1)
        log.flush()
    (row,) = _table(_segments(tmp_path)[0]).to_pylist()
    assert "unknown metadata record type 120" in row["record_error"]
    assert row["value"] == bad


def _one_segment(tmp_path: Path, n: int = 5) -> Path:
    with MetadataLog(tmp_path, CONFIG) as log:
        for i in range(n):
            log.append_as_leader(rb.build_batch([rb.Record(None, b"v%d" % i * 10) for _ in range(4)]), 1)
        log.flush()
    return _segments(tmp_path)[0]


def test_flipped_byte_flags_the_batch_not_silently_skipped(tmp_path: Path) -> None:
    seg = _one_segment(tmp_path)
    data = bytearray(seg.read_bytes())
    sizes = [v.size_in_bytes for v in rb.iter_batches(bytes(data))]
    data[sizes[0] + sizes[1] + 70] ^= 0xFF  # inside batch 3's records
    seg.write_bytes(bytes(data))
    t = _table(seg, replica=1).to_pylist()
    bad = [r for r in t if not r["batch_crc_valid"]]
    assert {r["batch_base_offset"] for r in bad} == {8}
    assert all(r["error"] and str(seg) in r["error"] and "CRC" in r["error"] for r in bad)
    assert len([r for r in t if r["batch_crc_valid"]]) == 16  # the other 4 batches


def test_torn_tail_and_garbage_become_error_rows(tmp_path: Path) -> None:
    seg = _one_segment(tmp_path)
    data = seg.read_bytes()
    seg.write_bytes(data[:-10])
    t = _table(seg).to_pylist()
    assert len([r for r in t if r["error"] is None]) == 16
    (err,) = [r for r in t if r["error"]]
    assert "incomplete batch" in err["error"] and str(seg) in err["error"]

    seg.write_bytes(data[:100] + b"\x00" * 40 + data[100:])
    t = _table(seg).to_pylist()
    errs = [r for r in t if r["error"]]
    # batch 0 now has 40 stray bytes inside (CRC mismatch), and the walk cannot re-sync after it
    assert [e["position"] for e in errs] == [0, 169]
    assert "CRC" in errs[0]["error"] and "byte 169" in errs[1]["error"] and "not read" in errs[1]["error"]


def test_decode_records_off_leaves_json_null(tmp_path: Path) -> None:
    _mixed_log(tmp_path)
    t = _table(_segments(tmp_path)[0], options=DecodeOptions(decode_records=False))
    assert set(t["record_json"].to_pylist()) <= {None} or all(
        r["is_control"] for r in t.to_pylist() if r["record_json"] is not None)


def test_paths_and_errors(tmp_path: Path) -> None:
    q = write_sample_quorum(tmp_path / "q", records_per_epoch=4, tail=1)
    files = discover([str(tmp_path / "q")])
    assert {f.replica for f in files} == {1, 2, 3}
    assert discover([str(tmp_path / "q" / "node*" / "metadata")]) == files
    assert [f.replica for f in discover([str(q.log_dirs[2])])] == [2]
    seg = _segments(q.log_dirs[3])[0]
    assert discover([str(seg)])[0].replica == 3
    (tmp_path / "empty").mkdir()
    with pytest.raises(PathError, match=f"{tmp_path / 'empty'}: not a metadata log dir"):
        discover([str(tmp_path / "empty")])
    with pytest.raises(PathError, match="matches nothing"):
        discover([str(tmp_path / "nope*")])
    with pytest.raises(PathError, match="not a log segment"):
        discover([str(q.log_dirs[1] / "meta.properties")])


def test_relative_paths_and_file_uris_are_made_absolute_on_the_driver(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42: a relative path reached the executors as typed and was opened in their working
    directory. discover() resolves it where it runs (the driver), and a file:// URI is the same
    files; a URI of another filesystem needs the session's JVM to be listed, and says so."""
    q = write_sample_quorum(tmp_path / "q", records_per_epoch=4, tail=1)
    absolute = discover([str(tmp_path / "q")])
    monkeypatch.chdir(tmp_path)
    relative = discover(["q/node1/metadata", "q/node2/metadata", "q/node3/metadata"])
    assert relative == absolute and all(os.path.isabs(f.path) for f in relative)
    assert discover(["q/node*/metadata"]) == absolute
    assert discover([(tmp_path / "q").as_uri()]) == absolute
    assert discover([str(q.log_dirs[1])])[0].size == _segments(q.log_dirs[1])[0].stat().st_size
    with pytest.raises(PathError, match="hdfs://nn:8020/q: a hdfs:// path is listed through Spark's filesystem"):
        discover(["hdfs://nn:8020/q"])


def test_spark_reads_one_partition_per_file_of_every_replica(spark: Any, tmp_path: Path) -> None:
    q = write_sample_quorum(tmp_path / "q", records_per_epoch=40, tail=2)
    # a snapshot file too, so segments and snapshots come back side by side
    pdir = q.log_dirs[1] / "__cluster_metadata-0"
    write_snapshot(pdir, SnapshotId(10, 1), [bytes(next(rb.iter_batches(_segments(q.log_dirs[1])[0].read_bytes())).buffer)],
                   last_contained_log_timestamp=1, now_ms=2)
    files = discover([str(tmp_path / "q")])
    df = spark.read.format("kraft-log").load(str(tmp_path / "q"))
    assert df.rdd.getNumPartitions() == len(files) > 3
    counts = {(r["replica"], r["file_type"]): r["count"] for r in df.groupBy("replica", "file_type").count().collect()}
    for node, end in q.end_offsets.items():
        assert counts[(node, "segment")] == end
    assert counts[(1, "snapshot")] >= 3  # header, the copied batch's records, footer
    lc = df.filter("control_type = 'LEADER_CHANGE' and replica = 1").orderBy("offset").collect()
    assert [json.loads(r["record_json"])["leaderId"] for r in lc] == [1, 2, 3]
    assert df.filter("error is not null").count() == 0
    two = spark.read.format("kraft-log").load([str(q.log_dirs[1]), str(q.log_dirs[3])])
    assert {r["replica"] for r in two.select("replica").distinct().collect()} == {1, 3}


def test_spark_flags_corruption_and_refuses_bad_paths(spark: Any, tmp_path: Path) -> None:
    q = write_sample_quorum(tmp_path / "q", records_per_epoch=4, tail=1)
    seg = _segments(q.log_dirs[2])[0]
    data = seg.read_bytes()
    seg.write_bytes(data[:-7])
    df = spark.read.format("kraft-log").load(str(q.log_dirs[2]))
    errs = df.filter("error is not null").collect()
    assert len(errs) == 1 and str(seg) in errs[0]["error"]
    shutil.rmtree(q.log_dirs[1] / "__cluster_metadata-0")
    with pytest.raises(Exception, match=f"{q.log_dirs[1].parent}: not a metadata log dir"):
        spark.read.format("kraft-log").load(str(q.log_dirs[1].parent)).count()


def test_a_user_schema_selects_columns(spark: Any, tmp_path: Path) -> None:
    q = write_sample_quorum(tmp_path / "q", records_per_epoch=6, tail=1)
    full = spark.read.format("kraft-log").load(str(q.log_dirs[1]))
    some = spark.read.format("kraft-log").schema("offset BIGINT, value BINARY, record_type STRING").load(
        str(q.log_dirs[1]))
    assert some.columns == ["offset", "value", "record_type"]
    assert sorted(some.collect()) == sorted(full.select("offset", "value", "record_type").collect())
    with pytest.raises(Exception, match="no column 'nope'"):
        spark.read.format("kraft-log").schema("nope INT").load(str(q.log_dirs[1])).collect()
