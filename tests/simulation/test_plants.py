"""The harness can fail: each planted bug is caught within the CI seed budget.

Each plant is searched over the same configurations as the CI budget (3 voters
first, then 5); the number of seeds it took is printed (``pytest -s``).
"""

from __future__ import annotations

import pytest

from tests.simulation import plants
from tests.simulation.runner import ALL_PLANTS, run_many

CI_SEED_BUDGET = 2000


@pytest.mark.timeout(600)
@pytest.mark.parametrize("plant", sorted(ALL_PLANTS))
def test_plant_is_caught(plant: str) -> None:
    used = 0
    for voters, observers, base in ((3, 1, 0), (5, 2, 200_000)):
        summary = run_many(CI_SEED_BUDGET - used, base, voters, observers, plant, stop_on_failure=True)
        used += summary.seeds
        if summary.failures:
            failure = summary.failures[0]
            print(f"plant {plant}: caught after {used} seeds ({voters} voters, seed {failure.seed}): "
                  f"{failure.message}")
            return
        if used >= CI_SEED_BUDGET:
            break
    pytest.fail(f"plant {plant} was not caught within {CI_SEED_BUDGET} seeds")


def test_unknown_plant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown plants"):
        plants.validate(frozenset({"no_such_bug"}))
