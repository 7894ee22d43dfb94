"""Record types: what a producer hands to the builder, and what decoding yields.

Both are named tuples: creation and field access run in C, which matters in the
per-record hot loops (a batch of 100-byte records holds ~10,000 of them per MiB).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Header", "Record", "RecordView"]

Header = tuple[str, bytes | None]
"""A record header: a UTF-8 string key and a nullable byte-string value."""


class Record(NamedTuple):
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
