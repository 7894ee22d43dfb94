"""No acknowledged write is lost: produce with acks=all (idempotent) while nodes are
killed with SIGKILL and restarted at random; afterwards every acknowledged record is
on every node's disk exactly once, at the offset it was acknowledged at."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kraftnode.log.metadata_log import MetadataLog
from tests.support.cluster import Cluster, wait_for_hw

pytestmark = pytest.mark.timeout(300)

SEED = 20261122
DURATION_S = 25
MAX_RECORDS = 3000


def test_acknowledged_writes_survive_kill_and_restart(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cl = Cluster(tmp_path, 3)
    cl.start_all()
    wait_for_hw(cl, 1, 30)
    acked: dict[bytes, int] = {}
    failed = 0
    stop = threading.Event()

    def produce() -> None:
        nonlocal failed
        p = Producer({"bootstrap.servers": cl.bootstrap(), "acks": "all",
                      "enable.idempotence": True, "message.timeout.ms": 15000,
                      "linger.ms": 5, "retry.backoff.ms": 50})

        def cb(err: object, msg: object) -> None:
            nonlocal failed
            if err is None:
                acked[msg.value()] = msg.offset()  # type: ignore[attr-defined]
            else:
                failed += 1

        i = 0
        while not stop.is_set() and i < MAX_RECORDS:
            try:
                p.produce("__cluster_metadata", value=f"w-{i:06d}".encode(), partition=0,
                          on_delivery=cb)
                i += 1
            except BufferError:
                p.poll(0.1)
            p.poll(0)
            time.sleep(0.005)
        p.flush(30)

    t = threading.Thread(target=produce)
    t.start()
    kills = 0
    deadline = time.monotonic() + DURATION_S
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(1.0, 2.5))
            victim = rng.choice(cl.ids)
            cl.kill(victim)
            kills += 1
            time.sleep(rng.uniform(0.2, 1.5))
            cl.start(victim)
    finally:
        stop.set()
        t.join(60)
    for i in cl.ids:
        if i not in cl.running():
            cl.start(i)
    top = max(acked.values(), default=0)
    info = wait_for_hw(cl, top + 1, 60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = cl.wait_for_leader()
        if all(v.log_end_offset >= top + 1 for v in info.voters):
            break
        time.sleep(0.2)
    for i in cl.ids:
        cl.stop(i)
    print(f"seed {SEED}: {kills} kills, {len(acked)} acknowledged writes, {failed} failed deliveries")
    assert kills >= 5 and len(acked) >= 100

    for i in cl.ids:
        log = MetadataLog(tmp_path / f"node{i}" / "metadata")
        try:
            seen: dict[bytes, list[int]] = {}
            for b in log.batches(0):
                if b.is_control:
                    continue
                for r in b.records():
                    seen.setdefault(bytes(r.value), []).append(r.offset)
        finally:
            log.close()
        lost = {v: o for v, o in acked.items() if v not in seen}
        moved = {v: (o, seen[v]) for v, o in acked.items() if v in seen and seen[v] != [o]}
        assert not lost, f"node {i} lost acknowledged writes: {sorted(lost.items())[:5]}"
        assert not moved, f"node {i}: acknowledged writes duplicated or moved: {list(moved.items())[:5]}"
