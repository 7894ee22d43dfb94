"""The start-up checks Kafka 3.9 makes across keys, made ours, with Kafka's messages.

Kafka refuses to start a controller whose configuration cannot work: its node id is not
among the static voters, a voter entry does not parse, a controller listener name is not a
listener, the metadata log directory cannot be read.  These checks are spread over
``KafkaConfig.validateValues`` and ``parseProcessRoles``, ``QuorumConfig``'s voter and
bootstrap-server validators, ``KafkaRaftManager`` (routable voter addresses) and
``KafkaRaftServer.initializeLogDirs`` (``MetaPropertiesEnsemble``).  Here each is one
function, run in Kafka's order, raising :class:`ConfigError` with the message the genuine
server prints (checked against ``kafka-server-start.sh`` with the same file; the table in
``docs/operations.md`` lists each check, its message and its test).  Where Kafka's message
does not name the key, `` (key)`` is appended, so the one line a refusal prints always says
which key to fix.

A few refusals are kraftnode's own, marked so in the table: where Kafka starts and then fails
at run time (a controller SASL mechanism its listener does not enable: every peer login
fails), or where Kafka keeps the last of two entries for one voter id.  Single-key checks (a
number that is not a number, ...) are the key table's (:mod:`kraftnode.config.keys`);
listener security (keystores, JAAS entries) is checked where it is built
(``kraftnode.security.setup``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kraftnode.config.server_config import ServerConfig
from kraftnode.errors import ConfigError
from kraftnode.vocabulary import METADATA_PARTITION, METADATA_TOPIC

__all__ = ["VoterAddress", "check_config", "check_metadata_log_dir", "parse_bootstrap_servers",
           "parse_voters"]

VOTERS = "controller.quorum.voters"
BOOTSTRAP = "controller.quorum.bootstrap.servers"

#: Utils.HOST_PORT_PATTERN and Utils.VALID_HOST_CHARACTERS (Kafka's clients module)
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
#: QuorumConfig.NON_ROUTABLE_HOST
_NON_ROUTABLE_HOST = "0.0.0.0"
_ENTRY_FORM = "Each entry should be in the form `{id}@{host}:{port}`."


@dataclass(frozen=True)
class VoterAddress:
    node_id: int
    host: str
    port: int


def _host_port(address: str) -> tuple[str | None, int | None]:
    """Utils.getHost / Utils.getPort."""
    m = _HOST_PORT.fullmatch(address)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def _port_in_range(port: int, key: str) -> int:
    # new InetSocketAddress(host, port) refuses the port with this message
    if not 0 <= port <= 65535:
        raise ConfigError(f"port out of range:{port} ({key})")
    return port


def parse_voters(entries: list[str]) -> tuple[VoterAddress, ...]:
    """``controller.quorum.voters`` (a LIST: empty entries kept, and refused) as
    QuorumConfig.parseVoterConnections parses it, with routable addresses required as
    KafkaRaftManager requires them."""
    out: dict[int, VoterAddress] = {}
    for entry in entries:
        parts = entry.split("@")
        while len(parts) > 1 and parts[-1] == "":  # Java's String.split drops trailing empties
            parts.pop()
        if len(parts) != 2:
            raise ConfigError(f"Invalid configuration value for {VOTERS}. {_ENTRY_FORM}")
        id_text, address = parts
        node_id = int(id_text) if re.fullmatch(r"[+-]?[0-9]+", id_text) else None
        if node_id is None or not -(2**31) <= node_id < 2**31:  # Integer.parseInt
            raise ConfigError(f"Failed to parse voter ID as an integer from {id_text} ({VOTERS})")
        host, port = _host_port(address)
        # Kafka 3.9 accepts an empty host (and then has no address to reach): refused here
        if host is None or not host or not _VALID_HOST.fullmatch(host):
            raise ConfigError(f"Failed to parse host name from entry {entry} for the configuration "
                              f"{VOTERS}. {_ENTRY_FORM}")
        if port is None:
            raise ConfigError(f"Failed to parse host port from entry {entry} for the configuration "
                              f"{VOTERS}. {_ENTRY_FORM}")
        _port_in_range(port, VOTERS)
        if host == _NON_ROUTABLE_HOST:
            raise ConfigError(f"Host string ({host}) is not routeable ({VOTERS})")
        if node_id in out:
            # kraftnode's own: Kafka's parser keeps the last entry of an id without a word
            raise ConfigError(f"Duplicate voter id {node_id} in {VOTERS}: each voter is listed once")
        out[node_id] = VoterAddress(node_id, host, port)
    return tuple(out.values())


def parse_bootstrap_servers(entries: list[str]) -> tuple[tuple[str, int], ...]:
    """``controller.quorum.bootstrap.servers`` as QuorumConfig.parseBootstrapServers parses it."""
    out = []
    for entry in entries:
        host, port = _host_port(entry)
        if host is None or not host or not _VALID_HOST.fullmatch(host):
            raise ConfigError(f"Failed to parse host name from {entry} for the configuration {BOOTSTRAP}. "
                              'Each entry should be in the form "{host}:{port}"')
        if port is None:
            raise ConfigError(f"Failed to parse host port from {entry} for the configuration {BOOTSTRAP}. "
                              'Each entry should be in the form "{host}:{port}"')
        out.append((host, _port_in_range(port, BOOTSTRAP)))
    return tuple(out)


def _scala_set(ids: list[int]) -> str:
    """How Kafka prints ``voterIds.asScala.toSet``: ``Set(1, 2, 3)`` (a Java HashMap of small
    ints iterates in ascending order)."""
    return f"Set({', '.join(str(i) for i in sorted(ids))})"


def check_config(cfg: ServerConfig) -> tuple[tuple[VoterAddress, ...], tuple[tuple[str, int], ...]]:
    """Kafka's start-up checks across keys, in Kafka's order; returns (static voters,
    bootstrap servers), parsed.  ConfigError with Kafka's message on the first failure."""
    roles = cfg.process_roles          # unknown and duplicate roles (ValidList, parseProcessRoles)
    if not roles:
        raise ConfigError("The kafka configuration file appears to be for a legacy cluster: "
                          "process.roles is not set. kraftnode runs in KRaft mode only "
                          "(process.roles=controller)")
    if "controller" not in roles:
        raise ConfigError(f"Invalid value {','.join(roles)!r} for configuration process.roles: "
                          "a kraftnode is a controller")
    node_id = cfg.node_id              # missing or negative
    _ = cfg.log_dirs                   # at least one log directory
    voters = parse_voters(cfg.quorum_voters)
    bootstrap = parse_bootstrap_servers(cfg.quorum_bootstrap_servers)
    if not voters and not bootstrap:
        raise ConfigError(f"If using process.roles, either {BOOTSTRAP} must contain the set of "
                          f"bootstrap controllers or {VOTERS} must contain a parseable set of "
                          "controllers.")
    listeners = cfg.listeners
    names = cfg.controller_listener_names or [ln.name for ln in listeners[:1]]
    by_name = {ln.name: ln for ln in listeners}
    advertised = {ln.name: ln for ln in cfg.advertised_listeners}
    effective = [advertised.get(n) or by_name[n] for n in names if n in advertised or n in by_name]
    if set(roles) == {"controller"} and len(effective) != len(listeners):
        raise ConfigError("The listeners config must only contain KRaft controller listeners from "
                          "controller.listener.names when process.roles=controller")
    if voters and node_id not in [v.node_id for v in voters]:
        raise ConfigError("If process.roles contains the 'controller' role, the node id "
                          f"{node_id} must be included in the set of voters "
                          f"{VOTERS}={_scala_set([v.node_id for v in voters])}")
    if not effective:
        raise ConfigError("controller.listener.names must contain at least one value appearing in "
                          "the 'listeners' configuration when running the KRaft controller role")
    if any(n not in by_name for n in names):
        raise ConfigError("controller.listener.names must only contain values appearing in the "
                          "'listeners' configuration when running the KRaft controller role")
    if any(ln.host == _NON_ROUTABLE_HOST for ln in effective):
        raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                          "Use a routable IP address.")
    _check_controller_sasl(cfg, names[0])
    return voters, bootstrap


def _check_controller_sasl(cfg: ServerConfig, listener: str) -> None:
    """kraftnode's own (Kafka starts, then every login to a peer fails with this message): the
    mechanism a controller logs in to its peers with must be one their controller listener
    enables, and it is the same listener with the same keys on every voter."""
    raw = cfg.props.raw()
    protocols = raw.get("listener.security.protocol.map", "")
    mapping = {k.strip().upper(): v.strip().upper() for k, _, v in
               (e.partition(":") for e in protocols.split(",") if e.strip())}
    if not mapping.get(listener, listener).startswith("SASL_"):
        return
    mech_key = "sasl.mechanism.controller.protocol"
    mechanism = (raw.get(mech_key) or "GSSAPI").strip().upper()
    enabled_key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    if enabled_key not in raw:
        enabled_key = "sasl.enabled.mechanisms"
    enabled = [m.strip().upper() for m in (raw.get(enabled_key) or "GSSAPI").split(",") if m.strip()]
    if mechanism not in enabled:
        raise ConfigError(f"Client SASL mechanism '{mechanism}' not enabled in the server, enabled "
                          f"mechanisms are [{', '.join(enabled)}] ({mech_key}, {enabled_key})")


def metadata_log_dir_key(cfg: ServerConfig) -> str:
    """The key that names the metadata log directory (for messages)."""
    if cfg.str_value("metadata.log.dir"):
        return "metadata.log.dir"
    return "log.dirs" if cfg.is_set("log.dirs") else "log.dir"


def check_metadata_log_dir(cfg: ServerConfig) -> None:
    """KafkaRaftServer.initializeLogDirs for the metadata log directory: it holds a readable
    ``meta.properties`` (``kraftnode format`` wrote it) and the node may write there."""
    d = Path(cfg.metadata_log_dir)
    key = metadata_log_dir_key(cfg)
    meta = d / "meta.properties"
    try:
        with open(meta, "rb"):
            pass
    except FileNotFoundError:
        raise ConfigError(f"No readable meta.properties files found: {d} ({key}) is not formatted: "
                          f"run `kraftnode format --config {cfg.source} --cluster-id ID` first") from None
    except OSError as e:
        raise ConfigError(f"No readable meta.properties files found: error while reading {meta}: "
                          f"{e.strerror or e} ({key})") from None
    partition_dir = d / f"{METADATA_TOPIC}-{METADATA_PARTITION}"
    writable = os.access(d, os.W_OK | os.X_OK) and (
        not partition_dir.exists() or os.access(partition_dir, os.W_OK | os.X_OK))
    if not writable:
        raise ConfigError(f"AccessDeniedException: {partition_dir} ({key}: {d} is not writable)")
