"""Message.to_json as Kafka's generated JsonConverters write it (what kafka-dump-log prints)."""

from __future__ import annotations

import uuid

from kraftnode.protocol.generated.metadata import PartitionRecord


def test_a_tagged_field_at_its_default_is_omitted_as_kafkas_json_converter_does() -> None:
    """JsonConverterGenerator wraps a tagged field in generateNonDefaultValueCheck: at its
    default it is not written (found comparing kraftnode dump-log with Kafka's
    MetadataJsonConverters on a generated snapshot, tests/interop/test_snapshot_interop.py)."""
    p = PartitionRecord(partition_id=0, topic_id=uuid.UUID(int=1), replicas=[1], isr=[1], leader=1)
    assert "leaderRecoveryState" not in p.to_json(0)
    assert "leaderEpoch" in p.to_json(0)   # not tagged: always written
    p.leader_recovery_state = 1
    assert p.to_json(0)["leaderRecoveryState"] == 1
    # and it reads back either way (a missing tagged field is its default)
    assert PartitionRecord.from_json(PartitionRecord(partition_id=0, topic_id=uuid.UUID(int=1)).to_json(0), 0) \
        .leader_recovery_state == 0
