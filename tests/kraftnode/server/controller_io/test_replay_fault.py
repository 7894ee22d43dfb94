"""A record framed as a KRaft metadata record that no controller can decode (an unknown record
type, a version it does not read) would stop every controller replaying it, as it stops Kafka's
(kraftnode.metadata.state.MetadataFault): Produce refuses it, with Kafka's MetadataParseException
text, on a running node -- it never becomes "application data"."""

from __future__ import annotations

from pathlib import Path

from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import NoOpRecord
from kraftnode.protocol.registry import PRODUCE
from recordbatch import Record, build_batch
from recordbatch.wire import uvarint
from tests.support.cluster import Cluster, wait_for_hw
from tests.support.node import call


def produce(port: int, values: list[bytes]) -> w.ProduceResponse.PartitionProduceResponse:
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="__cluster_metadata", partition_data=[P.PartitionProduceData(
            index=0, records=build_batch([Record(None, v) for v in values]))])])
    _, resp = call(port, PRODUCE, 9, req)
    return resp.responses[0].partition_responses[0]  # type: ignore[attr-defined, no-any-return]


def test_produce_refuses_metadata_records_no_controller_can_replay(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 1)
    try:
        cl.start(1)
        info = wait_for_hw(cl)
        port = cl.port(info.leader_id)
        unknown = uvarint(1) + uvarint(99) + uvarint(0) + b"\x00"
        r = produce(port, [unknown])
        assert r.error_code == Errors.INVALID_RECORD
        assert r.error_message == ("batch at offset 0, record at batch offset 0: MetadataParseException: "
                                   "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata "
                                   "id 99; every controller would stop replaying it")
        # a good metadata record first does not carry a bad one after it
        bad_version = uvarint(1) + uvarint(3) + uvarint(9) + b"\xff\xff"
        r = produce(port, [encode_metadata_record(NoOpRecord(), 0), bad_version])
        assert r.error_code == Errors.INVALID_RECORD
        assert "record at batch offset 1: MetadataParseException: Failed to deserialize record with type 3" in \
            (r.error_message or "")
        # a decodable metadata record is still taken, and the node still runs
        assert produce(port, [encode_metadata_record(NoOpRecord(), 0)]).error_code == 0
        assert cl.running() == [1]
        assert "Encountered fatal fault" not in cl.log(1)
    finally:
        cl.close()
