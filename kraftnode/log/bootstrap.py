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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
    "MINIMUM_BOOTSTRAP_MV",
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

# MetadataVersion feature levels for the KRaft-era releases (Kafka's MetadataVersion enum).
METADATA_VERSIONS: dict[str, int] = {
    "3.0-IV1": 1, "3.1-IV0": 2, "3.2-IV0": 3, "3.3-IV0": 4, "3.3-IV1": 5, "3.3-IV2": 6,
    "3.3-IV3": 7, "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12,
    "3.6-IV1": 13, "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18,
    "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21,
}
LATEST_PRODUCTION = "3.9-IV0"
KRAFT_VERSION_1_MINIMUM_MV = 21  # kraft.version 1 requires metadata.version 3.9-IV0
# MetadataVersion.MINIMUM_BOOTSTRAP_VERSION: Kafka's BootstrapMetadata refuses anything older.
MINIMUM_BOOTSTRAP_MV = 4


def check_bootstrap_metadata_version(level: int, source: str) -> None:
    """ValueError, in Kafka's words, for a bootstrap metadata.version its BootstrapMetadata
    constructor refuses (before 3.3-IV0): ``kafka-storage.sh format`` fails on it and a
    controller loading it does not start."""
    if level < MINIMUM_BOOTSTRAP_MV:
        raise ValueError(f"Bootstrap metadata.version before 3.3-IV0 are not supported. "
                         f"Can't load metadata from {source}")


def parse_release_version(text: str) -> tuple[str, int]:
    """``3.9``, ``3.9.1`` or ``3.9-IV0`` -> (name, feature level); ValueError names the accepted values.

    Like ``MetadataVersion.fromVersionString``, only the first two dot-separated segments
    count (``3.7.1`` is ``3.7``, the release's last IV).
    """
    t = text.strip()
    t = ".".join(t.split(".")[:2])
    if t in METADATA_VERSIONS:
        return t, METADATA_VERSIONS[t]
    matches = [k for k in METADATA_VERSIONS if k.split("-")[0] == t]
    if matches:
        name = matches[-1]
        return name, METADATA_VERSIONS[name]
    raise ValueError(
        f"Unknown release version '{text}'. Supported versions are: {', '.join(METADATA_VERSIONS)}"
    )


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


def bootstrap_records(metadata_version: int) -> list[bytes]:
    """Framed record values of the bootstrap metadata (metadata.version only, as DESIGN.md fixes)."""
    rec = FeatureLevelRecord(name="metadata.version", feature_level=metadata_version)
    return [encode_metadata_record(rec, 0)]


def read_bootstrap_records(metadata_dir: str | os.PathLike[str]) -> tuple[list[bytes], str]:
    """The framed bootstrap records of ``bootstrap.checkpoint`` (and where they came from).

    Kafka falls back to the latest production metadata.version when the file is absent.
    ValueError when the file cannot be read.
    """
    path = Path(metadata_dir) / BOOTSTRAP_FILE
    if not path.exists():
        return bootstrap_records(METADATA_VERSIONS[LATEST_PRODUCTION]), "the default bootstrap"
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
                               extra: Sequence[bytes] = ()) -> bytes:
    """``extra``: further framed records after metadata.version (format --add-scram)."""
    header = build_kraft_control_batch(
        [SnapshotHeaderRecord(version_=0, last_contained_log_timestamp=0)],
        base_offset=0, partition_leader_epoch=0, timestamp=now_ms)
    values = bootstrap_records(metadata_version) + list(extra)
    data = build_batch([Record(None, v, (), now_ms) for v in values], base_offset=1,
                       partition_leader_epoch=0, now_ms=now_ms)
    footer = build_kraft_control_batch(
        [SnapshotFooterRecord(version_=0)], base_offset=1 + len(values), partition_leader_epoch=0,
        timestamp=now_ms)
    return header + data + footer


def write_bootstrap_checkpoint(log_dir: str | os.PathLike[str], metadata_version: int, now_ms: int,
                               extra: Sequence[bytes] = ()) -> Path:
    path = Path(log_dir) / BOOTSTRAP_FILE
    atomic_write(path, bootstrap_checkpoint_bytes(metadata_version, now_ms, extra))
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
