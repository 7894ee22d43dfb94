"""Real quorums of `kraftnode start` processes on 127.0.0.1: election, replication,
commit, kill -9 and graceful failover, catch-up after restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kraftnode.metadata.state import is_metadata_record
from tests.support.cluster import Cluster

pytestmark = pytest.mark.timeout(240)

TOPIC = "__cluster_metadata"


def produce(bootstrap: str, values: list[bytes], timeout: float = 20) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": int(timeout * 1000)})
    offsets: list[int] = []
    errors: list[object] = []

    def cb(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    for v in values:
        p.produce(TOPIC, value=v, partition=0, on_delivery=cb)
    p.flush(timeout)
    assert not errors, errors
    assert len(offsets) == len(values)
    return offsets


def consume_all(bootstrap: str, expected: int, timeout: float = 20) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(out) < expected:
        m = c.poll(0.5)
        if m is None or m.error() or is_metadata_record(m.value()):
            continue  # the controllers' own records (bootstrap, registrations) share the log
        out.append((m.offset(), m.value()))
    c.close()
    return out


@pytest.mark.parametrize("n", [3, 5])
def test_elect_replicate_commit_and_failover(tmp_path: Path, n: int) -> None:
    cl = Cluster(tmp_path, n)
    try:
        cl.start_all()
        info = cl.wait_for_leader(30)
        assert len(info.voters) == n
        offsets = produce(cl.bootstrap(), [f"v{i}".encode() for i in range(20)])
        assert offsets == sorted(offsets) and len(set(offsets)) == 20

        # every voter replicates and the high watermark covers the writes
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            info = cl.wait_for_leader()
            if info.high_watermark > offsets[-1] and all(
                    v.log_end_offset >= info.high_watermark for v in info.voters):
                break
            time.sleep(0.1)
        assert info.high_watermark > offsets[-1]
        assert all(v.log_end_offset >= offsets[-1] + 1 for v in info.voters)

        # kill -9 the leader: a new leader within fetch timeout + election timeout + 1 s (+ a split vote)
        old = info.leader_id
        t0 = time.monotonic()
        cl.kill(old)
        new = cl.wait_for_leader(20, exclude=old, min_epoch=info.leader_epoch + 1)
        failover = time.monotonic() - t0
        print(f"{n} nodes: kill -9 failover took {failover:.2f}s")
        # fetch timeout + election timeout + 1 s, plus one split vote's retry
        # (election.backoff.max.ms): two followers can time out together (Kafka's backoff,
        # base 100 ms, since the mixed-quorum suite aligned it with Kafka)
        assert failover < 2.0 + 1.0 + 1.0 + 1.0
        # a new leader's high watermark is known once its LeaderChange commits; it then
        # covers everything the old leader committed
        deadline = time.monotonic() + 5
        while new.high_watermark < info.high_watermark and time.monotonic() < deadline:
            time.sleep(0.05)
            new = cl.wait_for_leader(5, exclude=old)
        assert new.high_watermark >= info.high_watermark  # everything the old leader committed

        # committed data survives, more writes commit, the restarted node catches up
        more = produce(cl.bootstrap(), [b"after-kill"])
        cl.start(old)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            q = cl.quorum()
            if q is not None and all(v.log_end_offset > more[0] for v in q.voters):
                break
            time.sleep(0.1)
        q = cl.quorum()
        assert q is not None and all(v.log_end_offset > more[0] for v in q.voters), q

        # graceful shutdown of the leader: a new leader in under a second
        leader = q.leader_id
        t0 = time.monotonic()
        cl.stop(leader)
        cl.wait_for_leader(5, exclude=leader, min_epoch=q.leader_epoch + 1)
        graceful = time.monotonic() - t0
        print(f"{n} nodes: graceful failover took {graceful:.2f}s")
        assert graceful < 1.0 + 0.5  # SIGTERM handling and process exit included

        records = consume_all(cl.bootstrap(), 21)
        assert [v for _, v in records] == [f"v{i}".encode() for i in range(20)] + [b"after-kill"]
    finally:
        cl.close()
