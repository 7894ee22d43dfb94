"""Issue 17 must-show 5: KIP-856's disk-failure runbook, end to end, with real processes and
the genuine ``kafka-metadata-quorum.sh`` (docs/operations.md, "Replacing a controller's
disk").

A dynamic 3-voter quorum with small snapshot and retention settings (so a replica starting
from nothing must catch up through FetchSnapshot) runs under keyed write load (acks=all,
idempotent). For each voter in turn: stop it, delete its metadata log directory, re-format
it with ``--no-initial-controllers`` (kafka-storage.sh's syntax), start it -- an observer
under a new directory id -- and let it catch up (through FetchSnapshot: the others' logs
start past offset 0); then replace its old (id, directory id) with the new one. Both orders
are tried as Kafka handles them: add-then-remove is refused by the leader (an id is a voter
once only: DUPLICATE_VOTER, Kafka's message), so the replacement is remove-then-add.

Throughout, the quorum stays writable (acknowledgements keep coming; the longest gap is
bounded by a leader failover), and at the end every acknowledged key is on every node, in
its latest snapshot or its log.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kraftnode.log.meta_properties import read_meta_properties
from kraftnode.log.metadata_log import MetadataLog
from kraftnode.log.snapshot import list_snapshots, read_snapshot_batches, snapshot_file_name
from tests.support.cluster import CLUSTER_ID, wait_for_hw
from tests.support.kafka import KafkaHome
from tests.support.quorums import DynamicCluster, format_node

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

EXTRA = ("metadata.log.max.record.bytes.between.snapshots=6000\n"
         "metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=4096\n"
         "metadata.max.retention.bytes=4096\n"
         "controller.quorum.fetch.timeout.ms=1000\ncontroller.quorum.election.timeout.ms=1000\n")
MAX_RECORDS = 60_000
#: a leader failover (the stopped voter may be the leader) plus a slow JVM on a loaded machine
MAX_ACK_GAP_S = 10.0


class Writer:
    """Keyed writes (each key once) with acks=all; remembers what was acknowledged and when."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: dict[bytes, int] = {}
        self.ack_times: list[float] = []
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 30000, "linger.ms": 5, "retry.backoff.ms": 50})

        def delivered(err: object, msg: object) -> None:
            if err is None:
                self.acked[msg.key()] = msg.offset()  # type: ignore[attr-defined]
                self.ack_times.append(time.monotonic())
            else:
                self.failed += 1

        i = 0
        while not self.stop.is_set() and i < MAX_RECORDS:
            try:
                p.produce("__cluster_metadata", key=f"k{i:06d}".encode(), value=b"v" * 40, partition=0,
                          on_delivery=delivered)
                i += 1
            except BufferError:
                p.poll(0.1)
            p.poll(0)
            time.sleep(0.01)
        p.flush(60)

    def acks_since(self, t: float) -> int:
        return sum(1 for x in self.ack_times if x >= t)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(90)


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[DynamicCluster]:
    cl = DynamicCluster(tmp_path, 3, extra=EXTRA)
    cl.start_all()
    try:
        wait_for_hw(cl, 1, 30)
        yield cl
    finally:
        cl.close()


def mq(kafka: KafkaHome, cl: DynamicCluster, *args: str) -> subprocess.CompletedProcess[str]:
    servers = ",".join(f"127.0.0.1:{cl.port(i)}" for i in cl.ids)
    return kafka.tool("kafka-metadata-quorum", "--bootstrap-controller", servers, *args, timeout=90)


def partition_dir(cl: DynamicCluster, i: int) -> Path:
    return cl.root / f"node{i}" / "metadata" / "__cluster_metadata-0"


def log_start(cl: DynamicCluster, i: int) -> int:
    """The base offset of a node's oldest segment on disk (0 until retention cleaned)."""
    bases = [int(p.stem) for p in partition_dir(cl, i).glob("*.log")]
    return min(bases, default=0)


def wait(what: str, cond: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def voters(cl: DynamicCluster) -> dict[int, str]:
    from recordbatch.wire import uuid_to_base64

    info = wait_for_hw(cl, 1)
    return {v.replica_id: uuid_to_base64(v.directory_id) for v in info.voters}


def caught_up_observer(cl: DynamicCluster, i: int, new_dir: str) -> bool:
    from recordbatch.wire import uuid_to_base64

    info = wait_for_hw(cl, 1)
    return any(o.replica_id == i and uuid_to_base64(o.directory_id) == new_dir
               and o.log_end_offset >= info.high_watermark - 200 for o in info.observers)


def keys_on_disk(cl: DynamicCluster, i: int) -> set[bytes]:
    """Record keys in a node's latest snapshot and in its log after it."""
    keys: set[bytes] = set()
    snaps = list_snapshots(partition_dir(cl, i))
    if snaps:
        for b in read_snapshot_batches(partition_dir(cl, i) / snapshot_file_name(snaps[-1])):
            if not b.is_control:
                keys.update(r.key for r in b.records() if r.key is not None)
    log = MetadataLog(cl.root / f"node{i}" / "metadata")
    try:
        for b in log.batches(log.start_offset):
            if not b.is_control:
                keys.update(r.key for r in b.records() if r.key is not None)
    finally:
        log.close()
    return keys


def replace_voter(cl: DynamicCluster, kafka_home: KafkaHome, writer: Writer, v: int, add_first: bool) -> None:
    """The runbook for voter ``v``, with the refused add-then-remove first when ``add_first``."""
    phase = time.monotonic()
    old_dir = cl.directory_id(v)
    others = [i for i in cl.ids if i != v]
    # the others' logs were cleaned behind a snapshot: v must fetch one
    wait("the log cleaned behind a snapshot", lambda: all(log_start(cl, i) > 0 for i in others), 90)
    cl.stop(v)
    shutil.rmtree(cl.root / f"node{v}" / "metadata")
    format_node(cl.properties(v), CLUSTER_ID, "--no-initial-controllers")
    meta = read_meta_properties(cl.root / f"node{v}" / "metadata")
    assert meta is not None and meta.directory_id is not None
    cl.dir_ids[v] = meta.directory_id
    new_dir = cl.directory_id(v)
    assert new_dir != old_dir
    logged = len(cl.log(v))
    cl.start(v)
    wait(f"node {v} to catch up as an observer", lambda: caught_up_observer(cl, v, new_dir), 90)
    assert "installed snapshot" in cl.log(v)[logged:], cl.log(v)[logged:][-3000:]
    if add_first:
        # Kafka's AddVoterHandler: the id is still a voter (the old directory id)
        dup = mq(kafka_home, cl, "--command-config", cl.properties(v), "add-controller")
        assert dup.returncode != 0
        assert (f"org.apache.kafka.common.errors.DuplicateVoterException: The voter id for "
                f"ReplicaKey(id={v}, directoryId=Optional[{new_dir}]) is already part of the set of "
                f"voters") in dup.stderr, dup.stderr
    r = mq(kafka_home, cl, "remove-controller", "--controller-id", str(v),
           f"--controller-directory-id={old_dir}")
    assert r.returncode == 0, r.stdout + r.stderr
    wait(f"old voter {v} removed", lambda: v not in voters(cl))
    r = mq(kafka_home, cl, "--command-config", cl.properties(v), "add-controller")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Added controller {v} with directory id {new_dir}" in r.stdout, r.stdout
    wait(f"voter {v} back under its new directory id", lambda: voters(cl).get(v) == new_dir)
    assert writer.acks_since(phase) > 0, f"no write acknowledged while replacing voter {v}"


def test_each_voter_replaced_after_disk_loss_under_load(quorum: DynamicCluster, kafka_home: KafkaHome) -> None:
    cl = quorum
    writer = Writer(cl.bootstrap())
    started = time.monotonic()
    try:
        wait("writes acknowledged", lambda: len(writer.acked) >= 50)
        for v, add_first in ((1, True), (2, False), (3, True)):
            replace_voter(cl, kafka_home, writer, v, add_first)
    finally:
        writer.close()
    assert time.monotonic() - started < 240
    assert writer.ack_times and len(writer.acked) >= 200, (len(writer.acked), writer.failed)
    gaps = [b - a for a, b in zip(writer.ack_times, writer.ack_times[1:], strict=False)]
    assert max(gaps) < MAX_ACK_GAP_S, f"the quorum was not writable for {max(gaps):.1f} s"
    top = max(writer.acked.values())
    wait("every node caught up", lambda: all(v.log_end_offset > top for v in wait_for_hw(cl, top + 1).voters))
    for i in cl.ids:
        cl.stop(i)
    for i in cl.ids:
        lost = set(writer.acked) - keys_on_disk(cl, i)
        assert not lost, f"node {i} lost {len(lost)} acknowledged writes: {sorted(lost)[:5]}"
    print(f"{len(writer.acked)} writes acknowledged, {writer.failed} failed, longest gap {max(gaps):.2f} s")
