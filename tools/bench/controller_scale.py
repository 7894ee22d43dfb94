"""The controller at scale (issue 39, must-show 1 and 2): kraftnode controllers against genuine
Kafka controller quorums (4.4 and 3.9), same run, same host.

For each system in turn: three controllers of a static quorum on 127.0.0.1 (three ``kraftnode
start`` processes, or three ``kafka-server-start.sh`` controllers formatted at metadata.version
3.9-IV0, as kraftnode is) and ``--brokers`` simulated brokers that speak the real protocol
(tests/support/sim_brokers.py: BrokerRegistration, then a BrokerHeartbeat every 2 s --
Kafka's broker.heartbeat.interval.ms -- each on its own connection to the active controller).
Then, growing the cluster to each of ``--sizes`` partitions (topics of 10 partitions, RF 3,
CreateTopics of 50 topics per request sent to the active controller):

* **create**: partitions/s while growing to the size;
* **heartbeat p99**: every broker's BrokerHeartbeat latency in ``--windows`` (3) windows of ``--window``
  seconds (20: 300 beats of 30 brokers) at the size; the median of the windows' p99 (one
  window's p99 is its third-slowest beat: a single stall of the shared host), with each window's
  and the p99 of all beats;
* **small write**: median latency of CreateTopics of one 10-partition topic at the size.

After the largest size:

* **restart load**: kill -9 of a standby controller, start it again; time until its log end
  offset (as the leader's DescribeQuorum reports it) reaches the leader's at the restart
  (process start, snapshot load, catching up; snapshots are taken every 4 MiB of records;
  kraftnode's modules byte-compiled first, as ``pip install`` leaves them); and, as **metadata
  loaded**, until the restarted node logged that its metadata image caught up with the high
  watermark (Kafka's MetadataLoader: "The loader finished catching up to the current high water
  mark"; kraftnode's snapshot manager: "the metadata state caught up with the high watermark") --
  a Kafka controller may answer and fetch before its image is loaded;
* **failover**: kill -9 of the active controller; time until a CreateTopics succeeds; then the
  killed controller starts again (one more restart sample); ``--failovers`` rounds (3), the
  median of each reported with the samples (a single failover is the fetch timeout's phase
  against the last fetch plus the election: one sample does not order two systems);
* **memory**: kraftnode: the active controller's RSS; Kafka: its heap used after a full GC
  (``jcmd GC.run``, then ``GC.heap_info``); per partition.

``--broker-start [ROUNDS]`` (must-show 4) adds, after the memory figure: a genuine Kafka 4.4 broker
(node 1000, formatted with the quorum's cluster id) starts against the quorum holding the largest size;
time from its process start until it registered (its log's "Successfully registered broker"), until it
was unfenced ("The broker has been unfenced"), and until it serves (a Metadata request for every topic
answers with all of them, each with its partitions). ROUNDS brokers (3; nodes 1000, 1001, ...) start one
after the other, each stopped before the next; the medians are reported with the samples.

``--soak MINUTES`` (must-show 2) instead grows to the largest size and runs the brokers' heartbeats
for that long while one topic is created and one deleted every second; it reports heartbeat p99
per minute, the brokers ever fenced (none may be) and, for kraftnode, the controller's
event-queue metrics from /metrics.

Usage::

    .venv/bin/python tools/bench/controller_scale.py [--sizes 10000,100000] [--systems kraftnode,kafka44,kafka39]
        [--brokers 30] [--window 20] [--windows 3] [--soak MINUTES] [--broker-start [ROUNDS]] [--failovers 3] [--json]

The figures are medians of one run on a shared 2-core host; each system's figures are printed as
they are measured, then the ratios kraftnode / Kafka.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.protocol import generated as w  # noqa: E402
from kraftnode.protocol.registry import (  # noqa: E402
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_QUORUM,
    METADATA,
)
from tests.support.cluster import CLUSTER_ID, Cluster, free_ports  # noqa: E402
from tests.support.kafka import KafkaHome, find_kafka_home  # noqa: E402
from tests.support.kafka_server import KafkaServer, broker_properties  # noqa: E402
from tests.support.node import call, frame_call  # noqa: E402
from tests.support.sim_brokers import SimBroker  # noqa: E402

HEARTBEAT_MS = 2000
TOPIC_PARTITIONS = 10
TOPICS_PER_REQUEST = 50
NOT_CONTROLLER = 41
TOPIC_ALREADY_EXISTS = 36
SNAPSHOTS = "metadata.log.max.record.bytes.between.snapshots=4194304\n"
#: what a controller logs once its metadata image has caught up with the high watermark
KAFKA_LOADED = "The loader finished catching up to the current high water mark"
KRAFTNODE_LOADED = "the metadata state caught up with the high watermark"


def wait_until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))] if s else float("nan")


class Quorum:
    """Three controllers of one kind: start, find the active one, kill -9, restart, memory."""

    def __init__(self, kind: str, home: KafkaHome | None, root: Path, heap: str) -> None:
        self.kind = kind
        self.kraft: Cluster | None = None
        self.kafka: dict[int, KafkaServer] = {}
        self.metrics_ports: dict[int, int] = {}
        if home is None:
            mports = free_ports(3)
            self.kraft = Cluster(root, 3, extra=SNAPSHOTS, application_records=False, node_extra={
                i: f"kraftnode.metrics.listener=127.0.0.1:{p}\n" for i, p in zip((1, 2, 3), mports, strict=True)})
            self.metrics_ports = dict(zip((1, 2, 3), mports, strict=True))
            self.ports = {i: self.kraft.port(i) for i in self.kraft.ids}
        else:
            self.ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
            voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
            for i, port in self.ports.items():
                s = KafkaServer(home, root / f"controller{i}", i,
                                f"process.roles=controller\nnode.id={i}\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                                "controller.listener.names=CONTROLLER\n"
                                "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
                                f"controller.quorum.voters={voters}\n"
                                f"log.dirs={root / f'controller{i}' / 'data'}\n{SNAPSHOTS}", heap=heap)
                s.format(CLUSTER_ID, *(("--release-version", "3.9-IV0") if home.major >= 4 else ()))
                self.kafka[i] = s

    def start(self, i: int) -> None:
        if self.kraft is not None:
            self.kraft.start(i)
        else:
            self.kafka[i].start()

    def start_all(self) -> None:
        for i in self.ports:
            self.start(i)

    def pid(self, i: int) -> int:
        if self.kraft is not None:
            p = self.kraft.procs[i]
        else:
            p = self.kafka[i].proc
        assert p is not None
        return p.pid

    def describe(self) -> Any | None:
        """The leader's DescribeQuorum partition (None when no leader answers)."""
        Q = w.DescribeQuorumRequest
        for port in self.ports.values():
            try:
                _, resp = call(port, DESCRIBE_QUORUM, 1, Q(topics=[Q.TopicData(
                    topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]), timeout=10)
            except (OSError, AssertionError):
                continue
            for t in resp.topics:  # type: ignore[attr-defined]
                for p in t.partitions:
                    if p.error_code == 0 and p.leader_id > 0:
                        return p
        return None

    def active(self, timeout: float = 120) -> int:
        return int(wait_until("a controller leader", lambda: (d := self.describe()) and d.leader_id, timeout))

    def kill(self, i: int) -> None:
        if self.kraft is not None:
            self.kraft.kill(i)
        else:
            self.kafka[i].kill()

    def loaded_lines(self, i: int) -> int:
        """How many times node ``i`` logged that its metadata image caught up with the high
        watermark (Kafka: its MetadataLoader's line, since its current process started, in a
        server.out of many megabytes at 1M; kraftnode: its snapshot manager's, in its whole log)."""
        if self.kraft is not None:
            return self.kraft.log(i).count(KRAFTNODE_LOADED)
        return self.kafka[i].log(since_start=True).count(KAFKA_LOADED)

    def close(self) -> None:
        if self.kraft is not None:
            self.kraft.close()
        for s in self.kafka.values():
            s.close()

    def memory_bytes(self, i: int) -> int:
        """kraftnode: RSS; Kafka: heap used after a full GC."""
        pid = self.pid(i)
        if self.kraft is not None:
            status = Path(f"/proc/{pid}/status").read_text()
            m = re.search(r"VmRSS:\s+(\d+) kB", status)
            assert m
            return int(m.group(1)) * 1024
        java = java_pid(pid)
        subprocess.run(["jcmd", str(java), "GC.run"], capture_output=True, timeout=120)
        out = subprocess.run(["jcmd", str(java), "GC.heap_info"], capture_output=True, text=True, timeout=60).stdout
        used = sum(int(x) for x in re.findall(r"used (\d+)K", out.split("Metaspace")[0]))
        return used * 1024

    def scrape(self, i: int) -> str:
        port = self.metrics_ports.get(i)
        if port is None:
            return ""
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()


def java_pid(pid: int) -> int:
    """The JVM of a kafka-server-start.sh process (the script execs java, or runs it as a child)."""
    if "java" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[0]:
        return pid
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else pid


def answers(port: int) -> bool:
    """ApiVersions answered on ``port``."""
    A = w.ApiVersionsRequest
    try:
        call(port, API_VERSIONS, 3, A(client_software_name="bench", client_software_version="1"), timeout=5)
        return True
    except (OSError, AssertionError):
        return False


class Controller:
    """A client connection to the active controller that follows it after a failover."""

    def __init__(self, q: Quorum) -> None:
        self.q = q
        self.sock: socket.socket | None = None
        self.cid = 0

    def send(self, key: int, version: int, body: Any, timeout: float = 60) -> Any:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.q.ports[self.q.active()]), timeout=timeout)
        self.cid += 1
        try:
            return frame_call(self.sock, key, version, body, self.cid, client_id="bench")
        except (OSError, AssertionError):
            self.close()
            return None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def create(self, names: list[str], partitions: int = TOPIC_PARTITIONS) -> int:
        C = w.CreateTopicsRequest
        q = C(topics=[C.CreatableTopic(name=n, num_partitions=partitions, replication_factor=3, assignments=[],
                                       configs=[]) for n in names], timeout_ms=60000, validate_only=False)
        r = self.send(CREATE_TOPICS, 7, q)
        if r is None:
            return -1
        codes = {int(t.error_code) for t in r.topics}
        if NOT_CONTROLLER in codes:
            self.close()
        return max(codes, key=lambda c: c != 0)

    def delete(self, name: str) -> int:
        D = w.DeleteTopicsRequest
        r = self.send(DELETE_TOPICS, 6, D(topics=[D.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))],
                                          timeout_ms=60000))
        if r is None:
            return -1
        return int(r.responses[0].error_code) if r.responses else 0


class Heartbeats:
    """Every simulated broker heartbeats every HEARTBEAT_MS to the active controller (one thread,
    brokers in turn); latencies are recorded per broker request."""

    def __init__(self, q: Quorum, brokers: list[SimBroker]) -> None:
        self.q = q
        self.brokers = brokers
        self.lat: list[float] = []
        self.errors: dict[int, int] = {}
        self.fenced_seen: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def take(self) -> list[float]:
        got, self.lat = self.lat, []
        return got

    def _run(self) -> None:
        due = {b.broker_id: time.monotonic() + i * HEARTBEAT_MS / 1000 / len(self.brokers)
               for i, b in enumerate(self.brokers)}
        while not self.stop.is_set():
            b = min(self.brokers, key=lambda x: due[x.broker_id])
            wait = due[b.broker_id] - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)
                continue
            due[b.broker_id] += HEARTBEAT_MS / 1000
            t0 = time.perf_counter()
            try:
                r = b.heartbeat(b.epoch)
            except (OSError, AssertionError):
                r = None
            ms = (time.perf_counter() - t0) * 1000
            if r is None or r.error_code == NOT_CONTROLLER:
                b.close()
                try:
                    b.port = self.q.ports[self.q.active(30)]
                except RuntimeError:
                    pass
                self.errors[-1 if r is None else NOT_CONTROLLER] = self.errors.get(-1 if r is None else NOT_CONTROLLER, 0) + 1
                continue
            if r.error_code != 0:
                self.errors[r.error_code] = self.errors.get(r.error_code, 0) + 1
                continue
            if r.is_fenced:
                self.fenced_seen.add(b.broker_id)
            self.lat.append(ms)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        for b in self.brokers:
            b.close()


def serves_all(port: int, topics: int, partitions: int) -> bool:
    """The broker answers a Metadata request for every topic with all of them and their partitions."""
    try:
        _, resp = call(port, METADATA, 12, w.MetadataRequest(topics=None, allow_auto_topic_creation=False),
                       timeout=60)
    except (OSError, AssertionError):
        return False
    got = [t for t in resp.topics if t.error_code == 0]
    return len(got) >= topics and sum(len(t.partitions) for t in got) >= partitions


def broker_start(q: Quorum, home: KafkaHome, root: Path, heap: str, topics: int, partitions: int,
                 log: Callable[[str], None], node_id: int = 1000) -> dict[str, float]:
    """A genuine Kafka 4.4 broker's start against the quorum as it is: seconds from its process
    start to registered, unfenced and serving every topic."""
    (port,) = free_ports(1)
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in q.ports.items())
    broker = KafkaServer(home, root / f"broker{node_id}", node_id,
                         broker_properties(node_id, port, voters, root / f"broker{node_id}" / "data"), heap=heap)
    broker.format(CLUSTER_ID)
    marks = {"registered_s": f"Successfully registered broker {node_id}",
             "unfenced_s": "The broker has been unfenced"}
    got: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        broker.start()
        deadline = t0 + 600
        while "serves_s" not in got:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{q.kind}: the broker did not serve within 600 s ({got}):\n"
                                   f"{broker.log()[-3000:]}")
            if not broker.running:
                raise RuntimeError(f"{q.kind}: the broker exited:\n{broker.log()[-3000:]}")
            text = broker.log(since_start=True)
            for key, line in marks.items():
                if key not in got and line in text:
                    got[key] = round(time.perf_counter() - t0, 2)
            if "unfenced_s" in got and serves_all(port, topics, partitions):
                got["serves_s"] = round(time.perf_counter() - t0, 2)
            time.sleep(0.1)
        log(f"{q.kind:9s} a Kafka 4.4 broker's start (node {node_id}): registered {got['registered_s']} s, "
            f"unfenced {got['unfenced_s']} s, serves all {topics} topics {got['serves_s']} s")
        return got
    finally:
        broker.close()


def broker_starts(q: Quorum, home: KafkaHome, root: Path, heap: str, topics: int, partitions: int,
                  log: Callable[[str], None], rounds: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    """``rounds`` brokers started one after the other (nodes 1000, 1001, ...; each stopped before
    the next starts): the median of each figure, and the samples. One start is one sample of a
    2-core host shared by a JVM starting and a quorum serving it: the first start of a run also
    reads the broker's jars from disk."""
    samples = []
    for k in range(rounds):
        samples.append(broker_start(q, home, root, heap, topics, partitions, log, 1000 + k))
        time.sleep(3)
    medians = {key: round(statistics.median(s[key] for s in samples), 2) for key in samples[0]}
    return medians, samples


def measure(kind: str, home: KafkaHome | None, root: Path, sizes: list[int], n_brokers: int, window: float,
            windows: int, soak_minutes: float, heap: str, log: Callable[[str], None],
            broker_home: KafkaHome | None = None, n_failovers: int = 3, broker_rounds: int = 3) -> dict[str, Any]:
    q = Quorum(kind, home, root, heap)
    row: dict[str, Any] = {"system": kind, "sizes": {}}
    hb: Heartbeats | None = None
    try:
        q.start_all()
        active = q.active()
        brokers = [SimBroker(q.ports[active], 100 + i, CLUSTER_ID) for i in range(n_brokers)]
        for b in brokers:
            b.join(120)
        hb = Heartbeats(q, brokers)
        hb.start()
        base_mem = q.memory_bytes(active) if not soak_minutes else 0
        ctl = Controller(q)
        made = 0
        topic = 0
        small_topics = 0
        for size in sizes:
            t0 = time.perf_counter()
            grown = 0
            while made < size:
                names = [f"t{topic + k}" for k in range(TOPICS_PER_REQUEST)]
                code = ctl.create(names)
                retries = 0
                while code in (-1, NOT_CONTROLLER) and retries < 3:
                    # the connection lost or the controller moved (a failover on a loaded host): the
                    # request goes again to the active controller; topics the first one made are fine
                    retries += 1
                    log(f"{kind:9s} CreateTopics at {made} partitions: {code}, sent again")
                    code = ctl.create(names)
                    code = 0 if code == TOPIC_ALREADY_EXISTS else code
                if code != 0:
                    raise RuntimeError(f"{kind}: CreateTopics failed with {code} at {made} partitions")
                topic += TOPICS_PER_REQUEST
                made += TOPICS_PER_REQUEST * TOPIC_PARTITIONS
                grown += TOPICS_PER_REQUEST * TOPIC_PARTITIONS
            rate = grown / (time.perf_counter() - t0)
            # heartbeat latency in ``windows`` windows: p50 and p99 are each the median over them
            # (one window's p99 is its 3rd-slowest beat of 300: one stall of a shared 2-core host)
            per_window: list[list[float]] = []
            hb.take()
            for _ in range(windows):
                time.sleep(window)
                per_window.append(hb.take())
            lat = [x for w in per_window for x in w]
            p99s = [round(pct(w, 0.99), 2) for w in per_window]
            small = []
            for k in range(10):
                s0 = time.perf_counter()
                code = ctl.create([f"s{size}-{k}"])
                small.append((time.perf_counter() - s0) * 1000)
                if code != 0:
                    raise RuntimeError(f"{kind}: small CreateTopics failed with {code}")
                made += TOPIC_PARTITIONS
                small_topics += 1
            r = {"create_partitions_per_s": round(rate),
                 "heartbeat_p50_ms": round(statistics.median(pct(w, 0.5) for w in per_window), 2),
                 "heartbeat_p99_ms": round(statistics.median(p99s), 2), "heartbeat_p99_windows_ms": p99s,
                 "heartbeat_p99_all_ms": round(pct(lat, 0.99), 2), "heartbeats": len(lat),
                 "small_create_p50_ms": round(statistics.median(small), 2)}
            row["sizes"][size] = r
            log(f"{kind:9s} {size:>8} partitions: create {r['create_partitions_per_s']} p/s, heartbeat p50 "
                f"{r['heartbeat_p50_ms']} p99 {r['heartbeat_p99_ms']} ms (median of windows {p99s}; {len(lat)} beats, p99 of all {r['heartbeat_p99_all_ms']}), small CreateTopics p50 "
                f"{r['small_create_p50_ms']} ms")
        row["partitions"] = made
        if soak_minutes:
            row["soak"] = soak(q, ctl, hb, soak_minutes, log, kind)
            log(f"{kind:9s} soak: {json.dumps(row['soak'])}")
            return row
        active = q.active()
        mem = q.memory_bytes(active)
        row["memory_bytes"] = mem
        row["memory_empty_bytes"] = base_mem
        row["memory_per_partition"] = round((mem - base_mem) / made)
        log(f"{kind:9s} memory {mem / 2**20:.0f} MiB ({base_mem / 2**20:.0f} MiB before the first topic; "
            f"{row['memory_per_partition']} B per partition above it)")
        if broker_home is not None:
            row["broker_start"], row["broker_start_samples"] = broker_starts(
                q, broker_home, root, heap, topic + small_topics, made, log, broker_rounds)
            log(f"{kind:9s} broker start, median of {broker_rounds}: {json.dumps(row['broker_start'])}")
        # restart load: a standby, killed and started again
        took, loaded = restart(q, next(i for i in q.ports if i != active), log, kind)
        restarts, loads = [took], [loaded]
        # failover, ``failovers`` times: kill -9 the active controller (asked again each time: at 1M
        # partitions a restart may have moved the leadership -- Kafka 4.4's and 3.9's did, and the
        # "failover" was then the kill of a follower), time the first successful CreateTopics; then
        # the killed one starts again (another restart sample) so that the next kill leaves a majority
        failovers = []
        for k in range(n_failovers):
            active = q.active()
            q.kill(active)
            ctl.close()
            t0 = time.perf_counter()
            n = 0
            while True:
                n += 1
                code = ctl.create([f"f{k}-{n}"])
                if code == 0:
                    break
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError(f"{kind}: no CreateTopics succeeded within 300 s of the kill")
                time.sleep(0.02)
            failovers.append(round(time.perf_counter() - t0, 2))
            log(f"{kind:9s} failover {k + 1} (kill -9 active -> CreateTopics ok) {failovers[-1]} s")
            took, loaded = restart(q, active, log, kind)
            restarts.append(took)
            loads.append(loaded)
        row["restart_load_samples_s"] = restarts
        row["restart_load_s"] = round(statistics.median(restarts), 2)
        row["restart_loaded_samples_s"] = loads
        row["restart_loaded_s"] = round(statistics.median(loads), 2)
        row["failover_samples_s"] = failovers
        row["failover_s"] = round(statistics.median(failovers), 2) if failovers else None
        log(f"{kind:9s} restart median {row['restart_load_s']} s of {restarts} (metadata loaded: median "
            f"{row['restart_loaded_s']} s of {loads}); failover median "
            f"{row['failover_s']} s of {failovers}")
        row["heartbeat_errors"] = dict(hb.errors)
        return row
    finally:
        if hb is not None:
            hb.close()
        q.close()


def restart(q: Quorum, node: int, log: Callable[[str], None], kind: str) -> tuple[float, float]:
    """Kill -9 ``node`` (if it runs), start it again; seconds from its start until it answers and the
    leader saw it fetch, after its start, up to the leader's log end at the restart; and until it
    logged that its metadata image caught up with the high watermark (loaded)."""
    q.kill(node)
    loaded_before = q.loaded_lines(node) if q.kraft is not None else 0   # Kafka's: the next process's
    # the leader, busy at 1M partitions, may miss one 10 s DescribeQuorum: ask until it answers
    d = wait_until("the leader's DescribeQuorum after the kill", q.describe, 120)
    target = max(v.log_end_offset for v in d.current_voters if v.replica_id == d.leader_id)
    t0 = time.perf_counter()
    started_ms = int(time.time() * 1000)
    q.start(node)

    def caught_up() -> bool:
        # the new process answers (its log and snapshot are loaded before its listener opens,
        # in Kafka's ControllerServer and in kraftnode), and the leader saw it fetch, after its
        # start, up to the leader's end at the kill
        if not answers(q.ports[node]):
            return False
        d = q.describe()
        return d is not None and any(v.replica_id == node and v.log_end_offset >= target
                                     and v.last_fetch_timestamp > started_ms for v in d.current_voters)
    wait_until("the restarted controller caught up", caught_up, 600)
    took = round(time.perf_counter() - t0, 2)
    # A Kafka controller may open its listener before its MetadataLoader has loaded the snapshot
    # (ControllerServer waits for its publishers to be installed, which is immediate when the
    # loader has not seen the snapshot yet; 3.9 and 4.4 did both at 1M): the image is loaded
    # when the node says so
    wait_until("the restarted controller's metadata loaded", lambda: q.loaded_lines(node) > loaded_before, 600)
    loaded = round(time.perf_counter() - t0, 2)
    log(f"{kind:9s} restart of {node} (kill -9, start, snapshot load, catch up) {took} s; metadata loaded "
        f"{loaded} s")
    return took, loaded


def soak(q: Quorum, ctl: Controller, hb: Heartbeats, minutes: float, log: Callable[[str], None],
         kind: str) -> dict[str, Any]:
    """Heartbeats for ``minutes`` while a topic is created and one deleted every second."""
    end = time.monotonic() + minutes * 60
    per_minute: list[float] = []
    all_lat: list[float] = []
    created: list[str] = []
    k = 0
    minute_end = time.monotonic() + 60
    hb.take()
    fenced_before = set(hb.fenced_seen)
    while time.monotonic() < end:
        t0 = time.monotonic()
        name = f"soak-{k}"
        k += 1
        if ctl.create([name]) == 0:
            created.append(name)
        if len(created) > 5:
            ctl.delete(created.pop(0))
        if time.monotonic() >= minute_end:
            lat = hb.take()
            all_lat += lat
            per_minute.append(round(pct(lat, 0.99), 2))
            log(f"{kind:9s} soak minute {len(per_minute)}: heartbeat p99 {per_minute[-1]} ms ({len(lat)}), "
                f"fenced seen {sorted(hb.fenced_seen - fenced_before)}")
            minute_end += 60
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    all_lat += hb.take()
    out: dict[str, Any] = {"minutes": minutes, "topics_created": k, "heartbeat_p99_per_minute_ms": per_minute,
                           "heartbeat_p99_ms": round(pct(all_lat, 0.99), 2), "heartbeats": len(all_lat),
                           "brokers_fenced": sorted(hb.fenced_seen - fenced_before),
                           "heartbeat_errors": dict(hb.errors)}
    active = q.active()
    text = q.scrape(active)
    if text:
        keep = {}
        for line in text.splitlines():
            if line.startswith(("kafka_controller_controllereventmanager_", "kafka_controller_kafkacontroller_timedout",
                                "kafka_controller_kafkacontroller_eventqueue")) and "_bucket" not in line:
                name, _, value = line.rpartition(" ")
                keep[name] = float(value)
        out["controller_metrics"] = keep
    return out


def byte_compile() -> None:
    """kraftnode as installed: pip byte-compiles a package's modules when it installs it, so a
    controller that starts again reads them; a source checkout run with
    PYTHONDONTWRITEBYTECODE=1 (as this host's sessions are) would compile its ~370 modules
    again at every start -- seconds of a restart on a loaded host that no deployment pays."""
    import compileall
    for pkg in ("kraftnode", "recordbatch"):
        compileall.compile_dir(str(ROOT / pkg), quiet=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--systems", default="kraftnode,kafka44,kafka39")
    ap.add_argument("--brokers", type=int, default=30)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--windows", type=int, default=3,
                    help="heartbeat windows at each size; p50 and p99 are the medians over them")
    ap.add_argument("--soak", type=float, default=0.0, help="minutes of soak at the largest size")
    ap.add_argument("--broker-start", type=int, nargs="?", const=3, default=0, metavar="ROUNDS",
                    help="time a genuine Kafka 4.4 broker's start on the quorum at the largest size, "
                         "ROUNDS times (3; the medians are reported)")
    ap.add_argument("--heap", default="-Xmx1g -Xms256m")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tmp", type=Path, default=None)
    ap.add_argument("--failovers", type=int, default=3,
                    help="failover rounds after the largest size (the median is reported)")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []

    def log(s: str) -> None:
        if not args.json:
            print(s, flush=True)
    broker_home = find_kafka_home("4.4") if args.broker_start else None
    if args.broker_start and broker_home is None:
        print("controller_scale: --broker-start needs genuine Kafka 4.4 (KRAFTNODE_KAFKA_CACHE)", file=sys.stderr)
        return 2
    if "kraftnode" in args.systems.split(","):
        byte_compile()
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for kind in args.systems.split(","):
            home = None
            if kind != "kraftnode":
                home = find_kafka_home({"kafka44": "4.4", "kafka39": "3.9", "kafka40": "4.0"}[kind])
                if home is None:
                    print(f"controller_scale: genuine Kafka for {kind} not found (KRAFTNODE_KAFKA_CACHE)",
                          file=sys.stderr)
                    return 2
            row = measure(kind, home, Path(tmp) / kind, sizes, args.brokers, args.window, args.windows, args.soak,
                          args.heap, log, broker_home, args.failovers, args.broker_start)
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
    ours = next((r for r in rows if r["system"] == "kraftnode"), None)
    if ours is not None and not args.soak:
        for r in rows:
            if r is ours:
                continue
            ratio: dict[str, Any] = {}
            for size in sizes:
                a, b = ours["sizes"][size], r["sizes"][size]
                ratio[size] = {k: round(a[k] / b[k], 2) if b[k] else None
                               for k in ("create_partitions_per_s", "heartbeat_p99_ms", "small_create_p50_ms")}
            for k in ("memory_per_partition", "restart_load_s", "restart_loaded_s", "failover_s"):
                ratio[k] = round(ours[k] / r[k], 2) if r.get(k) else None
            if "broker_start" in ours and "broker_start" in r:
                ratio["broker_start"] = {k: round(v / r["broker_start"][k], 2) if r["broker_start"][k] else None
                                         for k, v in ours["broker_start"].items()}
            print(json.dumps({"ratio_kraftnode_to": r["system"], **{str(k): v for k, v in ratio.items()}}),
                  flush=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
