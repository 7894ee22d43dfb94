"""``partition.metadata``: the topic id file Kafka keeps in every partition directory.

For ``__cluster_metadata`` the topic id is the reserved ``AAAAAAAAAAAAAAAAAAAAAQ``
(``Uuid.METADATA_TOPIC_ID``).  Kafka writes ``version: 0\\ntopic_id: <id>`` and
refuses to start if an existing file names a different topic id.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from kraftnode.errors import LocalError
from kraftnode.log.fileutil import atomic_write
from kraftnode.vocabulary import METADATA_TOPIC_ID
from recordbatch.wire import uuid_from_base64, uuid_to_base64

__all__ = ["METADATA_TOPIC_ID", "PartitionMetadataError", "read_partition_metadata",
           "write_partition_metadata", "ensure_partition_metadata"]

FILE_NAME = "partition.metadata"


class PartitionMetadataError(LocalError, ValueError):
    """``partition.metadata`` exists but is malformed or names another topic."""


def write_partition_metadata(partition_dir: str | os.PathLike[str], topic_id: uuid.UUID) -> None:
    text = f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}"
    atomic_write(Path(partition_dir) / FILE_NAME, text.encode("ascii"))


def read_partition_metadata(partition_dir: str | os.PathLike[str]) -> uuid.UUID | None:
    path = Path(partition_dir) / FILE_NAME
    try:
        raw = path.read_bytes()[:4096]
    except FileNotFoundError:
        return None
    try:
        lines = raw.decode("ascii").strip().split("\n")
    except UnicodeDecodeError:
        raise PartitionMetadataError(f"{path}: not a partition.metadata file") from None
    if len(lines) != 2 or lines[0].strip() != "version: 0" or not lines[1].startswith("topic_id:"):
        raise PartitionMetadataError(f"{path}: malformed partition.metadata (expected version 0 and topic_id)")
    try:
        return uuid_from_base64(lines[1][len("topic_id:"):].strip())
    except ValueError as e:
        raise PartitionMetadataError(f"{path}: {e}") from None


def ensure_partition_metadata(partition_dir: str | os.PathLike[str], topic_id: uuid.UUID = METADATA_TOPIC_ID) -> None:
    """Write the file if absent; refuse to run against a directory of another topic."""
    existing = read_partition_metadata(partition_dir)
    if existing is None:
        write_partition_metadata(partition_dir, topic_id)
    elif existing != topic_id:
        raise PartitionMetadataError(
            f"{Path(partition_dir) / FILE_NAME}: topic id {uuid_to_base64(existing)} does not match "
            f"{uuid_to_base64(topic_id)}"
        )
