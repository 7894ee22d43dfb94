"""Primitive Kafka wire types shared by record batches and generated message code.

This module is the runtime that generated encoders/decoders (``recordbatch.generated``
and ``kraftnode.protocol.generated``) call into, and that the record-batch codec uses
for varints.  It lives in ``recordbatch`` because ``recordbatch`` must stand alone
(it may not import ``kraftnode``) while still decoding control-record values.

Every decoding failure -- truncation, a lying length, an overlong varint, invalid
UTF-8, trailing garbage -- is reported as :class:`DecodeError`, the one exception
type callers need to catch for hostile input.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

__all__ = [
    "DecodeError",
    "UnsupportedVersionError",
    "read_uvarint",
    "read_varint",
    "read_uvarlong",
    "read_varlong",
    "uvarint",
    "varint",
    "uvarint_size",
    "varint_size",
    "ZERO_UUID",
    "uuid_to_base64",
    "uuid_from_base64",
]


class DecodeError(ValueError):
    """Input bytes do not form a valid value of the expected type and version."""


class UnsupportedVersionError(ValueError):
    """A value cannot be represented in the requested message version."""


ZERO_UUID: Final = uuid.UUID(int=0)


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes, 32 bits) at ``pos``; return (value, new_pos)."""
    try:
        b = buf[pos]
    except IndexError:
        raise DecodeError("truncated varint") from None
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise DecodeError("truncated varint") from None
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFF:
                raise DecodeError("varint does not fit in 32 bits")
            return value, pos
        shift += 7
        if shift > 28:
            raise DecodeError("varint is longer than 5 bytes")


def read_uvarlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varlong (at most 10 bytes, 64 bits); return (value, new_pos)."""
    value = 0
    shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise DecodeError("truncated varlong") from None
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFFFFFFFFFF:
                raise DecodeError("varlong does not fit in 64 bits")
            return value, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varlong is longer than 10 bytes")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed varint (32 bits)."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed varlong (64 bits)."""
    v, pos = read_uvarlong(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


_SMALL_UVARINTS: Final = tuple(bytes((i,)) for i in range(128))


def uvarint(value: int) -> bytes:
    """Encode an unsigned varint."""
    if 0 <= value < 128:
        return _SMALL_UVARINTS[value]
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Encode a zigzag signed varint/varlong (64-bit range)."""
    return uvarint((value << 1) ^ (value >> 63))


def uvarint_size(value: int) -> int:
    """Number of bytes :func:`uvarint` produces for ``value``."""
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def varint_size(value: int) -> int:
    """Number of bytes :func:`varint` produces for ``value``."""
    return uvarint_size((value << 1) ^ (value >> 63))


def uuid_to_base64(u: uuid.UUID) -> str:
    """Kafka's textual Uuid form: URL-safe base64 without padding (22 chars)."""
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    """Parse Kafka's textual Uuid form; raises ValueError naming the problem."""
    import base64
    import binascii

    if len(text) != 22:
        raise ValueError(f"invalid Uuid {text!r}: expected 22 base64url characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise ValueError(f"invalid Uuid {text!r}: not base64url") from None
    if len(raw) != 16:
        raise ValueError(f"invalid Uuid {text!r}: decodes to {len(raw)} bytes, not 16")
    return uuid.UUID(bytes=raw)


I8: Final = struct.Struct(">b")
I16: Final = struct.Struct(">h")
U16: Final = struct.Struct(">H")
I32: Final = struct.Struct(">i")
U32: Final = struct.Struct(">I")
I64: Final = struct.Struct(">q")
F64: Final = struct.Struct(">d")
