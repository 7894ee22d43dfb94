"""The scrape side of the metrics: the readiness/liveness answers and :class:`NodeCollector`,
which reads the raft gauges from the core when Prometheus scrapes (on the event loop
thread, the one thread that owns the core) and turns what kraftnode.server.metrics.recording
recorded as it happened (RaftMetrics, RequestMetrics) into Prometheus families. See
kraftnode.server.metrics.recording for the whole picture and docs/metrics.md for every metric.

metrics/ is the lowest floor of the server (docs/architecture.md, "The layers"): the scrape reads
the driver and the listeners through the Protocols below (:class:`DriverReadings`,
:class:`ListenerCounts`), which ``server/raft_io/driver.py::RaftDriver`` and
``server/net/listener.py::KafkaListener`` satisfy structurally (mypy checks it where
``server/node.py`` builds the collector), so nothing here imports a floor above."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

import kraftnode
from kraftnode.log.snapshot import SnapshotId, snapshot_file_name
from kraftnode.server.metrics.recording import (
    RAFT,
    STATES,
    TIME_BUCKETS_MS,
    RaftMetrics,
    RequestMetrics,
    error_name,
    now_ms,
)

if TYPE_CHECKING:
    from kraftnode.raft.log import OffsetAndEpoch
    from kraftnode.raft.messages import DescribeQuorumData
    from kraftnode.raft.voters import ReplicaKey, VoterSet


# ------------------------------------------------------------------ what the scrape reads
class StatusReadings(Protocol):
    """The driver's epoch state (``server/raft_io/driver.py::RaftStatus``)."""

    @property
    def state(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def high_watermark_known(self) -> bool: ...
    @property
    def voted_key(self) -> ReplicaKey | None: ...


class TrackingReadings(Protocol):
    """What a leader tracks beyond the voters (``server/raft_io/driver.py::LeaderTracking``)."""

    @property
    def observers(self) -> int: ...
    @property
    def voter_change_pending(self) -> bool: ...


class LogReadings(Protocol):
    """The raft log's ends and latest snapshot (``server/raft_io/disk_log.py::DiskRaftLog``)."""

    @property
    def end_offset(self) -> int: ...
    @property
    def last_fetched_epoch(self) -> int: ...
    @property
    def partition_dir(self) -> Path: ...
    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...


class DriverReadings(Protocol):
    """What the scrape and the health answers read of the raft driver
    (``server/raft_io/driver.py::RaftDriver``), on the event loop thread."""

    @property
    def fatal(self) -> str | None: ...
    @property
    def log(self) -> LogReadings: ...
    @property
    def addresses(self) -> Mapping[int, object]: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def is_voter(self) -> bool: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def local_key(self) -> ReplicaKey: ...
    @property
    def voters(self) -> VoterSet: ...
    def status(self) -> StatusReadings: ...
    def leader_tracking(self, now: int) -> TrackingReadings | None: ...
    def describe_quorum(self, now: int | None = None) -> DescribeQuorumData: ...


class ListenerCounts(Protocol):
    """A listener's connection counters (``server/net/listener.py::KafkaListener``)."""

    @property
    def connections_open(self) -> int: ...
    @property
    def connections_created(self) -> int: ...


# ------------------------------------------------------------------ readiness
@dataclass(frozen=True)
class Health:
    ok: bool
    reason: str


def readiness(driver: DriverReadings, fetch_timeout_ms: int, metrics: RaftMetrics | None,
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
    if driver.fatal is not None:
        return Health(False, f"stopped: {driver.fatal}")
    st = driver.status()
    if st.state == "leader":
        if st.high_watermark_known:
            return Health(True, f"leader of epoch {st.epoch}, high watermark {st.high_watermark}")
        return Health(False, f"leader of epoch {st.epoch}, nothing of this epoch committed yet")
    if st.state == "follower":
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
    return Health(False, f"{st.state} in epoch {st.epoch}, no leader known")


def liveness(driver: DriverReadings) -> Health:
    """``/healthz``: the process answers and its raft core has not stopped."""
    if driver.fatal is not None:
        return Health(False, f"stopped: {driver.fatal}")
    return Health(True, "ok")


# ------------------------------------------------------------------ the collector
def kafka_state(driver: DriverReadings) -> str:
    """Kafka 3.9's current-state value (KafkaRaftMetrics): a follower that is not a voter
    is an observer; a resigned leader falls through to unattached, as in Kafka."""
    state = driver.status().state
    if state in ("leader", "candidate", "voted"):
        return state
    if state == "follower":
        return "follower" if driver.is_voter else "observer"
    return "unattached"


def current_vote(driver: DriverReadings) -> tuple[int, str]:
    """Kafka's current-vote and current-vote-directory-id: a leader or candidate voted for
    itself; an unattached-voted replica for its candidate; otherwise -1 / the zero uuid."""
    st = driver.status()
    zero = "AAAAAAAAAAAAAAAAAAAAAA"
    if st.state in ("leader", "candidate"):
        key = driver.local_key
    elif st.voted_key is not None:
        key = st.voted_key
    else:
        return -1, zero
    d = key.directory_id
    if d is None:
        return key.id, zero
    return key.id, base64.urlsafe_b64encode(d.bytes).decode().rstrip("=")


def high_watermark_metric(driver: DriverReadings) -> int:
    """Kafka's high-watermark gauge: -1 while unknown -- on a leader until a record of its
    epoch commits (a new LeaderState starts empty), and from start-up until a high
    watermark is learnt (Kafka's initial state has none; the core's 0 means the same);
    otherwise the value carried across states, as Kafka's QuorumState carries it into
    the next follower, unattached or candidate state."""
    st = driver.status()
    if not st.high_watermark_known:
        return -1
    return st.high_watermark if st.high_watermark > 0 else -1


def _gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    if labels:
        g = GaugeMetricFamily(name, doc, labels=list(labels))
        g.add_metric(list(labels.values()), value)
        return g
    return GaugeMetricFamily(name, doc, value=value)


class NodeCollector(Collector):
    """Everything a node exports except the process/platform collectors, read at scrape."""

    def __init__(self, driver: DriverReadings, raft: RaftMetrics, requests: RequestMetrics,
                 listeners: Iterable[tuple[str, ListenerCounts]], node_id: int, cluster_id: str,
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

    def add_listener(self, name: str, listener: ListenerCounts) -> None:
        self.listeners.append((name, listener))

    def collect(self) -> Iterator[Metric]:
        now = now_ms()
        yield from self._raft(now)
        yield from self._replicas(now)
        yield from self._snapshot(now)
        yield from self._requests()
        yield from self._connections()
        yield _gauge("kraftnode_info", "This node: id, cluster id and kraftnode version (always 1)",
                     1, {"node_id": str(self.node_id), "cluster_id": self.cluster_id,
                         "version": kraftnode.__version__})
        ready = readiness(self.driver, self.fetch_timeout_ms, self.raft, now)
        yield _gauge("kraftnode_ready", "1 when /readyz answers 200 (see docs/metrics.md)",
                     1 if ready.ok else 0)

    def _raft(self, now: int) -> Iterator[Metric]:
        d = self.driver
        state = kafka_state(d)
        g = GaugeMetricFamily(RAFT + "current_state",
                              "The current state of this member (one series per state, 1 for "
                              "the current): leader, candidate, voted, follower, unattached, "
                              "observer", labels=["state"])
        for s in STATES:
            g.add_metric([s], 1 if s == state else 0)
        yield g
        yield _gauge(RAFT + "current_leader", "The current quorum leader's id; -1 indicates unknown",
                     d.leader_id)
        vote, vote_dir = current_vote(d)
        yield _gauge(RAFT + "current_vote", "The current voted id; -1 indicates not voted for anyone",
                     vote)
        yield _gauge(RAFT + "current_vote_directory_id",
                     "The current voted directory id as a label (always 1); the zero uuid "
                     "indicates not voted for a directory id", 1, {"directory_id": vote_dir})
        yield _gauge(RAFT + "current_epoch", "The current quorum epoch.", d.epoch)
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
                     "Number of voters for the KRaft topic partition.", len(d.voters))
        tracking = d.leader_tracking(now)
        if tracking is not None:   # leader-only, as in Kafka
            yield _gauge(RAFT + "number_of_observers",
                         "Number of observers being tracked by the KRaft topic partition leader.",
                         tracking.observers)
            yield _gauge(RAFT + "uncommitted_voter_change",
                         "1 if there is a voter change that has not been committed, 0 otherwise.",
                         1 if tracking.voter_change_pending else 0)

    def _unknown_voters(self) -> int:
        """Voters (other than this node) to which no endpoint is known: none in a voter set
        entry and none in controller.quorum.voters."""
        d = self.driver
        me = d.local_key.id
        return sum(1 for v in d.voters
                   if v.key.id != me and not v.endpoints and v.key.id not in d.addresses)

    def _replicas(self, now: int) -> Iterator[Metric]:
        """The leader's DescribeQuorum view of every replica (kraftnode's own names)."""
        if not self.driver.is_leader:
            return
        dq = self.driver.describe_quorum(now)
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
