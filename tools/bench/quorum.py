"""Quorum benchmark: a 3-node kraftnode quorum beside etcd and ZooKeeper, in one run.

Issue 6, "Must show" 4.  One invocation measures, back to back on the same machine:

1. the physical floors (``../shared/bench/physical.py``): append + fdatasync latency
   and the loopback TCP round trip;
2. a 3-node kraftnode quorum on 127.0.0.1 (fsync is always on: group commit), written
   to by confluent-kafka (librdkafka) with acks=all and 100-byte values to
   ``__cluster_metadata-0``:
     * 1 outstanding: produce one record, wait for its delivery report, repeat;
       per-record commit latency p50/p99;
     * 64 outstanding: a window of 64 undelivered records (produce while fewer than 64
       are in flight, else poll for delivery reports); records/s;
   in full mode three times, each on a freshly formatted quorum, reporting medians;
3. the anchors (``../shared/bench/anchors.py``): 3-node etcd 3.4 and ZooKeeper 3.8
   (and PySyncObj, a no-fsync speed reference), same value size and concurrency.

Why one invocation: the machine is small and shared, so absolute figures drift from
minute to minute; only figures taken side by side mean anything, and the targets are
ratios (issue 28): kraftnode records/s at 64 outstanding >= 3x etcd's, kraftnode p50 at 1
outstanding <= etcd's, server CPU per record at 1 outstanding <= 1/3 of the baseline
commit's (``--baseline REF``, default the commit issue 28 started from: the same quorum run
from a ``git archive`` of that commit, rows ``kraftnode@REF``), and p50 at 1 outstanding
<= 2x the floor (fsync p50 + loopback RTT p50).

4. Kafka's own raft (tools/bench/raft_compare.py): a 3-voter quorum of Kafka 3.9's
   TestRaftServer and three kraftnode voters running the same workload through the
   embedding API (tools/bench/raft_workload.py) -- 256-byte records at 20,000 records/s,
   commit latency from the append call to the leader's commit notification -- and kraftnode
   as fast as it commits; checks: kraftnode's maximum >= 1.0x Kafka's records/s, its p99 at
   Kafka's rate <= Kafka's. Skipped with the reason when Kafka is absent.
5. the CPU scale of the CPU target (tools/bench/cpu_floor.py, unless ``--skip-cpu-floor``):
   the servers' CPU per commit of a skeleton of kraftnode's messages (the kernel's part with
   the least Python that drives it) and, in full mode, kraftnode's own CPU if its sans-IO
   layers (codec, raft core, log, metadata) cost nothing; the CPU target's line names both.

The shared bench directory is found at ``<checkout>/../shared/bench`` (or
``<checkout>/../../shared/bench``, for a git worktree); without it the run is kraftnode-only (no floors, no anchors) and says so.  The anchors need Debian's
etcd-server, etcd-client and zookeeper packages and a venv at /tmp/benchvenv; both are
set up on first use as anchors.py's header describes (apt-get needs root; without it
the anchors are skipped with a message).

Every process this script starts is stopped by PID in a ``finally`` block (SIGTERM,
then SIGKILL); every wait and workload loop is bounded by a count and a deadline;
every server listens on 127.0.0.1 only.

With ``--metrics-compare`` (issue 16) each repeat also runs a quorum whose nodes serve
Prometheus metrics (``kraftnode.metrics.listener``) and are scraped during the run; the
two variants alternate in order and the table gains ``kraftnode+metrics`` rows and a
check that records/s with metrics stay within 3% of records/s without.

With ``--variants no-pre-vote,linearizable`` (issue 17) the same repeats also run quorums with
``kraftnode.raft.pre.vote.enable=false`` (pre-vote is on by default) and with
``kraftnode.read.linearizable=true`` (rows ``kraftnode+no-pre-vote``, ``kraftnode+linearizable``). Every PLAINTEXT quorum also measures
consumer read latency on the leader after its write runs: ``--read-ops`` ListOffsets LATEST
round trips and as many Fetch round trips (the last record, MaxWaitMs 0), one at a time on one
connection, p50/p99 (``reads`` in the row at 1 outstanding). All quorums of one repeat run back
to back, in an order that alternates between repeats, so drift on a shared host hits every
row alike; the table ends with each row's ratios to the PLAINTEXT default row.

Usage: python tools/bench/quorum.py [--quick] [--skip-anchors] [--json] [--metrics-compare]
       [--security PLAINTEXT,SSL,SASL_SSL] [--variants no-pre-vote,linearizable]
       [--baseline REF|none] [--skip-raft-workload] [--kafka-home DIR] [--skip-kafka]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

# Run as a file, sys.path[0] is tools/bench; make the checkout's packages importable.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import kraftnode  # noqa: E402
from kraftnode.commands.dev_cluster import free_ports  # noqa: E402
from kraftnode.commands.quorum import fetch_quorum_info  # noqa: E402
from kraftnode.errors import UsageError  # noqa: E402
from tools.bench import raft_compare  # noqa: E402

# next to the checkout; from a worktree under <project>/wt/<name>, two levels up
SHARED_BENCH = next((d for d in (ROOT.parent / "shared" / "bench",
                                 ROOT.parent.parent / "shared" / "bench") if d.is_dir()),
                    ROOT.parent / "shared" / "bench")
BENCH_VENV = Path("/tmp/benchvenv")
VENV_PACKAGES = ["grpcio==1.85.1", "kazoo==2.10.0", "pysyncobj==0.3.17", "crc32c==2.9.post0"]
DEB_PACKAGES = ["etcd-server", "etcd-client", "zookeeper"]
DEB_BINARIES = {"etcd": "/usr/bin/etcd", "zookeeper": "/usr/share/java/zookeeper.jar"}

TOPIC = "__cluster_metadata"
VALUE_SIZE = 100
NODES = 3
CLUSTER_ID = "UXVvcnVtQmVuY2hSdW4wMQ"   # any 16 bytes in base64; fixed so logs compare
TARGET_RATIO_ETCD = 3.0         # issue 28: records/s at 64 outstanding >= 3x etcd's (issue 6: 1x)
TARGET_P50_VS_ETCD = 1.0        # issue 28: p50 at 1 outstanding <= etcd's
TARGET_CPU_VS_BASELINE = 1 / 3  # issue 28: server CPU per record at 1 outstanding <= 1/3 of before
#: the commit issue 28 started from: the default --baseline of a full run
BASELINE_REF = "16382d9"
TARGET_FLOOR_FACTOR = 2.0
TARGET_METRICS_RATIO = 0.97   # issue 16: metrics on costs at most 3% of records/s
TARGET_SECURE_RATIO = 0.8      # issue 15: SSL / SASL_SSL records/s >= 0.8x PLAINTEXT's
#: issue 17: server settings measured beside the default (PLAINTEXT) quorum
VARIANTS: dict[str, str] = {
    # pre-vote (KIP-996) is on by default: the variant is the node with it off (Kafka 3.9's elections)
    "no-pre-vote": "kraftnode.raft.pre.vote.enable=false\n",
    "linearizable": "kraftnode.read.linearizable=true\n",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")

# librdkafka settings shared by both levels.  Nagle off (Kafka's Java client and the
# server set TCP_NODELAY too); idempotence off, as the anchors' clients have none.
PRODUCER_BASE = {
    "acks": "all",
    "enable.idempotence": False,
    "socket.nagle.disable": True,
    "message.timeout.ms": 30000,
    "request.timeout.ms": 10000,
}
# Per-level settings.  1 outstanding: one request in flight, linger 0 (any linger
# would be added to every record's latency).  64 outstanding: still one request in
# flight per connection -- the server answers a connection's requests strictly one
# at a time, as Kafka does, so pipelining only adds small requests that each wait
# for a commit (a sweep here: 5 in flight at linger 0 ran ~3x slower) -- and
# linger 1 ms: with linger 0 the client thread sends the first record it sees after
# a delivery, so requests alternate between 1 record and the rest of the window,
# and the 1-record commit rounds halve the rate (sweep: ~7,000 vs ~14,500 records/s).
# librdkafka's own default linger is 5 ms.
LEVEL_SETTINGS: dict[str, dict[str, Any]] = {
    "one": {"max.in.flight.requests.per.connection": 1, "linger.ms": 0},
    "window": {"max.in.flight.requests.per.connection": 1, "linger.ms": 1},
}


def log(msg: str) -> None:
    print(f"[quorum-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(sorted_vals: list[float], q: float) -> float | None:
    """Nearest-rank percentile, as anchors.py computes it (so the columns compare)."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(math.ceil(q * len(sorted_vals))) - 1))
    return sorted_vals[k]


# --------------------------------------------------------------------------- cpu meter


def _host_ticks() -> tuple[int, int]:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle, idle


class CpuMeter:
    """Cores used by the client and each server over a window, in anchors.py's format,
    so a reader can tell whether the box (not one process) was the limit."""

    def __init__(self, server_pids: list[int]) -> None:
        self.server_pids = server_pids
        self.result: dict[str, Any] = {}

    def __enter__(self) -> CpuMeter:
        self.t0 = time.perf_counter()
        self.c0 = raft_compare.proc_ticks(os.getpid())
        self.s0 = [raft_compare.proc_ticks(p) for p in self.server_pids]
        self.h0 = _host_ticks()
        return self

    def __exit__(self, *exc: object) -> None:
        dt = max(time.perf_counter() - self.t0, 1e-9)

        def cores(a: int | None, b: int | None) -> float | None:
            return None if a is None or b is None else round((b - a) / CLK_TCK / dt, 2)

        client = cores(self.c0, raft_compare.proc_ticks(os.getpid()))
        servers = [cores(a, raft_compare.proc_ticks(p)) for a, p in zip(self.s0, self.server_pids,
                                                            strict=True)]
        h1 = _host_ticks()
        busy, idle = h1[0] - self.h0[0], h1[1] - self.h0[1]
        ncpu = os.cpu_count() or 1
        host = round(ncpu * busy / max(busy + idle, 1), 2)
        ours = sum(x for x in [client, *servers] if x is not None)
        self.result = {"client": client, "servers": servers, "host_busy": host,
                       "other": round(max(0.0, host - ours), 2), "host_cores": ncpu}


def wait_idle(max_wait: float, busy_limit: float = 0.3, window: float = 2.0) -> float:
    """Wait (bounded) until load that is not ours drops below ``busy_limit`` cores; the
    last busy figure measured.  The anchors and the floors get the same flag, so every
    system may start from an equally quiet host."""
    deadline = time.monotonic() + max_wait
    ncpu = os.cpu_count() or 1
    while True:
        b0, i0 = _host_ticks()
        time.sleep(window)
        b1, i1 = _host_ticks()
        busy = round(ncpu * (b1 - b0) / max((b1 - b0) + (i1 - i0), 1), 2)
        if busy < busy_limit or time.monotonic() >= deadline:
            return busy
        log(f"host busy {busy:.2f} cores (not ours); waiting for it to drop")


# --------------------------------------------------------------------------- processes


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    logf: IO[bytes]


@dataclass
class Children:
    """Processes started by this script; stopped by PID only (never by name)."""

    items: list[Child] = field(default_factory=list)

    def spawn(self, name: str, argv: list[str], log_path: Path, **kw: Any) -> subprocess.Popen[bytes]:
        logf = log_path.open("ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf,
                                 stderr=subprocess.STDOUT, start_new_session=True, **kw)
        except BaseException:
            logf.close()
            raise
        self.items.append(Child(name, p, logf))
        return p

    def check_alive(self) -> None:
        for c in self.items:
            if c.proc.poll() is not None:
                raise RuntimeError(f"{c.name} exited early (rc={c.proc.returncode}); "
                                   f"see {c.logf.name}")

    def stop(self, timeout: float = 15.0) -> None:
        for c in self.items:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for c in self.items:
            try:
                c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"SIGKILL {c.name} pid={c.proc.pid}")
                c.proc.kill()
                c.proc.wait(timeout=10)
            c.logf.close()
        self.items = []


SECURITY_MODES = ("PLAINTEXT", "SSL", "SASL_SSL")
_BENCH_PASSWORD = "bench-secret"


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {r.stderr.strip()}")


def secure_setup(root: Path, mode: str) -> tuple[str, dict[str, Any], list[str]]:
    """(server.properties lines, librdkafka settings, format arguments) for ``mode``.

    SSL: TLS on the controller listener (raft traffic and clients), certificates made
    with openssl; SASL_SSL: the same TLS, voters log in to each other with PLAIN and the
    client with SCRAM-SHA-512 (a user written by ``format --add-scram``)."""
    if mode == "PLAINTEXT":
        return "", {}, []
    pki = root / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=quorum-bench-ca", cwd=pki)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
             "-subj", "/CN=node", cwd=pki)
    (pki / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "node.pem", "-days", "2", "-extfile", "san.ext", cwd=pki)
    _openssl("pkcs12", "-export", "-inkey", "node.key", "-in", "node.pem", "-out", "node.p12",
             "-passout", f"pass:{_BENCH_PASSWORD}", cwd=pki)
    props = (f"listener.security.protocol.map=CONTROLLER:{mode}\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={pki / 'node.p12'}\n"
             f"ssl.keystore.password={_BENCH_PASSWORD}\n"
             f"ssl.truststore.type=PEM\nssl.truststore.location={pki / 'ca.pem'}\n")
    client: dict[str, Any] = {"security.protocol": mode, "ssl.ca.location": str(pki / "ca.pem")}
    fmt: list[str] = []
    if mode == "SASL_SSL":
        props += ("sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\nsasl.mechanism.controller.protocol=PLAIN\n"
                  "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security."
                  'plain.PlainLoginModule required username="voter" password="voter-secret" '
                  'user_voter="voter-secret";\n'
                  "listener.name.controller.scram-sha-512.sasl.jaas.config=org.apache.kafka.common."
                  "security.scram.ScramLoginModule required;\n")
        client.update({"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "bench",
                       "sasl.password": "bench-secret"})
        fmt = ["--add-scram", "SCRAM-SHA-512=[name=bench,password=bench-secret]"]
    return props, client, fmt


@dataclass
class Quorum:
    """A freshly formatted kraftnode quorum on loopback, one ``kraftnode start`` each."""

    root: Path
    n: int = NODES
    #: serve Prometheus metrics (kraftnode.metrics.listener) on every node
    metrics: bool = False
    ports: list[int] = field(default_factory=list)
    metrics_ports: list[int] = field(default_factory=list)
    children: Children = field(default_factory=Children)
    security: str = "PLAINTEXT"       # PLAINTEXT, SSL or SASL_SSL (see secure_setup)
    client_conf: dict[str, Any] = field(default_factory=dict)
    variant: str = ""                 # "", or a key of VARIANTS (extra server settings)
    code_root: Path = ROOT            # the checkout whose kraftnode the nodes run (--baseline)

    def start(self) -> None:
        self.ports = free_ports(self.n)
        self.metrics_ports = free_ports(self.n) if self.metrics else []
        extra, self.client_conf, fmt_args = secure_setup(self.root, self.security)
        voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(self.ports))
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(self.code_root),
                                                           os.environ.get("PYTHONPATH")]))}
        for i, port in enumerate(self.ports):
            d = self.root / f"node{i + 1}"
            d.mkdir(parents=True)
            props = d / "server.properties"
            props.write_text(
                f"node.id={i + 1}\nprocess.roles=controller\nkraftnode.application.records.enable=true\n"
                f"listeners=CONTROLLER://127.0.0.1:{port}\n"
                f"controller.listener.names=CONTROLLER\n"
                f"controller.quorum.voters={voters}\nlog.dirs={d / 'metadata'}\n{extra}"
                + VARIANTS.get(self.variant, "")
                + (f"kraftnode.metrics.listener=127.0.0.1:{self.metrics_ports[i]}\n"
                   if self.metrics else ""))
            # cwd too: ``python -m`` puts the working directory first on sys.path, before
            # PYTHONPATH, so a bench started in another checkout would run that one's code
            fmt = subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config",
                                  str(props), "--cluster-id", CLUSTER_ID, *fmt_args],
                                 capture_output=True, text=True, timeout=60, env=env,
                                 cwd=self.code_root)
            if fmt.returncode != 0:
                raise RuntimeError(f"kraftnode format failed: {fmt.stderr.strip()}")
        for i in range(self.n):
            d = self.root / f"node{i + 1}"
            self.children.spawn(f"kraftnode node {i + 1}",
                                [sys.executable, "-m", "kraftnode", "start",
                                 str(d / "server.properties")],
                                d / "node.log", env=env, cwd=self.code_root)

    @property
    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.children.items]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def wait_ready(self, timeout: float = 60.0) -> tuple[int, int]:
        """Wait (bounded) for a leader whose high watermark is known; (leader id, pid)."""
        servers = [("127.0.0.1", p) for p in self.ports]
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            self.children.check_alive()
            if self.security != "PLAINTEXT":
                # the quorum tool speaks PLAINTEXT only: read the leader from the logs, and
                # wait for its activation (committed bootstrap records, SCRAM users included)
                for i in range(self.n):
                    text = (self.root / f"node{i + 1}" / "node.log").read_text(errors="replace")
                    if "controller activation in epoch" in text:
                        return i + 1, self.pids[i]
                time.sleep(0.2)
                continue
            try:
                info = fetch_quorum_info(servers, 2)
                if info.leader_id >= 1 and info.high_watermark >= 1:
                    return info.leader_id, self.pids[info.leader_id - 1]
                last = f"leader {info.leader_id}, high watermark {info.high_watermark}"
            except UsageError as e:
                last = str(e)
            time.sleep(0.2)
        raise TimeoutError(f"kraftnode quorum not ready in {timeout:.0f}s ({last}); "
                           f"logs under {self.root}")

    def stop(self) -> None:
        self.children.stop()


class Scraper:
    """Scrapes every node's /metrics every ``interval`` seconds while the block runs, as
    Prometheus would (so the metrics-on figures include the cost of being scraped)."""

    def __init__(self, ports: list[int], interval: float) -> None:
        self.ports = ports
        self.interval = interval
        self.scrapes = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import urllib.request

        while not self._stop.is_set():
            for port in self.ports:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                                timeout=5) as r:
                        r.read()
                    self.scrapes += 1
                except OSError:
                    self.failures += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> Scraper:
        if self.ports:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


# --------------------------------------------------------------------------- workloads


@dataclass
class Run:
    """One measured run at one concurrency level."""

    concurrency: int
    lat: list[float]
    seconds: float
    errors: int
    cpu: dict[str, Any]
    config: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.lat)
        ok = len(lat)
        p50, p99 = pct(lat, 0.50), pct(lat, 0.99)
        return {"concurrency": self.concurrency, "ops": ok, "seconds": round(self.seconds, 3),
                "ops_per_s": round(ok / self.seconds, 1) if self.seconds > 0 else None,
                "p50_ms": None if p50 is None else round(p50 * 1e3, 3),
                "p99_ms": None if p99 is None else round(p99 * 1e3, 3),
                "mean_ms": round(sum(lat) / ok * 1e3, 3) if ok else None,
                "errors": self.errors, "cpu_cores": self.cpu, "producer": self.config}


def _producer(bootstrap: str, extra: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from confluent_kafka import Producer

    conf = {**PRODUCER_BASE, **extra}
    return Producer({"bootstrap.servers": bootstrap, **conf}), conf


def _drive(producer: Any, conc: int, n: int, record: bool, max_seconds: float,
           lat: list[float], errors: list[int]) -> None:
    """Keep at most ``conc`` records undelivered; ``n`` records; stop at the deadline.

    The latency of a record runs from ``produce()`` to its delivery report being
    served in this thread: what an application waiting on the ack sees."""
    value = b"v" * VALUE_SIZE
    pc = time.perf_counter
    inflight = [0]

    def delivered(start: float, err: Any, _msg: Any) -> None:
        inflight[0] -= 1
        if err is not None:
            errors[0] += 1
        elif record:
            lat.append(pc() - start)

    deadline = time.monotonic() + max_seconds
    for _ in range(n):
        while inflight[0] >= conc and time.monotonic() < deadline:
            producer.poll(1.0)
        if time.monotonic() >= deadline:
            break
        inflight[0] += 1
        producer.produce(TOPIC, value, partition=0, on_delivery=functools.partial(delivered, pc()))
    drain_deadline = time.monotonic() + 30
    while inflight[0] > 0 and time.monotonic() < drain_deadline:
        producer.poll(1.0)
    if inflight[0] > 0:
        errors[0] += inflight[0]
        log(f"{inflight[0]} record(s) still undelivered 30 s after the run; counted as errors")


def measure(bootstrap: str, conc: int, ops: int, warm: int, max_seconds: float,
            server_pids: list[int], client_conf: dict[str, Any] | None = None) -> Run:
    extra = {**LEVEL_SETTINGS["one" if conc == 1 else "window"], **(client_conf or {})}
    producer, conf = _producer(bootstrap, extra)
    try:
        lat: list[float] = []
        errors = [0]
        _drive(producer, conc, warm, False, max_seconds, lat, errors)
        if errors[0]:
            log(f"warm-up at c={conc}: {errors[0]} error(s)")
        errors = [0]
        with CpuMeter(server_pids) as cpu:
            t0 = time.perf_counter()
            _drive(producer, conc, ops, True, max_seconds, lat, errors)
            elapsed = time.perf_counter() - t0
        conf["window"] = conc
        return Run(conc, lat, elapsed, errors[0], cpu.result, conf)
    finally:
        producer.flush(10)


class _Conn:
    """One raw Kafka connection (kraftnode's own framing), for request round trips."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def call(self, api_key: int, version: int, body: Any) -> Any:
        from kraftnode.protocol.framing import encode_request, parse_response
        from kraftnode.protocol.registry import SERVED

        self.cid += 1
        spec = SERVED[api_key]
        self.sock.sendall(encode_request(spec, version, self.cid, "quorum-bench-reader", body))
        size = int.from_bytes(self._exactly(4), "big")
        cid, resp = parse_response(spec, version, self._exactly(size))
        if cid != self.cid:
            raise RuntimeError(f"correlation id {cid}, expected {self.cid}")
        return resp

    def _exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the node")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def measure_reads(port: int, n: int, max_seconds: float) -> dict[str, Any]:
    """Consumer read latency on the leader: ``n`` ListOffsets LATEST round trips (v7,
    isolation READ_UNCOMMITTED), then ``n`` Fetch round trips (v12, the last committed
    record, MaxWaitMs 0), one request at a time on one connection; p50/p99 of each.  With
    kraftnode.read.linearizable=true each one first waits for a read-index round."""
    from kraftnode.protocol import generated as w
    from kraftnode.protocol.registry import FETCH, LIST_OFFSETS

    L, F = w.ListOffsetsRequest, w.FetchRequest
    latest = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=TOPIC, partitions=[L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                       timestamp=-1)])])
    conn = _Conn(port)
    out: dict[str, Any] = {}
    errors = 0
    try:
        deadline = time.monotonic() + max_seconds
        hw = -1
        lat: list[float] = []
        for _ in range(n):
            if time.monotonic() >= deadline:
                break
            t0 = time.perf_counter()
            p = conn.call(LIST_OFFSETS, 7, latest).topics[0].partitions[0]
            lat.append(time.perf_counter() - t0)
            if p.error_code:
                errors += 1
            else:
                hw = int(p.offset)
        out["list_offsets_latest"] = _lat_summary(lat)
        out["leader_offset"] = hw
        fetch = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=TOPIC, partitions=[
                      F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=max(hw - 1, 0),
                                       last_fetched_epoch=-1, log_start_offset=-1,
                                       partition_max_bytes=1 << 20)])])
        lat = []
        for _ in range(n):
            if time.monotonic() >= deadline:
                break
            t0 = time.perf_counter()
            r = conn.call(FETCH, 12, fetch)
            lat.append(time.perf_counter() - t0)
            part = r.responses[0].partitions[0]
            if r.error_code or part.error_code or not part.records:
                errors += 1  # an error, or no record where one was committed
        out["fetch_last_record"] = _lat_summary(lat)
    finally:
        conn.close()
    out["errors"] = errors
    out["client"] = "one raw connection to the leader, one request at a time (kraftnode.protocol framing)"
    return out


def _lat_summary(lat: list[float]) -> dict[str, Any]:
    s = sorted(lat)
    p50, p99 = pct(s, 0.50), pct(s, 0.99)
    return {"ops": len(s), "p50_ms": None if p50 is None else round(p50 * 1e3, 3),
            "p99_ms": None if p99 is None else round(p99 * 1e3, 3)}


def ops_for(args: argparse.Namespace, conc: int) -> tuple[int, int]:
    n = args.ops1 if conc == 1 else args.opsn
    if args.quick:
        n //= 10
    return max(1, n), max(10, min(500, n // 10))


# --------------------------------------------------------------------------- profiling

OWN_PACKAGES = ("kraftnode/", "recordbatch/")


def find_py_spy() -> str | None:
    found = shutil.which("py-spy")
    if found:
        return found
    for venv in (Path(sys.executable).parent / "py-spy", BENCH_VENV / "bin" / "py-spy"):
        if venv.exists():
            return str(venv)
    return None


@contextmanager
def py_spy(pid: int, out: Path | None, rate: int = 200, native: bool = False) -> Iterator[None]:
    """Sample ``pid`` with py-spy while the block runs (collapsed stacks into ``out``): where
    the interpreter holds the GIL, or with ``native`` every active sample with its C frames
    (system calls included; py-spy then pauses the process for each sample).

    py-spy stops on SIGINT and then writes its file; it is our child, stopped by PID."""
    exe = find_py_spy() if out is not None else None
    if out is None or exe is None:
        yield
        return
    how = ["--native"] if native else ["--gil", "--nonblocking"]
    p = subprocess.Popen([exe, "record", "--pid", str(pid), "--format", "raw", "--rate",
                          str(rate), "--full-filenames", *how, "-o", str(out)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(0.5)   # let it attach before the measured run starts
        yield
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def _frame_name(frame: str) -> tuple[str, str]:
    """'func (/abs/path/kraftnode/x.py:12)' -> ('kraftnode/x.py:func', path)."""
    func, _, loc = frame.rpartition(" (")
    path = loc.rstrip(")").rsplit(":", 1)[0]
    rel = path
    for pkg in OWN_PACKAGES:
        i = path.rfind("/" + pkg)
        if i >= 0:
            rel = path[i + 1:]
            break
    else:
        for marker in ("/site-packages/", "/lib/python3"):
            i = path.rfind(marker)
            if i >= 0:
                rel = path[i + len(marker):]
                break
    return f"{rel}:{func}", rel


def hotspots(raw: Path, top: int = 15) -> dict[str, Any]:
    """Self and inclusive shares of the sampled (active) time, per function.

    Self time says where the CPU burns; inclusive time of our own functions says which
    of our code paths (handler, raft core, log, codec) the burn belongs to."""
    self_t: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_frame_name(f) for f in stack.split(";") if " (" in f]
        if not frames:
            continue
        leaf = frames[-1][0]
        self_t[leaf] = self_t.get(leaf, 0) + n
        for name in {name for name, rel in frames if rel.startswith(OWN_PACKAGES)}:
            incl[name] = incl.get(name, 0) + n

    def share(d: dict[str, int]) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1))
                for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]]

    return {"samples": total, "self_pct": share(self_t), "inclusive_own_pct": share(incl)}


# --------------------------------------------------------------------------- kraftnode runs


#: one kind of kraftnode quorum: (listener security protocol, server variant, metrics on)
Unit = tuple[str, str, bool]


def run_kraftnode(args: argparse.Namespace, levels: list[int],
                  security: str | list[str] = "PLAINTEXT",
                  variants: list[str] | None = None) -> list[dict[str, Any]]:
    """``args.repeats`` rounds; in each, one fresh quorum per kind -- every ``security``
    protocol (rows kraftnode, kraftnode-SSL, ...) and every server ``variants`` entry
    (PLAINTEXT, rows kraftnode+no-pre-vote, ...) -- back to back, the order reversed every
    other round; every level on each; medians over the repeats.

    With ``--metrics-compare`` every kind also runs a twin quorum with
    ``kraftnode.metrics.listener`` set (scraped every ``--scrape-interval`` s)."""
    securities = [security] if isinstance(security, str) else list(security)
    metrics_variants = [False, True] if args.metrics_compare else [False]
    kinds: list[tuple[str, str]] = [(sec, "") for sec in securities] + \
        [("PLAINTEXT", v) for v in (variants or [])]
    if getattr(args, "baseline_dir", None) is not None:
        kinds.append(("PLAINTEXT", "@" + args.baseline))
    units: list[Unit] = [(sec, var, m) for sec, var in kinds for m in metrics_variants]
    runs: dict[tuple[Unit, int], list[dict[str, Any]]] = {(u, c): [] for u in units for c in levels}
    reads: dict[Unit, list[dict[str, Any]]] = {u: [] for u in units}
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        if find_py_spy() is None:
            log("--profile: py-spy not found (pip install py-spy); not profiling")
    for rep in range(args.repeats):
        order = units if rep % 2 == 0 else units[::-1]
        for unit in order:
            _one_quorum(args, levels, rep, unit, runs, reads)
    out = []
    for unit in units:
        for conc in levels:
            row = _kraftnode_row(runs[(unit, conc)], conc, unit, args)
            if conc == min(levels) and reads[unit]:
                row["reads"] = _reads_row(reads[unit])
            out.append(row)
    return out


def _system(security: str, metrics: bool, variant: str = "") -> str:
    """Row name: kraftnode, kraftnode-SSL, kraftnode-SASL_SSL, kraftnode+no-pre-vote,
    kraftnode+linearizable, each +metrics when scraped."""
    if variant.startswith("@"):      # the --baseline commit's code
        return f"kraftnode{variant}" + ("+metrics" if metrics else "")
    return ("kraftnode" if security == "PLAINTEXT" else f"kraftnode-{security}") + \
        (f"+{variant}" if variant else "") + ("+metrics" if metrics else "")


def _reads_row(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the repeats of each read kind's p50/p99."""
    out: dict[str, Any] = {"repeats": len(rs), "errors": sum(r["errors"] for r in rs),
                           "leader_offset": [r.get("leader_offset") for r in rs],
                           "client": rs[0]["client"], "runs": rs}
    for kind in ("list_offsets_latest", "fetch_last_record"):
        vals = [r[kind] for r in rs if r.get(kind)]
        out[kind] = {k: (round(statistics.median(got), 3) if (got := [v[k] for v in vals if v[k] is not None])
                         else None) for k in ("p50_ms", "p99_ms")}
        out[kind]["ops"] = sum(v["ops"] for v in vals)
    return out


def _one_quorum(args: argparse.Namespace, levels: list[int], rep: int, unit: Unit,
                runs: dict[tuple[Unit, int], list[dict[str, Any]]],
                reads: dict[Unit, list[dict[str, Any]]]) -> None:
    security, variant, metrics = unit
    tag = " (metrics on)" if metrics else (" (metrics off)" if args.metrics_compare else "")
    system = _system(security, False, variant)
    tmp = Path(tempfile.mkdtemp(prefix="quorum-bench-kraftnode-", dir=args.tmp))
    q = Quorum(tmp, metrics=metrics, security=security, variant=variant,
               code_root=args.baseline_dir if variant.startswith("@") else ROOT)
    try:
        if args.wait_idle > 0:
            log(f"host busy before kraftnode repeat {rep + 1}: "
                f"{wait_idle(args.wait_idle):.2f} cores")
        q.start()
        leader, leader_pid = q.wait_ready()
        log(f"{system} repeat {rep + 1}/{args.repeats}{tag}: leader node {leader} "
            f"(pid {leader_pid}) on {q.bootstrap}")
        for conc in levels:
            ops, warm = ops_for(args, conc)
            prof = (args.profile / f"leader-c{conc}-r{rep + 1}{'-metrics' if metrics else ''}.txt"
                    if args.profile is not None and find_py_spy() else None)
            with py_spy(leader_pid, prof), Scraper(q.metrics_ports, args.scrape_interval) as sc:
                s = measure(q.bootstrap, conc, ops, warm, args.max_seconds, q.pids,
                            q.client_conf).summary()
            q.children.check_alive()
            if metrics:
                s["scrapes"] = sc.scrapes
                s["scrape_failures"] = sc.failures
            if prof is not None and prof.exists():
                s["profile"] = {"file": str(prof), **hotspots(prof)}
                s["profiled"] = "py-spy sampled the leader during this run (it costs CPU)"
            s["repeat"] = rep + 1
            s["leader_node"] = leader
            runs[(unit, conc)].append(s)
            log(f"{system}{tag} c={conc}: {s['ops']} ops, {s['ops_per_s']} ops/s, "
                f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, errors {s['errors']}")
        n_reads = args.read_ops // 10 if args.quick else args.read_ops
        if security == "PLAINTEXT" and not metrics and n_reads > 0:
            rd = measure_reads(q.ports[leader - 1], n_reads, args.max_seconds)
            q.children.check_alive()
            rd["repeat"] = rep + 1
            reads[unit].append(rd)
            log(f"{system} reads: ListOffsets LATEST p50 {rd['list_offsets_latest']['p50_ms']} ms "
                f"p99 {rd['list_offsets_latest']['p99_ms']} ms; Fetch p50 "
                f"{rd['fetch_last_record']['p50_ms']} ms p99 {rd['fetch_last_record']['p99_ms']} ms; "
                f"errors {rd['errors']}")
    finally:
        q.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _kraftnode_row(rs: list[dict[str, Any]], conc: int, unit: Unit,
                   args: argparse.Namespace) -> dict[str, Any]:
    security, variant, metrics = unit

    def med(key: str) -> float | None:
        vals = [r[key] for r in rs if r[key] is not None]
        return round(statistics.median(vals), 3) if vals else None

    row = {
        "system": _system(security, metrics, variant), "security": security,
        "version": kraftnode.__version__, "nodes": NODES,
        "concurrency": conc, "ops": sum(r["ops"] for r in rs),
        "ops_per_s": med("ops_per_s"), "p50_ms": med("p50_ms"), "p99_ms": med("p99_ms"),
        "errors": sum(r["errors"] for r in rs), "repeats": len(rs),
        "cpu_cores": {"other_median": _median_or_none(
            [r["cpu_cores"].get("other") for r in rs]),
            "servers_median": _median_or_none(
            [sum(x or 0 for x in r["cpu_cores"]["servers"]) for r in rs])},
        "aggregate": f"median of {len(rs)} fresh quorum(s)",
        "durability": "fsync (group commit) on every voter; acks=all answers after commit",
        "client": "confluent-kafka {} (librdkafka {})".format(*_ck_versions()),
        "producer": rs[0]["producer"] if rs else None,
        "value_bytes": VALUE_SIZE, "runs": rs,
    }
    per_record = [x for r in rs if (x := _cpu_per_record(r)) is not None]
    row["cpu_us_per_record"] = round(statistics.median(per_record) * 1e6, 1) if per_record else None
    if variant.startswith("@"):
        row["version"] = f"{args.baseline} (baseline)"
        row["baseline"] = f"the code of commit {args.baseline} (git archive), same settings"
    elif variant:
        row["variant"] = VARIANTS[variant].strip()
    if metrics:
        row["metrics"] = (f"kraftnode.metrics.listener on every node, each scraped every "
                          f"{args.scrape_interval:g} s during the run")
    return row


def _median_or_none(vals: list[float | None]) -> float | None:
    got = [v for v in vals if v is not None]
    return round(statistics.median(got), 2) if got else None


def _ck_versions() -> tuple[str, str]:
    import confluent_kafka

    return confluent_kafka.version()[0], confluent_kafka.libversion()[0]


# --------------------------------------------------------------------------- shared scripts


def _pump(stream: IO[str], sink: Callable[[str], None]) -> threading.Thread:
    def run() -> None:
        for line in stream:
            sink(line)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _to_stderr(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()


def run_script(argv: list[str], timeout: float, what: str) -> list[dict[str, Any]]:
    """Run one of the shared scripts; its JSON lines from stdout, its stderr passed on.

    The child gets its own session and is stopped by PID if this script is interrupted
    or the deadline passes (the anchors stop their own servers on SIGTERM)."""
    out: list[str] = []
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stdout is not None and p.stderr is not None
        pumps = [_pump(p.stdout, out.append), _pump(p.stderr, _to_stderr)]
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"{what} did not finish within {timeout:.0f}s; stopping it")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
    for t in pumps:
        t.join(timeout=5)
    if p.returncode != 0:
        log(f"{what} exited with status {p.returncode}")
    recs = []
    for line in out:
        line = line.strip()
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                log(f"{what}: unparsable line {line[:120]!r}")
    return recs


def bench_python() -> str | None:
    """The anchors' venv python, created as anchors.py's header says if missing."""
    py = BENCH_VENV / "bin" / "python"
    if py.exists():
        return str(py)
    base = shutil.which("python3.11") or (sys.executable if sys.version_info[:2] == (3, 11)
                                          else None)
    if base is None:
        log("python3.11 not found: cannot create the anchors' venv")
        return None
    log(f"creating {BENCH_VENV} and installing {' '.join(VENV_PACKAGES)}")
    try:
        subprocess.run([base, "-m", "venv", str(BENCH_VENV)], check=True, timeout=300)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *VENV_PACKAGES],
                       check=True, timeout=900)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        log(f"could not set up {BENCH_VENV}: {e}")
        return None
    return str(py)


def ensure_debian_packages(systems: list[str]) -> list[str]:
    """The systems whose Debian packages are (now) installed."""
    missing = [s for s in systems if s in DEB_BINARIES and not Path(DEB_BINARIES[s]).exists()]
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            log(f"{', '.join(missing)} not installed and apt-get is not usable here "
                f"(need root): install {' '.join(DEB_PACKAGES)} to get those anchors")
        else:
            log(f"installing {' '.join(DEB_PACKAGES)} with apt-get (once)")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            try:
                subprocess.run(["apt-get", "update"], check=True, timeout=600, env=env,
                               stdout=subprocess.DEVNULL)
                subprocess.run(["apt-get", "install", "-y", "--no-install-recommends",
                                *DEB_PACKAGES], check=True, timeout=1200, env=env,
                               stdout=subprocess.DEVNULL)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
                log(f"apt-get failed: {e}")
    return [s for s in systems if s not in DEB_BINARIES or Path(DEB_BINARIES[s]).exists()]


def run_physical(args: argparse.Namespace, shared: Path) -> dict[str, dict[str, Any]]:
    script = shared / "physical.py"
    if not script.exists():
        log(f"{script} not found: no physical floors")
        return {}
    py = str(BENCH_VENV / "bin" / "python") if (BENCH_VENV / "bin" / "python").exists() \
        else sys.executable
    argv = [py, str(script), "--dir", args.tmp or tempfile.gettempdir()]
    if args.quick:
        argv.append("--quick")
    if args.wait_idle > 0:
        argv += ["--wait-idle", str(args.wait_idle)]
    log("physical floors: " + " ".join(argv))
    recs = run_script(argv, 600, "physical.py")
    return {r["test"]: r for r in recs if "test" in r}


def run_cpu_floor(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """tools/bench/cpu_floor.py: the skeleton's CPU per commit and, in full mode, kraftnode's
    with its sans-IO layers free (``cpu_skeleton``, ``cpu_kraftnode``, ``cpu_bound``)."""
    argv = [sys.executable, str(Path(__file__).with_name("cpu_floor.py")), "--json",
            "--ops", "1000" if args.quick else "3000", "--warm", "100" if args.quick else "500"]
    if not args.quick:
        argv.append("--kraftnode")
    if args.tmp:
        argv += ["--dir", args.tmp]
    log("CPU floor: " + " ".join(argv))
    return {f"cpu_{r['system']}": {"test": f"cpu_{r['system']}", **r}
            for r in run_script(argv, 900, "cpu_floor.py") if "system" in r}


def run_anchors(args: argparse.Namespace, shared: Path, levels: list[int]) -> list[dict[str, Any]]:
    script = shared / "anchors.py"
    if not script.exists():
        log(f"{script} not found: no anchors")
        return []
    systems = ensure_debian_packages([s for s in args.anchors.split(",") if s])
    py = bench_python()
    if py is None or not systems:
        return []
    argv = [py, str(script), "--systems", ",".join(systems),
            "--concurrency", ",".join(map(str, levels)),
            "--ops1", str(args.ops1), "--opsn", str(args.opsn),
            "--max-seconds", str(args.max_seconds)]
    if args.quick:
        argv.append("--quick")
    if args.tmp:
        argv += ["--tmp", args.tmp]
    if args.wait_idle > 0:
        argv += ["--wait-idle", str(args.wait_idle)]
    log("anchors: " + " ".join(argv))
    return run_script(argv, 1800, "anchors.py")


# --------------------------------------------------------------------------- report


def _row(rows: list[dict[str, Any]], system: str, conc: int) -> dict[str, Any] | None:
    for r in rows:
        if r.get("system") == system and r.get("concurrency") == conc:
            return r
    return None


def _ratio_check(check: str, target: str, ours: dict[str, Any] | None, theirs: dict[str, Any] | None,
                 key: str, ok: Callable[[float], bool], detail: Callable[[float, float], str],
                 missing: str) -> dict[str, Any]:
    """One target of the form ``ours[key] / theirs[key]`` against a limit."""
    c: dict[str, Any] = {"check": check, "target": target}
    a, b = (ours or {}).get(key), (theirs or {}).get(key)
    if a and b:
        c["ratio"] = round(a / b, 3)
        c["detail"] = detail(a, b)
        c["ok"] = ok(c["ratio"])
    else:
        c["ok"], c["detail"] = None, missing
    return c


def checks(rows: list[dict[str, Any]], floors: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    k64, e64 = _row(rows, "kraftnode", 64), _row(rows, "etcd", 64)
    k1, e1 = _row(rows, "kraftnode", 1), _row(rows, "etcd", 1)
    base1 = next((r for r in rows if str(r.get("system", "")).startswith("kraftnode@")
                  and r.get("concurrency") == 1), None)
    no_etcd = "n/a (no etcd figure in this run)"
    out = [
        _ratio_check("records/s at 64 outstanding vs etcd", f">= {TARGET_RATIO_ETCD:.1f}x etcd",
                     k64, e64, "ops_per_s", lambda r: r >= TARGET_RATIO_ETCD,
                     lambda a, b: f"{a:,.0f} vs {b:,.0f} records/s", no_etcd),
        _ratio_check("p50 at 1 outstanding vs etcd", f"<= {TARGET_P50_VS_ETCD:.1f}x etcd",
                     k1, e1, "p50_ms", lambda r: r <= TARGET_P50_VS_ETCD,
                     lambda a, b: f"{a:.3f} vs {b:.3f} ms", no_etcd),
        _ratio_check("server CPU per record at 1 outstanding vs the baseline commit",
                     f"<= {TARGET_CPU_VS_BASELINE:.2f}x baseline", k1, base1, "cpu_us_per_record",
                     lambda r: r <= TARGET_CPU_VS_BASELINE,
                     lambda a, b: (f"{a:,.0f} vs {b:,.0f} us ({(base1 or {}).get('system')}; the 3 "
                                   "servers' CPU / records, median of the repeats)"),
                     "n/a (no baseline row in this run: --baseline REF)"),
    ]
    _cpu_scale(out[-1], floors, base1)
    fs, rtt = floors.get("fsync_4k_append"), floors.get("tcp_rtt_100b")
    c: dict[str, Any] = {"check": "p50 at 1 outstanding vs floor (fsync p50 + loopback RTT p50)",
                         "target": f"<= {TARGET_FLOOR_FACTOR:.0f}x floor"}
    if k1 and k1.get("p50_ms") and fs and rtt:
        floor = fs["p50_ms"] + rtt["p50_ms"]
        c["floor_ms"] = round(floor, 4)
        c["ratio"] = round(k1["p50_ms"] / floor, 3)
        c["detail"] = (f"{k1['p50_ms']:.3f} ms vs floor {floor:.3f} ms "
                       f"({fs['p50_ms']:.3f} fsync + {rtt['p50_ms']:.3f} RTT)")
        c["ok"] = c["ratio"] <= TARGET_FLOOR_FACTOR
    else:
        c["ok"], c["detail"] = None, "n/a (no physical floors in this run)"
    out.append(c)
    for conc in sorted({r["concurrency"] for r in rows if r.get("system") == "kraftnode+metrics"}):
        on, off = _row(rows, "kraftnode+metrics", conc), _row(rows, "kraftnode", conc)
        c = {"check": f"records/s at {conc} outstanding, metrics on vs off",
             "target": f">= {TARGET_METRICS_RATIO:.2f}x (within {1 - TARGET_METRICS_RATIO:.0%})"}
        if on and off and on.get("ops_per_s") and off.get("ops_per_s"):
            c["ratio"] = round(on["ops_per_s"] / off["ops_per_s"], 3)
            # each repeat ran its two quorums back to back: the ratio within each pair
            # cancels the drift of a shared host between repeats
            pairs = {r["repeat"]: r["ops_per_s"] for r in off.get("runs", []) if r.get("ops_per_s")}
            per_pair = sorted(r["ops_per_s"] / pairs[r["repeat"]] for r in on.get("runs", [])
                              if r.get("ops_per_s") and r["repeat"] in pairs)
            c["pair_ratio_median"] = round(statistics.median(per_pair), 3) if per_pair else None
            # server CPU per record (the three nodes together), on vs off: what the metrics
            # cost in work, which a busy shared host disturbs far less than records/s
            cpu = {r["repeat"]: _cpu_per_record(r) for r in off.get("runs", [])}
            cpu_pairs = sorted(x / cpu[r["repeat"]] for r in on.get("runs", [])
                               if (x := _cpu_per_record(r)) and cpu.get(r["repeat"]))
            c["cpu_per_record_ratio_median"] = (round(statistics.median(cpu_pairs), 3)
                                                if cpu_pairs else None)
            c["detail"] = (f"{on['ops_per_s']:,.0f} vs {off['ops_per_s']:,.0f} records/s "
                           f"(medians of {on.get('repeats')} interleaved pairs; median ratio "
                           f"within a pair {c['pair_ratio_median']}; server CPU per record "
                           f"on/off {c['cpu_per_record_ratio_median']})")
            c["ok"] = c["ratio"] >= TARGET_METRICS_RATIO
        else:
            c["ok"], c["detail"] = None, "n/a (a side has no figure)"
        out.append(c)
    for mode in ("SSL", "SASL_SSL"):
        sec = _row(rows, f"kraftnode-{mode}", 64)
        if sec is None:
            continue
        out.append(_ratio_check(
            f"records/s at 64 outstanding, {mode} vs PLAINTEXT", f">= {TARGET_SECURE_RATIO:.1f}x PLAINTEXT",
            sec, k64, "ops_per_s", lambda r: r >= TARGET_SECURE_RATIO,
            lambda a, b: f"{a:,.0f} vs {b:,.0f} records/s", "n/a (no PLAINTEXT figure in this run)"))
    return out


def _cpu_scale(check: dict[str, Any], floors: dict[str, dict[str, Any]],
               base1: dict[str, Any] | None) -> None:
    """Name, in the CPU target's line, what the same run measured for the skeleton of a
    commit and for kraftnode with its sans-IO layers free (tools/bench/cpu_floor.py)."""
    base = (base1 or {}).get("cpu_us_per_record")
    for key, what in (("cpu_skeleton", "the skeleton of a commit"),
                      ("cpu_bound", "kraftnode with its sans-IO layers free")):
        us = floors.get(key, {}).get("cpu_us_per_commit")
        if us is None:
            continue
        check[key + "_us"] = us
        check["detail"] += f"; {what}: {us:,.0f} us"
        if base:
            check[key + "_ratio"] = round(us / base, 3)
            check["detail"] += f" ({us / base:.2f}x baseline)"


def comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every kraftnode row family against the PLAINTEXT default (``kraftnode``) of the same
    run: records/s at the highest level, p50 at 1 outstanding, and the read latencies."""
    base_n = max((r["concurrency"] for r in rows if r.get("system") == "kraftnode"), default=None)
    b_n = _row(rows, "kraftnode", base_n) if base_n else None
    b_1 = _row(rows, "kraftnode", 1)

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    out = []
    for system in dict.fromkeys(r["system"] for r in rows if str(r.get("system", "")).startswith("kraftnode")):
        c: dict[str, Any] = {"system": system}
        r_n = _row(rows, system, base_n) if base_n else None
        if r_n and b_n:
            c.update(outstanding=base_n, ops_per_s=r_n.get("ops_per_s"),
                     ops_per_s_ratio=ratio(r_n.get("ops_per_s"), b_n.get("ops_per_s")))
        r_1 = _row(rows, system, 1)
        if r_1 and b_1:
            c.update(p50_1_ms=r_1.get("p50_ms"), p50_1_ratio=ratio(r_1.get("p50_ms"), b_1.get("p50_ms")))
        rd, brd = (r_1 or {}).get("reads"), (b_1 or {}).get("reads")
        if rd and brd:
            for kind in ("list_offsets_latest", "fetch_last_record"):
                for q in ("p50_ms", "p99_ms"):
                    c[f"{kind}_{q}"] = rd[kind][q]
                    c[f"{kind}_{q.split('_')[0]}_ratio"] = ratio(rd[kind][q], brd[kind][q])
        out.append(c)
    return out


def _cpu_per_record(run: dict[str, Any]) -> float | None:
    """Server CPU seconds per record in one run (the three servers together)."""
    servers = [x for x in (run.get("cpu_cores") or {}).get("servers") or [] if x is not None]
    rate = run.get("ops_per_s")
    return sum(servers) / rate if servers and rate else None


def _servers_cpu(r: dict[str, Any]) -> float | None:
    cpu = r.get("cpu_cores") or {}
    if "servers_median" in cpu:
        return cast(float | None, cpu["servers_median"])
    servers = [x for x in cpu.get("servers") or [] if x is not None]
    if r.get("system") == "pysyncobj" and cpu.get("client") is not None:
        servers.append(cpu["client"])      # its leader runs the driver in-process
    return round(sum(servers), 2) if servers else None


def _cpu_us(r: dict[str, Any]) -> float | None:
    """Server CPU microseconds per record: a kraftnode row's median over its repeats, an
    anchor's from its one run."""
    if r.get("cpu_us_per_record") is not None:
        return cast(float, r["cpu_us_per_record"])
    x = _cpu_per_record(r)
    return None if x is None else x * 1e6


def _other_cpu(r: dict[str, Any]) -> float | None:
    cpu = r.get("cpu_cores") or {}
    return cast(float | None, cpu.get("other_median", cpu.get("other")))


SHORT_DURABILITY = {
    "kraftnode": "fdatasync per group commit, every voter",
    "kraftnode+metrics": "as kraftnode; /metrics served and scraped",
    "etcd": "fdatasync per raft batch, every member",
    "zookeeper": "forceSync=yes (fsync per group commit)",
    "pysyncobj": "no fsync (speed reference only)",
}


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict[str, Any]], floors: dict[str, dict[str, Any]],
                cks: list[dict[str, Any]], notes: list[str],
                cmps: list[dict[str, Any]] | None = None,
                raft_rows: list[dict[str, Any]] | None = None) -> None:
    print(f"kraftnode quorum benchmark -- {NODES} nodes on 127.0.0.1, {VALUE_SIZE}-byte values, "
          f"python {platform.python_version()}, {os.cpu_count()} cores")
    physical = [n for n in ("fsync_4k_append", "fsync_4k_overwrite", "tcp_rtt_100b",
                            "tcp_rtt_100b_same_cpu", "tcp_rtt_100b_cross_cpu") if n in floors]
    if physical:
        print("\nfloors (physical.py):")
        for name in physical:
            f = floors[name]
            print(f"  {name:<24} p50 {f['p50_ms']:.3f} ms  p99 {f['p99_ms']:.3f} ms")
    cpu = [floors[n] for n in ("cpu_skeleton", "cpu_kraftnode", "cpu_bound") if n in floors]
    if cpu:
        print("\nCPU per commit at 1 outstanding, the 3 servers (cpu_floor.py):")
        for f in cpu:
            label = {"skeleton": "skeleton", "kraftnode": "kraftnode",
                     "bound": "kraftnode, sans-IO free"}[f["system"]]
            if "cpu_us_per_commit" not in f:
                print(f"  {label:<24} {f.get('error', 'no figure')}")
                continue
            split = (f"  (user {f['user_us_per_commit']:,.0f}, system {f['system_us_per_commit']:,.0f})"
                     if "user_us_per_commit" in f else "")
            print(f"  {label:<24} {f['cpu_us_per_commit']:>7,.0f} us{split}")
    print()
    hdr = f"{'system':<22} {'version':<16} {'outstanding':>11} {'ops/s':>9} {'p50 ms':>8} " \
          f"{'p99 ms':>8} {'srv cpu':>7} {'noise':>6} {'us/rec':>7}  durability"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if "error" in r:
            print(f"{r.get('system', '?'):<22} FAILED: {r['error']}")
            continue
        ver = str(r.get("version", "")).split(" (")[0][:16]
        dur = SHORT_DURABILITY.get(r["system"], SHORT_DURABILITY.get(
            r["system"].split("-")[0].split("+")[0].split("@")[0], str(r.get("durability", ""))[:40]))
        if r.get("variant"):
            dur = f"as kraftnode; {r['variant']}"
        print(f"{r['system']:<22} {ver:<16} {r['concurrency']:>11} "
              f"{_fmt(r.get('ops_per_s'), ',.0f'):>9} {_fmt(r.get('p50_ms'), '.2f'):>8} "
              f"{_fmt(r.get('p99_ms'), '.2f'):>8} {_fmt(_servers_cpu(r), '.2f'):>7} "
              f"{_fmt(_other_cpu(r), '.2f'):>6} {_fmt(_cpu_us(r), ',.0f'):>7}  {dur}")
    print("(srv cpu: cores used by the 3 servers together; noise: cores busy with load that is "
          "not ours during the run -- figures taken under different noise do not compare; "
          "us/rec: the servers' CPU microseconds per record)")
    reads = [r for r in rows if r.get("reads")]
    if reads:
        print("\nconsumer reads on the leader, one at a time (medians of the repeats' p50/p99):")
        print(f"  {'system':<22} {'ListOffsets LATEST p50/p99 ms':>30} {'Fetch p50/p99 ms':>20} {'errors':>6}")
        for r in reads:
            lo, fe = r["reads"]["list_offsets_latest"], r["reads"]["fetch_last_record"]
            print(f"  {r['system']:<22} {_fmt(lo['p50_ms'], '.3f'):>14} / {_fmt(lo['p99_ms'], '.3f'):<13} "
                  f"{_fmt(fe['p50_ms'], '.3f'):>9} / {_fmt(fe['p99_ms'], '.3f'):<8} {r['reads']['errors']:>6}")
    if cmps and len(cmps) > 1:
        print("\nagainst the PLAINTEXT default row (kraftnode) of this run:")
        print(f"  {'system':<22} {'records/s':>10} {'ratio':>6} {'p50@1 ms':>9} {'ratio':>6} "
              f"{'LATEST p50':>10} {'ratio':>6} {'Fetch p50':>9} {'ratio':>6}")
        for c in cmps:
            print(f"  {c['system']:<22} {_fmt(c.get('ops_per_s'), ',.0f'):>10} "
                  f"{_fmt(c.get('ops_per_s_ratio'), '.2f'):>6} {_fmt(c.get('p50_1_ms'), '.2f'):>9} "
                  f"{_fmt(c.get('p50_1_ratio'), '.2f'):>6} "
                  f"{_fmt(c.get('list_offsets_latest_p50_ms'), '.3f'):>10} "
                  f"{_fmt(c.get('list_offsets_latest_p50_ratio'), '.2f'):>6} "
                  f"{_fmt(c.get('fetch_last_record_p50_ms'), '.3f'):>9} "
                  f"{_fmt(c.get('fetch_last_record_p50_ratio'), '.2f'):>6}")
    if raft_rows:
        print("\nKafka's raft (TestRaftServer) and kraftnode, one leader appending 256-byte records "
              "(commit latency: append call to the leader's commit notification):")
        print(f"  {'system':<36} {'target/s':>9} {'records/s':>10} {'p50 ms':>7} {'p75 ms':>7} "
              f"{'p99 ms':>7} {'p999 ms':>8} {'srv cpu':>7} {'us/rec':>7}")
        for r in raft_rows:
            if r.get("skipped") or r.get("error"):
                print(f"  {r['system']:<36} {'SKIPPED' if r.get('skipped') else 'FAILED'}: "
                      f"{r.get('skipped') or r.get('error')}")
                continue
            srv = [x for x in (r.get("cpu_cores") or {}).get("servers") or [] if x is not None]
            print(f"  {r['system']:<36} {_fmt(r.get('target_records_per_s'), ',.0f'):>9} "
                  f"{_fmt(r.get('records_per_s'), ',.0f'):>10} {_fmt(r.get('p50_ms'), '.2f'):>7} "
                  f"{_fmt(r.get('p75_ms'), '.2f'):>7} {_fmt(r.get('p99_ms'), '.2f'):>7} "
                  f"{_fmt(r.get('p999_ms'), '.2f'):>8} {_fmt(sum(srv) if srv else None, '.2f'):>7} "
                  f"{_fmt(r.get('cpu_us_per_record'), ',.1f'):>7}")
        print("  (Kafka 3.9's TestRaftServer always appends 20,000 records/s of 256 B and prints p75/"
              "p99/p999 only, in whole ms over its last 30-60 s; kraftnode (max): as fast as it "
              "commits, 8 batches of 500 records in flight)")
    print("\ntargets:")
    for c in cks:
        verdict = {True: "MET", False: "MISSED", None: "n/a"}[c["ok"]]
        ratio = f"{c['ratio']:.2f}x" if "ratio" in c else ""
        print(f"  {c['check']}: {ratio} (target {c['target']}) {verdict} -- {c['detail']}")
    for r in rows:
        for run in r.get("runs", []) if r.get("system") in ("kraftnode", "kraftnode+metrics") \
                else []:
            prof = run.get("profile")
            if not prof:
                continue
            print(f"\nleader hotspots, c={run['concurrency']} repeat {run['repeat']} "
                  f"({prof['samples']} active samples; {prof['file']}):")
            print("  self time:")
            for name, share in prof["self_pct"][:10]:
                print(f"    {share:5.1f}%  {name}")
            print("  inclusive, kraftnode/recordbatch functions:")
            for name, share in prof["inclusive_own_pct"][:12]:
                print(f"    {share:5.1f}%  {name}")
    for n in notes:
        print(f"note: {n}")


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="10x fewer ops everywhere and one kraftnode repeat")
    ap.add_argument("--skip-anchors", action="store_true", help="no etcd/ZooKeeper run")
    ap.add_argument("--skip-physical", action="store_true", help="no physical floors")
    ap.add_argument("--skip-cpu-floor", action="store_true",
                    help="no CPU floor (tools/bench/cpu_floor.py: the skeleton and, in full mode, the bound)")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per line (floors, rows, checks) instead of a table")
    ap.add_argument("--anchors", default="etcd,zookeeper,pysyncobj",
                    help="anchor systems (default etcd,zookeeper,pysyncobj)")
    ap.add_argument("--concurrency", default="1,64", help="outstanding levels (default 1,64)")
    ap.add_argument("--ops1", type=int, default=2000, help="ops at 1 outstanding (full mode)")
    ap.add_argument("--opsn", type=int, default=20000, help="ops at >1 outstanding (full mode)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="kraftnode repeats, median reported (default 3; 1 with --quick)")
    ap.add_argument("--max-seconds", type=float, default=120,
                    help="cap on one measured run; it stops early and reports what it did")
    ap.add_argument("--shared-dir", type=Path, default=SHARED_BENCH,
                    help=f"where physical.py and anchors.py live (default {SHARED_BENCH})")
    ap.add_argument("--tmp", default=None, help="parent dir for data dirs (default $TMPDIR)")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="S",
                    help="before each system (and each kraftnode repeat) wait up to S s for "
                         "load that is not ours to drop below 0.3 cores")
    ap.add_argument("--security", default="PLAINTEXT",
                    help="kraftnode listener security protocols to measure, each on its own "
                         "fresh quorums: PLAINTEXT, SSL, SASL_SSL (e.g. PLAINTEXT,SSL,SASL_SSL; "
                         "default PLAINTEXT)")
    ap.add_argument("--variants", default="",
                    help="kraftnode server settings measured beside the default, each on its own "
                         "fresh PLAINTEXT quorums: no-pre-vote (kraftnode.raft.pre.vote.enable=false; "
                         "pre-vote is on by default), linearizable (kraftnode.read.linearizable=true); "
                         "e.g. no-pre-vote,linearizable")
    ap.add_argument("--read-ops", type=int, default=2000, metavar="N",
                    help="consumer read round trips on each PLAINTEXT quorum's leader, per kind "
                         "(ListOffsets LATEST, Fetch); 0: none (default 2000; /10 with --quick)")
    ap.add_argument("--keep", action="store_true", help="keep kraftnode data dirs and logs")
    ap.add_argument("--metrics-compare", action="store_true",
                    help="every repeat also runs a quorum with kraftnode.metrics.listener set "
                         "(scraped during the run), in alternating order: rows "
                         "kraftnode+metrics and a check that records/s stay within 3%%")
    ap.add_argument("--scrape-interval", type=float, default=1.0, metavar="S",
                    help="with --metrics-compare: scrape every node every S s (default 1; "
                         "Prometheus' default is 15)")
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="sample the kraftnode leader with py-spy during each measured run; "
                         "collapsed stacks and a hotspot summary go to DIR")
    ap.add_argument("--baseline", default=None, metavar="REF",
                    help=f"also run the kraftnode of commit REF (git archive), same settings: rows "
                         f"kraftnode@REF and the CPU-per-record check (default {BASELINE_REF} in full "
                         "mode, none with --quick; 'none' to skip)")
    ap.add_argument("--skip-raft-workload", dest="raft_workload", action="store_false",
                    help="no TestRaftServer / kraftnode raft workload rows")
    ap.add_argument("--raft-seconds", type=float, default=None,
                    help="length of each raft workload run (default 60; 12 with --quick)")
    ap.add_argument("--raft-warmup", type=float, default=None,
                    help="seconds not measured at its start (default 15; 4 with --quick)")
    ap.add_argument("--kafka-lingers", default=None,
                    help="TestRaftServer runs, by controller.quorum.append.linger.ms: 'default' (the "
                         "shipped properties: Kafka's 25 ms) and/or numbers (default 'default,0'; "
                         "'default' with --quick)")
    ap.add_argument("--kafka-home", type=Path, default=None,
                    help="Kafka 3.9 installation for TestRaftServer (default: KAFKA_HOME, or "
                         "../shared/kafka-3.9 beside the checkout)")
    ap.add_argument("--skip-kafka", action="store_true", help="no TestRaftServer rows")
    args = ap.parse_args(argv)
    if args.baseline is None:
        args.baseline = None if args.quick else BASELINE_REF
    elif args.baseline.lower() == "none":
        args.baseline = None
    args.baseline_dir = None
    if args.raft_seconds is None:
        args.raft_seconds = 12.0 if args.quick else 60.0
    if args.raft_warmup is None:
        args.raft_warmup = min(4.0 if args.quick else 15.0, args.raft_seconds / 2)
    if not 0 <= args.raft_warmup < args.raft_seconds:
        ap.error("--raft-warmup must be below --raft-seconds")
    lingers = args.kafka_lingers or ("default" if args.quick else "default,0")
    try:
        args.kafka_lingers = [None if x.strip() == "default" else int(x)
                              for x in lingers.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--kafka-lingers: expected 'default' or numbers, not {lingers!r}")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if not 1 <= args.repeats <= 20:
        ap.error("--repeats must be between 1 and 20")
    if not 0.05 <= args.scrape_interval <= 600:
        ap.error("--scrape-interval must be between 0.05 and 600 seconds")
    if args.ops1 < 1 or args.opsn < 1 or args.max_seconds <= 0:
        ap.error("--ops1, --opsn and --max-seconds must be positive")
    if args.read_ops < 0:
        ap.error("--read-ops must not be negative")
    args.variants = [x.strip().lower() for x in args.variants.split(",") if x.strip()]
    bad_v = [x for x in args.variants if x not in VARIANTS]
    if bad_v:
        ap.error(f"--variants: expected some of {', '.join(VARIANTS)}, not {bad_v}")
    try:
        args.levels = [int(x) for x in args.concurrency.split(",")]
    except ValueError:
        ap.error(f"--concurrency: expected numbers separated by commas, not {args.concurrency!r}")
    args.security = [x.strip().upper() for x in args.security.split(",") if x.strip()]
    bad = [x for x in args.security if x not in SECURITY_MODES]
    if bad or not args.security:
        ap.error(f"--security: expected some of {', '.join(SECURITY_MODES)}, not {bad or 'nothing'}")
    if not all(1 <= c <= 10000 for c in args.levels):
        ap.error("--concurrency levels must be between 1 and 10000")
    return args


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the finally blocks stop every child."""
    def on_term(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    old: Callable[..., Any] | int | None = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shared: Path = args.shared_dir
    notes: list[str] = []
    if not (shared / "anchors.py").exists() and not (shared / "physical.py").exists():
        msg = (f"shared bench scripts not found at {shared} (physical.py, anchors.py): "
               "running kraftnode only -- no floors, no anchors, targets not checked")
        log(msg)
        notes.append(msg)
    raft_rows: list[dict[str, Any]] = []
    baseline_tmp: Path | None = None
    try:
        with _sigterm_as_exit():
            if args.baseline:
                baseline_tmp = Path(tempfile.mkdtemp(prefix="quorum-bench-baseline-", dir=args.tmp))
                args.baseline_dir = checkout_baseline(args.baseline, baseline_tmp, notes)
            floors = {} if args.skip_physical else run_physical(args, shared)
            if not args.skip_cpu_floor:
                floors.update(run_cpu_floor(args))
            rows = run_kraftnode(args, args.levels, args.security, args.variants)
            anchors = [] if args.skip_anchors else run_anchors(args, shared, args.levels)
            if args.raft_workload:
                raft_rows, raft_notes = raft_compare.run_raft_rows(
                    args.raft_seconds, args.raft_warmup, args.kafka_lingers, args.tmp, log, args.keep,
                    kafka_home=args.kafka_home if args.kafka_home and _kafka_ok(args.kafka_home) else None,
                    skip_kafka_reason=_skip_kafka_reason(args))
                notes += raft_notes
    finally:
        if baseline_tmp is not None:
            shutil.rmtree(baseline_tmp, ignore_errors=True)
    rows += anchors
    cks = checks(rows, floors) + (raft_compare.raft_checks(raft_rows) if args.raft_workload else [])
    cmps = comparisons(rows)
    if args.skip_anchors:
        notes.append("anchors skipped (--skip-anchors)")
    if args.json:
        for f in floors.values():
            print(json.dumps({"kind": "floor", **f}))
        for r in rows:
            print(json.dumps({"kind": "row", **r}))
        for r in raft_rows:
            print(json.dumps({"kind": "raft", **r}))
        for c in cks:
            print(json.dumps({"kind": "check", **c}))
        for c in cmps:
            print(json.dumps({"kind": "comparison", **c}))
        for n in notes:
            print(json.dumps({"kind": "note", "note": n}))
    else:
        print_table(rows, floors, cks, notes, cmps, raft_rows)
    return 0


def checkout_baseline(ref: str, into: Path, notes: list[str]) -> Path | None:
    """The code of commit ``ref`` (``git archive`` of this checkout's repository) in ``into``;
    None, with a note, when that cannot be had (not a git checkout, unknown commit)."""
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True,
                                 timeout=120, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, capture_output=True,
                       timeout=120, check=True)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        why = (e.stderr.decode(errors="replace").strip() if isinstance(e, subprocess.CalledProcessError)
               and e.stderr else str(e))
        msg = f"--baseline {ref}: cannot check it out ({why[:200]}); no baseline row"
        log(msg)
        notes.append(msg)
        return None
    log(f"baseline: the code of {ref} in {into}")
    return into


def _kafka_ok(home: Path) -> bool:
    return (home / "bin" / "test-kraft-server-start.sh").is_file() and (home / "libs").is_dir()


def _skip_kafka_reason(args: argparse.Namespace) -> str:
    if args.skip_kafka:
        return "TestRaftServer rows skipped (--skip-kafka)"
    if args.kafka_home is not None and not _kafka_ok(args.kafka_home):
        return (f"genuine Kafka not found at --kafka-home {args.kafka_home} "
                "(no bin/test-kraft-server-start.sh): no TestRaftServer rows")
    return ""


if __name__ == "__main__":
    sys.exit(main())
