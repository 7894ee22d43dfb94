"""``server.properties`` as Kafka reads it: the raw key/value pairs and their typed getters.

The text is read with Java's exact ``Properties`` rules (:mod:`kraftnode.javaprops`), so the
same file means the same thing to Kafka and to us.  Typed getters apply Kafka's parsing
rules (``INT``, ``LONG``, ``BOOLEAN``, ``LIST``) and fail with :class:`ConfigError` naming the
key, never with a traceback.  What a key's type and default *are* is the key table's business
(:mod:`kraftnode.config.keys`); :class:`~kraftnode.config.server_config.ServerConfig` reads
``server.properties`` through that table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kraftnode.errors import ConfigError
from kraftnode.javaprops import format_properties, parse_properties

__all__ = [
    "ConfigError",
    "Listener",
    "ListedProperties",
    "Properties",
    "load_properties",
    "parse_properties",
    "parse_listeners",
    "format_properties",
]


class Properties:
    """Parsed properties with typed getters that name the offending key on error."""

    def __init__(self, values: Mapping[str, str], source: str = "<properties>") -> None:
        self._values = dict(values)
        self.source = source

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def raw(self) -> dict[str, str]:
        return dict(self._values)

    def get_str(self, key: str, default: str | None = None) -> str | None:
        v = self._values.get(key)
        return default if v is None else v.strip()

    def _number(self, key: str, default: int | None, lo: int, hi: int, kind: str) -> int | None:
        v = self._values.get(key)
        if v is None:
            return default
        text = v.strip()
        try:
            n = int(text, 10)
        except ValueError:
            raise ConfigError(
                f"Invalid value {text!r} for configuration {key}: Not a number of type {kind}"
            ) from None
        if not lo <= n <= hi:
            raise ConfigError(
                f"Invalid value {text!r} for configuration {key}: out of range for {kind}"
            )
        return n

    def get_int(self, key: str, default: int | None = None, *, at_least: int | None = None) -> int | None:
        n = self._number(key, default, -(2**31), 2**31 - 1, "INT")
        if n is not None and at_least is not None and n < at_least:
            raise ConfigError(
                f"Invalid value {n} for configuration {key}: Value must be at least {at_least}"
            )
        return n

    def get_long(self, key: str, default: int | None = None, *, at_least: int | None = None) -> int | None:
        n = self._number(key, default, -(2**63), 2**63 - 1, "LONG")
        if n is not None and at_least is not None and n < at_least:
            raise ConfigError(
                f"Invalid value {n} for configuration {key}: Value must be at least {at_least}"
            )
        return n

    def get_bool(self, key: str, default: bool | None = None) -> bool | None:
        v = self._values.get(key)
        if v is None:
            return default
        text = v.strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
        raise ConfigError(
            f"Invalid value {v.strip()!r} for configuration {key}: Expected value to be either true or false"
        )

    def get_list(self, key: str, default: list[str] | None = None) -> list[str]:
        v = self._values.get(key)
        if v is None:
            return list(default or [])
        text = v.strip()
        if not text:
            return []
        return [p.strip() for p in text.split(",") if p.strip()]


class ListedProperties(Mapping[str, str]):
    """Every property as written (``--override`` included), read-only.  Two readers list them
    rather than read a key of their own: DescribeConfigs (a node's static broker configs) and
    the controller (the static layer of topic-config defaults, Kafka's ``staticConfig``).  Every
    other consumer gets its keys typed, from the key table (:mod:`kraftnode.config.consumers`)."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values = dict(values or {})

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ListedProperties({len(self._values)} keys)"


def load_properties(path: str | Path) -> Properties:
    """Read a properties file; a missing or unreadable file is a :class:`ConfigError`."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"configuration file {p} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"configuration file {p} is a directory") from None
    except OSError as e:
        raise ConfigError(f"cannot read configuration file {p}: {e.strerror}") from None
    # Java reads .properties as ISO-8859-1 through Properties.load(InputStream), but Kafka
    # loads server.properties through a Reader in UTF-8 (Utils.loadProps): accept UTF-8.
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return Properties(parse_properties(text), source=str(p))


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` entry; ``host`` is ``None`` when left empty (all interfaces)."""

    name: str
    host: str | None
    port: int


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[0-9a-fA-F:.]*\]|[^:\[\]]*):(-?[0-9]+)$")


def parse_listeners(key: str, text: str) -> list[Listener]:
    """Parse a ``listeners``-style list, naming ``key`` in errors."""
    out: list[Listener] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = _LISTENER_RE.match(part)
        if not m:
            raise ConfigError(f"Invalid value {part!r} for configuration {key}: expected NAME://host:port")
        name, host, port_s = m.group(1), m.group(2), m.group(3)
        port = int(port_s)
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {part!r} for configuration {key}: port out of range")
        if host.startswith("["):
            host = host[1:-1]
        out.append(Listener(name.upper(), host or None, port))
    names = [listener.name for listener in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: duplicate listener names")
    return out
