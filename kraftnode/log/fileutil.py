"""Durable small-file writes: temp file, fsync, atomic rename, fsync of the directory.

Every small state file Kafka keeps (quorum-state, meta.properties, checkpoints) is
replaced this way, so a crash leaves either the old or the new content, never a
mix, and the rename itself survives power loss because the directory is synced.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir", "fsync_file"]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so that entries created, renamed or removed in it are durable."""
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike[str]) -> None:
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes, *, tmp_suffix: str = ".tmp") -> None:
    """Replace ``path`` with ``data`` atomically and durably (``<path><tmp_suffix>`` is the temp)."""
    target = Path(path)
    tmp = target.with_name(target.name + tmp_suffix)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(target.parent)
