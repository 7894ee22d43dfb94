"""Find the files a ``kraft-log`` read covers, and which replica each belongs to.

A path may be a segment (``*.log``) or snapshot (``*.checkpoint``) file, a
``__cluster_metadata-0`` partition directory, a metadata log dir (the directory
holding ``meta.properties`` and ``__cluster_metadata-0``), or any directory above
log dirs (e.g. a ``kraftnode dev-cluster`` directory with one log dir per node);
globs are expanded.  Anything else is an error naming the path -- a path that
matches nothing is never silently ignored.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kraftnode.errors import LocalError
from kraftnode.log.meta_properties import MetaPropertiesError, read_meta_properties
from kraftnode.log.metadata_log import METADATA_PARTITION_DIR as PARTITION_DIR
from kraftnode.log.segment import parse_segment_file_name
from kraftnode.log.snapshot import parse_snapshot_file_name

__all__ = ["InputFile", "PathError", "discover", "PARTITION_DIR"]

_MAX_DEPTH = 4
_NODE_IN_PATH = re.compile(r"(?:node|replica|broker|controller)[-_]?(\d+)", re.IGNORECASE)


class PathError(LocalError, ValueError):
    """A path given to the ``kraft-log`` source is not something it can read."""


@dataclass(frozen=True, order=True)
class InputFile:
    replica: int | None
    path: str
    file_type: str  # segment | snapshot | bootstrap
    sort_key: int = 0


def replica_of(log_dir: Path) -> int | None:
    """node.id from ``meta.properties``; otherwise a ``node<N>`` component of the path."""
    try:
        props = read_meta_properties(log_dir)
    except MetaPropertiesError as e:
        raise PathError(str(e)) from None
    if props is not None:
        return props.node_id
    for part in reversed(log_dir.resolve().parts):
        m = _NODE_IN_PATH.fullmatch(part)
        if m:
            return int(m.group(1))
    return None


def _file(path: Path, replica: int | None) -> InputFile:
    name = path.name
    base = parse_segment_file_name(name)
    if base is not None:
        return InputFile(replica, str(path), "segment", base)
    sid = parse_snapshot_file_name(name)
    if sid is not None:
        return InputFile(replica, str(path), "snapshot", sid.offset)
    if name == "bootstrap.checkpoint":
        return InputFile(replica, str(path), "bootstrap", -1)
    raise PathError(f"{path}: not a log segment (<20 digits>.log) or snapshot (<offset>-<epoch>.checkpoint) file")


def _partition_files(pdir: Path, replica: int | None) -> list[InputFile]:
    out = []
    for entry in sorted(os.listdir(pdir)):
        if parse_segment_file_name(entry) is not None or parse_snapshot_file_name(entry) is not None:
            out.append(_file(pdir / entry, replica))
    return out


def _log_dir_files(log_dir: Path) -> list[InputFile]:
    replica = replica_of(log_dir)
    out = _partition_files(log_dir / PARTITION_DIR, replica)
    boot = log_dir / "bootstrap.checkpoint"
    if boot.is_file():
        out.append(_file(boot, replica))
    return out


def _find_log_dirs(root: Path, depth: int) -> list[Path]:
    if (root / PARTITION_DIR).is_dir():
        return [root]
    if depth >= _MAX_DEPTH:
        return []
    found: list[Path] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for e in entries:
        if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
            found.extend(_find_log_dirs(Path(e.path), depth + 1))
    return found


def _one(path: Path) -> list[InputFile]:
    if path.is_file():
        pdir = path.parent
        log_dir = pdir.parent if pdir.name == PARTITION_DIR else pdir
        return [_file(path, replica_of(log_dir))]
    if not path.is_dir():
        raise PathError(f"{path}: no such file or directory")
    if path.name == PARTITION_DIR:
        return _partition_files(path, replica_of(path.parent))
    log_dirs = _find_log_dirs(path, 0)
    if not log_dirs:
        raise PathError(f"{path}: not a metadata log dir (no {PARTITION_DIR} directory in it or below it)")
    out: list[InputFile] = []
    for d in log_dirs:
        out.extend(_log_dir_files(d))
    return out


def discover(paths: list[str]) -> list[InputFile]:
    """Every file to read, grouped by replica and ordered by offset; duplicates removed."""
    if not paths:
        raise PathError("no path given: use .load(PATH) or .option('path', PATH)")
    seen: dict[str, InputFile] = {}
    for p in paths:
        expanded = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not expanded:
            raise PathError(f"{p}: the pattern matches nothing")
        for e in expanded:
            for f in _one(Path(e)):
                seen.setdefault(os.path.realpath(f.path), f)
    return sorted(seen.values(), key=lambda f: (f.replica is None, f.replica or 0, f.file_type, f.sort_key, f.path))
