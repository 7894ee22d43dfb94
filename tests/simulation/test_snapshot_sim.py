"""The snapshot lifecycle simulation (tests/simulation/snapshot_sim.py): seeds pass, the
planted bug is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.simulation.snapshot_sim import SnapshotSimulation, Violation

SEEDS = 30
STEPS = 120


@pytest.mark.timeout(600)
def test_seeds_keep_every_invariant(tmp_path: Path) -> None:
    for seed in range(SEEDS):
        SnapshotSimulation(seed, tmp_path / f"s{seed}").run(STEPS)


@pytest.mark.timeout(600)
def test_cleaning_before_the_snapshot_is_durable_is_caught(tmp_path: Path) -> None:
    for seed in range(SEEDS):
        try:
            SnapshotSimulation(seed, tmp_path / f"s{seed}", plant="delete_before_snapshot_durable").run(STEPS)
        except Violation as e:
            print(f"caught at seed {seed}: {e}")
            return
    pytest.fail(f"the planted bug was not caught in {SEEDS} seeds")
