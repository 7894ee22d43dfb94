"""``server.properties`` read through the key table, one typed getter per key kraftnode uses.

Every getter reads its key with :func:`kraftnode.config.keys.value`: the type, the validator
and the default are the table's, never written here a second time.  The getters are lazy, so
a command that needs only a few keys (``format`` reads the node id, the log directories and
the controller listeners) is not refused for a key it does not use;
:func:`kraftnode.config.node_config.load` reads them all, once, for a running node.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kraftnode.config import keys
from kraftnode.config.properties import Listener, Properties, load_properties, parse_listeners
from kraftnode.errors import ConfigError

__all__ = ["ServerConfig"]


class ServerConfig:
    """The keys of Kafka's ``KafkaConfig`` that kraftnode reads, typed and defaulted by the table."""

    def __init__(self, props: Properties) -> None:
        self.props = props
        self._values = props.raw()

    @classmethod
    def load(cls, path: str | Path, overrides: Mapping[str, str] | None = None) -> ServerConfig:
        """The file's keys, then ``overrides`` over them (``kraftnode start --override``, as
        ``kafka-server-start.sh --override`` applies them over server.properties)."""
        props = load_properties(path)
        if overrides:
            props = Properties({**props.raw(), **overrides}, source=props.source)
        return cls(props)

    @property
    def source(self) -> str:
        return self.props.source

    # ------------------------------------------------------------------ typed access
    def validate_all(self) -> dict[str, object]:
        """Parse every known key present by its type and validator (ConfigError on the first bad one)."""
        return keys.validate(self._values)

    def is_set(self, name: str) -> bool:
        return name in self._values

    def written(self, name: str) -> str | None:
        """The value of ``name`` exactly as written (for a message that quotes it); None: unset."""
        return self._values.get(name)

    def _value(self, name: str, kind: type) -> object:
        v = keys.value(self._values, name)
        if v is not None and not isinstance(v, kind):  # a table entry of another type
            raise TypeError(f"{name} is a {keys.BY_NAME[name].type}, not {kind.__name__}")
        return v

    def int_value(self, name: str) -> int:
        """An ``int``/``long`` key that has a default in the table."""
        v = self._value(name, int)
        assert isinstance(v, int), f"{name} has no default"
        return v

    def optional_int(self, name: str) -> int | None:
        v = self._value(name, int)
        return v if isinstance(v, int) else None

    def bool_value(self, name: str) -> bool:
        v = self._value(name, bool)
        assert isinstance(v, bool), f"{name} has no default"
        return v

    def str_value(self, name: str) -> str | None:
        """A ``string`` key: its value, else its default; ``None`` when unset without a default."""
        v = self._value(name, str)
        return v if isinstance(v, str) else None

    def list_value(self, name: str) -> list[str]:
        v = self._value(name, list)
        return [str(x) for x in v] if isinstance(v, list) else []

    def host_port(self, name: str) -> tuple[str, int] | None:
        v = self._value(name, tuple)
        if v is None:
            return None
        assert isinstance(v, tuple)
        host, port = v
        return str(host), int(port)

    # ------------------------------------------------------------------ identity and roles
    @property
    def node_id(self) -> int:
        n = self.optional_int("node.id")
        if n is None or n < 0:  # Kafka's EMPTY_NODE_ID is -1: any negative id is "missing"
            raise ConfigError("Missing configuration `node.id` which is required when `process.roles` "
                              "is defined (i.e. when running in KRaft mode).")
        return n

    @property
    def process_roles(self) -> list[str]:
        """``process.roles`` as Kafka's ValidList validator and parseProcessRoles check it."""
        roles = self.list_value("process.roles")
        for r in roles:
            if r not in ("broker", "controller"):
                raise ConfigError(f"Invalid value {r} for configuration process.roles: String must be "
                                  "one of: broker, controller")
        if len(set(roles)) != len(roles):
            raise ConfigError("Duplicate role names found in `process.roles`: "
                              f"ArrayBuffer({', '.join(roles)})")
        return roles

    # ------------------------------------------------------------------ log directories
    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs`` if set, else ``log.dir`` (a comma-separated list too), as Kafka resolves them."""
        if self.is_set("log.dirs"):  # set, even empty, it wins (Kafka: Option(getString(LOG_DIRS)))
            dirs = [d for d in self.list_value("log.dirs") if d]
        else:
            dirs = [d.strip() for d in (self.str_value("log.dir") or "").split(",") if d.strip()]
        if not dirs:
            raise ConfigError("At least one log directory must be defined via log.dirs or log.dir.")
        return list(dict.fromkeys(dirs))

    @property
    def metadata_log_dir(self) -> str:
        d = self.str_value("metadata.log.dir")
        return d if d else self.log_dirs[0]

    @property
    def all_log_dirs(self) -> list[str]:
        """Every directory ``format`` writes: the log dirs plus the metadata log dir."""
        dirs = list(self.log_dirs)
        if self.metadata_log_dir not in dirs:
            dirs.append(self.metadata_log_dir)
        return dirs

    @property
    def metadata_log_segment_bytes(self) -> int:
        return self.int_value("metadata.log.segment.bytes")

    @property
    def metadata_log_segment_min_bytes(self) -> int:
        return self.int_value("metadata.log.segment.min.bytes")

    @property
    def metadata_log_segment_ms(self) -> int:
        return self.int_value("metadata.log.segment.ms")

    @property
    def inter_broker_protocol_version(self) -> str | None:
        """No longer read: Kafka 4.4's format ignores it (``--release-version``)."""
        return self.str_value("inter.broker.protocol.version") or None

    # ------------------------------------------------------------------ listeners
    @property
    def controller_listener_names(self) -> list[str]:
        return [n.upper() for n in self.list_value("controller.listener.names") if n]

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners("listeners", self.str_value("listeners") or "")

    @property
    def advertised_listeners(self) -> list[Listener]:
        text = self.str_value("advertised.listeners")
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

    # ------------------------------------------------------------------ quorum
    @property
    def quorum_voters(self) -> list[str]:
        return self.list_value("controller.quorum.voters")

    @property
    def quorum_bootstrap_servers(self) -> list[str]:
        return self.list_value("controller.quorum.bootstrap.servers")
