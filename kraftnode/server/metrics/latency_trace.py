"""Opt-in timestamps along the commit path, for the latency budget (docs/bench.md, issue 28).

Set ``KRAFTNODE_LATENCY_TRACE=DIR`` in a node's environment and it records, with
``time.monotonic_ns()`` (CLOCK_MONOTONIC: one clock for every process on the host, so the
three nodes' and the client's stamps line up), when each step of a commit happens on it:
a request's frame arriving, parsed, answered and written; the leader's append; every fsync;
the high watermark moving; an append completing; a peer's response arriving and handled;
a request to a peer written. At exit the node writes them to
``DIR/node-<id>-<pid>.trace``, one event per line, and ``tools/bench/latency_budget.py``
joins the files of a quorum (and the client's) into the median time of each step.

Off (the default) it costs one test of a module constant at each call site: :data:`ON` is
read once, when this module is first imported, and every site is
``if latency_trace.ON: latency_trace.mark(...)``.  Nothing of it is in the raft core: the
core stays pure, the sites are in the server (listener, peer client, driver, log adapter).

The buffer is bounded (:data:`MAX_EVENTS`); events past it are dropped and counted.
"""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["MAX_EVENTS", "ON", "dump", "fetch_response_keys", "mark", "records_end", "request_keys",
           "set_node"]

#: the directory the events go to; None: tracing off (read once, at import)
DIRECTORY: str | None = os.environ.get("KRAFTNODE_LATENCY_TRACE") or None
ON: bool = DIRECTORY is not None
#: at most this many events per process (a 1-outstanding run of a few thousand commits
#: makes ~20 per commit on the leader)
MAX_EVENTS = 2_000_000

_events: list[tuple[int, str, int, int, int, int]] = []
_dropped = 0
_node_id = -1
_now = time.monotonic_ns


def mark(event: str, a: int = 0, b: int = 0, c: int = 0, d: int = 0, t_ns: int | None = None) -> None:
    """Record ``event`` now (or at ``t_ns``) with up to four integers that identify it
    (an API key, offsets, a replica id ...)."""
    global _dropped
    if len(_events) >= MAX_EVENTS:
        _dropped += 1
        return
    _events.append((_now() if t_ns is None else t_ns, event, a, b, c, d))


def records_end(records: Any) -> int:
    """The offset after the last batch in ``records`` (raw v2 batches); -1 when none.
    Reads batch headers only (base offset at 0, length at 8, last offset delta at 23)."""
    if not records:
        return -1
    mv = memoryview(records)
    pos, end = 0, -1
    while pos + 27 <= len(mv):
        base = int.from_bytes(mv[pos:pos + 8], "big", signed=True)
        length = int.from_bytes(mv[pos + 8:pos + 12], "big", signed=True)
        if length <= 0 or pos + 12 + length > len(mv):
            break
        delta = int.from_bytes(mv[pos + 23:pos + 27], "big", signed=True)
        end = base + delta + 1
        pos += 12 + length
    return end


def request_keys(api_key: int, body: Any, reply_body: Any) -> tuple[int, int, int]:
    """What identifies a request on the commit path, from its body and answer: a Produce's
    (base offset answered, -1, -1); a Fetch's (fetch offset, end offset of the records
    answered or -1, replica id).  Only called while tracing."""
    try:
        if api_key == 0 and reply_body is not None:    # Produce
            return reply_body.responses[0].partition_responses[0].base_offset, -1, -1
        if api_key == 1:                               # Fetch
            part = body.topics[0].partitions[0]
            records = None
            if reply_body is not None:
                records = reply_body.responses[0].partitions[0].records
            replica = body.replica_id if body.replica_id >= 0 else body.replica_state.replica_id
            return part.fetch_offset, records_end(records), replica
    except (AttributeError, IndexError):
        pass
    return -1, -1, -1


def fetch_response_keys(resp: Any) -> tuple[int, int]:
    """A Fetch response's (end offset of its records or -1, high watermark)."""
    try:
        part = resp.responses[0].partitions[0]
        return records_end(part.records), part.high_watermark
    except (AttributeError, IndexError):
        return -1, -1


def set_node(node_id: int) -> None:
    global _node_id
    _node_id = node_id


def dump() -> Path | None:
    """Write the events recorded so far (and forget them); the file written, if any."""
    global _dropped
    if DIRECTORY is None or not _events:
        return None
    d = Path(DIRECTORY)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"node-{_node_id}-{os.getpid()}.trace"
    with path.open("a") as f:
        if _dropped:
            f.write(f"# dropped {_dropped} events past {MAX_EVENTS}\n")
        f.writelines(f"{t} {e} {a} {b} {c} {d}\n" for t, e, a, b, c, d in _events)
    _events.clear()
    _dropped = 0
    return path


if ON:
    atexit.register(dump)
