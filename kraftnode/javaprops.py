"""Java's ``Properties`` text format: what ``Properties.load`` reads and ``Properties.store`` writes.

Two files in Kafka's world use it: ``server.properties`` (read by :mod:`kraftnode.config`) and
``meta.properties`` in every log directory (read and written by
:mod:`kraftnode.log.meta_properties`).  Reading them with Java's exact rules (comments, ``\\``
continuations, ``\\uXXXX`` escapes, ``=``/``:``/whitespace separators) means the same file means
the same thing to Kafka and to us.  The format is a leaf of its own, below both users, so the
log never imports the configuration package.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from kraftnode.errors import ConfigError

__all__ = ["format_properties", "parse_properties"]

_WS = " \t\f"


def _logical_lines(text: str) -> Iterator[str]:
    """Yield Java ``Properties`` logical lines (continuations joined, comments dropped)."""
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            # a line continues when it ends with an odd number of backslashes
            stripped = line.rstrip("\\")
            n_bs = len(line) - len(stripped)
            if n_bs % 2 == 1 and i < len(natural):
                parts.append(line[:-1])
                line = natural[i].lstrip(_WS)
                i += 1
                continue
            if n_bs % 2 == 1:
                line = line[:-1]  # a trailing lone backslash at EOF is dropped, as Java does
            parts.append(line)
            break
        yield "".join(parts)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str, lineno_hint: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if len(hexdigits) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                raise ConfigError(f"malformed \\uxxxx escape in properties line {lineno_hint!r}")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _WS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WS:
            j += 1
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``Properties`` text; later keys win, as in ``Properties.load``."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        result[_unescape(raw_key, line)] = _unescape(raw_value, line)
    return result


def _escape(s: str, is_key: bool) -> str:
    out = []
    for idx, c in enumerate(s):
        if c == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def format_properties(items: Mapping[str, str], comment_lines: tuple[str, ...] = ()) -> str:
    """Render ``items`` (in the given order) as ``Properties.store`` does."""
    lines = [f"#{c}" for c in comment_lines]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in items.items()]
    return "".join(line + "\n" for line in lines)
