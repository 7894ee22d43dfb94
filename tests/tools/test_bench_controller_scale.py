"""tools/bench/controller_scale.py (issue 39, must-show 1 and 2) runs end to end with small sizes:
kraftnode's three controllers and a genuine Kafka 4.4 controller quorum, five simulated brokers
each, grown to 500 and 1,000 partitions, then a genuine Kafka 4.4 broker started on each quorum
(``--broker-start 2``: two brokers one after the other, must-show 4); then the soak mode for a few seconds.

This keeps the tool working; it does not judge the figures (docs/bench.md has the 10k and 100k
run). What it asserts holds at any size: every system reached every size with every figure
measured, no simulated broker was fenced, the restarted controller caught up and a CreateTopics
succeeded after the kill of the active one, and the ratio line compares kraftnode with Kafka.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.kafka import KafkaHome

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "controller_scale.py"


@pytest.mark.timeout(600)
def test_small_sizes_against_kafka_44(kafka44: KafkaHome, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(BENCH), "--sizes", "500,1000", "--systems", "kraftnode,kafka44",
                        "--brokers", "5", "--window", "2", "--windows", "2", "--heap=-Xmx384m", "--broker-start", "2", "--failovers", "2",
                        "--json",
                        "--tmp", str(tmp_path)],
                       capture_output=True, text=True, timeout=580, env={**os.environ})
    assert r.returncode == 0, r.stderr[-4000:]
    objs = [json.loads(ln) for ln in r.stdout.splitlines()]
    rows = {o["system"]: o for o in objs if "system" in o}
    assert set(rows) == {"kraftnode", "kafka44"}, r.stdout
    for row in rows.values():
        assert set(row["sizes"]) == {"500", "1000"}
        for fig in row["sizes"].values():
            assert fig["create_partitions_per_s"] > 0 and fig["heartbeats"] > 0 and fig["small_create_p50_ms"] > 0
            # p99 is the median of the windows' p99s
            p99s = fig["heartbeat_p99_windows_ms"]
            assert len(p99s) == 2 and min(p99s) <= fig["heartbeat_p99_ms"] <= max(p99s), fig
        assert row["restart_load_s"] > 0 and row["failover_s"] > 0 and row["memory_bytes"] > 0
        # the standby's restart, and each killed active controller's after its failover
        assert len(row["failover_samples_s"]) == 2 and len(row["restart_load_samples_s"]) == 3, row
        # and each restart until the node logged its metadata image caught up (after it answered)
        assert len(row["restart_loaded_samples_s"]) == 3 and row["restart_loaded_s"] > 0, row
        # two brokers started one after the other; each figure is the median of the two
        samples = row["broker_start_samples"]
        assert len(samples) == 2, row
        for start in samples:
            assert 0 < start["registered_s"] <= start["unfenced_s"] <= start["serves_s"], start
        assert row["broker_start"]["serves_s"] == round(statistics.median(s["serves_s"] for s in samples), 2)
    ratio = [o for o in objs if o.get("ratio_kraftnode_to") == "kafka44"]
    assert ratio and ratio[0]["1000"]["create_partitions_per_s"] > 0 and ratio[0]["broker_start"]["serves_s"] > 0


@pytest.mark.timeout(300)
def test_soak_mode_reports_heartbeats_and_event_queue(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(BENCH), "--sizes", "500", "--systems", "kraftnode", "--brokers", "5",
                        "--window", "1", "--soak", "0.3", "--json", "--tmp", str(tmp_path)],
                       capture_output=True, text=True, timeout=280, env={**os.environ})
    assert r.returncode == 0, r.stderr[-4000:]
    (row,) = [json.loads(ln) for ln in r.stdout.splitlines() if '"system"' in ln]
    soak = row["soak"]
    assert soak["brokers_fenced"] == [] and soak["heartbeats"] > 0 and soak["topics_created"] > 0
    m = soak["controller_metrics"]
    assert m["kafka_controller_controllereventmanager_eventqueueprocessingtimems_count"] > 0
    assert "kafka_controller_kafkacontroller_timedoutbrokerheartbeatcount" in m
