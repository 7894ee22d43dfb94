"""A new controller leader's activation records come first in its epoch, even when a
producer writes the moment it is elected (real process): Produce waits for the activation,
so the bootstrap records (metadata.version) are the log's first metadata records. Before,
a NoOpRecord produced in that window was replayed first, the log counted as "not empty",
and metadata.version was never written."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kraftnode.log.metadata_log import MetadataLog
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import FeatureLevelRecord, NoOpRecord
from kraftnode.protocol.registry import PRODUCE
from recordbatch import Record, build_batch
from tests.support.cluster import Cluster
from tests.support.node import call

pytestmark = pytest.mark.timeout(120)


def produce_noops(port: int, n: int) -> int:
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="__cluster_metadata", partition_data=[P.PartitionProduceData(index=0, records=build_batch(
            [Record(None, encode_metadata_record(NoOpRecord(), 0)) for _ in range(n)]))])])
    _, resp = call(port, PRODUCE, 9, req)
    return int(resp.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]


def test_writes_racing_a_new_leaders_activation_come_after_the_bootstrap_records(tmp_path: Path) -> None:
    for attempt in range(3):
        cl = Cluster(tmp_path / f"run{attempt}", 3)
        try:
            cl.start_all()
            # hammer Produce at every node from before the election until some are accepted:
            # the new leader's high watermark (and so its activation) waits for a follower's
            # Fetch, and these writes arrive in between
            deadline = time.monotonic() + 30
            accepted = 0
            lead = 0
            while accepted < 5 and time.monotonic() < deadline:
                for i in cl.ids:
                    try:
                        code = produce_noops(cl.port(i), 3)
                    except OSError:
                        continue
                    assert code in (Errors.NONE, Errors.NOT_LEADER_OR_FOLLOWER), code
                    if code == Errors.NONE:
                        accepted += 1
                        lead = i
            assert accepted >= 5, cl.log(1)
            for i in cl.ids:
                cl.stop(i)
            with MetadataLog(tmp_path / f"run{attempt}" / f"node{lead}" / "metadata") as mlog:
                records = [decode_metadata_record(r.value)[0] for b in mlog.batches(0) if not b.is_control
                           for r in b.records() if r.value is not None]
            kinds = [type(m).__name__ for m in records]
            first_noop = kinds.index("NoOpRecord")
            assert any(isinstance(m, FeatureLevelRecord) and m.name == "metadata.version"
                       for m in records[:first_noop]), kinds[:20]
            assert "the metadata log is empty: appending" in cl.log(lead)
        finally:
            cl.close()
