"""Real processes with small thresholds: every node generates snapshots, cleans its log as
Kafka's KafkaMetadataLog does, consumers see the new log start, and a wiped node catches
up through FetchSnapshot."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kraftnode.log.snapshot import list_snapshots, read_snapshot_batches, snapshot_file_name
from kraftnode.metadata.state_machine import KeyValueStateMachine, snapshot_data_records
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, Cluster, wait_for_hw

pytestmark = pytest.mark.timeout(240)

EXTRA = ("metadata.log.max.record.bytes.between.snapshots=20000\n"
         "metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=16384\n"
         "metadata.max.retention.bytes=60000\n")
TOPIC = "__cluster_metadata"


def produce(bootstrap: str, start: int, n: int, written: dict[int, tuple[bytes, bytes | None]]) -> None:
    """Keyed records (some deletes); remembers the committed offset of each."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def done(err: object, msg: object) -> None:
        assert err is None, err
        written[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    for i in range(start, start + n):
        key = f"key-{i % 50}".encode()
        value = None if i % 17 == 0 else f"value-{i}-".encode() * 8
        p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=done)
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def implied_state(written: dict[int, tuple[bytes, bytes | None]], upto: int) -> dict[bytes, bytes]:
    kv = KeyValueStateMachine()
    for off in sorted(o for o in written if o < upto):
        kv.apply_record(*written[off])
    return kv.data


def partition_dir(tmp: Path, i: int) -> Path:
    return tmp / f"node{i}" / "metadata" / "__cluster_metadata-0"


def log_start(tmp: Path, i: int) -> int:
    """The log start offset node i last checkpointed (log-start-offset-checkpoint)."""
    for line in (tmp / f"node{i}" / "metadata" / "log-start-offset-checkpoint").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == TOPIC:
            return int(parts[2])
    return 0


def wait_until(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out: {what}")


def check_node(tmp: Path, i: int, written: dict[int, tuple[bytes, bytes | None]]) -> int:
    """Every snapshot holds the state the committed log implies at its offset; returns the
    oldest kept snapshot's offset."""
    d = partition_dir(tmp, i)
    snaps = [s for s in list_snapshots(d) if s.offset > 0]
    assert snaps, f"no snapshot on node {i}"
    for s in snaps:
        state = {k: v for k, v in snapshot_data_records(read_snapshot_batches(d / snapshot_file_name(s)))
                 if k is not None and v is not None}
        assert state == implied_state(written, s.offset), f"node {i} snapshot {s}"
    return list_snapshots(d)[0].offset


def test_snapshots_cleaning_log_start_and_catch_up(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 3, extra=EXTRA)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    try:
        cl.start_all()
        wait_for_hw(cl, 1, 30)
        for round_ in range(6):  # six rounds, each well past the 20000-byte threshold
            produce(cl.bootstrap(), round_ * 500, 500, written)
            wait_for_hw(cl, max(written) + 1, 30)
        hw = max(written) + 1

        def generated(i: int) -> list[str]:
            return re.findall(r"generated snapshot (\S+)", cl.log(i))

        def cleaned(i: int) -> bool:
            # at least two snapshots made, the older ones deleted, the log start moved up
            return len(generated(i)) >= 3 and "log start offset advanced to" in cl.log(i)
        for i in cl.ids:
            wait_until(lambda i=i: cleaned(i), 30, f"node {i} snapshots and cleaning")  # type: ignore[misc]
        # every node that replayed the log from the start took its first snapshot at the same
        # offset: the first batch boundary past the threshold (later ones may drift, as in
        # Kafka, when the threshold is crossed again while a snapshot is still being written;
        # a node that lagged may have installed the leader's snapshot instead)
        made = [generated(i) for i in cl.ids if "installed snapshot" not in cl.log(i)]
        assert len(made) >= 2
        assert len({g[0] for g in made}) == 1, made
        for i in cl.ids:
            oldest = check_node(tmp_path, i, written)
            d = partition_dir(tmp_path, i)
            assert snapshot_file_name(list_snapshots(d)[0]) != generated(i)[0]  # the first one was deleted
            # the log start offset (Kafka's log-start-offset-checkpoint) is the end offset of a
            # kept snapshot, and the segments wholly below it are gone (cleaning goes on meanwhile:
            # wait for a consistent view)
            def start_ok(i: int = i, d: Path = d) -> bool:
                start = log_start(tmp_path, i)
                snaps = {s.offset for s in list_snapshots(d)}
                segs = sorted(int(p.name.split(".")[0]) for p in d.glob("*.log"))
                return (start == log_start(tmp_path, i) and start in snaps and 0 not in segs and segs[0] <= start
                        and (len(segs) == 1 or segs[1] > start))
            wait_until(start_ok, 10, f"node {i}: log start, snapshots and segments agree")
            assert oldest <= max(s.offset for s in list_snapshots(d))
        # a tail below the threshold (retention may have cleaned the log up to its end)
        produce(cl.bootstrap(), 3000, 20, written)
        hw = max(written) + 1
        wait_for_hw(cl, hw, 30)
        # consumers: EARLIEST is the log start, and reading from the beginning starts there
        c = Consumer({"bootstrap.servers": cl.bootstrap(), "group.id": "g", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        try:
            low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
            q = cl.quorum()
            assert q is not None
            # the leader's log start is the end offset of one of its snapshots (cleaning may
            # have moved it on since)
            leader_snaps = [int(name.split("-")[0]) for name in generated(q.leader_id)]
            assert low in leader_snaps and low > 0 and high >= hw, (low, leader_snaps)
            c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
            msg = None
            errors = []
            deadline = time.monotonic() + 20
            while msg is None and time.monotonic() < deadline:
                msg = c.poll(0.5)
                if msg is not None and msg.error():
                    errors.append(msg.error())
                    msg = None
            assert msg is not None and msg.offset() >= low, errors
        finally:
            c.close()

        # a wiped, re-formatted follower catches up through FetchSnapshot
        q = cl.quorum()
        assert q is not None
        victim = next(i for i in cl.ids if i != q.leader_id)
        cl.stop(victim)
        shutil.rmtree(tmp_path / f"node{victim}" / "metadata")
        subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config",
                        str(tmp_path / f"node{victim}" / "server.properties"), "--cluster-id", CLUSTER_ID],
                       check=True, capture_output=True)
        cl.start(victim)
        produce(cl.bootstrap(), 3020, 200, written)
        hw2 = max(written) + 1

        def caught_up() -> bool:
            info = cl.quorum()
            return info is not None and all(v.log_end_offset >= hw2 for v in info.voters if v.replica_id == victim)
        wait_until(caught_up, 60, "the wiped node catches up")
        assert "installed snapshot" in cl.log(victim)
        installed = [s for s in list_snapshots(partition_dir(tmp_path, victim)) if s.offset > 0]
        assert installed and installed[0].offset > 0
        check_node(tmp_path, victim, written)
        # its state machine applied the snapshot and the log after it (restart: same state)
        cl.stop(victim)
        cl.start(victim)
        wait_until(caught_up, 30, "the restarted node is back")
        assert "state loaded from snapshot" in cl.log(victim)
    finally:
        cl.close()


def test_dynamic_quorum_observer_catches_up_through_a_snapshot_then_becomes_a_voter(tmp_path: Path) -> None:
    from kraftnode.protocol import Errors
    from tests.kraftnode.server.test_voter_changes import (
        DynamicPair,
        add_voter,
        describe_quorum,
        retry_while_timed_out,
    )

    pair = DynamicPair(tmp_path, extra=EXTRA)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    try:
        pair.start(1)
        wait_until(lambda: _hw(pair.port(1)) > 0, 30, "node 1 leads")
        for round_ in range(4):
            produce(f"127.0.0.1:{pair.port(1)}", round_ * 500, 500, written)
        d1 = partition_dir(tmp_path, 1)
        wait_until(lambda: "log start offset advanced to" in (tmp_path / "node1" / "node.log").read_text(), 30,
                   "node 1 cleans its log")
        # the snapshot of a dynamic quorum carries the voter set (KRaftVersion + Voters)
        assert [s for s in list_snapshots(d1) if s.offset > 0]
        pair.start(2)
        dir2 = pair.directory_id(2)
        hw = max(written) + 1

        def observer_caught_up() -> bool:
            try:
                q = describe_quorum(pair.port(1))
            except (OSError, AssertionError):
                return False
            return any(o.replica_id == 2 and o.log_end_offset >= hw for o in q.observers)
        wait_until(observer_caught_up, 60, "node 2 catches up as an observer")
        log2 = (tmp_path / "node2" / "node.log").read_text()
        assert "installed snapshot" in log2 and "as an observer" in log2
        resp = retry_while_timed_out(lambda: add_voter(pair.port(1), 2, dir2, pair.port(2)))
        # (a leader that was the only voter for longer than the check-quorum timeout may resign
        # at once when the voter set grows: the add then completes under the next leader)
        assert resp.error_code in (Errors.NONE, Errors.NOT_LEADER_OR_FOLLOWER), pair.logs()

        def two_voters() -> bool:
            try:
                q = describe_quorum(pair.port(2))
            except (OSError, AssertionError):
                return False
            return q.leader_id >= 0 and sorted(v.replica_id for v in q.current_voters) == [1, 2]
        wait_until(two_voters, 60, "node 2 is a voter")
        produce(f"127.0.0.1:{pair.port(1)},127.0.0.1:{pair.port(2)}", 2000, 50, written)
        check_node(tmp_path, 2, written)
    finally:
        pair.close()


def _hw(port: int) -> int:
    from tests.kraftnode.server.test_voter_changes import describe_quorum

    try:
        return describe_quorum(port).high_watermark
    except (OSError, AssertionError):
        return -1


BIG = ("metadata.log.max.record.bytes.between.snapshots=8000000\n"
       "metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=4000000\n"
       "metadata.max.retention.bytes=20000000\n")


def test_a_leader_change_in_the_middle_of_a_snapshot_transfer_is_survived(tmp_path: Path) -> None:
    """The snapshot (~30 MB) travels in 8 MiB FetchSnapshot chunks; the leader is killed
    (SIGKILL) once the wiped replica's download has begun; the replica completes the
    download from the next leader (whose snapshots are at the same offsets) and catches up."""
    from confluent_kafka import Producer

    cl = Cluster(tmp_path, 3, extra=BIG)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    try:
        cl.start_all()
        wait_for_hw(cl, 1, 30)
        p = Producer({"bootstrap.servers": cl.bootstrap(), "acks": "all", "linger.ms": 20,
                      "batch.size": 500_000, "message.max.bytes": 1_000_000})

        def done(err: object, msg: object) -> None:
            assert err is None, err
            written[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]
        value = b"v" * 600
        for i in range(50_000):
            while True:
                try:
                    p.produce(TOPIC, key=f"key-{i:06d}".encode(), value=value, partition=0, on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        hw = max(written) + 1
        info = wait_for_hw(cl, hw, 60)
        leader = info.leader_id
        victim = next(i for i in cl.ids if i != leader)
        wait_until(lambda: all(partition_dir(tmp_path, i).exists() and list_snapshots(partition_dir(tmp_path, i))
                               and list_snapshots(partition_dir(tmp_path, i))[0].offset > 0 for i in cl.ids),
                   60, "every node snapshots and cleans")
        d = partition_dir(tmp_path, victim)
        mid_transfer = False
        for _attempt in range(4):
            cl.stop(victim)
            shutil.rmtree(tmp_path / f"node{victim}" / "metadata")
            subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config",
                            str(tmp_path / f"node{victim}" / "server.properties"), "--cluster-id", CLUSTER_ID],
                           check=True, capture_output=True)
            (tmp_path / f"node{victim}" / "node.log").write_bytes(b"")
            cl.start(victim)
            deadline = time.monotonic() + 60
            part = None
            while part is None and time.monotonic() < deadline:
                if d.exists():
                    part = next((f for f in d.iterdir() if f.name.endswith(".checkpoint.part")), None)
                time.sleep(0.001)
            assert part is not None, "the download never began"
            proc = cl.procs[leader]
            assert proc is not None
            os.kill(proc.pid, signal.SIGSTOP)   # freeze the leader at once, then look
            if "installed snapshot" not in cl.log(victim):
                mid_transfer = True
                break
            os.kill(proc.pid, signal.SIGCONT)  # the whole transfer beat us: try again
            info = wait_for_hw(cl, hw, 60)
            leader = info.leader_id
            victim = next(i for i in cl.ids if i != leader)
            d = partition_dir(tmp_path, victim)
        assert mid_transfer, "the transfer always completed before the leader could be stopped"
        cl.kill(leader)

        def caught_up() -> bool:
            q = cl.quorum()
            return q is not None and q.leader_id != leader and any(
                v.replica_id == victim and v.log_end_offset >= hw for v in q.voters)
        wait_until(caught_up, 90, "the wiped replica catches up from the next leader")
        assert "installed snapshot" in cl.log(victim)
        check_node(tmp_path, victim, written)
    finally:
        cl.close()
