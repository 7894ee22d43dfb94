"""A Kafka-style ``server.properties`` loader.

Operators already have Kafka ``server.properties`` files; reading them with
Java's exact ``Properties`` rules (comments, ``\\`` continuations, ``\\uXXXX``
escapes, ``=``/``:``/whitespace separators) means the same file means the same
thing to Kafka and to us.  Typed getters apply Kafka's defaults for the keys we
use and fail with :class:`ConfigError` naming the key, never with a traceback.

The server engineer extends :class:`ServerConfig` with more keys; the storage
layer only needs the node id, the log directories, the controller listener and
the metadata log segment settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ConfigError",
    "Listener",
    "Properties",
    "ServerConfig",
    "load_properties",
    "parse_properties",
    "parse_listeners",
    "format_properties",
]


class ConfigError(ValueError):
    """A configuration value is missing or invalid; the message names the key."""


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

    def require_str(self, key: str) -> str:
        v = self.get_str(key)
        if v is None or v == "":
            raise ConfigError(f"Missing required configuration {key} in {self.source}")
        return v

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


# Kafka 3.9 defaults for the keys we read (KafkaConfig / KRaftConfigs / MetadataLogConfig).
DEFAULT_LOG_DIR = "/tmp/kafka-logs"
METADATA_LOG_SEGMENT_BYTES_DEFAULT = 1024 * 1024 * 1024
METADATA_LOG_SEGMENT_MIN_BYTES_DEFAULT = 8 * 1024 * 1024
METADATA_LOG_SEGMENT_MS_DEFAULT = 7 * 24 * 60 * 60 * 1000
METADATA_MAX_RETENTION_BYTES_DEFAULT = 100 * 1024 * 1024
METADATA_MAX_RETENTION_MS_DEFAULT = 7 * 24 * 60 * 60 * 1000
METADATA_SNAPSHOT_MAX_NEW_RECORD_BYTES_DEFAULT = 20 * 1024 * 1024
METADATA_SNAPSHOT_MAX_INTERVAL_MS_DEFAULT = 60 * 60 * 1000


class ServerConfig:
    """The subset of Kafka's ``KafkaConfig`` that kraftnode reads, with Kafka's defaults."""

    def __init__(self, props: Properties) -> None:
        self.props = props

    @classmethod
    def load(cls, path: str | Path) -> ServerConfig:
        return cls(load_properties(path))

    @property
    def source(self) -> str:
        return self.props.source

    @property
    def node_id(self) -> int:
        n = self.props.get_int("node.id")
        if n is None:
            raise ConfigError(f"Missing required configuration node.id in {self.source}")
        if n < 0:
            raise ConfigError(f"Invalid value {n} for configuration node.id: must be non-negative")
        return n

    @property
    def process_roles(self) -> list[str]:
        roles = self.props.get_list("process.roles")
        for r in roles:
            if r not in ("broker", "controller"):
                raise ConfigError(f"Invalid value {r!r} for configuration process.roles: unknown role")
        return roles

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs`` if set, else ``log.dir`` (default /tmp/kafka-logs), as Kafka resolves them."""
        dirs = self.props.get_list("log.dirs")
        if not dirs:
            dirs = self.props.get_list("log.dir", [DEFAULT_LOG_DIR])
        if not dirs:
            raise ConfigError("Invalid value for configuration log.dirs: no log directory given")
        seen: list[str] = []
        for d in dirs:
            if d not in seen:
                seen.append(d)
        return seen

    @property
    def metadata_log_dir(self) -> str:
        d = self.props.get_str("metadata.log.dir")
        return d if d else self.log_dirs[0]

    @property
    def all_log_dirs(self) -> list[str]:
        """Every directory ``format`` writes: the log dirs plus the metadata log dir."""
        dirs = list(self.log_dirs)
        if self.metadata_log_dir not in dirs:
            dirs.append(self.metadata_log_dir)
        return dirs

    @property
    def controller_listener_names(self) -> list[str]:
        return [n.upper() for n in self.props.get_list("controller.listener.names")]

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners("listeners", self.props.get_str("listeners", "PLAINTEXT://:9092") or "")

    @property
    def advertised_listeners(self) -> list[Listener]:
        text = self.props.get_str("advertised.listeners")
        if not text:
            return []
        return parse_listeners("advertised.listeners", text)

    def advertised_controller_listeners(self) -> list[Listener]:
        """Controller listeners as advertised: ``advertised.listeners`` entry, else ``listeners``."""
        names = self.controller_listener_names
        if not names:
            raise ConfigError("Missing required configuration controller.listener.names")
        adv = {ln.name: ln for ln in self.advertised_listeners}
        plain = {ln.name: ln for ln in self.listeners}
        out = []
        for name in names:
            if name in adv:
                out.append(adv[name])
            elif name in plain:
                out.append(plain[name])
            else:
                raise ConfigError(
                    f"Invalid value for configuration controller.listener.names: listener {name} "
                    "is not in listeners"
                )
        return out

    @property
    def quorum_voters(self) -> list[str]:
        return self.props.get_list("controller.quorum.voters")

    @property
    def quorum_bootstrap_servers(self) -> list[str]:
        return self.props.get_list("controller.quorum.bootstrap.servers")

    @property
    def metadata_log_segment_bytes(self) -> int:
        v = self.props.get_int("metadata.log.segment.bytes", METADATA_LOG_SEGMENT_BYTES_DEFAULT, at_least=12)
        assert v is not None
        return v

    @property
    def metadata_log_segment_min_bytes(self) -> int:
        v = self.props.get_int(
            "metadata.log.segment.min.bytes", METADATA_LOG_SEGMENT_MIN_BYTES_DEFAULT, at_least=12
        )
        assert v is not None
        return v

    @property
    def metadata_log_segment_ms(self) -> int:
        v = self.props.get_long("metadata.log.segment.ms", METADATA_LOG_SEGMENT_MS_DEFAULT, at_least=1)
        assert v is not None
        return v
