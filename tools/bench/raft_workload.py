"""Kafka TestRaftServer's workload on a kraftnode voter, through the embedding API (issue 28).

One process per voter, as TestRaftServer runs one JVM per voter: each runs an
:class:`~kraftnode.embed.EmbeddedNode` (kraftnode/embed.py) with a state machine that only
counts what it applies (TestRaftServer's listener only reads the committed records), and the
voter that is leader appends records of ``--record-size`` zero bytes (TestRaftServer's
``new Array[Byte](recordSize)``) with no key:

* ``--rate R`` (records/s > 0): TestRaftServer's throttled generator -- every ~1 ms the records
  due by then (R x elapsed - sent) go out as one batch, none waiting for another's commit
  (TestRaftServer's prepareAppend: the raft client's accumulator batches what the generator
  hands it, and appends while earlier batches replicate);
* ``--rate 0``: as fast as the quorum commits -- ``--outstanding`` batches of ``--batch``
  records in flight, a new one as each commits.

Commit latency is measured as TestRaftServer measures it: from the append call to the
leader's notification that the record is committed (here ``append(..., applied=False)``
returning: committed, durable on a majority), per record, after ``--warmup`` seconds.
TestRaftServer records whole milliseconds (``Time.milliseconds()``); the summary gives
percentiles both exactly and in whole milliseconds, so the columns compare.

At the end every voter prints one JSON line; the leader's carries the figures. The bench
(tools/bench/quorum.py ``--raft-workload``) starts three of these next to a 3-voter
TestRaftServer quorum.

Usage: raft_workload.py --config server.properties --seconds 30 --warmup 10 [--rate 20000]
       [--record-size 256] [--outstanding 8 --batch 500]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.embed import AppendError, EmbeddedNode  # noqa: E402
from recordbatch import BatchView  # noqa: E402

#: at most this many records in one batch of the throttled generator (1 ms of 20,000/s is 20)
MAX_BATCH_RECORDS = 2000
#: the throttled generator stops sending while this many appends wait for their commit (the
#: quorum is not keeping up; the records/s it reaches then says so)
MAX_INFLIGHT = 5000


class CountingStateMachine:
    """Counts the records it applies; keeps nothing (TestRaftServer's listener only reads)."""

    def __init__(self) -> None:
        self.records = 0

    def apply(self, batch: BatchView, end_offset: int) -> None:
        if not batch.is_control:
            self.records += batch.records_count

    def snapshot(self) -> Callable[[], Iterator[tuple[bytes | None, bytes | None]]]:
        return lambda: iter(())

    def load_snapshot(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        self.records = 0

    def snapshot_allowed(self) -> bool:
        return True


def pct(sorted_vals: list[float], q: float) -> float | None:
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(math.ceil(q * len(sorted_vals))) - 1))
    return sorted_vals[k]


class Stats:
    def __init__(self, measure_from: float) -> None:
        self.measure_from = measure_from
        self.lat_ms: list[float] = []      # per record, exact
        self.lat_whole_ms: list[int] = []  # per record, as TestRaftServer: now_ms - append_ms
        self.committed = 0                 # records committed after measure_from
        self.first_commit: float | None = None
        self.last_commit: float | None = None
        self.errors = 0

    def record(self, t_append: float, wall_append_ms: int, n: int) -> None:
        now = time.monotonic()
        if t_append < self.measure_from:
            return
        ms = (now - t_append) * 1000
        whole = max(0, int(time.time() * 1000) - wall_append_ms)
        self.lat_ms.extend([ms] * n)
        self.lat_whole_ms.extend([whole] * n)
        self.committed += n
        if self.first_commit is None:
            self.first_commit = now
        self.last_commit = now

    def summary(self, seconds: float, record_size: int) -> dict[str, Any]:
        lat = sorted(self.lat_ms)
        whole = sorted(float(x) for x in self.lat_whole_ms)
        rate = self.committed / seconds if seconds > 0 else 0.0

        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return {"records": self.committed, "seconds": round(seconds, 3),
                "records_per_s": round(rate, 1), "bytes_per_s": round(rate * record_size, 1),
                "p50_ms": r(pct(lat, 0.5)), "p75_ms": r(pct(lat, 0.75)), "p99_ms": r(pct(lat, 0.99)),
                "p999_ms": r(pct(lat, 0.999)), "max_ms": r(lat[-1] if lat else None),
                "whole_ms": {"p50": pct(whole, 0.5), "p75": pct(whole, 0.75),
                             "p99": pct(whole, 0.99), "p999": pct(whole, 0.999)},
                "errors": self.errors}


async def generate(node: EmbeddedNode[CountingStateMachine], args: argparse.Namespace) -> dict[str, Any]:
    value = bytes(args.record_size)
    start = time.monotonic()
    end = start + args.seconds
    stats = Stats(start + args.warmup)
    done = anyio.Event()
    inflight = 0

    async def one(n: int) -> None:
        nonlocal inflight, done
        t = time.monotonic()
        wall = int(time.time() * 1000)
        try:
            await node.append([(None, value)] * n, timeout=30, applied=False)
            stats.record(t, wall, n)
        except AppendError:
            stats.errors += n
        finally:
            inflight -= 1
            done.set()
            done = anyio.Event()

    async with anyio.create_task_group() as tg:
        if args.rate > 0:
            sent = 0
            while (now := time.monotonic()) < end:
                due = int((now - start) * args.rate) - sent
                if due > 0 and inflight < MAX_INFLIGHT:
                    n = min(due, MAX_BATCH_RECORDS)
                    sent += n
                    inflight += 1
                    tg.start_soon(one, n)
                await anyio.sleep(0.001)
        else:
            while time.monotonic() < end:
                while inflight < args.outstanding:
                    inflight += 1
                    tg.start_soon(one, args.batch)
                waiter = done
                with anyio.move_on_after(max(0.0, end - time.monotonic())):
                    await waiter.wait()
    measured_for = (stats.last_commit or end) - (start + args.warmup)
    out = stats.summary(measured_for, args.record_size)
    out.update(leader=True, mode=f"rate {args.rate}/s" if args.rate > 0 else
               f"unthrottled: {args.outstanding} batches of {args.batch} records in flight")
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sm = CountingStateMachine()
    async with EmbeddedNode(args.config, sm) as node:
        with anyio.fail_after(args.ready_timeout):
            await node.wait_for_leader()
        # every voter waits until all are up and a leader committed (as the bench starts them
        # together), then the leader generates; the others serve and apply
        cpu: dict[str, float] = {}

        async def sample_cpu() -> None:
            """This process's cores over the measured window (after the warm-up)."""
            await anyio.sleep(args.warmup)
            c0, t0 = time.process_time(), time.monotonic()
            await anyio.sleep(args.seconds - args.warmup)
            cpu["cores"] = (time.process_time() - c0) / max(time.monotonic() - t0, 1e-9)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample_cpu)
            if node.is_leader:
                result = await generate(node, args)
            else:
                await anyio.sleep(args.seconds + 5)   # outlive the leader's last appends
                result = {"leader": False}
        result.update(node_id=node.node_id, applied_records=sm.records,
                      cpu_cores=round(cpu["cores"], 3) if "cores" in cpu else None)
        return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=20000, help="records/s; 0: as fast as it commits")
    ap.add_argument("--record-size", type=int, default=256)
    ap.add_argument("--outstanding", type=int, default=8)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--ready-timeout", type=float, default=60.0)
    ap.add_argument("--out", default=None, help="write the JSON line here too")
    args = ap.parse_args(argv)
    if args.warmup >= args.seconds or args.record_size < 1 or args.rate < 0:
        ap.error("need --warmup < --seconds, --record-size >= 1, --rate >= 0")
    result = anyio.run(run, args, backend="asyncio",
                       backend_options={"use_uvloop": os.environ.get("KRAFTNODE_UVLOOP", "1") != "0"})
    line = json.dumps(result)
    print(line, flush=True)
    if args.out:
        Path(args.out).write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
