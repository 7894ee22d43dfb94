"""Read index in the simulation: every node that believes it leads is asked for read
barriers throughout the fault phase; a completed barrier must cover every offset
committed (anywhere) before it was asked. The planted ``stale_read`` (answer without
confirming leadership) is caught by ``test_plants``."""

from __future__ import annotations

from tests.simulation.sim import Simulation


def test_read_barriers_complete_and_are_never_stale() -> None:
    done = 0
    for seed in range(0, 60):
        sim = Simulation(seed, 3, 1)
        result = sim.run()
        assert result.ok, f"seed {seed}: {result.message}"
        done += sim.reads_done
    assert done > 300, done  # barriers do complete (the check is not vacuous)
