"""Metadata records as the metadata log stores them (Kafka's ``MetadataRecordSerde``).

A metadata record's value is framed as unsigned varints ``frame version (1)``,
``api key``, ``record version``, followed by the generated message bytes; its key
is null.  The classes come from ``kraftnode.protocol.generated.metadata``.
"""

from __future__ import annotations

import re
import struct
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
    if type(message) is _PartitionRecord:
        fast = _encode_partition(message, version)
        if fast is not None:
            return fast
    body: bytes = message.encode(version)
    return uvarint(FRAME_VERSION) + uvarint(int(message.API_KEY)) + uvarint(version) + body


_PartitionRecord = RECORD_CLASSES[3]
#: the framed PartitionRecord's layout by the lengths of its five arrays
_PARTITION_LAYOUTS: dict[tuple[int, int, int, int, int], struct.Struct] = {}


def _encode_partition(m: Any, version: int) -> bytes | None:
    """A framed PartitionRecord v1/v2 in one ``struct.pack`` -- the record a snapshot and a growing
    cluster's log are mostly made of -- when it has no tagged field to write (leader recovery
    state 0, no ELR, no unknown tagged fields) and every array is shorter than 127 (a one-byte
    count); None otherwise, and the generated codec (the one source of truth, which this must
    match byte for byte: tests/kraftnode/log/test_metadata_records.py) encodes it."""
    if version not in (1, 2) or m.leader_recovery_state != 0 or m.eligible_leader_replicas is not None \
            or m.last_known_elr is not None or m.unknown_tagged_fields:
        return None
    r, i, rm, ad, d = m.replicas, m.isr, m.removing_replicas, m.adding_replicas, m.directories
    if r is None or i is None or rm is None or ad is None or d is None:
        return None
    key = (len(r), len(i), len(rm), len(ad), len(d))
    layout = _PARTITION_LAYOUTS.get(key)
    if layout is None:
        if max(key) >= 127:
            return None
        layout = struct.Struct(">BBBi16s" + "".join(f"B{n}i" for n in key[:4]) + "iiiB" + "16s" * key[4] + "B")
        if len(_PARTITION_LAYOUTS) < 4096:
            _PARTITION_LAYOUTS[key] = layout
    try:
        return layout.pack(FRAME_VERSION, 3, version, m.partition_id, m.topic_id.bytes, key[0] + 1, *r, key[1] + 1, *i,
                           key[2] + 1, *rm, key[3] + 1, *ad, m.leader, m.leader_epoch, m.partition_epoch, key[4] + 1,
                           *(u.bytes for u in d), 0)
    except (struct.error, AttributeError, TypeError):
        return None   # the generated codec says what is wrong with it


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
