"""Durable storage in Kafka 3.9's on-disk layout: the segmented metadata log, its
indexes and leader epoch cache, snapshots, quorum-state and meta.properties."""

from kraftnode.log.epoch_cache import LeaderEpochCache
from kraftnode.log.meta_properties import (
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from kraftnode.log.metadata_log import (
    METADATA_PARTITION_DIR,
    AppendInfo,
    InvalidAppendError,
    LogConfig,
    LogError,
    MetadataLog,
    OffsetOutOfRangeError,
    ReadInfo,
)
from kraftnode.log.quorum_state_store import QuorumStateData, QuorumStateError, QuorumStateStore
from kraftnode.log.snapshot import (
    SnapshotError,
    SnapshotId,
    SnapshotReader,
    SnapshotWriter,
    list_snapshots,
    validate_snapshot,
    write_snapshot,
)

__all__ = [
    "AppendInfo",
    "InvalidAppendError",
    "LeaderEpochCache",
    "LogConfig",
    "LogError",
    "METADATA_PARTITION_DIR",
    "MetaProperties",
    "MetadataLog",
    "OffsetOutOfRangeError",
    "QuorumStateData",
    "QuorumStateError",
    "QuorumStateStore",
    "ReadInfo",
    "SnapshotError",
    "SnapshotId",
    "SnapshotReader",
    "SnapshotWriter",
    "list_snapshots",
    "validate_snapshot",
    "write_snapshot",
    "read_meta_properties",
    "write_meta_properties",
]
