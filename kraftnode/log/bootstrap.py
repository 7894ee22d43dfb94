"""What ``kraftnode format`` writes: ``bootstrap.checkpoint`` and the KIP-853 bootstrap snapshot.

``bootstrap.checkpoint`` (Kafka's ``BootstrapDirectory`` binary file, written by
``BatchFileWriter``): a SnapshotHeader control batch (lastContainedLogTimestamp 0),
one batch of FeatureLevelRecords (metadata.version first), a SnapshotFooter batch;
offsets 0..n, epoch 0.

``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` (dynamic quorums
only, Kafka's ``RecordsSnapshotWriter``): one control batch [SnapshotHeader,
KRaftVersion(kraft.version=1), Voters] and a SnapshotFooter batch.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraftnode import features
from kraftnode.features import METADATA_VERSIONS
from kraftnode.log.fileutil import atomic_write
from kraftnode.log.metadata_log import METADATA_PARTITION_DIR
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.log.snapshot import (
    BOOTSTRAP_SNAPSHOT_ID,
    SnapshotError,
    SnapshotId,
    read_snapshot_batches,
    write_snapshot,
)
from kraftnode.log.uuids import is_reserved_directory_id
from kraftnode.protocol.generated.metadata import FeatureLevelRecord
from recordbatch import CorruptBatchError, Record, build_batch
from recordbatch.control import build_kraft_control_batch
from recordbatch.generated import SnapshotFooterRecord, SnapshotHeaderRecord, VotersRecord
from recordbatch.wire import uuid_from_base64

__all__ = [
    "BOOTSTRAP_FILE",
    "LATEST_PRODUCTION",
    "MINIMUM_BOOTSTRAP_MV",
    "bootstrap_records",
    "check_bootstrap_metadata_version",
    "DynamicVoter",
    "METADATA_VERSIONS",
    "parse_initial_controllers",
    "parse_release_version",
    "read_bootstrap_records",
    "write_bootstrap_checkpoint",
    "write_bootstrap_snapshot",
]

BOOTSTRAP_FILE = "bootstrap.checkpoint"

# MetadataVersion's levels and Kafka 4.4's features: kraftnode.features (one table)
LATEST_PRODUCTION = features.LATEST_PRODUCTION
KRAFT_VERSION_1_MINIMUM_MV = 21  # kraft.version 1's bootstrap metadata.version, 3.9-IV0
# The oldest bootstrap metadata.version a kraftnode controller loads: Kafka 3.x's
# MINIMUM_BOOTSTRAP_VERSION (3.3-IV0), so that a quorum formatted by an older kraftnode or
# Kafka 3.x still starts; ``format`` itself takes Kafka 4.4's levels only (3.3-IV3 and up).
MINIMUM_BOOTSTRAP_MV = 4


def check_bootstrap_metadata_version(level: int, source: str) -> None:
    """ValueError, in Kafka's words, for a bootstrap metadata.version its BootstrapMetadata
    constructor refuses (before 3.3-IV0): a controller loading it does not start."""
    if level < MINIMUM_BOOTSTRAP_MV:
        raise ValueError(f"Bootstrap metadata.version before 3.3-IV0 are not supported. "
                         f"Can't load metadata from {source}")


def parse_release_version(text: str) -> tuple[str, int]:
    """``4.4``, ``3.9.1`` or ``3.9-IV0`` -> (name, feature level), as Kafka 4.4's Formatter
    reads ``--release-version`` (MetadataVersion.fromVersionString, production levels only);
    ValueError with its message otherwise."""
    level = features.from_version_string(text)
    if level is None or level > features.LATEST_PRODUCTION_LEVEL:
        raise ValueError(
            f"Unknown metadata.version '{text}'. Supported metadata.version are: "
            f"{', '.join(features.PRODUCTION_METADATA_VERSIONS)}")
    return features.mv_name(level), level


@dataclass(frozen=True)
class DynamicVoter:
    """One ``id@host:port:directoryId`` entry of ``--initial-controllers`` (Kafka's DynamicVoter)."""

    node_id: int
    host: str
    port: int
    directory_id: uuid.UUID


_VOTER_RE = re.compile(r"^(-?\d+)@(\[[^\]]*\]|[^:@\[\]]+):(\d+):([A-Za-z0-9_-]{22})$")


def parse_initial_controllers(text: str) -> list[DynamicVoter]:
    out: list[DynamicVoter] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError("Empty entry in --initial-controllers")
        m = _VOTER_RE.match(part)
        if not m:
            raise ValueError(
                f"Invalid --initial-controllers entry '{part}': expected <id>@<host>:<port>:<directory id>"
            )
        node_id, host, port = int(m.group(1)), m.group(2), int(m.group(3))
        if node_id < 0:
            raise ValueError(f"Invalid --initial-controllers entry '{part}': negative node id")
        if not 0 < port <= 65535:
            raise ValueError(f"Invalid --initial-controllers entry '{part}': port out of range")
        try:
            dir_id = uuid_from_base64(m.group(4))
        except ValueError as e:
            raise ValueError(f"Invalid --initial-controllers entry '{part}': {e}") from None
        if is_reserved_directory_id(dir_id):
            raise ValueError(f"Invalid --initial-controllers entry '{part}': reserved directory id")
        if host.startswith("["):
            host = host[1:-1]
        if any(v.node_id == node_id for v in out):
            raise ValueError(f"Node id {node_id} appears more than once in --initial-controllers")
        out.append(DynamicVoter(node_id, host, port, dir_id))
    if not out:
        raise ValueError("--initial-controllers is empty")
    return out


def bootstrap_records(metadata_version: int,
                      feature_levels: Mapping[str, int] | None = None) -> list[bytes]:
    """Framed record values of the bootstrap metadata as Kafka 4.4's Formatter writes them:
    metadata.version's FeatureLevelRecord, then one per other feature with a level above 0, by
    name (kraft.version is the raft's, never a FeatureLevelRecord)."""
    recs = [FeatureLevelRecord(name=features.METADATA_VERSION, feature_level=metadata_version)]
    for name, level in sorted((feature_levels or {}).items()):
        if level > 0 and name not in (features.METADATA_VERSION, features.KRAFT_VERSION):
            recs.append(FeatureLevelRecord(name=name, feature_level=level))
    return [encode_metadata_record(r, 0) for r in recs]


def read_bootstrap_records(metadata_dir: str | os.PathLike[str]) -> tuple[list[bytes], str]:
    """The framed bootstrap records of ``bootstrap.checkpoint`` (and where they came from).

    Kafka falls back to the latest production metadata.version when the file is absent
    (BootstrapMetadata.fromVersion: metadata.version only).
    ValueError when the file cannot be read.
    """
    path = Path(metadata_dir) / BOOTSTRAP_FILE
    if not path.exists():
        return bootstrap_records(features.LATEST_PRODUCTION_LEVEL), "the default bootstrap"
    values: list[bytes] = []
    try:
        for b in read_snapshot_batches(path):
            if b.is_control:
                continue
            for r in b.records():
                if r.value is not None:
                    decode_metadata_record(r.value)  # must be a metadata record
                    values.append(bytes(r.value))
    except (SnapshotError, CorruptBatchError, ValueError) as e:
        raise ValueError(f"{path} is unreadable: {e}") from None
    return values, str(path)


def bootstrap_checkpoint_bytes(metadata_version: int, now_ms: int,
                               extra: Sequence[bytes] = (),
                               feature_levels: Mapping[str, int] | None = None) -> bytes:
    """``extra``: further framed records after the features (format --add-scram)."""
    header = build_kraft_control_batch(
        [SnapshotHeaderRecord(version_=0, last_contained_log_timestamp=0)],
        base_offset=0, partition_leader_epoch=0, timestamp=now_ms)
    values = bootstrap_records(metadata_version, feature_levels) + list(extra)
    data = build_batch([Record(None, v, (), now_ms) for v in values], base_offset=1,
                       partition_leader_epoch=0, now_ms=now_ms)
    footer = build_kraft_control_batch(
        [SnapshotFooterRecord(version_=0)], base_offset=1 + len(values), partition_leader_epoch=0,
        timestamp=now_ms)
    return header + data + footer


def write_bootstrap_checkpoint(log_dir: str | os.PathLike[str], metadata_version: int, now_ms: int,
                               extra: Sequence[bytes] = (),
                               feature_levels: Mapping[str, int] | None = None) -> Path:
    path = Path(log_dir) / BOOTSTRAP_FILE
    atomic_write(path, bootstrap_checkpoint_bytes(metadata_version, now_ms, extra, feature_levels))
    return path


def voters_record(voters: Sequence[DynamicVoter], listener_name: str) -> VotersRecord:
    return VotersRecord(
        version_=0,
        voters=[
            VotersRecord.Voter(
                voter_id=v.node_id,
                voter_directory_id=v.directory_id,
                endpoints=[VotersRecord.Endpoint(name=listener_name, host=v.host, port=v.port)],
                kraft_version_feature=VotersRecord.KRaftVersionFeature(
                    min_supported_version=0, max_supported_version=1),
            )
            for v in voters
        ],
    )


def write_bootstrap_snapshot(log_dir: str | os.PathLike[str], voters: Sequence[DynamicVoter],
                             listener_name: str, now_ms: int, kraft_version: int = 1) -> Path:
    partition_dir = Path(log_dir) / METADATA_PARTITION_DIR
    partition_dir.mkdir(parents=True, exist_ok=True)
    sid: SnapshotId = BOOTSTRAP_SNAPSHOT_ID
    return write_snapshot(partition_dir, sid, (), last_contained_log_timestamp=now_ms, now_ms=now_ms,
                          kraft_version=kraft_version, voters=voters_record(voters, listener_name))
