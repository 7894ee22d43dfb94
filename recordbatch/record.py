"""Record types: what a producer hands to the builder, and what decoding yields.

Per-record costs dominate the producer and consumer paths (a MiB of 100-byte
records is ~9,000 records), so both types are chosen for cheap creation:
``Record`` is a slotted dataclass (about half the construction cost of a named
tuple, which pays a Python-level ``__new__``), and ``RecordView`` is a named tuple
that the decoder creates with ``tuple.__new__`` directly, all in C.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["Header", "Record", "RecordView"]

Header = tuple[str, bytes | None]
"""A record header: a UTF-8 string key and a nullable byte-string value."""


@dataclass(slots=True)
class Record:
    """A record to be written.  ``timestamp`` None means "stamp it at build time".

    ``headers`` is any sequence of ``(str, bytes | None)`` pairs; keys may repeat,
    as in Kafka.
    """

    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()
    timestamp: int | None = None


class RecordView(NamedTuple):
    """A decoded record with its absolute offset and timestamp.

    ``timestamp`` is already resolved: base timestamp + delta for CreateTime batches,
    the batch's max timestamp for LogAppendTime batches (Kafka's rule).  ``headers``
    is a tuple of ``(str, bytes | None)`` pairs.  ``attributes`` is the record's own
    (currently unused) attribute byte, kept so that batches re-encode faithfully.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    attributes: int = 0
