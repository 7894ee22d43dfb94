"""kraftnode.server.metrics.latency_trace: off unless KRAFTNODE_LATENCY_TRACE names a directory
(read once, at import); the keys it extracts from real messages and batches; what it writes.
The whole chain across a real quorum is tests/tools/test_latency_budget.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kraftnode.protocol import generated as w
from kraftnode.server.metrics import latency_trace
from recordbatch import Record, build_batch


def test_off_by_default_and_on_with_the_directory(tmp_path: Path) -> None:
    code = ("from kraftnode.server.metrics import latency_trace as t; t.set_node(7); "
            "t.mark('x', 1, 2, 3, 4); print(t.ON, t.dump())")
    env = {"PATH": "/usr/bin:/bin"}
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60, check=True)
    assert off.stdout.split()[0] == "False"
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                        env={**env, "KRAFTNODE_LATENCY_TRACE": str(tmp_path)}, check=True)
    assert on.stdout.split()[0] == "True"
    (f,) = tmp_path.glob("node-7-*.trace")
    t, name, *ints = f.read_text().split()
    assert int(t) > 0 and name == "x" and ints == ["1", "2", "3", "4"]


def test_records_end_reads_batch_headers() -> None:
    one = build_batch([Record(None, b"a")], base_offset=10)
    three = build_batch([Record(None, b"b"), Record(None, b"c"), Record(None, b"d")], base_offset=11)
    assert latency_trace.records_end(one) == 11
    assert latency_trace.records_end(one + three) == 14
    assert latency_trace.records_end(one + three[:20]) == 11      # a partial batch is not counted
    assert latency_trace.records_end(b"") == -1 and latency_trace.records_end(None) == -1


def test_request_keys_of_fetch_and_produce() -> None:
    F = w.FetchRequest
    q = F(replica_id=2, max_wait_ms=500, min_bytes=0, max_bytes=1 << 20, topics=[F.FetchTopic(
        topic="__cluster_metadata", partitions=[F.FetchPartition(partition=0, fetch_offset=41)])])
    R = w.FetchResponse
    resp = R(responses=[R.FetchableTopicResponse(topic="__cluster_metadata", partitions=[
        R.PartitionData(partition_index=0, high_watermark=40,
                        records=build_batch([Record(None, b"x")], base_offset=41))])])
    assert latency_trace.request_keys(1, q, resp) == (41, 42, 2)
    assert latency_trace.fetch_response_keys(resp) == (42, 40)
    P = w.ProduceResponse
    presp = P(responses=[P.TopicProduceResponse(name="t", partition_responses=[
        P.PartitionProduceResponse(index=0, base_offset=99)])])
    assert latency_trace.request_keys(0, None, presp) == (99, -1, -1)
