"""Benchmark of the Raft core under the simulator: a healthy 3-node cluster under load.

Prints simulated events per wall-clock second (how fast the core + simulator run,
invariant checks included unless --no-checks) and committed records per second of
*simulated* time (what the protocol achieves with the simulated network delays).

    .venv/bin/python tools/bench/raft_sim.py [--sim-seconds 60] [--append-interval-ms 5]
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.simulation.model import FaultProfile  # noqa: E402
from tests.simulation.sim import Simulation  # noqa: E402


def healthy_profile(append_interval_ms: int, records_per_append: int, delay_ms: int) -> FaultProfile:
    return FaultProfile(
        loss=0.0, duplicate=0.0, delay_min_ms=delay_ms, delay_jitter_ms=delay_ms, long_delay_p=0.0,
        crash_interval_ms=None, mid_action_crash_p=0.0, restart_delay_max_ms=300, partition_interval_ms=None,
        resign_interval_ms=None, append_interval_ms=append_interval_ms, request_timeout_ms=2000,
        fetch_max_bytes=1 << 20, records_per_append=records_per_append, snapshot_interval_ms=None,
        election_timeout_ms=1000,
        fetch_timeout_ms=2000,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim-seconds", type=int, default=60)
    parser.add_argument("--append-interval-ms", type=int, default=5)
    parser.add_argument("--records-per-append", type=int, default=10)
    parser.add_argument("--delay-ms", type=int, default=1, help="one-way network delay (plus up to as much jitter)")
    parser.add_argument("--no-checks", action="store_true", help="skip the invariant checks after each event")
    args = parser.parse_args()
    if args.sim_seconds <= 0 or args.append_interval_ms <= 0 or args.records_per_append <= 0:
        print("error: durations and counts must be positive", file=sys.stderr)
        return 2
    profile = healthy_profile(args.append_interval_ms, args.records_per_append, args.delay_ms)
    sim = Simulation(1, voters=3, observers=0, profile=profile)
    end_ms = args.sim_seconds * 1000
    for t in range(args.append_interval_ms, end_ms, args.append_interval_ms):
        sim._schedule(t, "append", ())
    events = 0
    start = time.perf_counter()
    while sim._queue:
        at, _, kind, data = heapq.heappop(sim._queue)
        if at > end_ms:
            break
        sim.now = at
        if sim._step(kind, data):
            events += 1
            if not args.no_checks:
                sim.check()
    wall = time.perf_counter() - start
    sim.state.close()   # the state layer's snapshot directory
    best = max((n for n in sim.nodes.values() if n.core is not None), key=lambda n: n.core.high_watermark)  # type: ignore[union-attr]
    hw = best.core.high_watermark if best.core is not None else 0
    committed_records = sum(b.record_count for b in best.log.batches if not b.is_control and b.last_offset < hw)
    print(f"3 voters, {args.sim_seconds}s simulated, one append of {args.records_per_append} records "
          f"every {args.append_interval_ms}ms, delay {args.delay_ms}-{2 * args.delay_ms}ms"
          f"{', no invariant checks' if args.no_checks else ', invariants checked after every event'}")
    print(f"events: {events} in {wall:.2f}s wall = {events / wall:,.0f} simulated events/s")
    print(f"committed: {committed_records} records = {committed_records / args.sim_seconds:,.0f} "
          f"committed records per simulated second (elections: {sim.elections})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
