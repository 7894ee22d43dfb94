"""kraftnode's port of Kafka's windowed stats (commit-latency-avg/-max, election-latency,
fetch-/append-records-rate) measures what Kafka's own Avg, Max and Rate measure, on the
same recordings: the genuine kafka-clients classes are driven with the same script."""

from __future__ import annotations

import math
import random
import subprocess

from kraftnode.server.metrics.recording import AvgMax, Rate
from tests.support.kafka import KafkaHome


def _script(seed: int) -> list[tuple[str, float, int]]:
    rnd = random.Random(seed)
    t = 1_700_000_000_000
    out: list[tuple[str, float, int]] = [("measure", 0, t)]
    for _ in range(400):
        t += rnd.choice([0, 1, 7, 250, 2_000, 29_999, 30_000, 31_000, 65_000])
        if rnd.random() < 0.7:
            out.append(("record", float(rnd.randint(0, 500)), t))
        else:
            out.append(("measure", 0, t + rnd.choice([0, 5, 30_000, 61_000])))
    return out


def test_windowed_stats_match_kafka(kafka_home: KafkaHome) -> None:
    classes = kafka_home.compile("kafka-stats")
    for seed in (1, 2, 3):
        script = _script(seed)
        text = "".join(f"record {v} {t}\n" if op == "record" else f"measure {t}\n"
                       for op, v, t in script)
        r = subprocess.run(kafka_home.java(classes, "KafkaStats"), input=text,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        java = [[float(x) for x in ln.split()] for ln in r.stdout.split("\n") if ln.strip()]
        am, rate = AvgMax(), Rate()
        ours = []
        for op, v, t in script:
            if op == "record":
                am.record(v, t)
                rate.record(v, t)
            else:
                ours.append([am.avg.measure(t), am.max.measure(t), rate.measure(t)])
        assert len(ours) == len(java) > 50
        for i, (a, b) in enumerate(zip(ours, java, strict=True)):
            for x, y in zip(a, b, strict=True):
                assert (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9), \
                    (seed, i, a, b)
