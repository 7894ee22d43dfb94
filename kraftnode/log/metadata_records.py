"""Metadata records as the metadata log stores them (Kafka's ``MetadataRecordSerde``).

A metadata record's value is framed as unsigned varints ``frame version (1)``,
``api key``, ``record version``, followed by the generated message bytes; its key
is null.  The classes come from ``kraftnode.protocol.generated.metadata``.
"""

from __future__ import annotations

import re
from typing import Any

import kraftnode.protocol.generated.metadata as _generated
from recordbatch.wire import DecodeError, read_uvarint, uvarint

__all__ = ["FRAME_VERSION", "encode_metadata_record", "decode_metadata_record", "record_type_name",
           "RECORD_CLASSES"]

FRAME_VERSION = 1


def _classes() -> dict[int, Any]:
    out: dict[int, Any] = {}
    for name in _generated.__all__:
        cls = getattr(_generated, name)
        key = getattr(cls, "API_KEY", None)
        if isinstance(key, int):
            out[key] = cls
    return out


RECORD_CLASSES: dict[int, Any] = _classes()


def record_type_name(cls: Any) -> str:
    """``MetadataRecordType`` constant name: FeatureLevelRecord -> FEATURE_LEVEL_RECORD."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", str(cls.NAME)).upper()


def encode_metadata_record(message: Any, version: int) -> bytes:
    body: bytes = message.encode(version)
    return uvarint(FRAME_VERSION) + uvarint(int(message.API_KEY)) + uvarint(version) + body


def decode_metadata_record(value: bytes | bytearray | memoryview) -> tuple[Any, int]:
    """(message, version) from a record value; raises DecodeError for unknown or bad input."""
    frame, pos = read_uvarint(value, 0)
    if frame != FRAME_VERSION:
        raise DecodeError(f"unsupported metadata record frame version {frame}")
    api_key, pos = read_uvarint(value, pos)
    version, pos = read_uvarint(value, pos)
    cls = RECORD_CLASSES.get(api_key)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {api_key}")
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        raise DecodeError(f"unsupported {cls.NAME} version {version}")
    return cls.decode(memoryview(value)[pos:], version), version
