"""One definition of every configuration key kraftnode accepts: the key table.

Each :class:`ConfigKey` names a key, its type, its default (Kafka 3.9's for Kafka's
keys), its validator, its documentation and whether kraftnode honours it.  It is the one
source of names, types and defaults: :class:`~kraftnode.config.server_config.ServerConfig`
reads every key through it (:func:`value`), so a default is written here and nowhere else
(a default that a layer below the configuration needs too is a constant of
:mod:`kraftnode.vocabulary`, which this table reads).  From the table also come:

* start-up validation (:func:`validate`): every key present is parsed by its type and
  validator, so ``controller.quorum.fetch.timeout.ms=abc`` stops start-up with a line
  naming the key, exactly as the same file stops Kafka;
* the warnings at start-up (:func:`warnings_for`): keys kraftnode accepts but does not
  honour, and keys it does not know at all (warned, not refused, as Kafka does);
* ``docs/configuration.md`` (:func:`render_markdown`; ``python -m kraftnode.config
  --write`` regenerates it and a test fails when the committed file is stale).

Kafka's own keys keep Kafka's names and defaults; our additions are prefixed
``kraftnode.``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kraftnode.errors import ConfigError, LocalError
from kraftnode.vocabulary import (
    METADATA_LOG_SEGMENT_BYTES,
    METADATA_LOG_SEGMENT_MIN_BYTES,
    METADATA_LOG_SEGMENT_MS,
    METADATA_MAX_RETENTION_BYTES,
    METADATA_MAX_RETENTION_MS,
    METADATA_SNAPSHOT_MAX_INTERVAL_MS,
    METADATA_SNAPSHOT_MAX_NEW_RECORD_BYTES,
    METADATA_TOPIC,
    QUORUM_ELECTION_BACKOFF_MAX_MS,
    QUORUM_ELECTION_TIMEOUT_MS,
    QUORUM_FETCH_TIMEOUT_MS,
    QUORUM_REQUEST_TIMEOUT_MS,
    QUORUM_RETRY_BACKOFF_MS,
    RAFT_TOPICS,
    SOCKET_REQUEST_MAX_BYTES,
    TEST_RAFT_TOPIC,
)

__all__ = ["ConfigKey", "KEYS", "BY_NAME", "validate", "value", "warnings_for", "render_markdown",
           "parse_value"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class _Invalid(LocalError):
    """Why a value is invalid; parse_value turns it into a ConfigError naming the key."""


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str                 # int, long, string, list, boolean, host:port
    default: str | None       # as written in a properties file; None: no default (unset)
    doc: str
    honoured: bool
    group: str
    at_least: int | None = None
    choices: tuple[str, ...] = ()
    #: for keys kraftnode does not honour: why, in a few words
    why_ignored: str = ""

    @property
    def kafka(self) -> bool:
        return not self.name.startswith("kraftnode.")

    @property
    def validator(self) -> str:
        if self.at_least is not None:
            return f"[{self.at_least},...]"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return ""


def parse_value(key: ConfigKey, text: str) -> object:
    """The typed value of ``text`` for ``key``; ConfigError naming the key when invalid."""
    v = text.strip()
    try:
        if key.type in ("int", "long"):
            lo, hi, kind = (INT_MIN, INT_MAX, "INT") if key.type == "int" else (LONG_MIN, LONG_MAX, "LONG")
            try:
                n = int(v, 10)
            except ValueError:
                raise _Invalid(f"Not a number of type {kind}") from None
            if not lo <= n <= hi:
                raise _Invalid(f"out of range for {kind}")
            if key.at_least is not None and n < key.at_least:
                raise _Invalid(f"Value must be at least {key.at_least}")
            return n
        if key.type == "boolean":
            if v.lower() not in ("true", "false"):
                raise _Invalid("Expected value to be either true or false")
            return v.lower() == "true"
        if key.type == "list":
            # ConfigDef's LIST: split at commas (and the spaces around them), empty entries
            # kept -- Kafka refuses ``process.roles=controller,`` and so do we
            return re.split(r"\s*,\s*", v) if v else []
        if key.type == "host:port":
            if not v:
                return None              # set but empty: as if unset
            host, sep, port = v.rpartition(":")
            if "://" in host:
                raise _Invalid("expected HOST:PORT without a scheme (e.g. 127.0.0.1:9404)")
            if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
                raise _Invalid("expected HOST:PORT (e.g. 127.0.0.1:9404)")
            return host.strip("[]"), int(port)
        if key.choices and v not in key.choices:
            raise _Invalid("expected " + " or ".join(key.choices))
        return v
    except _Invalid as e:
        raise ConfigError(f"Invalid value {v!r} for configuration {key.name}: {e}") from None


def _k(name: str, type_: str, default: str | None, doc: str, *, group: str, honoured: bool = True,
       at_least: int | None = None, choices: tuple[str, ...] = (), why: str = "") -> ConfigKey:
    return ConfigKey(name, type_, default, doc, honoured, group, at_least, choices, why)


_BROKER = "kraftnode is a KRaft controller only: it runs no broker"

KEYS: tuple[ConfigKey, ...] = (
    # ---- identity and roles
    _k("node.id", "int", None, "The node id of this controller; required (not negative), and must "
       "equal the one `format` wrote into meta.properties.", group="Node"),
    _k("process.roles", "list", "", "The roles of this process. Must include `controller` "
       "(`broker` alongside it is accepted and ignored).", group="Node"),
    _k("broker.id", "int", "-1", "A broker's id.", group="Node", honoured=False,
       why="only node.id names a KRaft node"),
    # ---- quorum
    _k("controller.quorum.voters", "list", "", "Static quorum (kraft.version 0): the voters as "
       "`id@host:port,...`. Leave unset for a dynamic (KIP-853) quorum.", group="Quorum"),
    _k("controller.quorum.bootstrap.servers", "list", "", "Dynamic quorum: `host:port,...` of "
       "controllers to discover the quorum from.", group="Quorum"),
    _k("controller.quorum.election.timeout.ms", "int", str(QUORUM_ELECTION_TIMEOUT_MS), "Maximum time without a fetch from "
       "the leader before a new election starts.", group="Quorum", at_least=1),
    _k("controller.quorum.fetch.timeout.ms", "int", str(QUORUM_FETCH_TIMEOUT_MS), "Maximum time without a successful "
       "fetch from the leader before a voter becomes a candidate (and the leader's check-quorum "
       "window).", group="Quorum", at_least=1),
    _k("controller.quorum.election.backoff.max.ms", "int", str(QUORUM_ELECTION_BACKOFF_MAX_MS), "Maximum back-off before a new "
       "election after a failed one.", group="Quorum", at_least=1),
    _k("controller.quorum.request.timeout.ms", "int", str(QUORUM_REQUEST_TIMEOUT_MS), "How long a request to a peer may "
       "go unanswered before it is retried.", group="Quorum", at_least=1),
    _k("controller.quorum.retry.backoff.ms", "int", str(QUORUM_RETRY_BACKOFF_MS), "Wait before retrying a failed request "
       "to a peer.", group="Quorum", at_least=0),
    _k("controller.quorum.auto.join.enable", "boolean", "false", "Kafka 4.x: a controller that "
       "is an observer of a dynamic quorum (kraft.version 1) -- its id is not a voter, or its "
       "entry has another directory id -- adds itself as a voter with AddRaftVoter once caught "
       "up, removing the stale entry of its id first. See docs/raft.md.", group="Quorum"),
    _k("controller.quorum.append.linger.ms", "int", "25", "How long the leader lingers to batch "
       "appends.", group="Quorum", at_least=0, honoured=False,
       why="appends are batched by group commit, with no linger"),
    # ---- listeners
    _k("listeners", "string", "PLAINTEXT://:9092", "`NAME://host:port,...` to listen on; an "
       "empty host means every interface.", group="Listeners"),
    _k("advertised.listeners", "string", None, "The addresses this node gives to others, when "
       "they differ from `listeners`.", group="Listeners"),
    _k("controller.listener.names", "list", None, "The listener(s) the quorum uses; the first "
       "is this node's endpoint in the voter set. Default: the first listener.", group="Listeners"),
    _k("listener.security.protocol.map", "list",
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       "Security protocol per listener name: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL "
       "(docs/security.md).", group="Listeners"),
    _k("inter.broker.listener.name", "string", None, "The listener brokers talk to each other "
       "on.", group="Listeners", honoured=False, why=_BROKER),
    _k("socket.request.max.bytes", "int", str(SOCKET_REQUEST_MAX_BYTES), "The largest request frame accepted; a "
       "larger one closes the connection.", group="Listeners", at_least=1),
    _k("connections.max.idle.ms", "long", "600000", "Idle client connections are closed after "
       "this long.", group="Listeners", at_least=1),
    _k("socket.send.buffer.bytes", "int", "102400", "SO_SNDBUF of server sockets.",
       group="Listeners", honoured=False, why="the operating system's buffer sizes are used"),
    _k("socket.receive.buffer.bytes", "int", "102400", "SO_RCVBUF of server sockets.",
       group="Listeners", honoured=False, why="the operating system's buffer sizes are used"),
    _k("num.network.threads", "int", "3", "Network threads.", group="Listeners", honoured=False,
       why="one event loop serves every connection"),
    _k("num.io.threads", "int", "8", "Request handler threads.", group="Listeners",
       honoured=False, why="one event loop serves every connection"),
    # ---- log
    _k("log.dirs", "list", None, "The log directories; the first holds the metadata log unless "
       "`metadata.log.dir` is set.", group="Log"),
    _k("log.dir", "string", "/tmp/kafka-logs", "The log directory, when `log.dirs` is unset.",
       group="Log"),
    _k("metadata.log.dir", "string", None, "Where the metadata log (`__cluster_metadata-0`) "
       "lives. Default: the first of `log.dirs`.", group="Log"),
    _k("metadata.log.segment.bytes", "int", str(METADATA_LOG_SEGMENT_BYTES), "Maximum size of one segment of the "
       "metadata log.", group="Log", at_least=12),
    _k("metadata.log.segment.min.bytes", "int", str(METADATA_LOG_SEGMENT_MIN_BYTES), "Lower bound applied to "
       "`metadata.log.segment.bytes` (as Kafka's internal config).", group="Log", at_least=12),
    _k("metadata.log.segment.ms", "long", str(METADATA_LOG_SEGMENT_MS), "Roll a new segment after this long.",
       group="Log", at_least=1),
    _k("metadata.max.retention.bytes", "long", str(METADATA_MAX_RETENTION_BYTES), "Retention by size of the metadata "
       "log behind snapshots: the oldest snapshots (never the latest) and the segments wholly "
       "below the oldest kept one are deleted while the total exceeds this; -1: no limit "
       "(docs/snapshots.md).", group="Log"),
    _k("metadata.max.retention.ms", "long", str(METADATA_MAX_RETENTION_MS), "Retention by age of the metadata log "
       "behind snapshots, as metadata.max.retention.bytes; -1: no limit.", group="Log"),
    _k("metadata.log.max.record.bytes.between.snapshots", "long", str(METADATA_SNAPSHOT_MAX_NEW_RECORD_BYTES), "Generate a "
       "snapshot once this many bytes were committed since the last one.", group="Log",
       at_least=1),
    _k("metadata.log.max.snapshot.interval.ms", "long", str(METADATA_SNAPSHOT_MAX_INTERVAL_MS), "Generate a snapshot when "
       "this long has passed since the last one and new records were committed; 0: never by "
       "time.", group="Log", at_least=0),
    _k("inter.broker.protocol.version", "string", None, "Accepted and ignored, as Kafka 4.4's "
       "`kafka-storage.sh format` ignores it (Kafka 4.0 removed it): `kraftnode format "
       "--release-version` sets the metadata.version to bootstrap with.", group="Log"),
    _k("num.recovery.threads.per.data.dir", "int", "1", "Threads recovering logs at start-up.",
       group="Log", honoured=False, why="one metadata log is recovered in-line"),
    _k("log.retention.check.interval.ms", "long", "300000", "How often broker logs are checked "
       "for retention.", group="Log", honoured=False, why=_BROKER),
    # ---- broker-only keys found in Kafka's sample server.properties
    _k("offsets.topic.replication.factor", "int", "3", "Replication of __consumer_offsets.",
       group="Broker", honoured=False, why=_BROKER),
    _k("transaction.state.log.replication.factor", "int", "3", "Replication of "
       "__transaction_state.", group="Broker", honoured=False, why=_BROKER),
    _k("transaction.state.log.min.isr", "int", "2", "min.insync.replicas of __transaction_state.",
       group="Broker", honoured=False, why=_BROKER),
    # ---- the controller (docs/controller.md)
    _k("broker.session.timeout.ms", "int", "9000", "A broker that has not heartbeated for this long "
       "is fenced: it leaves every ISR and its leaderships move.", group="Controller", at_least=1),
    _k("broker.heartbeat.interval.ms", "int", "2000", "How often brokers heartbeat (theirs is "
       "what counts; the controller reads it for nothing else).", group="Controller", at_least=1),
    _k("num.partitions", "int", "1", "Partitions of a topic created without a count.",
       group="Controller", at_least=1),
    _k("default.replication.factor", "int", "1", "Replication factor of a topic created without "
       "one.", group="Controller", at_least=1),
    _k("delete.topic.enable", "boolean", "true", "Whether DeleteTopics deletes (false: "
       "TOPIC_DELETION_DISABLED).", group="Controller"),
    _k("auto.leader.rebalance.enable", "boolean", "true", "Move leadership back to each partition's "
       "preferred replica, checked every `leader.imbalance.check.interval.seconds`.", group="Controller"),
    _k("leader.imbalance.check.interval.seconds", "long", "300", "How often the preferred-leader "
       "balancing runs while some partition is not led by its preferred replica.", group="Controller",
       at_least=1),
    _k("unclean.leader.election.interval.ms", "long", "300000", "How often leaderless partitions "
       "of topics with `unclean.leader.election.enable=true` get an unclean election.",
       group="Controller", at_least=1),
    _k("metadata.max.idle.interval.ms", "int", "500", "While brokers are registered, the active "
       "controller writes a NoOpRecord when it has written nothing for this long; 0: never.",
       group="Controller", at_least=0),
    _k("unclean.leader.election.enable", "boolean", "false", "Cluster default of the topic config "
       "of the same name (a topic's own setting wins).", group="Controller"),
    _k("min.insync.replicas", "int", "1", "Cluster default of the topic config of the same name.",
       group="Controller", at_least=1),
    _k("log.segment.bytes", "int", "1073741824", "Static default of the topic config "
       "`segment.bytes` (the controller reports topics' effective configs from its own; "
       "the metadata log's segments are `metadata.log.segment.bytes`).", group="Controller", at_least=14),
    _k("log.retention.hours", "int", "168", "Static default of the topic config `retention.ms`, as "
       "hours (`log.retention.ms` and `log.retention.minutes` win when set).", group="Controller"),
    # ---- ours
    # ---- security: TLS/SASL key families are read by kraftnode/security (docs/security.md)
    _k("authorizer.class.name", "string", "", "The authorizer: "
       "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` enables ACLs (stored in the "
       "metadata log; docs/security.md); empty: every API is allowed to every client. Any other "
       "class is refused at start-up.", group="Security"),
    _k("super.users", "list", "", "With an authorizer: principals allowed everything, "
       "`;`-separated (`User:admin;User:controller`). Must include the principal the "
       "controllers use with each other.", group="Security"),
    _k("allow.everyone.if.no.acl.found", "boolean", "false", "With an authorizer: allow a "
       "resource no ACL names.", group="Security"),
    _k("connections.max.reauth.ms", "long", "0", "SASL session lifetime (KIP-368 "
       "re-authentication).", group="Security", honoured=False,
       why="re-authentication is not supported: sessions do not expire (lifetime 0)"),
    _k("principal.builder.class", "string", None, "Builds a connection's principal.",
       group="Security", honoured=False, why="the default principal builder's rules are built in"),
    _k("message.max.bytes", "int", "1048588", "The largest record batch a producer may write "
       "(larger: MESSAGE_TOO_LARGE, as a Kafka broker answers). Values above 8388608 act as "
       "8388608, the raft log's own limit.", group="Log", at_least=0),
    # ---- the group coordinator (kraftnode.groups; docs/server.md "Consumer groups")
    _k("group.min.session.timeout.ms", "int", "6000", "The smallest session timeout a classic "
       "group member may ask for (smaller: INVALID_SESSION_TIMEOUT).", group="Groups"),
    _k("group.max.session.timeout.ms", "int", "1800000", "The largest session timeout a classic "
       "group member may ask for.", group="Groups"),
    _k("group.initial.rebalance.delay.ms", "int", "3000", "How long the first rebalance of an "
       "empty classic group waits for more members (extended while members keep joining, up "
       "to the rebalance timeout).", group="Groups", at_least=0),
    _k("group.max.size", "int", "2147483647", "The most members of a classic group.",
       group="Groups", at_least=1),
    _k("group.coordinator.rebalance.protocols", "list", "classic,consumer", "The group "
       "protocols served: `classic`, and `consumer` (KIP-848, ConsumerGroupHeartbeat). The "
       "default is Kafka 4.x's without `streams` (KIP-1071, not served); Kafka 3.9's was "
       "`classic`, when KIP-848 was a preview.", group="Groups"),
    _k("group.consumer.session.timeout.ms", "int", "45000", "The session timeout of KIP-848 "
       "consumer group members.", group="Groups", at_least=1),
    _k("group.consumer.min.session.timeout.ms", "int", "45000", "Lower bound of "
       "`group.consumer.session.timeout.ms`.", group="Groups", at_least=1),
    _k("group.consumer.max.session.timeout.ms", "int", "60000", "Upper bound of "
       "`group.consumer.session.timeout.ms`.", group="Groups", at_least=1),
    _k("group.consumer.heartbeat.interval.ms", "int", "5000", "The heartbeat interval KIP-848 "
       "members are told to use.", group="Groups", at_least=1),
    _k("group.consumer.min.heartbeat.interval.ms", "int", "5000", "Lower bound of "
       "`group.consumer.heartbeat.interval.ms`.", group="Groups", at_least=1),
    _k("group.consumer.max.heartbeat.interval.ms", "int", "15000", "Upper bound of "
       "`group.consumer.heartbeat.interval.ms`.", group="Groups", at_least=1),
    _k("group.consumer.max.size", "int", "2147483647", "The most members of a KIP-848 consumer "
       "group.", group="Groups", at_least=1),
    _k("group.consumer.assignors", "list", "uniform,range", "The server-side assignors, the "
       "first the default (`uniform`, `range`, or Kafka's class names for them).", group="Groups"),
    _k("offset.metadata.max.bytes", "int", "4096", "The longest metadata string of a committed "
       "offset (longer: OFFSET_METADATA_TOO_LARGE).", group="Groups", at_least=0),
    _k("kraftnode.raft.topic", "string", None, "The topic the quorum replicates: "
       f"`{METADATA_TOPIC}` (a KRaft controller quorum) or `{TEST_RAFT_TOPIC}` (to join "
       "Kafka's TestRaftServer). Default: decided by the cluster id.", group="kraftnode",
       choices=tuple(RAFT_TOPICS)),
    _k("kraftnode.log.file", "string", None, "Also write the node's log to this file, rotated by "
       "size (the console keeps its copy). Unset: console only. `--log-config` overrides it.",
       group="kraftnode"),
    _k("kraftnode.log.file.max.bytes", "long", "104857600", "Rotate `kraftnode.log.file` when it "
       "would grow beyond this size.", group="kraftnode", at_least=1024),
    _k("kraftnode.log.file.backups", "int", "10", "How many rotated files (`FILE.1` ... `FILE.N`)"
       " to keep.", group="kraftnode", at_least=0),
    _k("kraftnode.raft.pre.vote.enable", "boolean", "true", "KIP-996 pre-vote and leader "
       "stickiness as Kafka 4.x runs them by default: advertise Vote v2, ask for pre-votes before "
       "an election, refuse them while the leader is heard from; toward a peer without Vote v2 "
       "(Kafka 3.9) a real election, as Kafka 4.x does. Off: Kafka 3.9's elections and "
       "ApiVersions. See docs/raft.md.", group="kraftnode"),
    _k("kraftnode.application.records.enable", "boolean", "false", "Let applications write "
       "their own records (anything that is not a KRaft metadata record) to the metadata log: "
       "Produce to `__cluster_metadata`, consumer groups' offsets and members, the embedding API "
       "(which sets it). A genuine Kafka broker or controller cannot replay such a log, so a node "
       "with it on says so at start-up and refuses BrokerRegistration. Off (the default): Produce "
       "to `__cluster_metadata` is refused (INVALID_TOPIC_EXCEPTION), groups are not served, and a "
       "node whose log holds application records stops with one line naming this key. Set it "
       "alike on every node of a quorum. See docs/server.md, \"Application records\".",
       group="kraftnode"),
    _k("kraftnode.read.linearizable", "boolean", "false", "Consumer Fetch and ListOffsets LATEST "
       "on the leader are linearizable: each first confirms leadership with a majority (read "
       "index, one BeginQuorumEpoch round trip). Off: Kafka's behaviour (a deposed leader may "
       "serve committed but stale data until it notices). See docs/raft.md.", group="kraftnode"),
    _k("kraftnode.snapshot.fork.enable", "boolean", "true", "Write each metadata snapshot in a "
       "child process forked at the snapshot's offset: its memory is the state at that moment "
       "(copy-on-write), so the node neither copies the metadata image on its event loop nor "
       "shares the interpreter with the encoding (at a million partitions, seconds of CPU). Off, "
       "or where the platform cannot fork: the state is copied on the event loop and written in a "
       "worker thread. See docs/snapshots.md.", group="kraftnode"),
    _k("kraftnode.metrics.listener", "host:port", None, "Serve Prometheus metrics "
       "(`/metrics`) and health (`/healthz`, `/readyz`) over HTTP on HOST:PORT. Unset: no "
       "metrics server.", group="kraftnode"),
)

BY_NAME: dict[str, ConfigKey] = {k.name: k for k in KEYS}


def validate(values: Mapping[str, str]) -> dict[str, object]:
    """Parse every known key present; ConfigError names the first invalid one."""
    return {name: parse_value(BY_NAME[name], text) for name, text in values.items() if name in BY_NAME}


def value(values: Mapping[str, str], name: str) -> object:
    """The typed value of key ``name``: as set in ``values``, else the table's default parsed
    (``None`` for a key without a default).  The one way a key is read."""
    key = BY_NAME[name]
    text = values.get(name, key.default)
    return None if text is None else parse_value(key, text)


#: Key families read by kraftnode/security and documented in docs/security.md rather
#: than key by key: Kafka's ``ssl.*`` and ``sasl.*`` keys and their per-listener overrides
#: (``listener.name.<listener>.<key>``).
SECURITY_FAMILIES = ("ssl.", "sasl.", "listener.name.")


def is_known(key: str) -> bool:
    """A key this table defines, or one of the security families."""
    return key in BY_NAME or key.startswith(SECURITY_FAMILIES)


def warnings_for(keys: Iterable[str]) -> list[str]:
    """The start-up warnings for the keys of one configuration (ignored, then unknown)."""
    present = sorted(set(keys))
    ignored = [k for k in present if k in BY_NAME and not BY_NAME[k].honoured]
    unknown = [k for k in present if not is_known(k)]
    out = []
    if ignored:
        out.append(f"These configurations '[{', '.join(ignored)}]' were supplied but are not used "
                   "by kraftnode (see docs/configuration.md)")
    out += [f"The configuration '{k}' was supplied but isn't a known config." for k in unknown]
    return out


_GROUP_TITLES = {
    "Node": "Node", "Quorum": "Quorum", "Listeners": "Listeners and connections", "Log": "Log",
    "Controller": "Controller (docs/controller.md; the controller's own `log.*`, `message.max.bytes`, `compression.type`, ... keys are the static defaults of topic configs, as in Kafka)",
    "Security": "Security (the `ssl.*`, `sasl.*` and `listener.name.<listener>.*` key families are Kafka's, read as Kafka reads them: docs/security.md)", "Broker": "Broker keys (accepted, not used)",
    "Groups": "Consumer groups (the group coordinator on the raft leader: docs/server.md)",
    "kraftnode": "kraftnode's own keys",
}


def _cell(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown() -> str:
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated from kraftnode/config/keys.py by `python -m kraftnode.config --write`;",
        "     tests/kraftnode/config/test_keys.py fails when this file is stale. Do not edit. -->",
        "",
        "`kraftnode start` reads a Kafka-style `server.properties` (Java Properties rules). Every key",
        "below is validated at start-up by its type and validator: an invalid value stops the node",
        "with one line naming the key (exit 2). Keys marked *ignored* are accepted -- so a Kafka",
        "controller's file works unchanged -- but have no effect; the node logs one warning at",
        "start-up listing those present (`These configurations '[...]' were supplied but are not",
        "used by kraftnode`). A key not in this table is warned about, not refused, in Kafka's",
        "words: `The configuration 'x' was supplied but isn't a known config.`",
        "",
        "Kafka's keys keep Kafka 3.9's names and defaults; kraftnode's additions are prefixed",
        "`kraftnode.`. Examples: `config/` (single node, static 3-node quorum, dynamic quorum).",
        "",
        "Not in the file: the log level comes from `kraftnode start --log-level LEVEL` or the",
        "`KRAFTNODE_LOG_LEVEL` environment variable (DEBUG, INFO, WARN, ERROR; default INFO), and",
        "`--log-config FILE` hands logging to a Python logging configuration file (INI, or JSON",
        "`dictConfig`).",
        "",
    ]
    for group, title in _GROUP_TITLES.items():
        lines += [f"## {title}", "", "| key | type | default | valid values | honoured | description |",
                  "|---|---|---|---|---|---|"]
        for k in KEYS:
            if k.group != group:
                continue
            default = "(unset)" if k.default is None else ("\"\"" if k.default == "" else f"`{k.default}`")
            honoured = "yes" if k.honoured else f"ignored: {k.why_ignored}"
            lines.append(f"| `{k.name}` | {k.type} | {_cell(default)} | {_cell(k.validator)} | "
                         f"{_cell(honoured)} | {_cell(k.doc)} |")
        lines.append("")
    return "\n".join(lines)


DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render_markdown()
    if args == ["--write"]:
        DOC_PATH.write_text(text)
        print(f"wrote {DOC_PATH}")
        return 0
    if args == ["--check"]:
        if not DOC_PATH.exists() or DOC_PATH.read_text() != text:
            print(f"{DOC_PATH} is stale: run python -m kraftnode.config --write", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: python -m kraftnode.config [--write | --check]", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0

