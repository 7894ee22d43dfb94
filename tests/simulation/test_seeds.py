"""CI budget of the Raft simulation: >= 2,000 seeds across configurations, no violation.

Run more with ``python -m tests.simulation --seeds N --seed-base S --nodes 3|5``.
"""

from __future__ import annotations

import os

import pytest

from tests.simulation.runner import replay_command, run_many

#: (voters, observers, seeds, seed base): 2,100 seeds in all.
CI_BUDGET = [
    (3, 1, 900, 0),
    (3, 0, 300, 100_000),
    (5, 2, 700, 200_000),
    (5, 0, 200, 300_000),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("voters", "observers", "seeds", "base"), CI_BUDGET)
def test_ci_seed_budget(voters: int, observers: int, seeds: int, base: int) -> None:
    summary = run_many(seeds, base, voters, observers, workers=os.cpu_count() or 1)
    print(f"{seeds} seeds, {voters} voters + {observers} observers: {summary.events} events, "
          f"{summary.committed} committed offsets, {summary.elections} elections, {summary.wall_s:.1f}s")
    assert summary.ok, "\n".join(
        f"seed {f.seed}: {f.message}\n  replay: {replay_command(f.seed, voters, observers, None)}"
        for f in summary.failures
    )
    # The runs did real work: records were committed and leaders elected.
    assert summary.committed > seeds * 5
    assert summary.elections >= seeds


def test_a_seed_replays_exactly() -> None:
    first = run_many(1, 4242, 5, 1)
    second = run_many(1, 4242, 5, 1)
    assert (first.events, first.committed, first.elections) == (second.events, second.committed, second.elections)
