"""KIP-853's standalone flow in the simulation (``tests/simulation/grow_sim.py``): a quorum
formatted with one voter grows to 3 (or 5) by AddRaftVoter at a person's pace, then loses a
voter and takes it back, with no election: leader and epoch never change. The planted bug
(the lone leader's check-quorum deadline not renewed by observers' fetches) is caught."""

from __future__ import annotations

import pytest

from tests.simulation.grow_sim import PLANTS, GrowSimulation


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("voters", "seeds"), [(3, 60), (5, 15)])
def test_adding_voters_to_a_leader_alone_never_causes_an_election(voters: int, seeds: int) -> None:
    for seed in range(seeds):
        sim = GrowSimulation(seed, voters, 1)
        result = sim.run()
        assert result.ok, f"seed {seed} ({voters} voters): {result.message}"
        # converged() demands the whole script: adds of 2..N, a remove and the add back
        assert sim.script_done and len(sim.steps_done) == voters + 1
        assert result.elections == 1, (seed, result.elections)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_bug_is_caught(plant: str) -> None:
    for seed in range(20):
        result = GrowSimulation(seed, 3, 1, plant).run()
        if not result.ok:
            assert "an election nobody asked for" in result.message, result.message
            print(f"plant {plant}: caught at seed {seed}: {result.message}")
            return
    pytest.fail(f"plant {plant} was not caught in 20 seeds")
