"""``meta.properties`` version 1, as Kafka 3.9 writes and checks it.

The file identifies the node and cluster a log directory belongs to; starting a
node on a directory of another cluster or node must fail loudly.  Kafka writes it
with ``Properties.store`` (a ``#`` line, a ``#<date>`` line, then the entries) via a
temp file and atomic rename; we write the same bytes in the same key order.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kraftnode.errors import ConfigError, LocalError
from kraftnode.javaprops import format_properties, parse_properties
from kraftnode.log.fileutil import atomic_write
from kraftnode.log.uuids import is_reserved_directory_id
from recordbatch.wire import uuid_from_base64, uuid_to_base64

__all__ = ["MetaProperties", "MetaPropertiesError", "parse_meta_properties", "read_meta_properties",
           "write_meta_properties"]

FILE_NAME = "meta.properties"


class MetaPropertiesError(LocalError, ValueError):
    """``meta.properties`` is malformed, inconsistent, or carries a reserved directory id."""


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: uuid.UUID | None = None
    version: int = 1

    def to_text(self, now: float | None = None) -> str:
        items: dict[str, str] = {"node.id": str(self.node_id)}
        if self.directory_id is not None:
            items["directory.id"] = uuid_to_base64(self.directory_id)
        items["version"] = str(self.version)
        items["cluster.id"] = self.cluster_id
        stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y", time.localtime(now))
        return format_properties(items, ("", stamp))


def write_meta_properties(log_dir: str | os.PathLike[str], props: MetaProperties) -> None:
    atomic_write(Path(log_dir) / FILE_NAME, props.to_text().encode("utf-8"))


def read_meta_properties(log_dir: str | os.PathLike[str]) -> MetaProperties | None:
    """Read and validate; ``None`` when the directory has no meta.properties."""
    path = Path(log_dir) / FILE_NAME
    try:
        raw = path.read_bytes()[: 1024 * 1024]
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MetaPropertiesError(f"{path}: cannot read: {e.strerror}") from None
    return parse_meta_properties(raw, str(path))


def parse_meta_properties(raw: bytes, path: str) -> MetaProperties:
    """Validate the bytes of a ``meta.properties`` file (``path`` names it in errors) --
    wherever they were read from (a local file, or HDFS through Spark's filesystem layer)."""
    try:
        values = parse_properties(raw.decode("utf-8"))
    except (UnicodeDecodeError, ConfigError) as e:
        raise MetaPropertiesError(f"{path}: not a properties file ({e})") from None
    version_s = values.get("version")
    if version_s is None:
        raise MetaPropertiesError(f"{path}: missing version")
    if version_s.strip() not in ("0", "1"):
        raise MetaPropertiesError(f"{path}: unsupported version {version_s!r}")
    version = int(version_s)
    cluster_id = values.get("cluster.id", "").strip()
    if not cluster_id:
        raise MetaPropertiesError(f"{path}: missing cluster.id")
    id_key = "node.id" if version == 1 else "broker.id"
    node_s = values.get(id_key)
    if node_s is None:
        raise MetaPropertiesError(f"{path}: missing {id_key}")
    try:
        node_id = int(node_s.strip())
    except ValueError:
        raise MetaPropertiesError(f"{path}: {id_key} {node_s!r} is not an integer") from None
    dir_id: uuid.UUID | None = None
    if "directory.id" in values:
        try:
            dir_id = uuid_from_base64(values["directory.id"].strip())
        except ValueError as e:
            raise MetaPropertiesError(f"{path}: directory.id: {e}") from None
        if is_reserved_directory_id(dir_id):
            raise MetaPropertiesError(
                f"{path}: directory.id {uuid_to_base64(dir_id)} is a reserved directory id"
            )
    return MetaProperties(cluster_id=cluster_id, node_id=node_id, directory_id=dir_id, version=version)
