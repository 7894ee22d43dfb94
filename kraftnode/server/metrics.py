"""Prometheus metrics with the names Kafka users scrape, and the health answers.

What is measured where (docs/metrics.md lists every metric and the Kafka MBean it
mirrors):

- The raft gauges (state, leader, epoch, vote, high watermark, log end, voters,
  observers, the leader's view of each replica) are read from the core when
  Prometheus scrapes: :class:`NodeCollector` runs on the event loop thread, the one
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kraftnode.protocol.errors import Errors
from kraftnode.protocol.registry import FETCH
from kraftnode.raft.states import Candidate, Follower, Leader, Voted

if TYPE_CHECKING:
    from kraftnode.protocol.framing import Request
    from kraftnode.server.network import KafkaListener, Reply
    from kraftnode.server.raft_driver import RaftDriver

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
    return ns["count"]  # type: ignore[no-any-return]


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

    def record(self, request: Request, reply: Reply | None, seconds: float) -> None:
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


# ------------------------------------------------------------------ readiness
@dataclass(frozen=True)
class Health:
    ok: bool
    reason: str


def readiness(driver: RaftDriver, fetch_timeout_ms: int, metrics: RaftMetrics | None,
              now: int | None = None) -> Health:
    """``/readyz``: this node knows a leader and its log is within the fetch timeout of it.

    Precisely: ready when
    - it is the leader and its high watermark is known, i.e. a record of its own epoch
      has committed (Kafka's LeaderState.highWatermark() is empty until then); or
    - it follows a known leader (voter or observer) and, within the last
      ``controller.quorum.fetch.timeout.ms``, a Fetch answer from that leader in the
      current epoch found this node's log end offset at or past the high watermark the
      leader sent -- i.e. it held every committed record no longer than one fetch
      timeout ago (the same timeout after which a voter gives up on its leader).
    Anything else (no leader known, candidate, voted, resigned, a stale follower, a
    node whose core stopped) is not ready; the reason says which.
    """
    now = now_ms() if now is None else now
    node = driver.node
    if driver.fatal is not None:
        return Health(False, f"stopped: {driver.fatal}")
    st = node.state
    if isinstance(st, Leader):
        if st.tracker.high_watermark_known:
            return Health(True, f"leader of epoch {st.epoch}, high watermark {node.high_watermark}")
        return Health(False, f"leader of epoch {st.epoch}, nothing of this epoch committed yet")
    if isinstance(st, Follower):
        cu = metrics.caught_up if metrics is not None else None
        if cu is None or cu[0] != st.epoch:
            return Health(False, f"following leader {st.leader_id} in epoch {st.epoch}, "
                                 "not caught up with it yet")
        age = now - cu[1]
        if age > fetch_timeout_ms:
            return Health(False, f"following leader {st.leader_id} in epoch {st.epoch}, last "
                                 f"caught up {age} ms ago (> controller.quorum.fetch.timeout.ms "
                                 f"{fetch_timeout_ms})")
        return Health(True, f"following leader {st.leader_id} in epoch {st.epoch}, caught up "
                            f"{age} ms ago")
    return Health(False, f"{st.name} in epoch {st.epoch}, no leader known")


def liveness(driver: RaftDriver) -> Health:
    """``/healthz``: the process answers and its raft core has not stopped."""
    if driver.fatal is not None:
        return Health(False, f"stopped: {driver.fatal}")
    return Health(True, "ok")


# ------------------------------------------------------------------ the collector
def kafka_state(driver: RaftDriver) -> str:
    """Kafka 3.9's current-state value (KafkaRaftMetrics): a follower that is not a voter
    is an observer; a resigned leader falls through to unattached, as in Kafka."""
    node = driver.node
    st = node.state
    if isinstance(st, Leader):
        return "leader"
    if isinstance(st, Candidate):
        return "candidate"
    if isinstance(st, Voted):
        return "voted"
    if isinstance(st, Follower):
        return "follower" if node.is_voter else "observer"
    return "unattached"


def current_vote(driver: RaftDriver) -> tuple[int, str]:
    """Kafka's current-vote and current-vote-directory-id: a leader or candidate voted for
    itself; an unattached-voted replica for its candidate; otherwise -1 / the zero uuid."""
    node = driver.node
    st = node.state
    zero = "AAAAAAAAAAAAAAAAAAAAAA"
    if isinstance(st, Leader | Candidate):
        key = node.local_key
    elif isinstance(st, Voted):
        key = st.voted_key
    else:
        return -1, zero
    d = key.directory_id
    if d is None:
        return key.id, zero
    import base64

    return key.id, base64.urlsafe_b64encode(d.bytes).decode().rstrip("=")


def high_watermark_metric(driver: RaftDriver) -> int:
    """Kafka's high-watermark gauge: -1 while unknown -- on a leader until a record of its
    epoch commits (a new LeaderState starts empty), and from start-up until a high
    watermark is learnt (Kafka's initial state has none; the core's 0 means the same);
    otherwise the value carried across states, as Kafka's QuorumState carries it into
    the next follower, unattached or candidate state."""
    node = driver.node
    st = node.state
    if isinstance(st, Leader) and not st.tracker.high_watermark_known:
        return -1
    return node.high_watermark if node.high_watermark > 0 else -1


def _gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    if labels:
        g = GaugeMetricFamily(name, doc, labels=list(labels))
        g.add_metric(list(labels.values()), value)
        return g
    return GaugeMetricFamily(name, doc, value=value)


class NodeCollector(Collector):
    """Everything a node exports except the process/platform collectors, read at scrape."""

    def __init__(self, driver: RaftDriver, raft: RaftMetrics, requests: RequestMetrics,
                 listeners: Iterable[tuple[str, KafkaListener]], node_id: int, cluster_id: str,
                 fetch_timeout_ms: int, start_ms: int | None = None) -> None:
        self.driver = driver
        self.raft = raft
        self.requests = requests
        self.listeners = list(listeners)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.fetch_timeout_ms = fetch_timeout_ms
        self.start_ms = now_ms() if start_ms is None else start_ms

    def describe(self) -> list[Metric]:
        return []   # no collect() at registration

    def add_listener(self, name: str, listener: KafkaListener) -> None:
        self.listeners.append((name, listener))

    def collect(self) -> Iterator[Metric]:
        now = now_ms()
        yield from self._raft(now)
        yield from self._replicas(now)
        yield from self._snapshot(now)
        yield from self._requests()
        yield from self._connections()
        import kraftnode

        yield _gauge("kraftnode_info", "This node: id, cluster id and kraftnode version (always 1)",
                     1, {"node_id": str(self.node_id), "cluster_id": self.cluster_id,
                         "version": kraftnode.__version__})
        ready = readiness(self.driver, self.fetch_timeout_ms, self.raft, now)
        yield _gauge("kraftnode_ready", "1 when /readyz answers 200 (see docs/metrics.md)",
                     1 if ready.ok else 0)

    def _raft(self, now: int) -> Iterator[Metric]:
        d = self.driver
        node = d.node
        st = node.state
        state = kafka_state(d)
        g = GaugeMetricFamily(RAFT + "current_state",
                              "The current state of this member (one series per state, 1 for "
                              "the current): leader, candidate, voted, follower, unattached, "
                              "observer", labels=["state"])
        for s in STATES:
            g.add_metric([s], 1 if s == state else 0)
        yield g
        yield _gauge(RAFT + "current_leader", "The current quorum leader's id; -1 indicates unknown",
                     node.leader_id)
        vote, vote_dir = current_vote(d)
        yield _gauge(RAFT + "current_vote", "The current voted id; -1 indicates not voted for anyone",
                     vote)
        yield _gauge(RAFT + "current_vote_directory_id",
                     "The current voted directory id as a label (always 1); the zero uuid "
                     "indicates not voted for a directory id", 1, {"directory_id": vote_dir})
        yield _gauge(RAFT + "current_epoch", "The current quorum epoch.", node.epoch)
        hw = high_watermark_metric(d)
        yield _gauge(RAFT + "high_watermark",
                     "The high watermark maintained on this member; -1 if it is unknown", hw)
        log = d.log
        yield _gauge(RAFT + "log_end_offset", "The current raft log end offset.", log.end_offset)
        yield _gauge(RAFT + "log_end_epoch", "The current raft log end epoch.",
                     log.last_fetched_epoch)
        yield _gauge(RAFT + "number_unknown_voter_connections",
                     "Number of unknown voters whose connection information is not cached; "
                     "would never be larger than quorum-size.", self._unknown_voters())
        yield _gauge(RAFT + "poll_idle_ratio_avg",
                     "The ratio of time the node's event loop thread is idle as opposed to "
                     "doing work (CPU or fsync), since the previous scrape",
                     self.raft.poll_idle_ratio())
        r = self.raft
        yield _gauge(RAFT + "commit_latency_avg",
                     "The average time in milliseconds to commit an entry in the raft log.",
                     r.commit_latency.avg.measure(now))
        yield _gauge(RAFT + "commit_latency_max",
                     "The maximum time in milliseconds to commit an entry in the raft log.",
                     r.commit_latency.max.measure(now))
        yield _gauge(RAFT + "election_latency_avg",
                     "The average time in milliseconds spent on electing a new leader.",
                     r.election_latency.avg.measure(now))
        yield _gauge(RAFT + "election_latency_max",
                     "The maximum time in milliseconds spent on electing a new leader.",
                     r.election_latency.max.measure(now))
        yield _gauge(RAFT + "fetch_records_rate",
                     "The average number of records fetched from the leader of the raft quorum.",
                     r.fetch_records.measure(now))
        yield _gauge(RAFT + "append_records_rate",
                     "The average number of records appended per sec as the leader of the raft "
                     "quorum.", r.append_records.measure(now))
        yield _gauge(RAFT + "number_of_voters",
                     "Number of voters for the KRaft topic partition.", len(node.voters))
        if isinstance(st, Leader):   # leader-only, as in Kafka
            tracker = st.tracker
            tracker.clear_inactive_observers(now)
            yield _gauge(RAFT + "number_of_observers",
                         "Number of observers being tracked by the KRaft topic partition leader.",
                         len(tracker.observers))
            pending = tracker.pending_add is not None or tracker.pending_remove is not None
            yield _gauge(RAFT + "uncommitted_voter_change",
                         "1 if there is a voter change that has not been committed, 0 otherwise.",
                         1 if pending else 0)

    def _unknown_voters(self) -> int:
        """Voters (other than this node) to which no endpoint is known: none in a voter set
        entry and none in controller.quorum.voters."""
        d = self.driver
        me = d.node.local_key.id
        return sum(1 for v in d.node.voters
                   if v.key.id != me and not v.endpoints and v.key.id not in d.addresses)

    def _replicas(self, now: int) -> Iterator[Metric]:
        """The leader's DescribeQuorum view of every replica (kraftnode's own names)."""
        node = self.driver.node
        if not isinstance(node.state, Leader):
            return
        dq = node.describe_quorum(now)
        leader_end = self.driver.log.end_offset
        labels = ["replica", "role"]
        leo = GaugeMetricFamily("kraftnode_raft_replica_log_end_offset",
                                "Leader only: each replica's log end offset as the leader last "
                                "saw it (DescribeQuorum LogEndOffset; -1 unknown)", labels=labels)
        lag = GaugeMetricFamily("kraftnode_raft_replica_lag",
                                "Leader only: records each replica is behind the leader's log end "
                                "offset (leader LogEndOffset - replica LogEndOffset, as "
                                "kafka-metadata-quorum describe --replication prints Lag)",
                                labels=labels)
        fetch_age = GaugeMetricFamily("kraftnode_raft_replica_last_fetch_age_ms",
                                      "Leader only: milliseconds since each replica's last Fetch "
                                      "(now - LastFetchTimestamp)", labels=labels)
        caught_age = GaugeMetricFamily("kraftnode_raft_replica_last_caught_up_age_ms",
                                       "Leader only: milliseconds since each replica was last "
                                       "caught up (now - LastCaughtUpTimestamp)", labels=labels)
        for role, views in (("voter", dq.current_voters), ("observer", dq.observers)):
            for r in views:
                lv = [str(r.replica_id), role]
                leo.add_metric(lv, r.log_end_offset)
                lag.add_metric(lv, leader_end - r.log_end_offset)
                if r.last_fetch_timestamp >= 0:
                    fetch_age.add_metric(lv, max(0, now - r.last_fetch_timestamp))
                if r.last_caught_up_timestamp >= 0:
                    caught_age.add_metric(lv, max(0, now - r.last_caught_up_timestamp))
        yield leo
        yield lag
        yield fetch_age
        yield caught_age

    def _snapshot(self, now: int) -> Iterator[Metric]:
        """Kafka's SnapshotEmitter gauges.  kraftnode does not generate snapshots yet: these
        describe the latest snapshot on disk (e.g. one downloaded with FetchSnapshot); with
        none, 0 bytes and the age since start-up, as Kafka reports before its first one."""
        size, made = 0, self.start_ms
        sid = self.driver.log.latest_snapshot_id()
        if sid is not None:
            from kraftnode.log.snapshot import SnapshotId, snapshot_file_name

            p = Path(self.driver.log.partition_dir) / snapshot_file_name(
                SnapshotId(sid.offset, sid.epoch))
            try:
                stat = p.stat()
                size, made = stat.st_size, int(stat.st_mtime * 1000)
            except OSError:
                pass
        yield _gauge("kafka_server_snapshotemitter_latestsnapshotgeneratedbytes",
                     "Size in bytes of the latest snapshot (kraftnode: the latest on disk)", size)
        yield _gauge("kafka_server_snapshotemitter_latestsnapshotgeneratedagems",
                     "Age in milliseconds of the latest snapshot (kraftnode: since its file was "
                     "written; since start-up when there is none)", max(0, now - made))

    def _requests(self) -> Iterator[Metric]:
        rm = self.requests
        reqs = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                   "Requests answered, per API and version (Kafka's "
                                   "RequestsPerSec count)", labels=["request", "version"])
        for (name, v), n in sorted(rm.requests.items()):
            reqs.add_metric([name, str(v)], n)
        yield reqs
        errs = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                   "Error codes in responses, per API and error (Kafka's "
                                   "ErrorsPerSec count; NONE included)", labels=["request", "error"])
        for name, codes in sorted(rm.errors.items()):
            for code, n in sorted(codes.items()):
                errs.add_metric([name, error_name(code)], n)
        yield errs
        h = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                  "Milliseconds from taking a request off its connection to "
                                  "writing its response (Kafka's TotalTimeMs)", labels=["request"])
        for name, (counts, total) in sorted(rm.times.items()):
            buckets = []
            acc = 0
            for bound, c in zip((*TIME_BUCKETS_MS, math.inf), counts, strict=True):
                acc += c
                buckets.append(("+Inf" if bound == math.inf else repr(bound), acc))
            h.add_metric([name], buckets, total[0])
        yield h

    def _connections(self) -> Iterator[Metric]:
        labels = ["listener", "networkProcessor"]
        count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                  "Open client connections per listener", labels=labels)
        made = CounterMetricFamily("kafka_server_socket_server_metrics_connection_creation",
                                   "Connections accepted per listener", labels=labels)
        closed = CounterMetricFamily("kafka_server_socket_server_metrics_connection_close",
                                     "Connections closed per listener", labels=labels)
        for name, lst in self.listeners:
            lv = [name, "0"]
            count.add_metric(lv, lst.connections_open)
            made.add_metric(lv, lst.connections_created)
            closed.add_metric(lv, lst.connections_created - lst.connections_open)
        yield count
        yield made
        yield closed
