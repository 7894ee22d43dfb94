"""``format("kraft")`` against a real 3-node quorum started with ``kraftnode dev-cluster``:
the writer's rows come back through a genuine Kafka consumer (confluent-kafka), the
batch read sees committed records, and the streaming source picks up records appended
while it runs and resumes after a restart without gaps or duplicates."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kraftnode.metadata.state import is_metadata_record  # noqa: E402
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
        return (spark.readStream.format("kraft").option("bootstrap.servers", bs)
                .option("startingOffsets", "earliest").load()
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


def test_stream_starts_at_latest_by_default(spark: Any, dev_cluster: Any, tmp_path: Path) -> None:
    """As Spark's Kafka source: without startingOffsets a stream reads what is appended after it starts."""
    bs = dev_cluster.bootstrap
    out, ck = tmp_path / "out", tmp_path / "checkpoint"
    before = produce(bs, [b"b%d" % i for i in range(5)])
    q = (spark.readStream.format("kraft").option("bootstrap.servers", bs).load()
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
         .trigger(processingTime="1 second").start())
    try:
        deadline = time.monotonic() + 60
        while not q.recentProgress and time.monotonic() < deadline:  # the start offset is chosen
            time.sleep(0.5)
        assert q.recentProgress, "the query made no progress"
        after = produce(bs, [b"a%d" % i for i in range(7)])
        got = _wait_for(spark, out, 7)
    finally:
        q.stop()
    assert got == after and not set(got) & set(before)


def test_batch_read_takes_sparks_offset_options(spark: Any, dev_cluster: Any) -> None:
    bs = dev_cluster.bootstrap
    offsets = produce(bs, [b"o%d" % i for i in range(10)])

    def read(**opts: str) -> list[int]:
        r = spark.read.format("kraft").option("bootstrap.servers", bs)
        for k, v in opts.items():
            r = r.option(k, v)
        return sorted(row["offset"] for row in r.load().collect())

    start, end = offsets[2], offsets[7]
    got = read(startingOffsets=f'{{"__cluster_metadata":{{"0":{start}}}}}',
               endingOffsets=f'{{"__cluster_metadata":{{"0":{end}}}}}')
    assert got == offsets[2:7]  # the end is exclusive, as in Spark
    assert read(startingOffsets=str(start), endingOffsets=str(end)) == offsets[2:7]
    assert read(startingOffsets=f'{{"__cluster_metadata":{{"0":{start}}}}}',
                endingOffsets='{"__cluster_metadata":{"0":-1}}')[-1] >= offsets[-1]
    assert read(startingOffsets="earliest")[-1] >= offsets[-1]


@pytest.mark.parametrize(("opts", "message"), [
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"startingOffsets": '{"__cluster_metadata":{"0":-1}}'},
     "startingOffsets for __cluster_metadata-0 can't be latest for batch queries on Kafka"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"endingOffsets": '{"__cluster_metadata":{"0":-2}}'},
     "endingOffsets for __cluster_metadata-0 can't be earliest for batch queries on Kafka"),
    ({"startingOffsets": '{"other":{"0":3}}'}, "only __cluster_metadata partition 0 can be read"),
    ({"startingOffsets": '{"__cluster_metadata":{"0":3,"1":4}}'}, "only __cluster_metadata partition 0"),
    ({"startingOffsets": "newest"}, "expected earliest, latest or e.g."),
    ({"startingOffsets": '{"__cluster_metadata":{"0":-3}}'}, "is not an offset"),
])
def test_offset_options_are_checked_as_spark_checks_them(opts: dict[str, str], message: str) -> None:
    from kraftnode.spark.live_source import KraftSourceError, _read_options

    with pytest.raises(KraftSourceError, match=re.escape(message)):
        _read_options(opts, streaming=False)


def test_stream_offset_options() -> None:
    from kraftnode.spark.live_source import EARLIEST, LATEST, KraftSourceError, _read_options

    assert _read_options({}, streaming=True) == (LATEST, None)  # Spark's default for streams
    assert _read_options({}, streaming=False) == (EARLIEST, LATEST)  # and for batch reads
    assert _read_options({"startingOffsets": "EARLIEST"}, streaming=True) == (EARLIEST, None)
    assert _read_options({"startingOffsets": '{"__cluster_metadata": {"0": 17}}'}, streaming=True) == (17, None)
    with pytest.raises(KraftSourceError, match="ending offset not valid in streaming queries"):
        _read_options({"endingOffsets": "latest"}, streaming=True)


def test_watermark_client_is_one_consumer_polled_at_a_bounded_rate(dev_cluster: Any, monkeypatch: Any) -> None:
    """latestOffset's look-ups: one client however often Spark asks, at most one ListOffsets per interval."""
    from kraftnode.spark import live_source

    made: list[Any] = []
    real = live_source._consumer

    def counting(conf: dict[str, Any]) -> Any:
        made.append(real(conf))
        return made[-1]

    client = live_source._WatermarkClient({"bootstrap.servers": dev_cluster.bootstrap}, 30, 0.3)
    monkeypatch.setattr(live_source, "_consumer", counting)
    try:
        t = time.monotonic()
        marks = [client.get() for _ in range(8)]
        took = time.monotonic() - t
    finally:
        client.close()
    assert len(made) == 1
    assert took >= 7 * 0.3 - 0.05  # eight look-ups are at least seven intervals apart
    assert all(hi >= 0 for _, hi in marks)
