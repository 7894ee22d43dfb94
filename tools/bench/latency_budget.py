"""Latency budget of one acks=all Produce at 1 outstanding on a real 3-node quorum (issue 28).

Starts a fresh 3-voter kraftnode quorum (tools/bench/quorum.py's ``Quorum``) with
``KRAFTNODE_LATENCY_TRACE`` set, so every node records when each step of a commit happens
on it (kraftnode/server/metrics/latency_trace.py; CLOCK_MONOTONIC, one clock for every
process on the host); writes ``--ops`` records one at a time with confluent-kafka
(acks=all, linger 0, 100-byte values, as quorum.py's 1-outstanding level), stamping each
``produce()`` and delivery report with the same clock; stops the quorum (the nodes write
their events at exit) and joins everything by offset into the chain of one commit:

  client send -> leader frame -> parsed -> append -> answer to the parked follower Fetch
  -> follower frame -> decoded -> core + log append -> follower fsync -> next Fetch written
  -> leader frame -> parsed -> high watermark -> append completed -> Produce answer written
  -> client delivery report

(the follower is the one whose acknowledgement reached the leader first: with 3 voters the
leader and one follower are the majority), with the leader's own fsync beside it. Prints
the median of each step beside its physical floor (``physical.py``: loopback one-way =
round trip / 2, fdatasync of an append; CPU-only steps have none), the median total and
the server CPU per commit.

With ``--profile DIR`` a second fresh quorum (tracing off) is sampled by py-spy (``--gil``:
where the interpreter holds the GIL, i.e. runs Python) on every node, first for
``--idle-seconds`` with no load, then during ``--ops`` records at 1 outstanding; the
collapsed stacks go to DIR and the top functions are printed per node.

Usage: python tools/bench/latency_budget.py [--ops 2000] [--json] [--profile DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.bench import quorum as qb  # noqa: E402
from tools.bench.raft_compare import proc_ticks  # noqa: E402

Event = tuple[int, str, int, int, int, int]   # t_ns, name, a, b, c, d


# --------------------------------------------------------------------------- client


def produce_one_at_a_time(bootstrap: str, ops: int, warm: int,
                          max_seconds: float) -> tuple[list[tuple[int, int, int]], int]:
    """``warm`` records, then ``ops`` records one at a time; ((t_send, t_done, offset) per
    measured record, errors).  The times are time.monotonic_ns (CLOCK_MONOTONIC)."""
    producer, _ = qb._producer(bootstrap, dict(qb.LEVEL_SETTINGS["one"]))
    value = b"v" * qb.VALUE_SIZE
    out: list[tuple[int, int, int]] = []
    errors = 0
    done: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        done.append((time.monotonic_ns(), err, msg.offset() if err is None else -1))

    deadline = time.monotonic() + max_seconds
    try:
        for i in range(warm + ops):
            if time.monotonic() >= deadline:
                break
            done.clear()
            t0 = time.monotonic_ns()
            producer.produce(qb.TOPIC, value, partition=0, on_delivery=delivered)
            while not done and time.monotonic() < deadline:
                producer.poll(1.0)
            if not done:
                errors += 1
                break
            t1, err, offset = done[0]
            if err is not None:
                errors += 1
            elif i >= warm:
                out.append((t0, t1, offset))
    finally:
        producer.flush(10)
    return out, errors


# --------------------------------------------------------------------------- traces


def read_traces(d: Path) -> dict[int, list[Event]]:
    """node id -> its events, in time order."""
    nodes: dict[int, list[Event]] = defaultdict(list)
    for f in sorted(d.glob("node-*.trace")):
        node = int(f.name.split("-")[1])
        for line in f.read_text().splitlines():
            if line.startswith("#"):
                qb.log(f"{f.name}: {line}")
                continue
            t, name, a, b, c, dd = line.split()
            nodes[node].append((int(t), name, int(a), int(b), int(c), int(dd)))
    for evs in nodes.values():
        evs.sort()
    return dict(nodes)


@dataclass
class NodeIndex:
    """One node's events, looked up by what identifies them (every occurrence, in time order)."""

    times: dict[tuple[Any, ...], list[int]] = field(default_factory=lambda: defaultdict(list))

    def add(self, key: tuple[Any, ...], t: int) -> None:
        self.times[key].append(t)

    def get(self, *key: Any, after: int = 0) -> int | None:
        """The first occurrence of ``key`` at or after ``after``."""
        for t in self.times.get(key, ()):
            if t >= after:
                return t
        return None


def index(events: list[Event]) -> NodeIndex:
    ix = NodeIndex()
    for t, name, a, b, c, d in events:
        if name.startswith("req."):
            # (name, api, fetch offset or produce base, records end, replica)
            ix.add((name, a, b, c, d), t)
            if a == 1 and c >= 0:
                ix.add((name + ".data", c, d), t)       # Fetch answered with records up to c
            if a == 1:
                ix.add((name + ".ack", b, d), t)        # Fetch from replica d at offset b
        elif name.startswith("peer."):
            if a == 1 and b >= 0:
                ix.add((name + ".data", b), t)          # a Fetch answer carrying records up to b
            if a == 1 and name == "peer.sent":
                ix.add(("peer.sent.fetch", b), t)
        elif name in ("append.start", "append.done", "log.start", "log.end", "hw", "commit",
                      "flush.start", "flush.end"):
            ix.add((name, a), t)
        elif name in ("resp.start", "resp.core", "resp.done"):
            ix.add((name, b), t)                        # keyed by the log end offset then
    return ix


#: how far before the client's send an event of its commit may be stamped
SLACK_NS = 200_000

#: the producer's critical path: (step name, floor kind)
STEPS = [
    ("client send -> leader has the Produce frame", "oneway"),
    ("leader parses the Produce", None),
    ("handler -> driver append (validation, producer ids)", None),
    ("leader append (log write + core, parked Fetch answered)", None),
    ("append -> answer written to the parked follower Fetch", None),
    ("leader -> follower: Fetch answer arrives", "oneway"),
    ("follower decodes the Fetch answer", None),
    ("decoded -> the follower's task resumes", None),
    ("follower core + log append", None),
    ("follower append -> fsync starts", None),
    ("follower fsync", "fsync"),
    ("fsync -> next Fetch written", None),
    ("follower -> leader: the Fetch (acknowledgement) arrives", "oneway"),
    ("leader parses the Fetch", None),
    ("parsed -> high watermark advanced (core)", None),
    ("high watermark -> append completed", None),
    ("append completed -> Produce answer written", None),
    ("leader -> client: delivery report", "oneway"),
]


def chains(traces: dict[int, list[Event]], client: list[tuple[int, int, int]]
           ) -> tuple[int, list[list[int]], list[dict[str, int]]]:
    """(leader id, per commit the step durations (ns) along STEPS, per commit the side facts:
    the leader's fsync and how long the critical path waited for it)."""
    ixs = {n: index(evs) for n, evs in traces.items()}
    leader = max(ixs, key=lambda n: sum(len(v) for k, v in ixs[n].times.items() if k[0] == "append.done"))
    L = ixs[leader]
    followers = [n for n in ixs if n != leader]
    out: list[list[int]] = []
    side: list[dict[str, int]] = []
    missing = 0
    for t_send, t_done, offset in client:
        e = offset + 1        # the log end offset once this record is appended
        acks = {f: L.get("req.parsed.ack", e, f, after=t_send) for f in followers}
        got = {f: t for f, t in acks.items() if t is not None}
        if not got:
            continue
        f = min(got, key=lambda k: got[k])
        F = ixs[f]
        # each point: the first such event at or after the one before it
        keys: list[tuple[NodeIndex, tuple[Any, ...]]] = [
            (L, ("req.frame", 0, offset, -1, -1)),
            (L, ("req.parsed", 0, offset, -1, -1)),
            (L, ("append.start", offset)),
            (L, ("append.done", e)),
            (L, ("req.written.data", e, f)),
            (F, ("peer.frame.data", e)),
            (F, ("peer.decoded.data", e)),
            (F, ("resp.start", offset)),
            (F, ("resp.core", e)),
            (F, ("flush.start", e)),
            (F, ("flush.end", e)),
            (F, ("peer.sent.fetch", e)),
            (L, ("req.frame.ack", e, f)),
            (L, ("req.parsed.ack", e, f)),
            (L, ("hw", e)),
            (L, ("commit", offset)),
            (L, ("req.written", 0, offset, -1, -1)),
        ]
        # Every key but the follower's resp.start names an event that happens once per
        # commit (offsets are unique): take its first occurrence after the send (less a
        # little: another process's stamp may precede its cause by microseconds, the sender
        # stamps after its write returns). resp.start is keyed by the log end before the
        # append, which the previous commit's high-watermark answer shares: take the first
        # after the decode.
        pts: list[int | None] = [t_send]
        for ix, key in keys:
            prev = pts[-1]
            after = prev if key[0] == "resp.start" and prev is not None else t_send - SLACK_NS
            pts.append(ix.get(*key, after=after))
        pts.append(t_done)
        if any(p is None for p in pts):
            missing += 1
            continue
        ts = [int(p) for p in pts if p is not None]
        out.append([b - a for a, b in zip(ts, ts[1:], strict=False)])
        ls, le = L.get("flush.start", e), L.get("flush.end", e)
        if ls is not None and le is not None:
            side.append({"leader_fsync": le - ls, "leader_fsync_start_after_append": ls - ts[4],
                         "leader_fsync_end_after_ack_parsed": le - ts[14],
                         "total": t_done - t_send})
    if missing:
        qb.log(f"{missing} of {len(client)} commits had a step without its event (not counted)")
    return leader, out, side


def floors(args: argparse.Namespace) -> dict[str, float]:
    """p50 fdatasync of a 4 KiB append and loopback one-way (RTT/2), ms, from physical.py."""
    if args.skip_physical:
        return {}
    recs = qb.run_physical(args, args.shared_dir)
    out: dict[str, float] = {}
    if "fsync_4k_append" in recs:
        out["fsync"] = recs["fsync_4k_append"]["p50_ms"]
    if "tcp_rtt_100b" in recs:
        out["oneway"] = recs["tcp_rtt_100b"]["p50_ms"] / 2
        out["rtt"] = recs["tcp_rtt_100b"]["p50_ms"]
    return out


def budget(steps: list[list[int]], side: list[dict[str, int]], fl: dict[str, float]) -> dict[str, Any]:
    med = [statistics.median(col) / 1e6 for col in zip(*steps, strict=True)] if steps else []
    rows = []
    for (name, kind), m in zip(STEPS, med, strict=False):
        rows.append({"step": name, "median_ms": round(m, 4),
                     "floor_ms": round(fl[kind], 4) if kind and kind in fl else (0.0 if not kind else None),
                     "floor": kind or "cpu"})
    totals = sorted(sum(s) / 1e6 for s in steps)
    out: dict[str, Any] = {
        "commits": len(steps), "steps": rows,
        "sum_of_step_medians_ms": round(sum(med), 4),
        "median_total_ms": round(statistics.median(totals), 4) if totals else None,
        "p99_total_ms": round(qb.pct(totals, 0.99) or 0, 4) if totals else None,
    }
    for k in ("leader_fsync", "leader_fsync_start_after_append", "leader_fsync_end_after_ack_parsed"):
        vals = [s[k] / 1e6 for s in side]
        if vals:
            out[k + "_median_ms"] = round(statistics.median(vals), 4)
    if {"fsync", "oneway"} <= fl.keys():
        out["floor_total_ms"] = round(fl["fsync"] + 4 * fl["oneway"], 4)
        out["floor_note"] = ("4 one-way loopback hops (client -> leader -> follower -> leader -> "
                             "client) + one fdatasync (the follower's; the leader's overlaps)")
    return out


# --------------------------------------------------------------------------- profiling


@contextmanager
def profile_all(pids: dict[int, int], out_dir: Path, tag: str) -> Iterator[dict[int, Path]]:
    files = {n: out_dir / f"node{n}-{tag}.txt" for n in pids}
    with ExitStack() as stack:
        for n, pid in pids.items():
            stack.enter_context(qb.py_spy(pid, files[n]))
        yield files


def run_profile(args: argparse.Namespace) -> dict[str, Any]:
    if qb.find_py_spy() is None:
        qb.log("--profile: py-spy not found (pip install py-spy); not profiling")
        return {}
    args.profile.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="latency-budget-prof-", dir=args.tmp))
    q = qb.Quorum(tmp)
    result: dict[str, Any] = {}
    try:
        q.start()
        leader, _ = q.wait_ready()
        pids = {i + 1: pid for i, pid in enumerate(q.pids)}
        time.sleep(2)
        t0 = {n: proc_ticks(p) for n, p in pids.items()}
        w0 = time.monotonic()
        with profile_all(pids, args.profile, "idle") as files:
            time.sleep(args.idle_seconds)
        dt = time.monotonic() - w0
        t1 = {n: proc_ticks(p) for n, p in pids.items()}
        result["idle"] = {"seconds": round(dt, 2), "leader": leader, "nodes": {
            n: {"cores": round(((t1[n] or 0) - (t0[n] or 0)) / qb.CLK_TCK / dt, 4),
                "profile": qb.hotspots(files[n]) if files[n].exists() else None} for n in pids}}
        with profile_all(pids, args.profile, "c1") as files:
            with qb.CpuMeter(list(pids.values())) as cpu:
                t_0 = time.perf_counter()
                client, errors = produce_one_at_a_time(q.bootstrap, args.ops, args.warm, args.max_seconds)
                elapsed = time.perf_counter() - t_0
        result["c1"] = {"leader": leader, "records": len(client), "errors": errors,
                        "seconds": round(elapsed, 2), "cpu": cpu.result, "nodes": {
                            n: {"profile": qb.hotspots(files[n]) if files[n].exists() else None}
                            for n in pids}}
    finally:
        q.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


# --------------------------------------------------------------------------- main


def run_budget(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="latency-budget-", dir=args.tmp))
    trace_dir = tmp / "traces"
    os.environ["KRAFTNODE_LATENCY_TRACE"] = str(trace_dir)
    q = qb.Quorum(tmp)
    try:
        q.start()
        del os.environ["KRAFTNODE_LATENCY_TRACE"]
        leader, _ = q.wait_ready()
        qb.log(f"traced quorum ready, leader node {leader}; {args.ops} records at 1 outstanding")
        with qb.CpuMeter(q.pids) as cpu:
            t0 = time.perf_counter()
            client, errors = produce_one_at_a_time(q.bootstrap, args.ops, args.warm, args.max_seconds)
            elapsed = time.perf_counter() - t0
        q.children.check_alive()
    finally:
        os.environ.pop("KRAFTNODE_LATENCY_TRACE", None)
        q.stop()
    (trace_dir / "client.json").write_text(json.dumps(
        {"client": client, "errors": errors, "elapsed": elapsed, "cpu": cpu.result}))
    out = analyze(args, trace_dir)
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        qb.log(f"traces kept in {trace_dir} (re-analyse with --analyze {trace_dir})")
    return out


def analyze(args: argparse.Namespace, trace_dir: Path) -> dict[str, Any]:
    saved = json.loads((trace_dir / "client.json").read_text())
    client: list[tuple[int, int, int]] = [(a, b, c) for a, b, c in saved["client"]]
    errors, elapsed, cpu_result = saved["errors"], saved["elapsed"], saved["cpu"]
    traces = read_traces(trace_dir)
    if len(traces) != 3:
        raise SystemExit(f"expected 3 nodes' traces in {trace_dir}, found {sorted(traces)}")
    leader_id, steps, side = chains(traces, client)
    fl = floors(args)
    out = budget(steps, side, fl)
    servers = [x for x in cpu_result.get("servers", []) if x is not None]
    out.update(leader=leader_id, records=len(client), errors=errors,
               records_per_s=round(len(client) / elapsed, 1) if elapsed > 0 else None,
               server_cpu_ms_per_commit=round(sum(servers) * elapsed / max(len(client), 1) * 1e3, 3),
               cpu=cpu_result, floors=fl, host_load=os.getloadavg(),
               note="tracing on: every step also pays for its time stamps")
    return out


def print_budget(b: dict[str, Any]) -> None:
    print(f"latency budget, 1 outstanding, {b['commits']} commits (leader node {b['leader']}; "
          f"{b['records_per_s']} records/s; load average {b['host_load'][0]:.2f}; "
          f"host cores busy with other load {b['cpu'].get('other')})")
    print("\n| step | median ms | floor ms |\n|---|---|---|")
    for r in b["steps"]:
        fl = "-" if r["floor_ms"] is None else (f"{r['floor_ms']:.3f} ({r['floor']})" if r["floor"] != "cpu"
                                                 else "0 (CPU only)")
        print(f"| {r['step']} | {r['median_ms']:.3f} | {fl} |")
    print(f"| **sum of step medians** | **{b['sum_of_step_medians_ms']:.3f}** | "
          f"{b.get('floor_total_ms', '-')} |")
    print(f"\nmedian send-to-delivery {b['median_total_ms']} ms, p99 {b['p99_total_ms']} ms")
    for k, what in (("leader_fsync_median_ms", "leader fsync"),
                    ("leader_fsync_start_after_append_median_ms", "leader fsync starts after its append"),
                    ("leader_fsync_end_after_ack_parsed_median_ms",
                     "leader fsync ends after the follower's ack is parsed (> 0: on the critical path)")):
        if k in b:
            print(f"{what}: median {b[k]:.3f} ms")
    print(f"server CPU per commit (3 nodes, tracing on): {b['server_cpu_ms_per_commit']:.3f} ms")
    if "floor_note" in b:
        print(f"floor: {b['floor_note']}")


def print_profile(p: dict[str, Any]) -> None:
    for phase in ("idle", "c1"):
        if phase not in p:
            continue
        ph = p[phase]
        print(f"\npy-spy --gil, {phase} ({'leader node ' + str(ph['leader'])}):")
        if phase == "c1":
            print(f"  {ph['records']} records in {ph['seconds']} s; cpu {ph['cpu']}")
        for n, info in sorted(ph["nodes"].items()):
            prof = info.get("profile")
            cores = f", {info['cores']} cores" if "cores" in info else ""
            print(f"  node {n}{' (leader)' if n == ph['leader'] else ''}{cores}: "
                  f"{prof['samples'] if prof else 0} samples")
            if prof:
                for name, share in prof["self_pct"][:8]:
                    print(f"      self {share:5.1f}%  {name}")
                for name, share in prof["inclusive_own_pct"][:8]:
                    print(f"      incl {share:5.1f}%  {name}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=2000, help="records measured (default 2000)")
    ap.add_argument("--warm", type=int, default=200, help="records before measuring (default 200)")
    ap.add_argument("--max-seconds", type=float, default=120)
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="also sample every node with py-spy, idle and at 1 outstanding")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--skip-physical", action="store_true")
    ap.add_argument("--skip-budget", action="store_true", help="only --profile")
    ap.add_argument("--shared-dir", type=Path, default=qb.SHARED_BENCH)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data dirs and the traces")
    ap.add_argument("--analyze", type=Path, default=None, metavar="DIR",
                    help="only analyse the traces a --keep run left in DIR")
    args = ap.parse_args(argv)
    args.quick = True            # physical.py --quick: floors in seconds
    args.wait_idle = 0
    if args.ops < 10:
        ap.error("--ops must be at least 10")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out: dict[str, Any] = {}
    with qb._sigterm_as_exit():
        if args.analyze is not None:
            out["budget"] = analyze(args, args.analyze)
        elif not args.skip_budget:
            out["budget"] = run_budget(args)
        if args.profile is not None:
            out["profile"] = run_profile(args)
    if args.json:
        print(json.dumps(out))
    else:
        if "budget" in out:
            print_budget(out["budget"])
        if out.get("profile"):
            print_profile(out["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
