"""Prometheus metrics with the names Kafka users scrape, and the health answers.

What is measured where (docs/metrics.md lists every metric and the Kafka MBean it
mirrors):

- The raft gauges (state, leader, epoch, vote, high watermark, log end, voters,
  observers, the leader's view of each replica) are read from the core when
  Prometheus scrapes: :class:`~kraftnode.server.metrics.collector.NodeCollector` runs on the event loop thread, the one
  thread that owns the core, so it sees a consistent state and nothing is updated
  per event for them.
- What can only be seen as it happens is recorded cheaply into
  :class:`RaftMetrics` (plain attributes and Kafka's windowed stats, no locks: one
  thread): commit and election latency, records appended and fetched, fsync time.
- Requests: :class:`RequestMetrics` counts per (API, version), per (API, error
  code) and a latency histogram per API in plain dicts and lists; the collector
  turns them into Prometheus families at scrape time.

The windowed statistics are ports of Kafka's ``SampledStat``/``Avg``/``Max``/``Rate``
with Kafka's defaults (2 samples of 30 s), so ``commit-latency-avg`` means here what
it means on a Kafka controller (NaN when nothing was recorded in the window).
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from kraftnode.protocol.errors import Errors
from kraftnode.protocol.registry import FETCH

if TYPE_CHECKING:
    from kraftnode.protocol.framing import Request
    from recordbatch.message import Message


class Answer(Protocol):
    """What :meth:`RequestMetrics.record` reads of an answer (the listener's
    ``server/net/listener.py::Reply``; metrics/ is the server's lowest floor and imports no
    floor above it)."""

    @property
    def body(self) -> Message: ...
    @property
    def version(self) -> int: ...

#: Kafka's MetricConfig defaults: metrics.num.samples=2, metrics.sample.window.ms=30000.
SAMPLES = 2
WINDOW_MS = 30_000

RAFT = "kafka_server_raft_metrics_"
#: Kafka 3.9's current-state values (KafkaRaftMetrics); one series each, 1 for the current.
STATES = ("leader", "candidate", "voted", "follower", "unattached", "observer")


def now_ms() -> int:
    return int(time.time() * 1000)


# ------------------------------------------------------------------ Kafka's windowed stats
class _Sample:
    __slots__ = ("count", "last_event_ms", "max", "start_ms", "value")

    def __init__(self, initial: float, now: int) -> None:
        self.value = initial
        self.max = -math.inf
        self.count = 0
        self.start_ms = now
        self.last_event_ms = now

    def reset(self, initial: float, now: int) -> None:
        self.value = initial
        self.max = -math.inf
        self.count = 0
        self.start_ms = now
        self.last_event_ms = now


class SampledStat:
    """Kafka's ``SampledStat``: ``SAMPLES`` windows of ``WINDOW_MS`` plus one overlapping
    placeholder; samples without events in the monitored window are reset on measure."""

    __slots__ = ("_current", "_initial", "_samples")

    def __init__(self, initial: float) -> None:
        self._initial = initial
        self._current = 0
        self._samples: list[_Sample] = []

    def _update(self, s: _Sample, value: float) -> None:
        raise NotImplementedError

    def combine(self, samples: Sequence[_Sample]) -> float:
        raise NotImplementedError

    def record(self, value: float, now: int) -> None:
        samples = self._samples
        if not samples:
            samples.append(_Sample(self._initial, now))
        s = samples[self._current]
        if now - s.start_ms >= WINDOW_MS:
            self._current = (self._current + 1) % (SAMPLES + 1)
            if self._current >= len(samples):
                s = _Sample(self._initial, now)
                samples.append(s)
            else:
                s = samples[self._current]
                s.reset(self._initial, now)
        self._update(s, value)
        s.count += 1
        s.last_event_ms = now

    def purge(self, now: int) -> None:
        for s in self._samples:
            if now - s.last_event_ms >= SAMPLES * WINDOW_MS:
                s.reset(self._initial, now)

    def measure(self, now: int) -> float:
        self.purge(now)
        return self.combine(self._samples)

    def oldest_start(self, now: int) -> int:
        if not self._samples:
            self._samples.append(_Sample(self._initial, now))
        return min(s.start_ms for s in self._samples)


class WindowedSum(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, s: _Sample, value: float) -> None:
        s.value += value

    def combine(self, samples: Sequence[_Sample]) -> float:
        return sum(s.value for s in samples)


class Rate:
    """Kafka's ``Rate(TimeUnit.SECONDS, new WindowedSum())``: per second over the retained
    window, which counts as at least ``SAMPLES - 1`` full windows."""

    __slots__ = ("stat",)

    def __init__(self) -> None:
        self.stat = WindowedSum()

    def record(self, value: float, now: int) -> None:
        self.stat.record(value, now)

    def measure(self, now: int) -> float:
        value = self.stat.measure(now)
        elapsed = now - self.stat.oldest_start(now)
        # Java's (int) cast truncates toward zero (the clock may step back: time.time())
        full = elapsed // WINDOW_MS if elapsed >= 0 else -(-elapsed // WINDOW_MS)
        if full < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - full) * WINDOW_MS
        return value / (max(elapsed, 1) / 1000.0)


class _AvgMaxStat(SampledStat):
    """An Avg and a Max recorded together share their sample windows exactly (same
    config, same record times), so one set of samples keeps both."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, s: _Sample, value: float) -> None:
        s.value += value
        if value > s.max:
            s.max = value

    def combine(self, samples: Sequence[_Sample]) -> float:
        count = sum(s.count for s in samples)
        return math.nan if count == 0 else sum(s.value for s in samples) / count

    def combine_max(self, now: int) -> float:
        self.purge(now)
        count = sum(s.count for s in self._samples)
        return math.nan if count == 0 else max(s.max for s in self._samples)


class _View:
    __slots__ = ("_measure",)

    def __init__(self, measure: Callable[[int], float]) -> None:
        self._measure = measure

    def measure(self, now: int) -> float:
        return self._measure(now)


class AvgMax:
    """One Kafka sensor with an Avg and a Max stat (commit-latency, election-latency):
    ``avg.measure(now)`` is Kafka's Avg, ``max.measure(now)`` its Max."""

    __slots__ = ("_stat", "avg", "max", "record")

    def __init__(self) -> None:
        self._stat = _AvgMaxStat()
        self.record = self._stat.record
        self.avg = _View(self._stat.measure)
        self.max = _View(self._stat.combine_max)


# ------------------------------------------------------------------ raft, as it happens
class RaftMetrics:
    """What the driver and the log record as it happens (one thread: no locks).

    - commit latency: per appended batch, (commit time - append time) / records, as
      KafkaRaftClient.appendBatch records it;
    - election latency: from becoming a candidate (each new candidacy restarts it) to
      becoming leader or follower, as KafkaRaftMetrics.updateElectionStartMs /
      maybeUpdateElectionLatency;
    - records appended as leader / fetched as follower (for the -rate gauges);
    - when a follower was last caught up with its leader (for /readyz);
    - busy time of the event loop thread for poll-idle-ratio-avg.
    """

    def __init__(self) -> None:
        self.commit_latency = AvgMax()
        self.election_latency = AvgMax()
        self.append_records = Rate()
        self.fetch_records = Rate()
        self.election_start_ms: int | None = None
        #: (epoch, time) of the last Fetch answer from the current leader that this
        #: follower's log end offset had reached the high watermark of.
        self.caught_up: tuple[int, int] | None = None
        #: wall seconds spent in fsync (FlushLog), counted as busy time
        self.flush_seconds = 0.0
        self._idle_mark: tuple[float, float, float] | None = None   # (wall, cpu, flush)

    # -- driver hooks
    def on_state_changed(self, state: str, epoch: int, became_leader_at_once: bool, now: int) -> None:
        if state == "candidate":
            if not became_leader_at_once:   # Kafka: onBecomeCandidate, unless it wins at once
                self.election_start_ms = now
        elif state in ("leader", "follower"):
            if self.election_start_ms is not None:
                self.election_latency.record(now - self.election_start_ms, now)
                self.election_start_ms = None
        if self.caught_up is not None and self.caught_up[0] != epoch:
            self.caught_up = None

    def on_commit(self, append_ms: int, records: int, now: int) -> None:
        if records > 0:
            self.commit_latency.record(max(0, now - append_ms) / records, append_ms)

    def poll_idle_ratio(self) -> float:
        """Kafka's TimeRatio over the interval since the previous measurement (each scrape
        starts the next interval, as in Kafka): 1 - busy / elapsed, where busy is the CPU
        time of the event loop thread plus the wall time of its fsyncs.  1.0 at first."""
        wall, cpu, flush = time.monotonic(), time.thread_time(), self.flush_seconds
        mark = self._idle_mark
        self._idle_mark = (wall, cpu, flush)
        if mark is None or wall <= mark[0]:
            return 1.0
        busy = (cpu - mark[1]) + (flush - mark[2])
        return max(0.0, 1.0 - busy / (wall - mark[0]))


# ------------------------------------------------------------------ requests
#: TotalTimeMs histogram buckets, in milliseconds (Kafka's is a Yammer histogram in ms).
TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
                   1000.0, 2500.0, 5000.0, 10000.0, 30000.0)

_ErrorPlan = tuple[tuple[str, ...], tuple[tuple[str, bool, Any], ...]]
_plans: dict[tuple[type, int], _ErrorPlan | None] = {}


def _error_plan(cls: Any, version: int) -> _ErrorPlan | None:
    """Where the ErrorCode fields of a response class are, at one version (cached)."""
    key = (cls, version)
    if key in _plans:
        return _plans[key]
    direct: list[str] = []
    nested: list[tuple[str, bool, Any]] = []
    for f in cls.FIELDS:
        if not f.present_in(version):
            continue
        if f.name == "ErrorCode" and f.type == "int16":
            direct.append(f.attr)
        elif f.struct is not None:
            sub = _error_plan(f.struct, version)
            if sub is not None:
                nested.append((f.attr, f.type.startswith("[]"), sub))
    plan = (tuple(direct), tuple(nested)) if direct or nested else None
    _plans[key] = plan
    return plan


def _count_errors(msg: Any, plan: _ErrorPlan, out: dict[int, int]) -> None:
    direct, nested = plan
    for attr in direct:
        code = getattr(msg, attr)
        out[code] = out.get(code, 0) + 1
    for attr, many, sub in nested:
        v = getattr(msg, attr)
        if v is None:
            continue
        if many:
            for x in v:
                _count_errors(x, sub, out)
        else:
            _count_errors(v, sub, out)


_Counter = Callable[[Any, dict[int, int]], None]
_counters: dict[tuple[type, int], _Counter | None] = {}


def _compile(plan: _ErrorPlan) -> _Counter:
    """Straight-line code for one plan (a Fetch response is counted per request: the
    generic walk above costs ~4x as much)."""
    lines = ["def count(m0, out):"]

    def emit(plan: _ErrorPlan, var: str, depth: int) -> None:
        pad = "    " * depth
        direct, nested = plan
        for attr in direct:
            lines.append(f"{pad}c = {var}.{attr}; out[c] = out.get(c, 0) + 1")
        for attr, many, sub in nested:
            child = f"m{depth}"
            lines.append(f"{pad}v{depth} = {var}.{attr}")
            lines.append(f"{pad}if v{depth} is not None:")
            if many:
                lines.append(f"{pad}    for {child} in v{depth}:")
                emit(sub, child, depth + 2)
            else:
                lines.append(f"{pad}    {child} = v{depth}")
                emit(sub, child, depth + 1)

    emit(plan, "m0", 1)
    lines.append("    return None")
    ns: dict[str, Any] = {}
    exec("\n".join(lines), ns)  # noqa: S102 - generated from the schema's field names only
    return cast(_Counter, ns["count"])


def error_counter(cls: type, version: int) -> _Counter | None:
    key = (cls, version)
    try:
        return _counters[key]
    except KeyError:
        plan = _error_plan(cls, version)
        fn = _counters[key] = None if plan is None else _compile(plan)
        return fn


def error_counts(body: Any, version: int) -> dict[int, int]:
    """Kafka's ``AbstractResponse.errorCounts`` for most responses: every ErrorCode field
    of the response (top level and per topic/partition), NONE included."""
    out: dict[int, int] = {}
    fn = error_counter(type(body), version)
    if fn is not None:
        fn(body, out)
    return out


def error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


class RequestMetrics:
    """Kafka's RequestMetrics (RequestsPerSec, ErrorsPerSec, TotalTimeMs), as plain counts.

    A Fetch is counted under ``Fetch`` and also under ``FetchFollower`` (a replica's,
    replica id >= 0) or ``FetchConsumer``, as Kafka's RequestChannel does; errors under
    the API's name only."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        #: per request name: {error code: count}
        self.errors: dict[str, dict[int, int]] = {}
        #: per request name: [non-cumulative bucket counts (+Inf last), sum ms]
        self.times: dict[str, tuple[list[int], list[float]]] = {}

    def _time(self, name: str, ms: float) -> None:
        t = self.times.get(name)
        if t is None:
            t = self.times[name] = ([0] * (len(TIME_BUCKETS_MS) + 1), [0.0])
        t[0][bisect_left(TIME_BUCKETS_MS, ms)] += 1
        t[1][0] += ms

    def record(self, request: Request, reply: Answer | None, seconds: float) -> None:
        spec = request.spec
        name = spec.name
        v = request.api_version
        ms = seconds * 1000.0
        reqs = self.requests
        k = (name, v)
        reqs[k] = reqs.get(k, 0) + 1
        self._time(name, ms)
        if spec.key == FETCH and request.body is not None:
            body: Any = request.body
            rid = body.replica_state.replica_id if v >= 15 else body.replica_id
            k = ("FetchFollower" if rid >= 0 else "FetchConsumer", v)
            reqs[k] = reqs.get(k, 0) + 1
            self._time(k[0], ms)
        if reply is not None:
            key = (type(reply.body), reply.version)
            fn = _counters[key] if key in _counters else error_counter(*key)
            if fn is not None:
                errs = self.errors.get(name)
                if errs is None:
                    errs = self.errors[name] = {}
                fn(reply.body, errs)
