"""Running many seeds, and the command line (``python -m tests.simulation``)."""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat

from tests.simulation import plants
from tests.simulation.sim import Result, profile_of, run_seed
from tests.simulation.state_layer import PLANTS as STATE_PLANTS

#: the core's planted bugs and the state layer's (tests only)
ALL_PLANTS: dict[str, str] = {**plants.ALL, **STATE_PLANTS}


@dataclass
class Summary:
    seeds: int
    failures: list[Result]
    events: int
    committed: int
    elections: int
    wall_s: float

    @property
    def ok(self) -> bool:
        return not self.failures


def replay_command(seed: int, voters: int, observers: int, plant: str | None) -> str:
    cmd = f"python -m tests.simulation --seeds 1 --seed-base {seed} --nodes {voters} --observers {observers}"
    if plant:
        cmd += f" --plant {plant}"
    return cmd


def run_many(
    seeds: int, seed_base: int = 0, voters: int = 3, observers: int = 1, plant: str | None = None,
    stop_on_failure: bool = False, workers: int = 1,
) -> Summary:
    """Run ``seeds`` seeds from ``seed_base``. ``workers`` > 1 runs them in that many forked
    processes (each seed is deterministic on its own, so the results are the same; CI uses the
    machine's cores); ``stop_on_failure`` runs them in order in this process."""
    start = time.monotonic()
    failures: list[Result] = []
    events = committed = elections = 0
    seed_range = range(seed_base, seed_base + seeds)
    results: Iterable[Result]
    if workers > 1 and not stop_on_failure:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        with pool:
            results = list(pool.map(run_seed, seed_range, repeat(voters), repeat(observers), repeat(plant),
                                    chunksize=max(1, seeds // (workers * 8))))
    else:
        results = (run_seed(seed, voters, observers, plant) for seed in seed_range)
    for seed, result in zip(seed_range, results, strict=True):
        events += result.events
        committed += result.committed
        elections += result.elections
        if not result.ok:
            failures.append(result)
            if stop_on_failure:
                return Summary(seed - seed_base + 1, failures, events, committed, elections,
                               time.monotonic() - start)
    return Summary(seeds, failures, events, committed, elections, time.monotonic() - start)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation",
                                     description="Fault-injecting simulation of the Raft core.")
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--seed-base", type=int, default=0, help="first seed")
    parser.add_argument("--nodes", type=int, default=3, choices=[3, 5], help="number of voters")
    parser.add_argument("--observers", type=int, default=1, help="number of observers (non-voters)")
    parser.add_argument("--plant", choices=sorted(ALL_PLANTS), help="plant a known bug (expect a violation)")
    parser.add_argument("--list-plants", action="store_true", help="list the planted bugs and exit")
    parser.add_argument("--keep-going", action="store_true", help="do not stop at the first violation")
    parser.add_argument("--verbose", action="store_true", help="print the fault profile of failing seeds")
    parser.add_argument("--trace", action="store_true", help="print every event and the cluster state (one seed)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.list_plants:
        for name, what in sorted(ALL_PLANTS.items()):
            print(f"{name}: {what}")
        return 0
    if args.seeds < 1 or args.observers < 0 or args.seed_base < 0:
        print("error: --seeds must be >= 1, --observers and --seed-base >= 0", file=sys.stderr)
        return 2
    if args.trace:
        if args.seeds != 1:
            print("error: --trace replays exactly one seed (use --seeds 1)", file=sys.stderr)
            return 2
        print(f"profile: {profile_of(args.seed_base, args.nodes, args.observers)}")
        result = run_seed(args.seed_base, args.nodes, args.observers, args.plant, trace=print)
        print(("ok" if result.ok else f"VIOLATION {result.message}") + f" after {result.events} events")
        return 0 if result.ok else 1
    summary = run_many(args.seeds, args.seed_base, args.nodes, args.observers, args.plant,
                       stop_on_failure=not args.keep_going)
    for failure in summary.failures:
        print(f"VIOLATION seed={failure.seed} {failure.message}")
        if args.verbose:
            print(f"  profile: {profile_of(failure.seed, args.nodes, args.observers)}")
        print(f"  replay: {replay_command(failure.seed, args.nodes, args.observers, args.plant)}")
    print(f"{summary.seeds} seeds ({args.nodes} voters + {args.observers} observers"
          f"{', plant ' + args.plant if args.plant else ''}): {len(summary.failures)} violations, "
          f"{summary.events} events, {summary.committed} committed offsets, {summary.elections} elections, "
          f"{summary.wall_s:.1f}s")
    return 1 if summary.failures else 0
