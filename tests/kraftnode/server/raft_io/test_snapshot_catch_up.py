"""A replica whose fetch offset is below the leader's log start catches up through
FetchSnapshot over the wire, then continues with Fetch."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kraftnode.log.metadata_log import MetadataLog
from kraftnode.log.snapshot import SnapshotId, write_snapshot
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, Cluster, wait_for_hw

pytestmark = pytest.mark.timeout(180)


def _produce(bootstrap: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce("__cluster_metadata", value=f"r{i}".encode(), partition=0)
    assert p.flush(20) == 0


def test_replica_behind_the_log_start_installs_a_snapshot(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 3)
    try:
        cl.start_all()
        wait_for_hw(cl, 1, 30)
        _produce(cl.bootstrap(), 40)
        info = wait_for_hw(cl, 41)
        for i in cl.ids:
            cl.stop(i)
        # nodes 1 and 2 take a snapshot at a committed batch boundary and drop the log below it
        snap_offset = epoch = -1
        for i in (1, 2):
            log = MetadataLog(tmp_path / f"node{i}" / "metadata")
            try:
                views = list(log.batches(0))
                cut = views[len(views) // 2]
                snap_offset, epoch = cut.base_offset, views[len(views) // 2 - 1].partition_leader_epoch
                data = [bytes(v.buffer) for v in views[: len(views) // 2] if not v.is_control]
                write_snapshot(log.dir, SnapshotId(snap_offset, epoch), data,
                               last_contained_log_timestamp=0, now_ms=int(time.time() * 1000))
                log.advance_start_offset(snap_offset)
            finally:
                log.close()
        # node 3 loses its disk and is reformatted: it must fetch the snapshot
        shutil.rmtree(tmp_path / "node3" / "metadata")
        subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config",
                        str(tmp_path / "node3" / "server.properties"), "--cluster-id", CLUSTER_ID],
                       check=True, capture_output=True)
        cl.start_all()
        wait_for_hw(cl, info.high_watermark, 30)
        _produce(cl.bootstrap(), 5)
        deadline = time.monotonic() + 30
        q = cl.quorum()
        while time.monotonic() < deadline:
            q = cl.quorum()
            if q is not None and q.high_watermark >= info.high_watermark + 5 and all(
                    v.log_end_offset >= q.high_watermark for v in q.voters):
                break
            time.sleep(0.2)
        assert q is not None
        node3 = next(v for v in q.voters if v.replica_id == 3)
        assert node3.log_end_offset >= q.high_watermark, (q, cl.log(3)[-3000:])
        assert "installed snapshot" in cl.log(3)
        for i in cl.ids:
            cl.stop(i)
        log = MetadataLog(tmp_path / "node3" / "metadata")
        try:
            assert log.start_offset == snap_offset  # the log restarted at the snapshot's end
        finally:
            log.close()
    finally:
        cl.close()
