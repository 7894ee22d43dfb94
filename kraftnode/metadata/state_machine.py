"""The replicated state machine a node applies its committed log to (KIP-630).

Every committed batch is handed, in offset order and exactly once (across restarts
and snapshot loads), to a :class:`StateMachine`.  A snapshot is the state machine's
state written as records: ``<end offset>-<epoch>.checkpoint`` holds everything the
records below ``end offset`` imply, so the log below it can be deleted.

The protocol is deliberately small (docs/embedding.md):

``apply(batch)``
    One committed v2 batch (a :class:`recordbatch.BatchView`; control batches
    included, most state machines skip them).  ``end_offset`` arguments let a state
    machine stop inside a batch when only part of it is committed (never happens for
    batches appended by this project's raft leader, whose commits fall on batch
    boundaries).
``snapshot()``
    Called on the event loop thread between two ``apply`` calls; returns a
    zero-argument callable that yields ``(key, value)`` records describing the state
    *at that moment*.  The callable runs in a worker thread while the node keeps
    applying commits, so ``snapshot()`` must capture what the writer needs (cheap
    copies or immutable values); it must not read the live state later.
``load_snapshot(records)``
    Replace the whole state with the one the records describe.

:class:`StateMachineRunner` is the driver-side half: it follows the high watermark,
reads committed batches from the log (the replication path never decodes records)
and applies them; :mod:`kraftnode.server.controller_io.snapshot_manager` decides when to write a snapshot
and cleans the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, runtime_checkable

from recordbatch import BatchView
from recordbatch.layout import RECORDS_OFFSET
from recordbatch.records_codec import decode_null_key_values

__all__ = ["SnapshotRecords", "StateMachine", "StateMachineRunner", "KeyValueStateMachine"]

# The records of a snapshot: (key, value) pairs in the order they must be replayed.
SnapshotRecords = Iterator[tuple[bytes | None, bytes | None]]


@runtime_checkable
class StateMachine(Protocol):
    """What a node needs from an application's state machine (see the module doc)."""

    def apply(self, batch: BatchView, end_offset: int) -> None:
        """Apply the records of committed ``batch`` whose offsets are below ``end_offset``."""
        ...

    def snapshot(self) -> Callable[[], SnapshotRecords]:
        """Capture the current state; the returned writer yields its records (off the loop)."""
        ...

    def load_snapshot(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Replace the state by the one ``records`` (a snapshot's data records) describe."""
        ...

    def snapshot_allowed(self) -> bool:
        """False while the state is not a consistent point (e.g. inside a metadata transaction)."""
        ...


class KeyValueStateMachine:
    """The compacted-topic semantics as a state machine: the latest value per key.

    A record with a null value deletes its key; a record without a key is not state
    (it lives only in the log, and leaves with retention)."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.unkeyed_records = 0

    def apply(self, batch: BatchView, end_offset: int) -> None:
        if batch.is_control:
            return
        for r in batch.records():
            if r.offset >= end_offset:
                break
            self.apply_record(r.key, r.value)

    def apply_record(self, key: bytes | memoryview | None, value: bytes | memoryview | None) -> None:
        if key is None:
            self.unkeyed_records += 1
        elif value is None:
            self.data.pop(bytes(key), None)
        else:
            self.data[bytes(key)] = bytes(value)

    def snapshot(self) -> Callable[[], SnapshotRecords]:
        frozen = dict(self.data)

        def write() -> SnapshotRecords:
            yield from frozen.items()
        return write

    def load_snapshot(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        self.data = {}
        for k, v in records:
            if k is not None and v is not None:
                self.data[bytes(k)] = bytes(v)

    def snapshot_allowed(self) -> bool:
        return True


class StateMachineRunner:
    """Applies committed batches to a state machine, in order, exactly once.

    ``next_offset`` is the first offset not yet applied; ``bytes_since_snapshot`` the
    committed batch bytes applied since the last snapshot (the trigger of
    ``metadata.log.max.record.bytes.between.snapshots``); ``last_timestamp`` the max
    timestamp of the last applied batch (the snapshot header's
    LastContainedLogTimestamp)."""

    def __init__(self, sm: StateMachine, next_offset: int = 0) -> None:
        self.sm = sm
        self._next_offset = next_offset
        self.bytes_since_snapshot = 0
        self.last_timestamp = -1
        self.applied_batches = 0

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @next_offset.setter
    def next_offset(self, offset: int) -> None:
        self._next_offset = offset
        if hasattr(self.sm, "next_offset"):  # a state machine that tracks offsets itself
            self.sm.next_offset = offset

    def apply_batches(self, batches: Iterable[BatchView], end_offset: int) -> None:
        """Apply every record in ``[next_offset, end_offset)``; batches may start earlier."""
        for b in batches:
            if b.base_offset >= end_offset:
                break
            if b.last_offset < self.next_offset:
                continue
            self.sm.apply(b, end_offset)
            self.next_offset = min(b.last_offset + 1, end_offset)
            self.bytes_since_snapshot += b.size_in_bytes
            self.last_timestamp = b.max_timestamp   # Kafka: the last batch's appendTimestamp
            self.applied_batches += 1
        self.next_offset = max(self.next_offset, end_offset)

    def load_snapshot(self, records: Iterable[tuple[bytes | None, bytes | None]], end_offset: int,
                      timestamp: int = -1) -> None:
        self.sm.load_snapshot(records)
        self.next_offset = end_offset
        self.bytes_since_snapshot = 0
        self.last_timestamp = timestamp


def snapshot_data_records(batches: Iterable[BatchView]) -> SnapshotRecords:
    """The (key, value) data records of a snapshot's batches (control batches skipped)."""
    for b in batches:
        if b.is_control:
            continue
        values = null_key_values(b)
        if values is not None:
            for v in values:
                yield None, v
            continue
        for r in b.records():
            yield (None if r.key is None else bytes(r.key)), (None if r.value is None else bytes(r.value))


_NO_COMPRESSION = 0


def null_key_values(b: BatchView) -> list[bytes] | None:
    """The values of an uncompressed batch whose records all have a null key, a non-null value
    and no header -- a metadata snapshot's batches -- read without building a record object
    each (a third of a million-partition snapshot's load was building them); None for any
    other batch, and for any record :func:`recordbatch.decode_null_key_values` does not take
    as written: the record decoder (``BatchView.records``) then decides, and names what is wrong."""
    if b.compression_id != _NO_COMPRESSION:
        return None
    return decode_null_key_values(bytes(b.buffer[RECORDS_OFFSET:]), b.records_count)
