"""The controller's rules under simulated brokers and controller failovers (issue 25, must-show 3;
tests/simulation/controller_sim.py): no invariant fails over the seed budget, and each planted
bug is caught by its invariant within it (the seed that caught it is printed with ``-s``)."""

from __future__ import annotations

import pytest

from tests.simulation.controller_sim import PLANTS, ControllerSim, run_seed

SEEDS = 300


def test_no_invariant_fails() -> None:
    failures = [r for r in (run_seed(s) for s in range(SEEDS)) if not r.ok]
    assert not failures, failures[:3]


def test_the_runs_exercise_the_controller() -> None:
    sim = ControllerSim(0)
    result = sim.run()
    kinds = {type(m).__name__ for b in sim.committed for m, _v in b.records}
    assert {"RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "TopicRecord", "PartitionRecord",
            "PartitionChangeRecord"} <= kinds
    assert result.failovers >= 1 and result.acked_alter_partitions > 10


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_each_plant_is_caught(plant: str) -> None:
    for seed in range(SEEDS):
        result = run_seed(seed, plant)
        if not result.ok:
            print(f"plant {plant}: caught at seed {seed}: {result.message}")
            return
    pytest.fail(f"plant {plant} ({PLANTS[plant]}) was not caught within {SEEDS} seeds")


def test_a_seed_replays_exactly() -> None:
    assert run_seed(16, "ack_before_commit") == run_seed(16, "ack_before_commit")
    assert run_seed(5) == run_seed(5)


def test_no_invariant_fails_with_eligible_leader_replicas() -> None:
    """Metadata.version 4.4 with KIP-966 on and min.insync.replicas=2: the ELR invariants hold too,
    and the runs go through ELR states."""
    failures = [r for r in (run_seed(s, elr=True) for s in range(SEEDS // 3)) if not r.ok]
    assert not failures, failures[:3]
    sim = ControllerSim(1, elr=True)
    assert sim.run().ok
    elrs = [m for b in sim.committed for m, _v in b.records
            if type(m).__name__ == "PartitionChangeRecord" and m.eligible_leader_replicas]
    assert elrs
