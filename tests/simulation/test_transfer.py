"""Leadership transfer in the simulation: seeds ask the leader to hand over to another
voter (with every fault); an accepted transfer must leave the successor holding the
leader's whole log, and the usual invariants (committed entries never change, one leader
per epoch) hold throughout. The plant ``transfer_without_catch_up`` is caught by
``test_plants``."""

from __future__ import annotations

from tests.simulation.sim import Simulation


def test_transfers_are_accepted_and_safe() -> None:
    done = 0
    for seed in range(0, 100):
        sim = Simulation(seed, 3, 1)
        result = sim.run()
        assert result.ok, f"seed {seed}: {result.message}"
        done += sim.transfers_done
    assert done >= 100, done
