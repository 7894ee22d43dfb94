"""``format("kraft")``: read committed records from, and append records to, a live quorum.

Everything goes through a genuine Kafka client (confluent-kafka / librdkafka) on
``__cluster_metadata`` partition 0, so it works against any Kafka-protocol
endpoint, kraftnode or Apache Kafka alike.

Reading (``spark.read`` and ``spark.readStream``): a consumer ``assign``-ed to an
offset reads what the leader serves, which is committed records only (Fetch stops
at the high watermark); the end of each range is the high watermark reported by
ListOffsets (``get_watermark_offsets``).  The streaming source's offsets are
``{"offset": N}`` -- the next offset to read -- and Spark keeps them in its
checkpoint, so a restarted query resumes exactly after the last record it
committed, with no gap and no duplicate.  Control records (LeaderChange, ...)
are never delivered by Kafka clients, so offsets in the output have holes there.

Writing (``df.write.format("kraft")``): each task produces its rows (key, value,
headers) with acks=all to partition 0 and waits for every delivery report; any
error fails the task and so the write.  With acks=all the leader answers only once
the records are committed, so a successful write means every row is committed.
The committed offsets are reported by the driver-side commit: logged, and written
as JSON to the ``reportPath`` option when given.

Options: ``bootstrap.servers`` (required), ``startingOffsets`` ("earliest" |
"latest" | a number; default earliest), ``endingOffsets`` (batch read: "latest" |
a number), ``maxRecordsPerTrigger`` (stream), ``timeoutMs`` (default 30000),
``reportPath`` (write); any option prefixed ``kafka.`` is passed to the client.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

__all__ = ["KraftDataSource", "TOPIC", "LIVE_DDL"]

TOPIC = "__cluster_metadata"
LIVE_DDL = ("offset BIGINT, partition_leader_epoch INT, timestamp BIGINT, key BINARY, value BINARY, "
            "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")


class KraftSourceError(RuntimeError):
    """The quorum could not be read or written as asked."""


def _client_conf(options: Any) -> dict[str, Any]:
    servers = options.get("bootstrap.servers") or options.get("kafka.bootstrap.servers")
    if not servers:
        raise KraftSourceError("option bootstrap.servers is required, e.g. .option('bootstrap.servers', "
                               "'127.0.0.1:9093')")
    conf: dict[str, Any] = {"bootstrap.servers": servers}
    for k, v in options.items():
        if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers":
            conf[k[len("kafka."):]] = v
    return conf


def _timeout_s(options: Any) -> float:
    return int(options.get("timeoutMs") or 30000) / 1000.0


def _consumer(conf: dict[str, Any]) -> Any:
    from confluent_kafka import Consumer

    return Consumer({**conf, "group.id": f"kraftnode-spark-{uuid.uuid4()}", "enable.auto.commit": False,
                     "enable.partition.eof": False, "isolation.level": "read_committed"})


def watermarks(conf: dict[str, Any], timeout: float) -> tuple[int, int]:
    """(log start offset, high watermark) of the metadata partition."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    c = _consumer(conf)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=timeout)
            except KafkaException as e:
                # a new leader answers LATEST with OFFSET_NOT_AVAILABLE until its high
                # watermark reaches its epoch start (KIP-207); librdkafka does not retry it
                if e.args[0].code() != KafkaError.OFFSET_NOT_AVAILABLE or time.monotonic() > deadline:
                    raise
                lo, hi = -1, -1
            # a new leader reports an unknown (-1) high watermark until its epoch commits
            if hi >= 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    except KafkaException as e:
        raise KraftSourceError(f"ListOffsets on {conf['bootstrap.servers']} failed: {e}") from None
    finally:
        c.close()
    if hi < 0:
        raise KraftSourceError(f"{conf['bootstrap.servers']}: the high watermark stayed unknown for {timeout:.0f} s")
    return int(lo), int(hi)


def _resolve(spec: str | None, default: str, conf: dict[str, Any], timeout: float) -> int:
    s = (spec or default).strip().lower()
    if s in ("earliest", "latest"):
        lo, hi = watermarks(conf, timeout)
        return lo if s == "earliest" else hi
    try:
        return int(s)
    except ValueError:
        raise KraftSourceError(f"offset {spec!r}: expected earliest, latest or a number") from None


def read_range(conf: dict[str, Any], start: int, end: int, timeout: float) -> Iterator[tuple[Any, ...]]:
    """Rows for offsets [start, end) read with a consumer; fails after ``timeout`` without progress."""
    if end <= start:
        return
    from confluent_kafka import TopicPartition

    c = _consumer(conf)
    tp = TopicPartition(TOPIC, 0, start)
    try:
        c.assign([tp])
        deadline = time.monotonic() + timeout
        while True:
            msg = c.poll(0.2)
            if msg is None:
                pos = c.position([TopicPartition(TOPIC, 0)])[0].offset
                if pos >= end:
                    return  # the last offsets were control records, which clients never see
                if time.monotonic() > deadline:
                    raise KraftSourceError(f"no progress reading offsets [{start}, {end}) from "
                                           f"{conf['bootstrap.servers']}: at {pos} after {timeout:.0f} s")
                continue
            if msg.error():
                raise KraftSourceError(f"fetch from {conf['bootstrap.servers']} failed: {msg.error()}")
            off = msg.offset()
            if off >= end:
                return
            deadline = time.monotonic() + timeout
            epoch = msg.leader_epoch() if hasattr(msg, "leader_epoch") else None
            _, ts = msg.timestamp()
            headers = [(k, v) for k, v in (msg.headers() or [])]
            yield (off, epoch, ts, msg.key(), msg.value(), headers)
            if off >= end - 1:
                return
    finally:
        c.close()


@dataclass
class RangePartition(InputPartition):
    start: int
    end: int

    def __post_init__(self) -> None:
        super().__init__((self.start, self.end))


class KraftBatchReader(DataSourceReader):
    def __init__(self, options: Any) -> None:
        self.conf = _client_conf(options)
        self.timeout = _timeout_s(options)
        self.start = _resolve(options.get("startingOffsets"), "earliest", self.conf, self.timeout)
        self.end = _resolve(options.get("endingOffsets"), "latest", self.conf, self.timeout)

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(self.start, self.end)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        p: RangePartition = partition  # type: ignore[assignment]
        yield from read_range(self.conf, p.start, p.end, self.timeout)


class KraftStreamReader(DataSourceStreamReader):
    def __init__(self, options: Any) -> None:
        self.options = dict(options)
        self.conf = _client_conf(options)
        self.timeout = _timeout_s(options)
        limit = options.get("maxRecordsPerTrigger")
        self.max_per_trigger = int(limit) if limit else None

    def initialOffset(self) -> dict[str, int]:
        return {"offset": _resolve(self.options.get("startingOffsets"), "earliest", self.conf, self.timeout)}

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        _, hw = watermarks(self.conf, self.timeout)
        if start is not None:
            # a new leader reports its high watermark only once its first entry commits;
            # never let the end move backwards past what was already read
            hw = max(hw, int(start["offset"]))
            if self.max_per_trigger:
                hw = min(hw, int(start["offset"]) + self.max_per_trigger)
        return {"offset": hw}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [RangePartition(int(start["offset"]), int(end["offset"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        p: RangePartition = partition  # type: ignore[assignment]
        yield from read_range(self.conf, p.start, p.end, self.timeout)

    def commit(self, end: dict[str, int]) -> None:
        pass  # nothing to release: the quorum keeps the log, Spark keeps the offsets


@dataclass
class CommittedRange(WriterCommitMessage):
    count: int
    first_offset: int | None
    last_offset: int | None


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode("utf-8")


class KraftWriter(DataSourceWriter):
    def __init__(self, options: Any, schema: StructType) -> None:
        self.conf = _client_conf(options)
        self.timeout = _timeout_s(options)
        self.report_path = options.get("reportPath")
        names = set(schema.fieldNames())
        if "value" not in names:
            raise KraftSourceError(f"df.write.format('kraft') needs a value column; the DataFrame has {sorted(names)}")
        unknown = names - {"key", "value", "headers"}
        if unknown:
            raise KraftSourceError(f"df.write.format('kraft') takes key, value, headers; not {sorted(unknown)}")

    def write(self, iterator: Iterator[Any]) -> CommittedRange:
        from confluent_kafka import KafkaException, Producer

        producer = Producer({**self.conf, "acks": "all", "linger.ms": 5,
                             "message.timeout.ms": int(self.timeout * 1000)})
        offsets: list[int] = []
        errors: list[str] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                offsets.append(msg.offset())

        sent = 0
        for row in iterator:
            d = row.asDict()
            headers: list[tuple[str, str | bytes | None]] = [
                (str(h["key"]), _bytes(h["value"])) for h in (d.get("headers") or [])]
            while True:
                try:
                    producer.produce(TOPIC, value=_bytes(d.get("value")), key=_bytes(d.get("key")),
                                     partition=0, headers=headers or None, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as e:
                    raise KraftSourceError(f"produce to {self.conf['bootstrap.servers']} failed: {e}") from None
            sent += 1
            producer.poll(0)
        remaining = producer.flush(self.timeout + 5)
        if errors or remaining or len(offsets) != sent:
            raise KraftSourceError(
                f"{sent - len(offsets)} of {sent} rows not committed by {self.conf['bootstrap.servers']}"
                + (f": {errors[0]}" if errors else f" (still in flight after {self.timeout:.0f} s)"))
        return CommittedRange(sent, min(offsets) if offsets else None, max(offsets) if offsets else None)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        ranges = [m for m in messages if isinstance(m, CommittedRange) and m.count]
        report = {"committed_rows": sum(m.count for m in ranges),
                  "ranges": [{"first_offset": m.first_offset, "last_offset": m.last_offset, "rows": m.count}
                             for m in ranges]}
        print(f"kraft write committed: {json.dumps(report)}", file=sys.stderr)
        if self.report_path:
            with open(self.report_path, "w", encoding="utf-8") as f:
                json.dump(report, f)


class KraftDataSource(DataSource):
    """Committed records of a live quorum's ``__cluster_metadata-0``, through a Kafka client."""

    @classmethod
    def name(cls) -> str:
        return "kraft"

    def schema(self) -> str:
        return LIVE_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KraftStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise KraftSourceError("a Raft log is append-only: use mode('append')")
        return KraftWriter(self.options, schema)
