"""Runtime for generated Kafka message classes.

Generated modules (``recordbatch.generated`` and ``kraftnode.protocol.generated``)
hold straight-line, per-field encode/decode code; the variable-length pieces they
share (strings, bytes, records, array counts) and the generic behaviour every
message has (equality, repr, JSON form) live here, once.

Decoders read from a ``memoryview`` and never allocate more than the input can
justify: every length is checked against what remains before slicing.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from recordbatch.wire import (
    I16,
    I32,
    ZERO_UUID,
    DecodeError,
    UnsupportedVersionError,
    read_uvarint,
    uuid_from_base64,
    uuid_to_base64,
    uvarint,
)

Buf = bytes | memoryview  # what generated readers accept

__all__ = ["Buf", "FieldInfo", "Message", "DecodeError", "UnsupportedVersionError"]


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """What generated code knows about one field, kept for generic walkers (JSON, tests)."""

    name: str                      # Kafka name, e.g. "ReplicaDirectoryId"
    attr: str                      # Python attribute, e.g. "replica_directory_id"
    type: str                      # Kafka type, e.g. "[]int32", "uuid", "[]ReplicaState"
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    ignorable: bool
    struct: Any = None             # generated class for struct element types

    def present_in(self, version: int) -> bool:
        v = self.versions
        return v is not None and v[0] <= version <= v[1]

    def nullable_in(self, version: int) -> bool:
        n = self.nullable
        return n is not None and n[0] <= version <= n[1]


class Message:
    """Base of every generated message and struct class."""

    __slots__ = ("unknown_tagged_fields",)
    FIELDS: ClassVar[tuple[FieldInfo, ...]] = ()
    NAME: ClassVar[str] = ""
    unknown_tagged_fields: list[tuple[int, bytes]] | None

    def _values(self) -> Iterator[Any]:
        for f in self.FIELDS:
            yield getattr(self, f.attr)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Message)
        return all(
            _eq(a, b) for a, b in zip(self._values(), other._values(), strict=True)
        ) and (self.unknown_tagged_fields or None) == (other.unknown_tagged_fields or None)

    __hash__ = None  # type: ignore[assignment]

    # Implemented by generated top-level message classes (declared here for typing).
    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)

    def __init__(self, **kwargs: Any) -> None:  # pragma: no cover - generated classes override
        raise NotImplementedError

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        raise NotImplementedError

    def encode(self, version: int) -> bytes:
        raise NotImplementedError

    def encode_into(self, out: bytearray, version: int) -> None:
        raise NotImplementedError

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Any:
        raise NotImplementedError

    @classmethod
    def decode_from(cls, buf: memoryview, pos: int, version: int) -> tuple[Any, int]:
        raise NotImplementedError

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.attr}={getattr(self, f.attr)!r}" for f in self.FIELDS)
        return f"{type(self).__qualname__}({parts})"

    def to_json(self, version: int) -> dict[str, Any]:
        """Kafka's JSON form (as its generated JsonConverters write it) for ``version``."""
        out: dict[str, Any] = {}
        for f in self.FIELDS:
            if not f.present_in(version):
                continue
            value = getattr(self, f.attr)
            if f.tagged is not None and f.tagged[0] <= version <= f.tagged[1] \
                    and _eq(value, getattr(_default_of(type(self)), f.attr)):
                # Kafka's JsonConverterGenerator writes a tagged field only when it is not
                # its default (generateNonDefaultValueCheck), as the wire format does
                continue
            out[f.name[0].lower() + f.name[1:]] = _to_json(f, value, version)
        return out

    @classmethod
    def from_json(cls, obj: Any, version: int) -> Any:
        """Inverse of :meth:`to_json`; raises DecodeError naming the bad key."""
        if not isinstance(obj, dict):
            raise DecodeError(f"{cls.__qualname__}: expected a JSON object")
        inst = cls()
        for f in cls.FIELDS:
            key = f.name[0].lower() + f.name[1:]
            if not f.present_in(version):
                continue
            if key not in obj:
                if f.tagged is not None or f.ignorable:
                    continue
                raise DecodeError(f"{cls.__qualname__}: missing {key!r}")
            setattr(inst, f.attr, _from_json(f, obj[key], version, f"{cls.__qualname__}.{key}"))
        return inst


_DEFAULTS: dict[type, Any] = {}


def _default_of(cls: type) -> Any:
    """A default-constructed instance of a generated class (every field at its default)."""
    d = _DEFAULTS.get(cls)
    if d is None:
        d = _DEFAULTS[cls] = cls()
    return d


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, memoryview | bytearray):
        a = bytes(a)
    if isinstance(b, memoryview | bytearray):
        b = bytes(b)
    return bool(a == b)


def _scalar_to_json(t: str, v: Any) -> Any:
    if v is None:
        return None
    if t == "uuid":
        return uuid_to_base64(v)
    if t in ("bytes", "records"):
        return base64.b64encode(bytes(v)).decode("ascii")
    return v


def _to_json(f: FieldInfo, v: Any, version: int) -> Any:
    if v is None:
        return None
    if f.type.startswith("[]"):
        if f.struct is not None:
            return [e.to_json(version) for e in v]
        return [_scalar_to_json(f.type[2:], e) for e in v]
    if f.struct is not None:
        return v.to_json(version)
    return _scalar_to_json(f.type, v)


_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1), "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def _scalar_from_json(t: str, v: Any, where: str) -> Any:
    if v is None:
        return None
    try:
        if t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"expected {t}")
            return v
        if t == "bool":
            if not isinstance(v, bool):
                raise ValueError("expected a boolean")
            return v
        if t == "float64":
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise ValueError("expected a number")
            return float(v)
        if t == "string":
            if not isinstance(v, str):
                raise ValueError("expected a string")
            return v
        if t == "uuid":
            return uuid_from_base64(v) if isinstance(v, str) else _bad("expected a Uuid string")
        if t in ("bytes", "records"):
            return base64.b64decode(v, validate=True)
    except (ValueError, TypeError) as e:
        raise DecodeError(f"{where}: {e}") from None
    raise DecodeError(f"{where}: unsupported type {t}")


def _bad(msg: str) -> Any:
    raise ValueError(msg)


def _from_json(f: FieldInfo, v: Any, version: int, where: str) -> Any:
    if v is None:
        if f.nullable_in(version):
            return None
        raise DecodeError(f"{where}: null is not allowed in version {version}")
    if f.type.startswith("[]"):
        if not isinstance(v, list):
            raise DecodeError(f"{where}: expected an array")
        if f.struct is not None:
            return [f.struct.from_json(e, version) for e in v]
        return [_scalar_from_json(f.type[2:], e, where) for e in v]
    if f.struct is not None:
        return f.struct.from_json(v, version)
    return _scalar_from_json(f.type, v, where)


# ---------------------------------------------------------------------------
# Variable-length readers.  Each returns (value, new_pos).

def r_str(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    """Classic string: int16 length (-1 = null), UTF-8 bytes."""
    if pos + 2 > len(buf):
        raise DecodeError("truncated string length")
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise DecodeError(f"invalid string length {n}")
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"string length {n} exceeds the remaining {len(buf) - pos} bytes")
    try:
        return bytes(buf[pos:end]).decode(), end
    except UnicodeDecodeError:
        raise DecodeError("string is not valid UTF-8") from None


def r_cstr(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    """Compact string: unsigned varint length+1 (0 = null)."""
    n = buf[pos]
    if n & 0x80:
        n, pos = read_uvarint(buf, pos)
    else:
        pos += 1
    if n == 0:
        if nullable:
            return None, pos
        raise DecodeError("non-nullable string was null")
    end = pos + n - 1
    if end > len(buf):
        raise DecodeError(f"string length {n - 1} exceeds the remaining {len(buf) - pos} bytes")
    try:
        return bytes(buf[pos:end]).decode(), end
    except UnicodeDecodeError:
        raise DecodeError("string is not valid UTF-8") from None


def _r_blob32(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    if pos + 4 > len(buf):
        raise DecodeError("truncated bytes length")
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise DecodeError(f"invalid bytes length {n}")
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"bytes length {n} exceeds the remaining {len(buf) - pos} bytes")
    return buf[pos:end], end


def _r_cblob(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        if nullable:
            return None, pos
        raise DecodeError("non-nullable bytes were null")
    end = pos + n - 1
    if end > len(buf):
        raise DecodeError(f"bytes length {n - 1} exceeds the remaining {len(buf) - pos} bytes")
    return buf[pos:end], end


def r_bytes(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    v, pos = _r_blob32(buf, pos, nullable)
    return (None if v is None else bytes(v)), pos


def r_cbytes(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    v, pos = _r_cblob(buf, pos, nullable)
    return (None if v is None else bytes(v)), pos


# Records stay zero-copy: a memoryview into the frame (the replication path never copies).
r_records = _r_blob32
r_crecords = _r_cblob


# Requests are read as Kafka's generated ``XxxRequestData(readable, version)`` reads them,
# which is more lenient than the readers above in three ways and stricter in one: a classic
# length below zero (not only -1) is null where null is allowed; malformed UTF-8 becomes
# U+FFFD, as Java's ``new String(bytes, UTF_8)``; a compact string longer than 0x7fff bytes
# is refused ("string field ... had invalid length"). Responses, records and our own files
# keep the strict readers. (docs/protocol.md, issue 43)

def r_str_k(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    """Classic string of a request, as Kafka reads it."""
    if pos + 2 > len(buf):
        raise DecodeError("truncated string length")
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if nullable:
            return None, pos
        raise DecodeError(f"non-nullable string was serialized as null (length {n})")
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"string length {n} exceeds the remaining {len(buf) - pos} bytes")
    return bytes(buf[pos:end]).decode("utf-8", "replace"), end


def r_cstr_k(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    """Compact string of a request, as Kafka reads it."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        if nullable:
            return None, pos
        raise DecodeError("non-nullable string was serialized as null")
    n -= 1
    if n > 0x7FFF:
        raise DecodeError(f"string field had invalid length {n}")
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"string length {n} exceeds the remaining {len(buf) - pos} bytes")
    return bytes(buf[pos:end]).decode("utf-8", "replace"), end


def _r_blob32_k(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    if pos + 4 > len(buf):
        raise DecodeError("truncated bytes length")
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if nullable:
            return None, pos
        raise DecodeError(f"non-nullable bytes were serialized as null (length {n})")
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"bytes length {n} exceeds the remaining {len(buf) - pos} bytes")
    return buf[pos:end], end


def r_bytes_k(buf: Buf, pos: int, nullable: bool) -> tuple[Any, int]:
    """Classic bytes of a request, as Kafka reads them."""
    v, pos = _r_blob32_k(buf, pos, nullable)
    return (None if v is None else bytes(v)), pos


r_records_k = _r_blob32_k


def r_count_k(buf: Buf, pos: int, nullable: bool) -> tuple[int, int]:
    """Classic array length of a request, as Kafka reads it: below zero is null."""
    if pos + 4 > len(buf):
        raise DecodeError("truncated array length")
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if nullable:
            return -1, pos
        raise DecodeError(f"non-nullable array was serialized as null (length {n})")
    if n > len(buf) - pos:
        raise DecodeError(f"array length {n} exceeds the remaining {len(buf) - pos} bytes")
    return n, pos


_ZERO16 = bytes(16)
_obj_new = object.__new__
_obj_setattr = object.__setattr__
_from_bytes = int.from_bytes
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


_UUID_CACHE: dict[bytes, uuid.UUID] = {_ZERO16: ZERO_UUID}
_UUID_CACHE_MAX = 4096


def uuid_from_bytes(raw: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=raw)``, fast: the same few directory and topic ids arrive in
    every Fetch and DescribeQuorum, and UUIDs are immutable, so decoded ones are shared
    through a small bounded cache."""
    u = _UUID_CACHE.get(raw)
    if u is not None:
        return u
    u = _obj_new(uuid.UUID)
    _obj_setattr(u, "int", _from_bytes(raw, "big"))
    _obj_setattr(u, "is_safe", _SAFE_UNKNOWN)
    if len(_UUID_CACHE) >= _UUID_CACHE_MAX:
        _UUID_CACHE.clear()
        _UUID_CACHE[_ZERO16] = ZERO_UUID
    _UUID_CACHE[raw] = u
    return u


def r_uuid(buf: Buf, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise DecodeError("truncated uuid")
    return uuid_from_bytes(bytes(buf[pos:end])), end


def r_count(buf: Buf, pos: int, nullable: bool) -> tuple[int, int]:
    """Classic array length (int32, -1 = null); bounded by remaining bytes."""
    if pos + 4 > len(buf):
        raise DecodeError("truncated array length")
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise DecodeError(f"invalid array length {n}")
    if n > len(buf) - pos:
        raise DecodeError(f"array length {n} exceeds the remaining {len(buf) - pos} bytes")
    return n, pos


def r_ccount(buf: Buf, pos: int, nullable: bool) -> tuple[int, int]:
    """Compact array length (uvarint length+1, 0 = null); bounded by remaining bytes."""
    n = buf[pos]
    if n & 0x80:
        n, pos = read_uvarint(buf, pos)
    else:
        pos += 1
    if n == 0:
        if nullable:
            return -1, pos
        raise DecodeError("non-nullable array was null")
    n -= 1
    if n > len(buf) - pos:
        raise DecodeError(f"array length {n} exceeds the remaining {len(buf) - pos} bytes")
    return n, pos


def r_tag_header(buf: Buf, pos: int) -> tuple[int, int, int]:
    """Read a tagged field's (tag, size) and check the size fits; return (tag, end, pos)."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    end = pos + size
    if end > len(buf):
        raise DecodeError(f"tagged field {tag} size {size} exceeds the remaining bytes")
    return tag, end, pos


# ---------------------------------------------------------------------------
# Variable-length writers.

def _null_error(what: str, version: int) -> UnsupportedVersionError:
    return UnsupportedVersionError(f"{what} is not nullable in version {version}")


#: Strings as written, length prefix included (INT16-prefixed, compact), of the short strings
#: every request repeats (client ids, topic names, the cluster id): one dict lookup instead of
#: an encode and two appends. Bounded: strings past the first _STRINGS_KEPT are encoded each time.
_STRINGS: dict[str, bytes] = {}
_COMPACT_STRINGS: dict[str, bytes] = {}
_STRINGS_KEPT = 1024
_STRING_KEPT_CHARS = 255


def w_str(out: bytearray, s: str | None, nullable: bool, what: str, version: int) -> None:
    if s is None:
        if not nullable:
            raise _null_error(what, version)
        out += b"\xff\xff"
        return
    written = _STRINGS.get(s)
    if written is None:
        b = s.encode("utf-8")
        if len(b) > 0x7FFF:
            raise UnsupportedVersionError(f"{what}: string of {len(b)} bytes is longer than 32767")
        written = I16.pack(len(b)) + b
        if len(s) <= _STRING_KEPT_CHARS and len(_STRINGS) < _STRINGS_KEPT:
            _STRINGS[s] = written
    out += written


def w_cstr(out: bytearray, s: str | None, nullable: bool, what: str, version: int) -> None:
    if s is None:
        if not nullable:
            raise _null_error(what, version)
        out.append(0)
        return
    written = _COMPACT_STRINGS.get(s)
    if written is None:
        b = s.encode("utf-8")
        if len(b) > 0x7FFF:
            raise UnsupportedVersionError(f"{what}: string of {len(b)} bytes is longer than 32767")
        written = uvarint(len(b) + 1) + b
        if len(s) <= _STRING_KEPT_CHARS and len(_COMPACT_STRINGS) < _STRINGS_KEPT:
            _COMPACT_STRINGS[s] = written
    out += written


_DEFER_MIN = 64 * 1024


class EncodeBuffer(bytearray):
    """The buffer ``Message.encode`` writes into.

    Large bytes/records payloads (a Fetch response's batches) are not copied into
    it; their position is remembered and they are spliced in once, by
    :meth:`result`.  So ``encode()`` copies a 1 MiB record set once, not twice.
    """

    __slots__ = ("deferred",)

    def __init__(self) -> None:
        super().__init__()
        self.deferred: list[tuple[int, Any]] = []

    def result(self) -> bytes:
        if not self.deferred:
            return bytes(self)
        mv = memoryview(self)
        parts: list[Any] = []
        prev = 0
        for pos, data in self.deferred:
            parts.append(mv[prev:pos])
            parts.append(data)
            prev = pos
        parts.append(mv[prev:])
        return b"".join(parts)


def _put_blob(out: bytearray, b: Any) -> None:
    if len(b) >= _DEFER_MIN and type(out) is EncodeBuffer:
        out.deferred.append((len(out), b))
    else:
        out += b


def w_bytes(out: bytearray, b: Any, nullable: bool, what: str, version: int) -> None:
    if b is None:
        if not nullable:
            raise _null_error(what, version)
        out += b"\xff\xff\xff\xff"
        return
    out += I32.pack(len(b))
    _put_blob(out, b)


def w_cbytes(out: bytearray, b: Any, nullable: bool, what: str, version: int) -> None:
    if b is None:
        if not nullable:
            raise _null_error(what, version)
        out.append(0)
        return
    out += uvarint(len(b) + 1)
    _put_blob(out, b)


def w_count(out: bytearray, items: Any, nullable: bool, what: str, version: int) -> None:
    if items is None:
        if not nullable:
            raise _null_error(what, version)
        out += b"\xff\xff\xff\xff"
        return
    out += I32.pack(len(items))


def w_ccount(out: bytearray, items: Any, nullable: bool, what: str, version: int) -> None:
    if items is None:
        if not nullable:
            raise _null_error(what, version)
        out.append(0)
        return
    out += uvarint(len(items) + 1)


def w_tagged(out: bytearray, fields: list[tuple[int, bytes]]) -> None:
    """Write a tagged-field section; ``fields`` sorted by tag."""
    out += uvarint(len(fields))
    for tag, data in fields:
        out += uvarint(tag)
        out += uvarint(len(data))
        out += data


def absent_error(what: str, version: int) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"attempted to write non-default {what} at version {version}, which lacks it"
    )
