"""The records the active controller writes (server/controller_io/controller_duties.py): its
activation records, the bootstrap records it accepts, and RegisterControllerRecord."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraftnode.log.bootstrap import write_bootstrap_checkpoint
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata.state import MetadataState
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import FeatureLevelRecord, NoOpRecord
from kraftnode.server.controller_io.controller_duties import (
    activation_records,
    check_bootstrap_records,
    controller_registration_record,
    read_bootstrap_records,
)
from kraftnode.server.net.api_versions import FeatureView


def meta(m: object) -> bytes:
    return encode_metadata_record(m, 0)


def test_activation_records_follow_kafka() -> None:
    boot = [meta(FeatureLevelRecord(name="metadata.version", feature_level=21))]
    values, _ = activation_records(MetadataState(), boot)
    names = [type(decode_metadata_record(v)[0]).NAME for v in values]
    assert names == ["BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord",
                     "EndTransactionRecord"]
    # metadata.version before 3.6-IV1 has no metadata transactions: the bare records
    old = [meta(FeatureLevelRecord(name="metadata.version", feature_level=8))]
    assert activation_records(MetadataState(), old)[0] == old
    # a non-empty log with an open transaction gets it aborted, nothing else
    st = MetadataState(metadata_records=3, transaction_start=5, metadata_version=21)
    values, what = activation_records(st, boot)
    assert len(values) == 1 and "aborting" in what
    assert activation_records(MetadataState(metadata_records=3, metadata_version=21), boot)[0] == []


def test_activation_records_at_4x_follow_kafka_44() -> None:
    """Kafka 4.4's ActivationRecordsGenerator: no ZkMigrationStateRecord; with ELR enabled by the
    bootstrap, the cluster-level min.insync.replicas ConfigRecord before the EndTransaction."""
    boot = [meta(FeatureLevelRecord(name="metadata.version", feature_level=33)),
            meta(FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1))]
    values, _ = activation_records(MetadataState(), boot, default_min_isr=2)
    decoded = [decode_metadata_record(v)[0] for v in values]
    assert [type(m).NAME for m in decoded] == ["BeginTransactionRecord", "FeatureLevelRecord", "FeatureLevelRecord",
                                               "ConfigRecord", "EndTransactionRecord"]
    cfg = decoded[3]
    assert (cfg.resource_type, cfg.resource_name, cfg.name, cfg.value) == (4, "", "min.insync.replicas", "2")
    no_elr = [meta(FeatureLevelRecord(name="metadata.version", feature_level=25))]
    assert [type(decode_metadata_record(v)[0]).NAME for v in activation_records(MetadataState(), no_elr)[0]] == [
        "BeginTransactionRecord", "FeatureLevelRecord", "EndTransactionRecord"]


SUPPORTED = FeatureView().supported  # what we register, and what a Kafka 4.4 controller supports


def test_bootstrap_records_are_checked_as_a_kafka_controller_loads_them(tmp_path: Path) -> None:
    write_bootstrap_checkpoint(tmp_path, 21, 0)
    values, source = read_bootstrap_records(tmp_path)
    check_bootstrap_records(values, source, SUPPORTED)  # what format writes is accepted

    def fails(records: list[object]) -> str:
        with pytest.raises(ValueError) as e:
            check_bootstrap_records([meta(r) for r in records], "f", SUPPORTED)
        return str(e.value)

    mv21 = FeatureLevelRecord(name="metadata.version", feature_level=21)
    # BootstrapMetadata.fromRecords: a metadata.version record is required
    assert "No FeatureLevelRecord for metadata.version" in fails([NoOpRecord()])
    # FeatureControlManager.replay: a Kafka 4.4 controller stops on levels it does not support,
    # metadata.version before MetadataVersion.MINIMUM_VERSION (3.3-IV3 = 7) included
    assert "only supports versions 7-33" in fails([FeatureLevelRecord(name="metadata.version", feature_level=3)])
    assert "only supports versions 7-33" in fails([FeatureLevelRecord(name="metadata.version", feature_level=6)])
    check_bootstrap_records([meta(FeatureLevelRecord(name="metadata.version", feature_level=7))], "f", SUPPORTED)
    check_bootstrap_records([meta(FeatureLevelRecord(name="metadata.version", feature_level=33))], "f", SUPPORTED)
    assert "only supports versions 7-33" in fails([FeatureLevelRecord(name="metadata.version", feature_level=34)])
    check_bootstrap_records([meta(mv21), meta(FeatureLevelRecord(name="group.version", feature_level=1))],
                            "f", SUPPORTED)
    assert "only supports versions 0-1" in fails([mv21, FeatureLevelRecord(name="group.version", feature_level=2)])
    assert "only supports versions 0" in fails([mv21, FeatureLevelRecord(name="test.feature.version", feature_level=1)])
    assert "kraft.version" in fails([mv21, FeatureLevelRecord(name="kraft.version", feature_level=2)])
    # level 0 of a feature nobody supports is fine (it removes the feature)
    check_bootstrap_records([meta(mv21), meta(FeatureLevelRecord(name="test.feature.version", feature_level=0))],
                            "f", SUPPORTED)


def test_controller_registration_record_follows_listener_info() -> None:
    R = w.ControllerRegistrationRequest
    inc = uuid.uuid4()

    def req(*listeners: tuple[str, int, int]) -> w.ControllerRegistrationRequest:
        return R(controller_id=3, incarnation_id=inc, zk_migration_ready=False,
                 listeners=[R.Listener(name=n, host="h", port=p, security_protocol=sp) for n, p, sp in listeners],
                 features=[R.Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)])

    rec = controller_registration_record(req(("CONTROLLER", 1, 0), ("SSL_CTL", 2, 1), ("CONTROLLER", 3, 0)))
    # a repeated name keeps its first position and its last value (Kafka's LinkedHashMap)
    assert [(e.name, e.port, e.security_protocol) for e in rec.end_points] == [("CONTROLLER", 3, 0), ("SSL_CTL", 2, 1)]
    assert (rec.controller_id, rec.incarnation_id, rec.features[0].max_supported_version) == (3, inc, 1)
    decoded, version = decode_metadata_record(meta(rec))
    assert version == 0 and decoded == rec
    # an unknown security protocol: Kafka's followers could not replay the record
    with pytest.raises(ValueError, match="Unknown security protocol 9 in listener X"):
        controller_registration_record(req(("CONTROLLER", 1, 0), ("X", 2, 9)))
