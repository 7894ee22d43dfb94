"""Kafka's text checkpoint format (``CheckpointFile``): ``<version>\\n<count>\\n<entry>\\n...``.

Used for ``leader-epoch-checkpoint`` (entries ``<epoch> <startOffset>``) and the
log-dir level ``recovery-point-offset-checkpoint`` (entries ``<topic> <partition>
<offset>``).  Reading is strict: a file that does not parse raises
:class:`CheckpointError` naming the file and line, because guessing at durable
state is how data gets lost.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kraftnode.errors import LocalError
from kraftnode.log.fileutil import atomic_write

__all__ = ["CheckpointError", "read_checkpoint", "write_checkpoint"]

CURRENT_VERSION = 0
_MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024


class CheckpointError(LocalError, ValueError):
    """A checkpoint file exists but is malformed."""


def write_checkpoint(path: str | os.PathLike[str], entries: Sequence[Sequence[object]]) -> None:
    """Atomically replace ``path`` with the given entries (each a row of space-separated fields)."""
    lines = [str(CURRENT_VERSION), str(len(entries))]
    lines += [" ".join(str(f) for f in e) for e in entries]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))


def read_checkpoint(path: str | os.PathLike[str], fields: int) -> list[list[str]] | None:
    """Read a checkpoint with ``fields`` fields per entry; ``None`` if the file does not exist."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > _MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{p}: checkpoint file is implausibly large ({size} bytes)")
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CheckpointError(f"{p}: not a text checkpoint file") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"{p}: truncated checkpoint file (missing version or count line)")
    if lines[0].strip() != str(CURRENT_VERSION):
        raise CheckpointError(f"{p}: unrecognised checkpoint version {lines[0]!r}")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(f"{p}: malformed entry count {lines[1]!r}") from None
    body = lines[2:]
    if count < 0 or count != len(body):
        raise CheckpointError(f"{p}: expected {count} entries but found {len(body)}")
    out = []
    for i, line in enumerate(body, start=3):
        parts = line.split()
        if len(parts) != fields:
            raise CheckpointError(f"{p}: line {i} {line!r} does not have {fields} fields")
        out.append(parts)
    return out
