"""tools/bench/latency_budget.py traces a real 3-node quorum (KRAFTNODE_LATENCY_TRACE) and
joins the nodes' and the client's stamps into the steps of each commit. Tiny run, no floors:
every step is found for (nearly) every commit, the steps are in causal order, and they add up
to the client's send-to-delivery time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "latency_budget.py"


@pytest.mark.timeout(120)
def test_tiny_budget_run(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(BENCH), "--ops", "40", "--warm", "10", "--skip-physical",
                        "--json", "--tmp", str(tmp_path)], capture_output=True, text=True, timeout=110)
    assert r.returncode == 0, r.stderr[-3000:]
    b = json.loads(r.stdout)["budget"]
    assert b["records"] == 40 and b["errors"] == 0
    assert b["commits"] >= 36                      # a commit's chain may miss a step under load
    names = [s["step"] for s in b["steps"]]
    assert names[0].startswith("client send") and names[-1].endswith("delivery report")
    assert "follower fsync" in names and len(names) == 18
    assert all(s["median_ms"] >= 0 for s in b["steps"])
    fsync = next(s for s in b["steps"] if s["step"] == "follower fsync")
    assert fsync["median_ms"] > 0
    # the steps of one commit add up to its total; medians of steps roughly to the median total
    assert 0.3 * b["median_total_ms"] <= b["sum_of_step_medians_ms"] <= 3 * b["median_total_ms"]
    assert b["leader_fsync_median_ms"] > 0
    assert b["server_cpu_ms_per_commit"] > 0
    assert not list(tmp_path.glob("latency-budget-*"))      # data dirs and traces removed
