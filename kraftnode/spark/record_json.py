"""Kafka's JSON form of KRaft control records and metadata records, for one value.

The ``kraft-log`` source calls these only for control records and for values
that look like framed metadata records (frame version 1, null key); everything
else gets a constant ``record_error`` without any per-record Python work.
"""

from __future__ import annotations

import json
from typing import Any, Final

from kraftnode.log.metadata_records import RECORD_CLASSES, decode_metadata_record, record_type_name
from recordbatch.control import (
    ControlType,
    EndTransactionMarker,
    decode_control_record,
    parse_control_key,
)
from recordbatch.errors import CorruptBatchError
from recordbatch.record import Record, RecordView
from recordbatch.wire import DecodeError

__all__ = ["Decoded", "decode_control", "decode_metadata", "NOT_METADATA", "METADATA_TYPE_NAMES"]

Decoded = tuple[str | None, int | None, str | None, str | None]
"""(record_type, record_version, record_json, record_error)"""

NOT_METADATA: Final = "not a metadata record"
"""Set for values that are not framed metadata records (null key, frame version 1).
Kept short on purpose: it is repeated on every such row and Spark copies it per row."""
METADATA_TYPE_NAMES: Final[dict[int, str]] = {k: record_type_name(c) for k, c in RECORD_CLASSES.items()}
_CONTROL_NAMES: Final = {int(t): t.name for t in ControlType}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), default=str)


def control_type_name(key: bytes | None) -> str | None:
    try:
        _, ctype = parse_control_key(key)
    except CorruptBatchError:
        return None
    return _CONTROL_NAMES.get(ctype, f"UNKNOWN({ctype})")


def decode_control(record: Record | RecordView) -> Decoded:
    """A control record: (type name, key version, JSON of the value, error)."""
    try:
        kversion, ctype = parse_control_key(record.key)
        _, message = decode_control_record(record)
    except CorruptBatchError as e:
        return control_type_name(record.key), None, None, str(e)
    name = _CONTROL_NAMES.get(ctype)
    if name is None:
        return f"UNKNOWN({ctype})", kversion, None, f"unknown control record type {ctype}"
    if isinstance(message, EndTransactionMarker):
        body: Any = {"version": message.version, "coordinatorEpoch": message.coordinator_epoch}
    else:
        body = message.to_json(0)  # type: ignore[union-attr]
    return name, kversion, _dumps(body), None


def decode_metadata(value: bytes) -> Decoded:
    """A metadata record value (frame version, api key, version, message)."""
    try:
        message, version = decode_metadata_record(value)
    except DecodeError as e:
        name = None
        if len(value) >= 2 and value[1] < 128:
            name = METADATA_TYPE_NAMES.get(value[1])
        return name, None, None, str(e)
    return record_type_name(type(message)), version, _dumps(message.to_json(version)), None
