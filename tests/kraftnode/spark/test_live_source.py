"""``format("kraft")`` against a real 3-node quorum started with ``kraftnode dev-cluster``:
the writer's rows come back through a genuine Kafka consumer (confluent-kafka), the
batch read sees committed records, and the streaming source picks up records appended
while it runs and resumes after a restart without gaps or duplicates."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kraftnode.server.metadata_state import is_metadata_record  # noqa: E402
from kraftnode.spark.live_source import LIVE_DDL  # noqa: E402

TOPIC = "__cluster_metadata"


def produce(bootstrap: str, values: list[bytes]) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    offsets: list[int] = []
    errors: list[Any] = []
    for v in values:
        p.produce(TOPIC, key=v, value=v, partition=0,
                  on_delivery=lambda e, m: errors.append(e) if e else offsets.append(m.offset() or 0))
    assert p.flush(30) == 0
    assert not errors
    return sorted(offsets)


def consume(bootstrap: str, start: int, count: int, timeout: float = 20) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraftnode-test", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, start)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m)
        return out
    finally:
        c.close()


def test_writer_rows_come_back_through_a_kafka_consumer(spark: Any, dev_cluster: Any, tmp_path: Path) -> None:
    rows = [(f"k{i}".encode(), f"value-{i}".encode() * 3, [("h", f"{i}".encode()), ("n", None)])
            for i in range(40)]
    df = spark.createDataFrame(rows, "key BINARY, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
    report = tmp_path / "report.json"
    (df.coalesce(1).write.format("kraft").option("bootstrap.servers", dev_cluster.bootstrap)
     .option("reportPath", str(report)).mode("append").save())
    rep = json.loads(report.read_text())
    assert rep["committed_rows"] == 40
    (rng,) = rep["ranges"]
    assert rng["last_offset"] - rng["first_offset"] == 39
    got = consume(dev_cluster.bootstrap, rng["first_offset"], 40)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [(k, v, h) for k, v, h in rows]
    assert [m.offset() for m in got] == list(range(rng["first_offset"], rng["last_offset"] + 1))


def test_writer_fails_when_the_quorum_is_unreachable(spark: Any) -> None:
    df = spark.createDataFrame([(b"v",)], "value BINARY")
    with pytest.raises(Exception, match="not committed|ListOffsets|failed|timed out"):
        (df.write.format("kraft").option("bootstrap.servers", "127.0.0.1:1").option("timeoutMs", "3000")
         .mode("append").save())


def test_batch_read_returns_committed_records(spark: Any, dev_cluster: Any) -> None:
    offsets = produce(dev_cluster.bootstrap, [b"a%d" % i for i in range(25)])
    df = spark.read.format("kraft").option("bootstrap.servers", dev_cluster.bootstrap).load()
    # the controllers' own metadata records (bootstrap, registrations) share the log
    got = {r["offset"]: r["value"] for r in df.collect() if not is_metadata_record(r["value"])}
    assert all(got[o] == b"a%d" % i for i, o in enumerate(offsets))
    assert max(got) == offsets[-1]


def _sink_offsets(spark: Any, path: Path) -> list[int]:
    if not (path / "_spark_metadata").exists():
        return []
    rows = spark.read.schema(LIVE_DDL).parquet(str(path)).select("offset", "value").collect()
    return sorted(r["offset"] for r in rows if not is_metadata_record(r["value"]))


def _wait_for(spark: Any, path: Path, n: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    got: list[int] = []
    while time.monotonic() < deadline:
        got = _sink_offsets(spark, path)
        if len(got) >= n:
            return got
        time.sleep(1)
    return got


def test_stream_picks_up_appends_and_resumes_after_restart(spark: Any, dev_cluster: Any, tmp_path: Path) -> None:
    bs = dev_cluster.bootstrap
    out, ck = tmp_path / "out", tmp_path / "checkpoint"

    def start() -> Any:
        return (spark.readStream.format("kraft").option("bootstrap.servers", bs).load()
                .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
                .trigger(processingTime="1 second").start())

    first = produce(bs, [b"s%d" % i for i in range(10)])
    q = start()
    try:
        assert _wait_for(spark, out, 10) == first
        during = produce(bs, [b"t%d" % i for i in range(15)])  # appended while the query runs
        assert _wait_for(spark, out, 25) == first + during
    finally:
        q.stop()
    stopped = produce(bs, [b"u%d" % i for i in range(12)])  # appended while it is stopped
    q = start()
    try:
        got = _wait_for(spark, out, 37)
    finally:
        q.stop()
    assert got == first + during + stopped  # every record once: no gap, no duplicate
    values = {r["offset"]: r["value"] for r in spark.read.schema(LIVE_DDL).parquet(str(out)).collect()}
    assert values[stopped[-1]] == b"u11"
