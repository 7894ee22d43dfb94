"""What a controller operation produces: records to write and the answer to give once they commit.

Kafka's ``ControllerResult``: ``of`` (records that may be split into several batches) or
``atomicOf`` (records that must commit all together, in one batch). The I/O shell appends the
records, then answers with ``response`` once the last of them is committed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["MAX_RECORDS_PER_BATCH", "ControllerResult", "Record"]

T = TypeVar("T")

#: (metadata record message, record version), Kafka's ApiMessageAndVersion
Record = tuple[Any, int]

#: QuorumController.MAX_RECORDS_PER_BATCH: a non-atomic result is written in batches of at most
#: this many records; an atomic one larger than this is refused.
MAX_RECORDS_PER_BATCH = 10_000


@dataclass
class ControllerResult(Generic[T]):
    records: list[Record] = field(default_factory=list)
    response: T = None  # type: ignore[assignment]
    atomic: bool = False
    #: called with the offset of the result's last record once appended (with no records: the
    #: last offset already written) -- Kafka's ControllerWriteOperation.processBatchEndOffset
    on_offset: Callable[[int], None] | None = None

    @classmethod
    def of(cls, records: list[Record], response: T) -> ControllerResult[T]:
        return cls(list(records), response, False)

    @classmethod
    def atomic_of(cls, records: list[Record], response: T) -> ControllerResult[T]:
        return cls(list(records), response, True)

    def without_records(self) -> ControllerResult[T]:
        """validateOnly: the same answer, nothing written."""
        return ControllerResult([], self.response, True)

    def batches(self) -> list[list[Record]]:
        """The records as they are appended: one batch if atomic, else chunks of
        :data:`MAX_RECORDS_PER_BATCH` (Kafka's ``QuorumController.appendRecords``)."""
        if not self.records:
            return []
        if self.atomic:
            if len(self.records) > MAX_RECORDS_PER_BATCH:
                raise ValueError(f"Attempted to atomically commit {len(self.records)} records, but "
                                 f"maxRecordsPerBatch is {MAX_RECORDS_PER_BATCH}")
            return [list(self.records)]
        return [self.records[i:i + MAX_RECORDS_PER_BATCH]
                for i in range(0, len(self.records), MAX_RECORDS_PER_BATCH)]
