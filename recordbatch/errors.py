"""Exceptions for undecodable or hostile record batches.

Both derive from :class:`recordbatch.wire.DecodeError` so that a caller decoding a
whole Fetch/Produce frame can catch the one type for every kind of bad input.
"""

from __future__ import annotations

from recordbatch.wire import DecodeError

__all__ = ["CorruptBatchError", "DecompressionLimitError"]


class CorruptBatchError(DecodeError):
    """A record batch (or a record inside it) is malformed: bad magic, CRC mismatch,
    impossible length, truncated records, unknown compression codec, ...

    The message names the problem; it never includes the (possibly huge) payload.
    """


class DecompressionLimitError(CorruptBatchError):
    """A compressed batch claims, or would inflate to, more than the configured limit.

    Raised before the output is allocated (when the stream states its size) or as
    soon as streaming decompression crosses the limit, so a decompression bomb costs
    at most ``limit`` bytes of memory and the time to produce them.
    """
