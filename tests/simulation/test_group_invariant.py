"""The simulation covers the group coordinator's state (tests/simulation/state_layer.py,
GroupWatch): seeds pass with leaders serving committed offsets across elections, snapshots
and crashes, and the invariant fails on a leader whose state serves an older offset."""

from __future__ import annotations

import pytest

from kraftnode.groups import records as rec
from kraftnode.metadata.state import MetadataState
from recordbatch import Record, build_batch, iter_batches
from tests.simulation.sim import Simulation, Violation
from tests.simulation.state_layer import GroupWatch

SEEDS = 40


@pytest.mark.timeout(600)
def test_seeds_serve_committed_offsets_that_never_go_backwards() -> None:
    observations = served = 0
    for seed in range(SEEDS):
        sim = Simulation(seed, 3, 1, None)
        try:
            result = sim.run()
        finally:
            sim.state.close()
        assert result.ok, (seed, result)
        observations += sim.state.groups.observations
        served += len(sim.state.groups.served)
    assert observations > SEEDS and served > SEEDS    # the invariant was exercised


def _state(*commits: tuple[int, int]) -> MetadataState:
    sm = MetadataState()
    for offset, epoch in commits:
        k, v = rec.offset_commit("g0", "t", 0, offset, epoch, "", 1)
        sm.apply(next(iter_batches(build_batch([Record(k, v)], base_offset=offset, now_ms=0))), offset + 1)
    return sm


def test_a_leader_serving_an_older_offset_is_a_violation() -> None:
    watch = GroupWatch()
    watch.observe("leader 1", GroupWatch.view(_state((5, 2), (9, 2))))
    watch.observe("leader 2", GroupWatch.view(_state((5, 2), (9, 2), (12, 3))))
    with pytest.raises(Violation, match="went backwards"):
        watch.observe("leader 3", GroupWatch.view(_state((5, 2), (9, 2))))   # lost the epoch-3 commit
