"""KIP-996 pre-vote in the simulation: leader stickiness is an invariant, and it can fail.

The seeds of ``test_seeds`` already run pre-vote (on, off, or mixed with "3.9" voters
that lack Vote v2) and check the stickiness invariant where it applies; the planted
bug ``pre_vote_ignores_leader`` is caught by ``test_plants``. Here: the invariant is
not vacuous (Kafka 3.9's elections, without pre-vote, break it on the same calm
profiles), and with pre-vote on those profiles hold it.
"""

from __future__ import annotations

from tests.simulation.sim import Simulation

SEEDS = range(0, 120)


def test_without_pre_vote_a_rejoining_voter_disrupts_the_leader() -> None:
    # "off-checked": every node runs Kafka 3.9's elections, the invariant is checked anyway.
    failures = []
    for seed in SEEDS:
        result = Simulation(seed, 3, 1, pre_vote_mode="off-checked", calm=True).run()
        if not result.ok:
            failures.append(result.message)
    assert any("while leader" in m and "reachable by a majority" in m for m in failures), failures[:3]


def test_with_pre_vote_the_leader_keeps_its_epoch() -> None:
    elections = 0
    for seed in SEEDS:
        sim = Simulation(seed, 3, 1, pre_vote_mode="on", calm=True)
        assert sim.sticky_applies
        result = sim.run()
        assert result.ok, f"seed {seed}: {result.message}"
        elections += result.elections
    assert elections >= len(SEEDS)


def test_mixed_quorum_with_3_9_voters_converges() -> None:
    # Voters without Vote v2 answer pre-votes with UNSUPPORTED_VERSION (as the driver does
    # for a Kafka 3.9 peer): the prospective runs a real election at once.
    mixed = 0
    for seed in range(0, 80):
        sim = Simulation(seed, 3, 1, pre_vote_mode="mixed")
        flags = {n.pre_vote for n in sim.nodes.values() if n.is_voter}
        mixed += flags == {True, False}
        result = sim.run()
        assert result.ok, f"seed {seed}: {result.message}"
    assert mixed >= 10
