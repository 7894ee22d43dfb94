"""Leadership transfer on demand (``kraftnode quorum ... transfer-leadership --to N``) with
real processes: many transfers in a row under write load, each completing within one
election timeout, no acknowledged write lost; refusals name the problem (exit 2)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kraftnode.log.metadata_log import MetadataLog
from tests.support.cluster import Cluster, wait_for_hw
from tests.support.kafka import KafkaHome

pytestmark = pytest.mark.timeout(400)

TRANSFERS = 100
ELECTION_TIMEOUT_MS = 1000  # controller.quorum.election.timeout.ms (default)
MAX_RECORDS = 20000


def _cli(cl: Cluster, via: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                           f"127.0.0.1:{cl.port(via)}", *args],
                          capture_output=True, text=True, timeout=60)


def test_transfers_in_a_row_under_write_load(tmp_path: Path, kafka_home: KafkaHome) -> None:
    from kraftnode.commands.transfer_leadership import transfer_leadership

    cl = Cluster(tmp_path, 3)
    try:
        cl.start_all()
        wait_for_hw(cl, 1, 30)
        acked: dict[bytes, int] = {}
        failed = 0
        stop = threading.Event()

        def produce() -> None:
            nonlocal failed
            p = Producer({"bootstrap.servers": cl.bootstrap(), "acks": "all", "enable.idempotence": True,
                          "message.timeout.ms": 30000, "linger.ms": 5, "retry.backoff.ms": 20})

            def cb(err: object, msg: object) -> None:
                nonlocal failed
                if err is None:
                    acked[msg.value()] = msg.offset()  # type: ignore[attr-defined]
                else:
                    failed += 1

            i = 0
            deadline = time.monotonic() + 180
            while not stop.is_set() and i < MAX_RECORDS and time.monotonic() < deadline:
                try:
                    p.produce("__cluster_metadata", value=f"t-{i:06d}".encode(), partition=0, on_delivery=cb)
                    i += 1
                except BufferError:
                    p.poll(0.1)
                p.poll(0)
                time.sleep(0.005)
            p.flush(60)

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(1.0)
        import argparse

        durations: list[float] = []
        epochs: list[int] = []
        try:
            for n in range(TRANSFERS):
                info = cl.wait_for_leader(10)
                target = cl.ids[(cl.ids.index(info.leader_id) + 1 + n % 2) % 3]
                args = argparse.Namespace(bootstrap_controller=cl.bootstrap(), bootstrap_server=None, to=target)
                start = time.monotonic()
                assert transfer_leadership(args) == 0
                durations.append((time.monotonic() - start) * 1000)
                after = cl.wait_for_leader(10)
                assert after.leader_id == target, (n, info.leader_id, target, after.leader_id)
                epochs.append(after.leader_epoch)
                time.sleep(0.1)
        finally:
            stop.set()
            t.join(120)
        durations.sort()
        print(f"{TRANSFERS} transfers: p50 {durations[len(durations) // 2]:.0f} ms, max {durations[-1]:.0f} ms; "
              f"epochs {epochs[0]}..{epochs[-1]}; {len(acked)} writes acknowledged, {failed} failed")
        # Each transfer (catch-up, resignation, election, seen through DescribeQuorum) completes
        # within one election timeout.
        assert durations[-1] < ELECTION_TIMEOUT_MS, durations
        assert epochs == sorted(epochs) and len(set(epochs)) == TRANSFERS
        assert len(acked) >= 200
        # The genuine kafka-metadata-quorum.sh sees the last transfer's target as the leader.
        last = cl.wait_for_leader(10)
        out = kafka_home.tool("kafka-metadata-quorum.sh", "--bootstrap-controller", cl.bootstrap(),
                              "describe", "--status")
        assert out.returncode == 0, out.stderr
        assert f"LeaderId:               {last.leader_id}\n" in out.stdout, out.stdout
        assert f"LeaderEpoch:            {epochs[-1]}\n" in out.stdout, out.stdout
        top = max(acked.values())
        wait_for_hw(cl, top + 1, 60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            info = cl.wait_for_leader()
            if all(v.log_end_offset >= top + 1 for v in info.voters):
                break
            time.sleep(0.2)
        for i in cl.ids:
            cl.stop(i)
        for i in cl.ids:
            log = MetadataLog(tmp_path / f"node{i}" / "metadata")
            try:
                seen: dict[bytes, list[int]] = {}
                for b in log.batches(0):
                    if not b.is_control:
                        for r in b.records():
                            seen.setdefault(bytes(r.value), []).append(r.offset)
            finally:
                log.close()
            lost = {v: o for v, o in acked.items() if v not in seen}
            moved = {v: (o, seen[v]) for v, o in acked.items() if v in seen and seen[v] != [o]}
            assert not lost, f"node {i} lost acknowledged writes: {sorted(lost.items())[:5]}"
            assert not moved, f"node {i}: acknowledged writes duplicated or moved: {list(moved.items())[:5]}"
    finally:
        cl.close()


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    # Pre-vote on: the paused follower must not disturb the leader when it resumes.
    cl = Cluster(tmp_path, 3, extra="kraftnode.raft.pre.vote.enable=true\n")
    try:
        cl.start_all()
        info = wait_for_hw(cl, 1, 30)
        r = _cli(cl, info.leader_id, "transfer-leadership", "--to", "9")
        assert r.returncode == 2 and "node 9 is not a voter (voters: 1, 2, 3)" in r.stderr, r
        assert "Traceback" not in r.stderr
        follower = next(i for i in cl.ids if i != info.leader_id)
        proc = cl.procs[follower]
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(3.0)  # > controller.quorum.fetch.timeout.ms: no longer caught up
            r = _cli(cl, info.leader_id, "transfer-leadership", "--to", str(follower))
        finally:
            proc.send_signal(signal.SIGCONT)
        assert r.returncode == 2 and f"node {follower} is not caught up" in r.stderr, r
        assert cl.wait_for_leader(10).leader_id == info.leader_id  # nothing moved
        r = _cli(cl, info.leader_id, "transfer-leadership", "--to", str(info.leader_id))
        assert r.returncode == 0 and "already the leader" in r.stdout, r
    finally:
        cl.close()
