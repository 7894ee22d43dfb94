"""Kafka's own raft beside kraftnode's, same workload, same run (issue 28 must-show 3).

Rows for tools/bench/quorum.py:

* ``TestRaftServer`` -- a 3-voter quorum of Kafka 3.9's ``kafka.tools.TestRaftServer``
  (``bin/test-kraft-server-start.sh``: KafkaRaftClient on the real KafkaMetadataLog, topic
  ``__raft_performance_test``), one JVM per voter. Its leader appends records and prints,
  every 5 s, the committed bytes/s and the p75/p99/p999 commit latency (append call to the
  leader's commit callback, whole milliseconds, Kafka's windowed histograms: 2 samples of
  30 s). Kafka 3.9 parses ``--throughput`` and ``--record-size`` but does not use them: its
  workload generator is built with 20,000 records/s of 256 bytes (TestRaftServer.scala), so
  that is the workload of these rows, and 20,000 records/s is a floor of its capacity, not a
  measure of it. Run with the shipped properties (``controller.quorum.append.linger.ms`` 25,
  Kafka's default) and, with ``--kafka-lingers 25,0``, also with no linger.
* ``kraftnode raft workload`` -- three ``tools/bench/raft_workload.py`` processes, one per
  voter (the embedding API, kraftnode/embed.py): the leader appends the same records (256
  zero bytes, no key) at the same rate, latency measured the same way (append call to the
  commit notification), p50 as well; and ``kraftnode raft workload (max)``: as fast as the
  quorum commits (8 batches of 500 records in flight).

Every process is stopped by PID; a quorum that does not produce figures gives a row with an
``error``; with no Kafka (``KAFKA_HOME``, ``../shared/kafka-3.9`` beside the checkout or two
levels up, or java missing) the Kafka rows are skipped with the reason.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.commands.dev_cluster import free_ports  # noqa: E402

WORKLOAD = Path(__file__).resolve().parent / "raft_workload.py"
#: what Kafka 3.9's TestRaftServer appends, whatever its options say
KAFKA_RATE = 20000
KAFKA_RECORD_SIZE = 256
_THROUGHPUT = re.compile(r"Throughput \(bytes/second\): ([0-9.]+), Latency \(ms\): ([0-9.]+) p75 "
                         r"([0-9.]+) p99 ([0-9.]+) p999")
CLK_TCK = os.sysconf("SC_CLK_TCK")
Log = Callable[[str], None]


def find_kafka_home() -> tuple[Path | None, str]:
    """(Kafka installation with bin/test-kraft-server-start.sh, or None; why not)."""
    env = os.environ.get("KAFKA_HOME")
    candidates = ([Path(env)] if env else []) + [ROOT.parent / "shared" / "kafka-3.9",
                                                 ROOT.parent.parent / "shared" / "kafka-3.9"]
    for c in candidates:
        if (c / "bin" / "test-kraft-server-start.sh").is_file() and (c / "libs").is_dir():
            if shutil.which("java") is None:
                return None, f"java is not on PATH (Kafka found at {c})"
            return c, ""
    return None, ("genuine Kafka not found (KAFKA_HOME, or ../shared/kafka-3.9 beside the "
                  "checkout): no TestRaftServer rows")


def proc_cpu_ticks(pid: int) -> tuple[int, int] | None:
    """(user, system) CPU ticks of ``pid`` from /proc (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]), int(rest[12])
    except (OSError, IndexError, ValueError):
        return None


def proc_ticks(pid: int) -> int | None:
    """User + system CPU ticks of ``pid`` from /proc (None once it is gone); quorum.py uses it too."""
    t = proc_cpu_ticks(pid)
    return None if t is None else t[0] + t[1]


def _stop(procs: list[subprocess.Popen[bytes]], timeout: float = 20) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def _window_cpu(pids: list[int], start: float, end: float, sleep_until: Callable[[float], None]
                ) -> list[float | None]:
    """Cores each process used between monotonic ``start`` and ``end`` (sleeps until then)."""
    sleep_until(start)
    t0 = time.monotonic()
    a = [proc_ticks(p) for p in pids]
    sleep_until(end)
    dt = max(time.monotonic() - t0, 1e-9)
    b = [proc_ticks(p) for p in pids]
    return [None if x is None or y is None else round((y - x) / CLK_TCK / dt, 3) for x, y in zip(a, b, strict=True)]


def _sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))


def run_test_raft_server(kafka: Path, seconds: float, warmup: float, linger_ms: int | None,
                         tmp_parent: str | None, log: Log, keep: bool = False) -> dict[str, Any]:
    """One 3-voter TestRaftServer quorum for ``seconds`` after its JVMs start."""
    root = Path(tempfile.mkdtemp(prefix="quorum-bench-testraftserver-", dir=tmp_parent))
    ports = free_ports(3)
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    procs: list[subprocess.Popen[bytes]] = []
    outs: list[Path] = []
    name = "TestRaftServer" + ("" if linger_ms is None else f" (linger {linger_ms} ms)")
    try:
        for i, port in enumerate(ports):
            d = root / f"node{i + 1}"
            (d / "logs").mkdir(parents=True)
            props = d / "server.properties"
            props.write_text(f"node.id={i + 1}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                             f"controller.listener.names=PLAINTEXT\ncontroller.quorum.voters={voters}\n"
                             f"log.dirs={d / 'data'}\n"
                             + ("" if linger_ms is None else f"controller.quorum.append.linger.ms={linger_ms}\n"))
            directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            env = {**os.environ, "LOG_DIR": str(d / "logs"),
                   "KAFKA_HEAP_OPTS": os.environ.get("QUORUM_BENCH_KAFKA_HEAP", "-Xmx384m -Xms384m")}
            out = d / "stdout.txt"
            outs.append(out)
            with out.open("wb") as f:
                procs.append(subprocess.Popen(
                    [str(kafka / "bin" / "test-kraft-server-start.sh"), "--config", str(props),
                     "--replica-directory-id", directory_id,
                     "--throughput", str(KAFKA_RATE), "--record-size", str(KAFKA_RECORD_SIZE)],
                    stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env,
                    start_new_session=True))
        t0 = time.monotonic()
        log(f"{name}: 3 JVMs started (pids {[p.pid for p in procs]}), {seconds:.0f} s")
        cpu = _window_cpu([p.pid for p in procs], t0 + warmup, t0 + seconds, _sleep_until)
        dead = [i + 1 for i, p in enumerate(procs) if p.poll() is not None]
    finally:
        _stop(procs)
    row: dict[str, Any] = {"system": name, "kind": "raft-workload", "record_bytes": KAFKA_RECORD_SIZE,
                           "target_records_per_s": KAFKA_RATE, "seconds": seconds,
                           "cpu_cores": {"servers": cpu}}
    lines = {}
    for i, out in enumerate(outs):
        text = out.read_text(errors="replace")
        got = _THROUGHPUT.findall(text)
        if got:
            lines[i + 1] = got
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    if dead:
        row["error"] = f"node(s) {dead} exited early"
    if not lines:
        row.setdefault("error", "no leader printed its figures")
        return row
    leader, got = max(lines.items(), key=lambda kv: len(kv[1]))
    bps, p75, p99, p999 = (float(x) for x in got[-1])
    rate = bps / KAFKA_RECORD_SIZE
    row.update(leader=leader, records_per_s=round(rate, 1), bytes_per_s=round(bps, 1), p50_ms=None,
               p75_ms=p75, p99_ms=p99, p999_ms=p999, reports=len(got),
               latency="append call to the leader's commit callback, whole ms, Kafka's windowed "
                       "percentiles (last ~30-60 s) as the leader printed them last",
               note=f"Kafka 3.9's TestRaftServer appends {KAFKA_RATE:,} records/s of "
                    f"{KAFKA_RECORD_SIZE} B whatever --throughput/--record-size say")
    servers = [x for x in cpu if x is not None]
    if servers and rate > 0:
        row["cpu_us_per_record"] = round(sum(servers) / rate * 1e6, 2)
    return row


def run_kraftnode_workload(rate: int, seconds: float, warmup: float, record_size: int,
                           tmp_parent: str | None, log: Log, keep: bool = False,
                           outstanding: int = 8, batch: int = 500) -> dict[str, Any]:
    """Three raft_workload.py voters on a freshly formatted kraftnode quorum."""
    root = Path(tempfile.mkdtemp(prefix="quorum-bench-raftworkload-", dir=tmp_parent))
    ports = free_ports(3)
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs: list[subprocess.Popen[bytes]] = []
    results: list[Path] = []
    name = "kraftnode raft workload" + (" (max)" if rate == 0 else "")
    try:
        for i, port in enumerate(ports):
            d = root / f"node{i + 1}"
            d.mkdir(parents=True)
            props = d / "server.properties"
            props.write_text(f"node.id={i + 1}\nprocess.roles=controller\nkraftnode.application.records.enable=true\n"
                             f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
                             f"controller.quorum.voters={voters}\nlog.dirs={d / 'metadata'}\n")
            fmt = subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config", str(props),
                                  "--cluster-id", "UXVvcnVtQmVuY2hSdW4wMQ"], capture_output=True,
                                 text=True, timeout=60, env=env, cwd=ROOT)
            if fmt.returncode != 0:
                raise RuntimeError(f"kraftnode format failed: {fmt.stderr.strip()}")
        for i in range(3):
            d = root / f"node{i + 1}"
            result = d / "result.json"
            results.append(result)
            with (d / "node.log").open("wb") as f:
                procs.append(subprocess.Popen(
                    [sys.executable, str(WORKLOAD), "--config", str(d / "server.properties"),
                     "--seconds", str(seconds), "--warmup", str(warmup), "--rate", str(rate),
                     "--record-size", str(record_size), "--outstanding", str(outstanding),
                     "--batch", str(batch), "--out", str(result)],
                    stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env,
                    start_new_session=True))
        log(f"{name}: 3 voters started (pids {[p.pid for p in procs]}), {seconds:.0f} s")
        deadline = time.monotonic() + seconds + 90
        for p in procs:
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
    finally:
        _stop(procs)
    row: dict[str, Any] = {"system": name, "kind": "raft-workload", "record_bytes": record_size,
                           "target_records_per_s": rate or None, "seconds": seconds}
    got = []
    for r in results:
        try:
            got.append(json.loads(r.read_text()))
        except (OSError, ValueError):
            pass
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    leaders = [g for g in got if g.get("leader")]
    if len(got) < 3 or not leaders:
        row["error"] = f"{len(got)} of 3 voters reported, {len(leaders)} as leader"
        return row
    lead = leaders[0]
    row.update({k: lead.get(k) for k in ("records_per_s", "bytes_per_s", "p50_ms", "p75_ms", "p99_ms",
                                         "p999_ms", "max_ms", "whole_ms", "errors", "mode")})
    row["leader"] = lead.get("node_id")
    row["cpu_cores"] = {"servers": [g.get("cpu_cores") for g in got]}
    servers = [g["cpu_cores"] for g in got if g.get("cpu_cores") is not None]
    if servers and lead.get("records_per_s"):
        row["cpu_us_per_record"] = round(sum(servers) / lead["records_per_s"] * 1e6, 2)
    row["latency"] = ("append call (EmbeddedNode.append(..., applied=False)) to the leader's commit "
                      "notification, per record after the warm-up; whole_ms: as TestRaftServer counts")
    return row


def run_raft_rows(seconds: float, warmup: float, kafka_lingers: list[int | None], tmp: str | None,
                  log: Log, keep: bool = False, kafka_home: Path | None = None,
                  skip_kafka_reason: str = "") -> tuple[list[dict[str, Any]], list[str]]:
    """Kafka's TestRaftServer quorum(s), then kraftnode at the same rate and at its maximum."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    kafka, why = (kafka_home, "") if kafka_home is not None else find_kafka_home()
    if skip_kafka_reason:
        kafka, why = None, skip_kafka_reason
    if kafka is None:
        log(why)
        notes.append(why)
        rows.append({"system": "TestRaftServer", "kind": "raft-workload", "skipped": why})
    else:
        for linger in kafka_lingers:
            rows.append(run_test_raft_server(kafka, seconds, warmup, linger, tmp, log, keep))
    rows.append(run_kraftnode_workload(KAFKA_RATE, seconds, warmup, KAFKA_RECORD_SIZE, tmp, log, keep))
    rows.append(run_kraftnode_workload(0, seconds, warmup, KAFKA_RECORD_SIZE, tmp, log, keep))
    return rows, notes


def raft_checks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kraftnode against TestRaftServer (shipped settings): max records/s >= 1.0x Kafka's,
    p99 at Kafka's fixed rate no worse than Kafka's."""
    kafka = next((r for r in rows if r.get("system") == "TestRaftServer"), None)
    same = next((r for r in rows if r.get("system") == "kraftnode raft workload"), None)
    top = next((r for r in rows if r.get("system") == "kraftnode raft workload (max)"), None)
    out = []
    c: dict[str, Any] = {"check": "raft workload: kraftnode max records/s vs TestRaftServer",
                         "target": ">= 1.0x Kafka's (which is fixed at 20,000/s in 3.9)"}
    if kafka and top and kafka.get("records_per_s") and top.get("records_per_s"):
        c["ratio"] = round(top["records_per_s"] / kafka["records_per_s"], 3)
        c["detail"] = f"{top['records_per_s']:,.0f} vs {kafka['records_per_s']:,.0f} records/s of 256 B"
        c["ok"] = c["ratio"] >= 1.0
    else:
        c["ok"], c["detail"] = None, "n/a (" + (kafka or {}).get("skipped", "a side has no figure") + ")"
    out.append(c)
    c = {"check": "raft workload: kraftnode p99 commit latency vs TestRaftServer, same rate",
         "target": "<= 1.0x Kafka's"}
    if kafka and same and kafka.get("p99_ms") and same.get("p99_ms") is not None:
        c["ratio"] = round(same["p99_ms"] / kafka["p99_ms"], 3)
        c["detail"] = (f"{same['p99_ms']:.2f} vs {kafka['p99_ms']:.1f} ms at "
                       f"{same.get('records_per_s') or 0:,.0f} vs {kafka.get('records_per_s') or 0:,.0f} records/s")
        c["ok"] = c["ratio"] <= 1.0
    else:
        c["ok"], c["detail"] = None, "n/a (" + (kafka or {}).get("skipped", "a side has no figure") + ")"
    out.append(c)
    return out
