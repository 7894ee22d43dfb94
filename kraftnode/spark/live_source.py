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

Connections: a streaming query keeps **one** consumer on the driver for its
watermark look-ups (closed by ``stop()``) and asks for the high watermark at most
once per ``kraftnode.pollIntervalMs`` (Spark calls ``latestOffset`` every ~10 ms
while a query is idle); each Python worker keeps one consumer per client
configuration for reading ranges and re-assigns it for every micro-batch.  So a
query opens a handful of connections for its lifetime, not one per trigger.

Writing (``df.write.format("kraft")``): each task produces its rows (key, value,
headers) with acks=all to partition 0 and waits for every delivery report; any
error fails the task and so the write.  With acks=all the leader answers only once
the records are committed, so a successful write means every row is committed.
The committed offsets are reported by the driver-side commit: logged, and written
as JSON to the ``reportPath`` option when given.

Options, named as Spark's own Kafka source names them:

* ``startingOffsets``: ``"earliest"``, ``"latest"`` or Spark's per-partition JSON
  ``{"__cluster_metadata":{"0":N}}`` (-2 = earliest, -1 = latest); default
  ``latest`` for streams and ``earliest`` for batch reads (where ``latest`` is
  refused, as Spark refuses it).  A bare number N is accepted too (kraftnode's
  shorthand for the JSON form).
* ``endingOffsets`` (batch only): ``"latest"`` (default) or the JSON form (-1 =
  latest; earliest is refused); refused in streaming queries.
* ``maxOffsetsPerTrigger`` (stream; ``maxRecordsPerTrigger`` is accepted as an alias).
* ``kafka.*``: passed to the client (``kafka.bootstrap.servers`` may replace
  ``bootstrap.servers``).

kraftnode's own: ``bootstrap.servers`` (required unless ``kafka.bootstrap.servers``),
``timeoutMs`` (default 30000), ``kraftnode.pollIntervalMs`` (stream; the shortest
time between two high-watermark look-ups, default 500), ``reportPath`` (write).
"""

from __future__ import annotations

import atexit
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

from kraftnode.errors import RemoteError
from kraftnode.vocabulary import METADATA_TOPIC

# confluent_kafka (librdkafka) and pyspark's streaming classes are imported inside the functions
# that use them, on purpose: the option checks and the schema need neither.

__all__ = ["KraftDataSource", "TOPIC", "LIVE_DDL"]

TOPIC = METADATA_TOPIC
LIVE_DDL = ("offset BIGINT, partition_leader_epoch INT, timestamp BIGINT, key BINARY, value BINARY, "
            "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")


class KraftSourceError(RemoteError, RuntimeError):
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
    return _int_option(options, "timeoutMs", 30000) / 1000.0


def _int_option(options: Any, name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise KraftSourceError(f"option {name}: expected a whole number, got {raw!r}") from None
    if value < 0:
        raise KraftSourceError(f"option {name}: must not be negative, got {value}")
    return value


def _consumer(conf: dict[str, Any]) -> Any:
    from confluent_kafka import Consumer

    return Consumer({**conf, "group.id": f"kraftnode-spark-{uuid.uuid4()}", "enable.auto.commit": False,
                     "enable.partition.eof": False, "isolation.level": "read_committed"})


def _query_watermarks(c: Any, conf: dict[str, Any], timeout: float) -> tuple[int, int]:
    """(log start offset, high watermark) of the metadata partition, asked through consumer ``c``."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

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
    if hi < 0:
        raise KraftSourceError(f"{conf['bootstrap.servers']}: the high watermark stayed unknown for {timeout:.0f} s")
    return int(lo), int(hi)


def watermarks(conf: dict[str, Any], timeout: float) -> tuple[int, int]:
    """(log start offset, high watermark) of the metadata partition, with a one-off consumer."""
    c = _consumer(conf)
    try:
        return _query_watermarks(c, conf, timeout)
    finally:
        c.close()


class _WatermarkClient:
    """One consumer kept for a query's watermark look-ups, asked at most once per ``interval``.

    Why: Spark calls ``latestOffset`` about every 10 ms while a streaming query has
    nothing to do; a new client per call meant a new connection (and ListOffsets)
    per call on every node.  Between look-ups the caller sleeps out the interval,
    as Spark's own Kafka source blocks in its offset fetches.
    """

    def __init__(self, conf: dict[str, Any], timeout: float, interval: float) -> None:
        self.conf = conf
        self.timeout = timeout
        self.interval = interval
        self._consumer: Any = None
        self._asked_at: float | None = None

    def get(self) -> tuple[int, int]:
        if self._asked_at is not None:
            wait = self._asked_at + self.interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        if self._consumer is None:
            self._consumer = _consumer(self.conf)
        try:
            return _query_watermarks(self._consumer, self.conf, self.timeout)
        finally:
            self._asked_at = time.monotonic()

    def close(self) -> None:
        c, self._consumer = self._consumer, None
        if c is not None:
            c.close()

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader (with its read function) for the executors: no client there
        return {**self.__dict__, "_consumer": None}


# ---------------------------------------------------------------- offsets options
EARLIEST, LATEST = -2, -1  # as in Spark's Kafka source JSON offsets
_JSON_EXAMPLE = '{"__cluster_metadata":{"0":23}}'


def parse_offsets(name: str, spec: str | None, default: str) -> int:
    """``startingOffsets`` / ``endingOffsets`` as Spark's Kafka source takes them:
    "earliest" (-2), "latest" (-1), or per-partition JSON for ``__cluster_metadata``
    partition 0; also a bare offset (kraftnode's shorthand).  Returns -2, -1 or an offset."""
    s = (spec if spec is not None and str(spec).strip() != "" else default).strip()
    if s.lower() == "earliest":
        return EARLIEST
    if s.lower() == "latest":
        return LATEST
    if s.lstrip("-").isdigit():
        value = int(s)
    else:
        try:
            parsed = json.loads(s)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
            raise KraftSourceError(f"option {name}: expected earliest, latest or e.g. {_JSON_EXAMPLE}, got {s}")
        others = sorted(f"{t}-{p}" for t, ps in parsed.items() for p in ps if (t, str(p)) != (TOPIC, "0"))
        if others or TOPIC not in parsed or "0" not in parsed[TOPIC]:
            raise KraftSourceError(f"option {name}: only {TOPIC} partition 0 can be read, e.g. {_JSON_EXAMPLE}; "
                                   f"got {s}")
        value = parsed[TOPIC]["0"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise KraftSourceError(f"option {name}: offset of {TOPIC}-0 must be a number, got {value!r}")
    if value < EARLIEST:
        raise KraftSourceError(f"option {name}: offset {value} is not an offset (-2 = earliest, -1 = latest)")
    return value


def _read_options(options: Any, streaming: bool) -> tuple[int, int | None]:
    """(start, end) offset specs, validated the way Spark validates its Kafka source's options."""
    if streaming:
        if options.get("endingOffsets") is not None:
            raise KraftSourceError("ending offset not valid in streaming queries")
        return parse_offsets("startingOffsets", options.get("startingOffsets"), "latest"), None
    start = parse_offsets("startingOffsets", options.get("startingOffsets"), "earliest")
    if start == LATEST:
        what = "starting offset" if str(options.get("startingOffsets")).strip().lower() == "latest" \
            else f"startingOffsets for {TOPIC}-0"
        raise KraftSourceError(f"{what} can't be latest for batch queries on Kafka")
    end = parse_offsets("endingOffsets", options.get("endingOffsets"), "latest")
    if end == EARLIEST:
        what = "ending offset" if str(options.get("endingOffsets")).strip().lower() == "earliest" \
            else f"endingOffsets for {TOPIC}-0"
        raise KraftSourceError(f"{what} can't be earliest for batch queries on Kafka")
    return start, end


def _resolve(spec: int, marks: tuple[int, int]) -> int:
    lo, hi = marks
    return lo if spec == EARLIEST else hi if spec == LATEST else spec


# ---------------------------------------------------------------- reading ranges
_READ_CONSUMERS: dict[tuple[tuple[str, str], ...], Any] = {}


def _reading_consumer(conf: dict[str, Any]) -> Any:
    """This process's consumer for ``conf``, kept across micro-batches (Spark reuses its
    Python workers), so a stream does not open connections per trigger."""
    key = tuple(sorted((str(k), str(v)) for k, v in conf.items()))
    c = _READ_CONSUMERS.get(key)
    if c is None:
        if not _READ_CONSUMERS:
            atexit.register(_close_reading_consumers)
        c = _READ_CONSUMERS[key] = _consumer(conf)
    return c


def _close_reading_consumers() -> None:
    while _READ_CONSUMERS:
        _, c = _READ_CONSUMERS.popitem()
        c.close()


def read_range(conf: dict[str, Any], start: int, end: int, timeout: float) -> Iterator[tuple[Any, ...]]:
    """Rows for offsets [start, end) read with this process's consumer; fails after ``timeout``
    without progress."""
    if end <= start:
        return
    from confluent_kafka import TopicPartition

    c = _reading_consumer(conf)
    ok = False
    try:
        c.assign([TopicPartition(TOPIC, 0, start)])
        deadline = time.monotonic() + timeout
        while True:
            msg = c.poll(0.2)
            if msg is None:
                pos = c.position([TopicPartition(TOPIC, 0)])[0].offset
                if pos >= end:
                    ok = True
                    return  # the last offsets were control records, which clients never see
                if time.monotonic() > deadline:
                    raise KraftSourceError(f"no progress reading offsets [{start}, {end}) from "
                                           f"{conf['bootstrap.servers']}: at {pos} after {timeout:.0f} s")
                continue
            if msg.error():
                raise KraftSourceError(f"fetch from {conf['bootstrap.servers']} failed: {msg.error()}")
            off = msg.offset()
            if off < start:
                continue  # fetched for an earlier assignment
            if off >= end:
                ok = True
                return
            deadline = time.monotonic() + timeout
            epoch = msg.leader_epoch() if hasattr(msg, "leader_epoch") else None
            _, ts = msg.timestamp()
            headers = [(k, v) for k, v in (msg.headers() or [])]
            yield (off, epoch, ts, msg.key(), msg.value(), headers)
            if off >= end - 1:
                ok = True
                return
    finally:
        if ok:
            c.unassign()
        else:  # an error or an abandoned iterator: start the next read from a clean client
            for k, v in list(_READ_CONSUMERS.items()):
                if v is c:
                    del _READ_CONSUMERS[k]
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
        start, end = _read_options(options, streaming=False)
        marks = watermarks(self.conf, self.timeout) if start < 0 or (end is not None and end < 0) else (0, 0)
        self.start = _resolve(start, marks)
        self.end = _resolve(end if end is not None else LATEST, marks)

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(self.start, self.end)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        p: RangePartition = partition  # type: ignore[assignment]
        yield from read_range(self.conf, p.start, p.end, self.timeout)


class KraftStreamReader(DataSourceStreamReader):
    def __init__(self, options: Any) -> None:
        self.conf = _client_conf(options)
        self.timeout = _timeout_s(options)
        self.start_spec, _ = _read_options(options, streaming=True)
        limit = options.get("maxOffsetsPerTrigger") or options.get("maxRecordsPerTrigger")
        self.max_per_trigger = _int_option({"maxOffsetsPerTrigger": limit}, "maxOffsetsPerTrigger", 0) or None
        interval = _int_option(options, "kraftnode.pollIntervalMs", 500) / 1000.0
        self.marks = _WatermarkClient(self.conf, self.timeout, interval)
        self.latest: int | None = None

    def initialOffset(self) -> dict[str, int]:
        spec = self.start_spec
        return {"offset": spec if spec >= 0 else _resolve(spec, self.marks.get())}

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        _, hw = self.marks.get()
        self.latest = hw
        if start is not None:
            # a new leader reports its high watermark only once its first entry commits;
            # never let the end move backwards past what was already read
            hw = max(hw, int(start["offset"]))
            cap = getattr(limit, "max_rows", None) if limit is not None else self.max_per_trigger
            if cap:
                hw = min(hw, int(start["offset"]) + int(cap))
        return {"offset": hw}

    def reportLatestOffset(self) -> dict[str, int] | None:
        return None if self.latest is None else {"offset": self.latest}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [RangePartition(int(start["offset"]), int(end["offset"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        p: RangePartition = partition  # type: ignore[assignment]
        yield from read_range(self.conf, p.start, p.end, self.timeout)

    def commit(self, end: dict[str, int]) -> None:
        pass  # nothing to release: the quorum keeps the log, Spark keeps the offsets

    def stop(self) -> None:
        self.marks.close()


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
