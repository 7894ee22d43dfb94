"""Hypothesis strategies for any generated message class at any version.

Built from the FIELDS metadata the generator emits, so every message and every
field is covered without hand-written strategies going stale.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from hypothesis import strategies as st

from recordbatch.message import FieldInfo, Message

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def scalar(t: str) -> st.SearchStrategy[Any]:
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.one_of(st.sampled_from([lo, hi, 0, -1, 1]).filter(lambda v: lo <= v <= hi),
                         st.integers(lo, hi))
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return st.text(max_size=12)
    if t == "uuid":
        return st.uuids()
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(t)


def value(f: FieldInfo, version: int, unknown_tags: bool, depth: int) -> st.SearchStrategy[Any]:
    if f.type.startswith("[]"):
        if f.struct is not None:
            elem = message(f.struct, version, unknown_tags, depth + 1)
        else:
            elem = scalar(f.type[2:])
        base: st.SearchStrategy[Any] = st.lists(elem, max_size=3 if depth < 2 else 1)
    elif f.struct is not None:
        base = message(f.struct, version, unknown_tags, depth + 1)
    else:
        base = scalar(f.type)
    if f.nullable_in(version):
        return st.one_of(st.none(), base)
    return base


@st.composite
def _message(draw: st.DrawFn, cls: type[Message], version: int, unknown_tags: bool,
             depth: int) -> Message:
    kwargs: dict[str, Any] = {}
    for f in cls.FIELDS:
        if f.present_in(version):
            kwargs[f.attr] = draw(value(f, version, unknown_tags, depth))
    flexible = getattr(cls, "_flexible_for", None)
    if unknown_tags and flexible is not None and flexible(version):
        used = {f.tag for f in cls.FIELDS if f.tag is not None}
        tags = draw(st.lists(st.integers(0, 40).filter(lambda t: t not in used),
                             max_size=2, unique=True))
        if tags:
            kwargs["unknown_tagged_fields"] = sorted(
                (t, draw(st.binary(max_size=6))) for t in tags)
    return cls(**kwargs)


def message(cls: type[Message], version: int, unknown_tags: bool = True,
            depth: int = 0) -> st.SearchStrategy[Message]:
    return _message(cls, version, unknown_tags, depth)


def all_message_classes() -> list[type[Message]]:
    """Every top-level generated class: protocol messages, metadata records, control records."""
    out: list[type[Message]] = []
    for pkg_name in ("kraftnode.protocol.generated", "kraftnode.protocol.generated.metadata",
                     "recordbatch.generated"):
        pkg = importlib.import_module(pkg_name)
        for name in pkg.__all__:
            out.append(getattr(pkg, name))
    return out


def attach_flexibility(classes: list[type[Message]]) -> None:
    """Let nested struct classes know when their message is flexible (for unknown tags)."""
    def mark(cls: type[Message], fn: Any, seen: set[type]) -> None:
        if cls in seen:
            return
        seen.add(cls)
        cls._flexible_for = fn  # type: ignore[attr-defined]
        for f in cls.FIELDS:
            if f.struct is not None:
                mark(f.struct, fn, seen)

    for c in classes:
        mark(c, c.is_flexible, set())  # type: ignore[attr-defined]


__all__ = ["all_message_classes", "attach_flexibility", "message", "pkgutil"]
