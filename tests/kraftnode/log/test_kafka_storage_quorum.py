"""Every segment a real 3-voter quorum wrote, judged by Kafka 3.9's ``LogSegment.sanityCheck``,
index sanity checks and the checks of ``kafka-dump-log.sh --verify-index-only`` (one JVM for
all segments of all nodes): after rolls at run time (32 KiB segments, through Kafka's internal
``metadata.log.segment.min.bytes``), after a kill -9 of the leader mid-write and its restart,
and after a clean SIGTERM shutdown. Zero findings on every node, each time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kraftnode.log import MetadataLog, QuorumStateStore
from tests.support.cluster import Cluster, wait_for_hw
from tests.support.kafka import KafkaHome
from tests.support.storage_check import StorageCheck, segment_logs

pytestmark = pytest.mark.timeout(240)

SEGMENT = "metadata.log.segment.bytes=32768\nmetadata.log.segment.min.bytes=12\n"
VALUE = b"x" * 180


def _produce(bootstrap: str, n: int, tag: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "batch.size": 3000})
    for i in range(n):
        while True:
            try:
                p.produce("__cluster_metadata", value=f"{tag}-{i:06d}-".encode() + VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(30) == 0


def _converged(cl: Cluster, timeout: float = 30) -> int:
    """Wait until every voter's log end offset equals the leader's high watermark."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = cl.wait_for_leader()
        ends = {v.log_end_offset for v in info.voters}
        if len(info.voters) == 3 and ends == {info.high_watermark}:
            return info.high_watermark
        time.sleep(0.1)
    raise AssertionError(f"voters did not converge: {cl.wait_for_leader()}")


def _all_logs(cl: Cluster, tmp_path: Path) -> dict[int, list[Path]]:
    return {i: segment_logs(tmp_path / f"node{i}" / "metadata") for i in cl.ids}


def test_kafka_finds_nothing_wrong_with_any_segment_of_a_real_quorum(tmp_path: Path, kafka_home: KafkaHome) -> None:
    cl = Cluster(tmp_path, 3, extra=SEGMENT)
    sc = StorageCheck(kafka_home)
    try:
        cl.start_all()
        wait_for_hw(cl, 1, 30)
        # 1. rolls at run time: checked live, the active segments included
        _produce(cl.bootstrap(), 800, "a")
        # then a little at a time until the leader has just rolled: its active segment
        # holds less than index.interval.bytes, so no index entry has been needed yet
        leader = cl.wait_for_leader().leader_id
        ldir = tmp_path / f"node{leader}" / "metadata"
        rolled_at = len(segment_logs(ldir))
        for k in range(100):
            _produce(cl.bootstrap(), 5, f"e{k}")
            if len(segment_logs(ldir)) > rolled_at:
                break
        else:
            raise AssertionError("the leader did not roll")
        _converged(cl)
        active = segment_logs(ldir)[-1]
        assert 0 < active.stat().st_size < 4096, active.stat().st_size
        logs = _all_logs(cl, tmp_path)
        assert all(len(v) >= 4 for v in logs.values()), {i: len(v) for i, v in logs.items()}
        assert sc.verify([p for v in logs.values() for p in v], closed=False) == []

        # 2. kill -9 of the leader while a producer writes, restart, catch up
        stop = threading.Event()
        failures: list[BaseException] = []

        def load() -> None:
            p = Producer({"bootstrap.servers": cl.bootstrap(), "acks": "all", "linger.ms": 2, "batch.size": 3000,
                          "message.timeout.ms": 20000})
            i = 0
            while not stop.is_set() and i < 20000:
                try:
                    p.produce("__cluster_metadata", value=f"b-{i:06d}-".encode() + VALUE, partition=0)
                    i += 1
                except BufferError:
                    p.poll(0.05)
                except BaseException as e:  # pragma: no cover - reported below
                    failures.append(e)
                    return
                p.poll(0)
                if i % 50 == 0:
                    time.sleep(0.01)
            p.flush(30)

        t = threading.Thread(target=load)
        t.start()
        try:
            time.sleep(1.5)
            leader = cl.wait_for_leader().leader_id
            cl.kill(leader)
            time.sleep(1.0)
            cl.start(leader)
            time.sleep(2.0)
        finally:
            stop.set()
            t.join(60)
        assert not failures, failures
        _converged(cl, 60)
        assert "rebuilding index files" not in cl.log(leader), "the killed leader's indexes were fine"
        logs = _all_logs(cl, tmp_path)
        assert sc.verify([p for v in logs.values() for p in v], closed=False) == []

        # 3. a clean shutdown: every segment, the active ones too, ends its time index with
        # the final entry Kafka's LogSegment.close() writes
        for i in cl.ids:
            cl.stop(i)
        logs = _all_logs(cl, tmp_path)
        assert sc.verify([p for v in logs.values() for p in v], closed=True) == []

        # the state files of every node, read by Kafka's readers, are what kraftnode holds
        for i in cl.ids:
            pdir = tmp_path / f"node{i}" / "metadata" / "__cluster_metadata-0"
            held = QuorumStateStore(pdir).read()
            assert held is not None
            got = sc.call("quorum-state", pdir / "quorum-state")["state"]
            assert (got["epoch"], got["leaderId"], got["votedId"]) == \
                (held.leader_epoch, held.leader_id, held.voted_id)
            log = MetadataLog(tmp_path / f"node{i}" / "metadata")
            try:
                epochs = [list(e) for e in log.epoch_entries()]
            finally:
                log.close()
            assert sc.call("epoch-checkpoint", pdir / "leader-epoch-checkpoint")["entries"] == epochs
            assert len(epochs) >= 2  # the kill made a new leader epoch
            assert sc.call("bootstrap", tmp_path / f"node{i}" / "metadata")["metadataVersion"] == 21
    finally:
        cl.close()
        sc.close()
