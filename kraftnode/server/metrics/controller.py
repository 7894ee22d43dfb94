"""Kafka's controller metrics (``kafka.controller:type=KafkaController``,
``type=ControllerEventManager``, ``type=ControllerStats``) under the names the Prometheus JMX
exporter gives them, as the raft metrics are (docs/metrics.md).

Kafka's ``QuorumControllerMetrics`` (ActiveControllerCount, event-queue times, last applied and
committed offsets, timed-out heartbeats, new active controllers, ...) and
``ControllerMetadataMetrics`` (broker, topic and partition counts, offline partitions,
preferred-replica imbalance, metadata errors) are exported on every controller. What happens as it
happens is recorded into :class:`ControllerMetrics` (plain counters and histogram buckets, one
thread); the gauges are read at scrape time from the controller's view
(:class:`~kraftnode.controller.view.ControllerView`): its indexes (kept on replay) give the
partition, offline and imbalance counts in O(1), so a scrape of a million partitions costs no scan.
Brokers are counted by walking the registered brokers (tens, not partitions).
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kraftnode.protocol.generated.metadata import PartitionChangeRecord
from kraftnode.server.metrics.recording import TIME_BUCKETS_MS

if TYPE_CHECKING:
    from kraftnode.controller.result import Record
    from kraftnode.controller.view import ControllerView


class _Driver(Protocol):
    @property
    def high_watermark(self) -> int: ...


class ControllerSource(Protocol):
    """What the collector reads of the controller shell (server/controller_io/controller_shell.py),
    named here so that metrics/ stays below metadata/ (no import back up)."""

    @property
    def driver(self) -> _Driver: ...
    def observe_leader(self) -> None: ...
    def active_view(self) -> ControllerView | None: ...
    def metrics_view(self) -> ControllerView | None: ...
    def kraft_version(self) -> int: ...

__all__ = ["CONTROLLER", "EVENT_MANAGER", "STATS", "ControllerCollector", "ControllerMetrics", "count_elections"]

#: the exporter's names for kafka.controller:type=KafkaController,name=X (Value)
CONTROLLER = "kafka_controller_kafkacontroller_"
#: kafka.controller:type=ControllerEventManager,name=X
EVENT_MANAGER = "kafka_controller_controllereventmanager_"
#: kafka.controller:type=ControllerStats,name=XPerSec (Count -> _total)
STATS = "kafka_controller_controllerstats_"


class _Histogram:
    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(TIME_BUCKETS_MS) + 1)
        self.total = 0.0

    def record(self, ms: float) -> None:
        self.counts[bisect_left(TIME_BUCKETS_MS, ms)] += 1
        self.total += ms

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, c in zip((*TIME_BUCKETS_MS, math.inf), self.counts, strict=True):
            acc += c
            out.append(("+Inf" if bound == math.inf else repr(bound), acc))
        return out


class ControllerMetrics:
    """What the controller shell records as it happens (one thread, no locks)."""

    def __init__(self) -> None:
        #: EventQueueTimeMs: how late the event loop ran a periodic duty that was due
        self.queue_time = _Histogram()
        #: EventQueueProcessingTimeMs: one controller operation's time on the event loop
        #: (decide, append, replay)
        self.processing_time = _Histogram()
        self.operations_started = 0
        self.operations_timed_out = 0
        self.timed_out_heartbeats = 0
        self.new_active_controllers = 0
        self.metadata_errors = 0
        self.unclean_elections = 0
        self.elr_elections = 0
        #: the timestamp (ms) of the batch holding the last record the view replayed
        self.last_applied_timestamp = 0
        #: processing seconds since the last AvgIdleRatio measurement, and when that was
        self._busy_s = 0.0
        self._idle_since = time.monotonic()

    def processed(self, seconds: float) -> None:
        self.operations_started += 1
        self.processing_time.record(seconds * 1000)
        self._busy_s += seconds

    def idle_ratio(self) -> float:
        """ControllerEventManager's AvgIdleRatio: the share of wall time since the previous
        measurement not spent on controller operations (the first answer covers the time since
        start-up)."""
        now = time.monotonic()
        elapsed = now - self._idle_since
        busy, self._busy_s, self._idle_since = self._busy_s, 0.0, now
        if elapsed <= 0:
            return 1.0
        return max(0.0, min(1.0, 1.0 - busy / elapsed))


def count_elections(view: ControllerView, batches: Iterable[list[Record]], m: ControllerMetrics) -> None:
    """ControllerStats' UncleanLeaderElectionsPerSec and ElectionFromEligibleLeaderReplicasPerSec:
    a PartitionChangeRecord about to be written that gives a partition a new leader outside its
    current ISR -- from its ELR, or else an unclean election (``view``: before the write)."""
    for batch in batches:
        for rec, _v in batch:
            if isinstance(rec, PartitionChangeRecord) and rec.leader >= 0:
                old = view.partition(rec.topic_id, rec.partition_id)
                if old is None or rec.leader == old.leader or rec.leader in old.isr:
                    continue
                if rec.leader in (old.eligible_leader_replicas or ()):
                    m.elr_elections += 1
                else:
                    m.unclean_elections += 1


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


class ControllerCollector(Collector):
    """Kafka's controller metrics, read at scrape time from the shell and its view."""

    def __init__(self, shell: ControllerSource, metrics: ControllerMetrics, static_voters: bool) -> None:
        self.shell = shell
        self.metrics = metrics
        self.static_voters = static_voters

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        shell, m = self.shell, self.metrics
        shell.observe_leader()
        active = shell.active_view() is not None
        view = shell.metrics_view()
        active_brokers = fenced = shutting_down = topics = partitions = offline = imbalanced = 0
        last_applied = -1
        if view is not None:
            for reg, _v in view.image.brokers.values():
                if reg.fenced:
                    fenced += 1
                else:
                    active_brokers += 1
                    if reg.in_controlled_shutdown:
                        shutting_down += 1
            ix = view.indexes
            topics = len(ix.topic_order)
            partitions = ix.partition_count
            offline = len(ix.leaderless)
            imbalanced = len(ix.imbalanced)
            last_applied = view.next_offset - 1
        now = int(time.time() * 1000)
        c = CONTROLLER
        yield _gauge(c + "activecontrollercount", "1 on the active controller, else 0", 1 if active else 0)
        yield _gauge(c + "activebrokercount", "Registered brokers that are not fenced", active_brokers)
        yield _gauge(c + "fencedbrokercount", "Registered brokers that are fenced", fenced)
        yield _gauge(c + "controlledshutdownbrokercount",
                     "Unfenced brokers in controlled shutdown", shutting_down)
        yield _gauge(c + "globaltopiccount", "Topics in the metadata image", topics)
        yield _gauge(c + "globalpartitioncount", "Partitions in the metadata image", partitions)
        yield _gauge(c + "offlinepartitionscount", "Partitions without a leader", offline)
        yield _gauge(c + "preferredreplicaimbalancecount",
                     "Partitions not led by their preferred (first) replica", imbalanced)
        yield _gauge(c + "metadataerrorcount",
                     "Errors while replaying or acting on metadata since start-up", m.metadata_errors)
        yield _gauge(c + "lastappliedrecordoffset",
                     "Offset of the last record the controller replayed (the active controller: "
                     "its own appends included)", last_applied)
        yield _gauge(c + "lastappliedrecordtimestamp",
                     "Timestamp (ms) of the batch holding the last replayed record", m.last_applied_timestamp)
        yield _gauge(c + "lastappliedrecordlagms",
                     "Now minus the last applied record's timestamp (ms)",
                     max(0, now - m.last_applied_timestamp) if m.last_applied_timestamp else 0)
        yield _gauge(c + "lastcommittedrecordoffset", "Offset of the last committed record",
                     shell.driver.high_watermark - 1 if shell.driver.high_watermark > 0 else -1)
        yield _gauge(c + "timedoutbrokerheartbeatcount",
                     "BrokerHeartbeats that timed out before they could be answered", m.timed_out_heartbeats)
        yield _gauge(c + "eventqueueoperationsstartedcount", "Controller operations started",
                     m.operations_started)
        yield _gauge(c + "eventqueueoperationstimedoutcount",
                     "Controller operations that timed out", m.operations_timed_out)
        yield _gauge(c + "newactivecontrollerscount",
                     "Times this controller saw a new active controller", m.new_active_controllers)
        yield _gauge(c + "ignoredstaticvoters",
                     "1 when controller.quorum.voters is set but ignored (kraft.version 1)",
                     1 if self.static_voters and shell.kraft_version() >= 1 else 0)
        e = EVENT_MANAGER
        yield _gauge(e + "avgidleratio", "Share of wall time since the previous scrape the controller "
                     "spent on no operation", m.idle_ratio())
        for name, h, doc in (
                ("eventqueuetimems", m.queue_time,
                 "Milliseconds a periodic controller duty waited past its due time for the event loop"),
                ("eventqueueprocessingtimems", m.processing_time,
                 "Milliseconds a controller operation held the event loop (decide, append, replay)")):
            fam = HistogramMetricFamily(e + name, doc)
            fam.add_metric([], h.buckets(), h.total)
            yield fam
        yield _counter(STATS + "uncleanleaderelections",
                       "Leaders this controller elected outside the ISR", m.unclean_elections)
        yield _counter(STATS + "electionfromeligibleleaderreplicas",
                       "Leaders this controller elected from the eligible leader replicas (ELR)",
                       m.elr_elections)
