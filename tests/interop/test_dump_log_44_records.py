"""``kraftnode dump-log`` prints Kafka 4.4's metadata records -- ClearElrRecord,
UnregisterControllerRecord, RegisterBrokerRecord v4 and BrokerRegistrationChangeRecord v3 with
cordoned log dirs, PartitionRecord / PartitionChangeRecord v2 with ELR fields -- exactly as Kafka
4.4's ``kafka-dump-log.sh --cluster-metadata-decoder`` does (the payload of every record)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from kraftnode.cli import main
from kraftnode.log import MetadataLog
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol.generated.metadata import (
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnregisterControllerRecord,
)
from recordbatch import Record, build_batch
from tests.support.kafka import KafkaHome

T = uuid.UUID("6f1e8c2a-0d4b-4c1e-9a77-5b2c3d4e5f60")
D1, D2 = uuid.UUID("1b5e0f7c-2a3d-4e6f-8a9b-0c1d2e3f4a5b"), uuid.UUID("2c6f1a8d-3b4e-4f70-9bac-1d2e3f4a5b6c")


def records() -> list[bytes]:
    R = RegisterBrokerRecord
    return [
        encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=33), 0),
        encode_metadata_record(FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
        encode_metadata_record(R(broker_id=101, is_migrating_zk_broker=False, incarnation_id=D1, broker_epoch=7,
                                 end_points=[R.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092,
                                                              security_protocol=0)],
                                 features=[R.BrokerFeature(name="metadata.version", min_supported_version=7,
                                                           max_supported_version=33)],
                                 rack=None, fenced=True, in_controlled_shutdown=False, log_dirs=[D1, D2],
                                 cordoned_log_dirs=[D2]), 4),
        encode_metadata_record(BrokerRegistrationChangeRecord(broker_id=101, broker_epoch=7, fenced=-1,
                                                              cordoned_log_dirs=[]), 3),
        encode_metadata_record(TopicRecord(name="t", topic_id=T), 0),
        encode_metadata_record(PartitionRecord(partition_id=0, topic_id=T, replicas=[101, 102, 103], isr=[101],
                                               removing_replicas=[], adding_replicas=[], leader=101,
                                               leader_recovery_state=0, leader_epoch=1, partition_epoch=2,
                                               directories=[D1, D1, D1], eligible_leader_replicas=[102, 103],
                                               last_known_elr=[]), 2),
        encode_metadata_record(PartitionChangeRecord(partition_id=0, topic_id=T, isr=[], leader=-1,
                                                     eligible_leader_replicas=[101, 102, 103],
                                                     last_known_elr=[101]), 2),
        encode_metadata_record(ClearElrRecord(topic_name="t"), 0),
        encode_metadata_record(ClearElrRecord(topic_name=""), 0),
        encode_metadata_record(UnregisterControllerRecord(controller_id=3), 0),
    ]


def test_dump_log_prints_44_records_as_kafka_44_does(kafka44: KafkaHome, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    values = records()
    with MetadataLog(tmp_path) as log:
        log.append_as_leader(build_batch([Record(None, v) for v in values], partition_leader_epoch=1), 1)
    seg = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    assert main(["dump-log", str(seg)]) == 0
    ours = [ln.split(" payload: ", 1)[1] for ln in capsys.readouterr().out.splitlines() if " payload: " in ln]
    r = kafka44.tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(seg), timeout=120,
                     env={"LOG_DIR": str(tmp_path / "logs")})
    assert r.returncode == 0, r.stdout + r.stderr
    theirs = [ln.split(" payload: ", 1)[1] for ln in r.stdout.splitlines() if " payload: " in ln]
    assert len(theirs) == len(values)
    assert not any("Error" in t for t in theirs), theirs
    assert ours == theirs
    assert any(re.search(r'"type":"CLEAR_ELR_RECORD"', t) for t in theirs)
