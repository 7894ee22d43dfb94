"""``kraftnode format``: prepare log directories, mirroring Kafka 4.4's ``kafka-storage.sh format``.

Writes ``meta.properties`` and ``bootstrap.checkpoint`` into every log directory of
the configuration (``log.dirs`` plus ``metadata.log.dir``), and for a dynamic
(KIP-853) quorum the bootstrap snapshot
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` holding
kraft.version 1 and the initial voters.  Formatted directories are refused unless
``--ignore-formatted``; a directory of another cluster is always refused.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kraftnode import features
from kraftnode.config import ConfigError, ServerConfig
from kraftnode.errors import UsageError
from kraftnode.log.bootstrap import (
    LATEST_PRODUCTION,
    METADATA_VERSIONS,
    DynamicVoter,
    check_bootstrap_metadata_version,
    parse_initial_controllers,
    parse_release_version,
    write_bootstrap_checkpoint,
    write_bootstrap_snapshot,
)
from kraftnode.log.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    read_meta_properties,
    write_meta_properties,
)
from kraftnode.log.uuids import random_directory_id, random_uuid
from recordbatch.wire import uuid_from_base64, uuid_to_base64

NAME = "format"
HELP = "Format the log directories of this node (like kafka-storage.sh format)"
EXAMPLES = """\
  kraftnode format --config config/controller-static-1.properties --cluster-id $(kraftnode random-uuid)
  kraftnode format -c config/single-node.properties -t MkU3OEVBNTcwNTJENDM2Qg --standalone
  kraftnode format -c server.properties -t ID --initial-controllers 1@h1:9093:DIRID1,2@h2:9093:DIRID2
  kraftnode format -c server.properties -t ID --no-initial-controllers    # joins with add-controller
A static quorum (controller.quorum.voters set) takes none of the three dynamic options.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", required=True, help="the server.properties file")
    parser.add_argument("--cluster-id", "-t", required=True, help="the cluster id (see random-uuid)")
    parser.add_argument("--ignore-formatted", "-g", action="store_true",
                        help="skip directories that are already formatted instead of failing")
    parser.add_argument("--release-version", "-r", default=None,
                        help=f"metadata.version to bootstrap with (default {LATEST_PRODUCTION})")
    parser.add_argument("--feature", "-f", action="append", default=None, metavar="FEATURE=LEVEL",
                        help="a feature level to bootstrap with, e.g. group.version=1 (repeatable; "
                             "every other feature gets its default for the metadata.version)")
    group = parser.add_mutually_exclusive_group()
    parser.add_argument("--add-scram", "-S", action="append", default=None, metavar="SCRAM_CREDENTIAL",
                        help="a SCRAM credential to add to the __cluster_metadata log, e.g. "
                             "'SCRAM-SHA-256=[name=alice,password=alice-secret]' or "
                             "'SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"N3E=\","
                             "saltedpassword=\"YCE=\"]' (kafka-storage.sh's syntax)")
    group.add_argument("--standalone", "-s", action="store_true",
                       help="bootstrap a dynamic quorum with this controller as its only voter")
    group.add_argument("--initial-controllers", "-I", default=None,
                       help="bootstrap a dynamic quorum: id@host:port:directoryId,...")
    group.add_argument("--no-initial-controllers", "-N", action="store_true",
                       help="dynamic quorum; this controller joins later with add-controller")


def _standalone_voter(cfg: ServerConfig, node_id: int) -> DynamicVoter:
    listener = cfg.advertised_controller_listeners()[0]
    host = listener.host or "localhost"
    return DynamicVoter(node_id, host, listener.port, random_directory_id())


@dataclass(frozen=True)
class _Target:
    """What ``format`` reads of server.properties (through the key table, lazily: only these)."""

    cfg: ServerConfig
    node_id: int
    listener_names: list[str]
    static_voters: list[str]
    dirs: list[str]
    metadata_dir: str


def run(args: argparse.Namespace) -> int:
    target = _read_config(args.config)
    try:
        uuid_from_base64(args.cluster_id)
    except ValueError as e:
        raise UsageError(f"Cluster ID string {args.cluster_id} does not appear to be a valid UUID: {e}") from None

    mv_name, mv_level, feature_levels = bootstrap_features(args.release_version, args.feature)
    try:
        check_bootstrap_metadata_version(mv_level, f"format command ({mv_name})")
    except ValueError as e:
        raise UsageError(str(e)) from None
    scram_values = _scram_records(args, mv_level)
    _check_quorum_kind(args, bool(target.static_voters))
    voters = _initial_voters(args, target)
    to_format, in_use = _unformatted_dirs(args, target)
    if not to_format:
        print("All of the log directories are already formatted.")
        return 0

    print(f"Bootstrap metadata: {_bootstrap_metadata_string(mv_level, feature_levels, scram_values)}")
    now_ms = int(time.time() * 1000)
    own_voter = next((v for v in voters or [] if v.node_id == target.node_id), None)
    for d in to_format:
        is_metadata = d == target.metadata_dir
        kind, dir_id = _directory_kind(is_metadata, voters, own_voter, in_use)
        in_use.add(dir_id)
        print(f"Formatting {kind} {d} with metadata.version {mv_name}.")
        try:
            os.makedirs(d, exist_ok=True)
            write_bootstrap_checkpoint(d, mv_level, now_ms, scram_values, feature_levels)
            if is_metadata and voters is not None:
                write_bootstrap_snapshot(d, voters, target.listener_names[0], now_ms)
            write_meta_properties(d, MetaProperties(cluster_id=args.cluster_id, node_id=target.node_id,
                                                    directory_id=dir_id))
        except OSError as e:
            raise UsageError(f"Error while writing to log directory {d}: {e.strerror or e}") from None
    return 0


def _read_config(path: str) -> _Target:
    try:
        cfg = ServerConfig.load(path)
        roles = cfg.process_roles
        if not roles:
            raise UsageError(
                "The configuration file appears to be for a legacy cluster: process.roles is not set. "
                "Formatting is only supported for clusters in KRaft mode.")
        if "controller" not in roles:
            raise UsageError("kraftnode is a controller: process.roles must include controller")
        node_id = cfg.node_id
        listener_names = cfg.controller_listener_names
        if not listener_names:
            raise UsageError("controller.listener.names must be set: the initial controller listener is unknown")
        return _Target(cfg, node_id, listener_names, cfg.quorum_voters, cfg.all_log_dirs, cfg.metadata_log_dir)
    except ConfigError as e:
        raise UsageError(str(e)) from None


def _scram_records(args: argparse.Namespace, mv_level: int) -> list[bytes]:
    """``--add-scram``: the SCRAM credential records to bootstrap with."""
    if not getattr(args, "add_scram", None):
        return []
    if mv_level < METADATA_VERSIONS["3.5-IV2"]:
        raise UsageError("SCRAM is only supported in metadata.version 3.5-IV2 or later.")
    from kraftnode.log.metadata_records import encode_metadata_record
    from kraftnode.security.scram import ScramArgumentError, parse_add_scram
    try:
        return [encode_metadata_record(parse_add_scram(a), 0) for a in args.add_scram]
    except ScramArgumentError as e:
        raise UsageError(str(e)) from None


def _check_quorum_kind(args: argparse.Namespace, static: bool) -> None:
    """A static quorum (controller.quorum.voters) or a dynamic one (the flags), never both,
    with kraft.version following the kind (Formatter.calculateEffectiveFeatureLevel)."""
    dynamic = bool(args.standalone or args.initial_controllers or args.no_initial_controllers)
    if dynamic and static:
        raise UsageError(
            "You cannot use --standalone, --initial-controllers or --no-initial-controllers when "
            "controller.quorum.voters is set; remove controller.quorum.voters to use a dynamic quorum")
    if not dynamic and not static:
        raise UsageError(
            "Because controller.quorum.voters is not set on this controller, you must specify one of "
            "the following: --standalone, --initial-controllers, or --no-initial-controllers.")
    explicit_kraft = dict(_parse_features(args.feature or [])).get(features.KRAFT_VERSION)
    if dynamic and explicit_kraft == 0:
        raise UsageError(
            "Cannot set kraft.version to 0 if controller.quorum.voters is empty and one of the flags "
            "--standalone, --initial-controllers, or --no-initial-controllers is used. For dynamic "
            "controllers support, try removing the --feature flag for kraft.version.")
    if not dynamic and explicit_kraft is not None and explicit_kraft > 0:
        raise UsageError(
            f"Cannot set kraft.version to {explicit_kraft} unless controller.quorum.voters is empty and "
            "one of the flags --standalone, --initial-controllers, or --no-initial-controllers is used. "
            "For dynamic controllers support, try using one of --standalone, --initial-controllers, or "
            "--no-initial-controllers and removing controller.quorum.voters.")


def _initial_voters(args: argparse.Namespace, target: _Target) -> list[DynamicVoter] | None:
    """The voters a dynamic quorum is bootstrapped with (None: none, static or joining later)."""
    try:
        if args.standalone:
            return [_standalone_voter(target.cfg, target.node_id)]
        if args.initial_controllers:
            return parse_initial_controllers(args.initial_controllers)
    except (ValueError, ConfigError) as e:
        raise UsageError(str(e)) from None
    return None


def _unformatted_dirs(args: argparse.Namespace, target: _Target) -> tuple[list[str], set[uuid.UUID]]:
    """Every directory inspected first, so nothing is written when any of them is unusable:
    (those to format, the directory ids already in use)."""
    to_format: list[str] = []
    in_use: set[uuid.UUID] = set()
    for d in target.dirs:
        p = Path(d)
        if p.exists() and not p.is_dir():
            raise UsageError(f"Log directory {d} exists but is not a directory")
        try:
            existing = read_meta_properties(p) if p.is_dir() else None
        except MetaPropertiesError as e:
            raise UsageError(str(e)) from None
        if existing is None:
            to_format.append(d)
            continue
        if existing.cluster_id != args.cluster_id:
            raise UsageError(
                f"Invalid cluster.id in {p / 'meta.properties'}. Expected {args.cluster_id}, but read {existing.cluster_id}")
        if existing.node_id != target.node_id:
            raise UsageError(
                f"Stored node id {existing.node_id} in {p / 'meta.properties'} doesn't match configured "
                f"node.id {target.node_id}")
        if existing.directory_id is not None:
            in_use.add(existing.directory_id)
        if not args.ignore_formatted:
            raise UsageError(
                f"Log directory {d} is already formatted. Use --ignore-formatted to ignore this "
                "directory and format the others.")
    return to_format, in_use


def _directory_kind(is_metadata: bool, voters: list[DynamicVoter] | None, own_voter: DynamicVoter | None,
                    in_use: set[uuid.UUID]) -> tuple[str, uuid.UUID]:
    """Kafka's DirectoryType of a directory, and its directory id."""
    if not is_metadata:
        return "data directory", random_directory_id(in_use)
    if voters is None:
        # without initial controllers (static quorum, and also --no-initial-controllers) the
        # metadata directory is a plain "metadata directory"
        return "metadata directory", random_directory_id(in_use)
    if own_voter is not None:
        return "dynamic metadata voter directory", own_voter.directory_id
    return "dynamic metadata directory", random_directory_id(in_use)


def _parse_features(specs: list[str]) -> list[tuple[str, int]]:
    """``--feature NAME=LEVEL`` as Kafka's Formatter.parseFeature reads it (a later value of
    the same feature wins)."""
    out: list[tuple[str, int]] = []
    for spec in specs:
        name, eq, text = spec.partition("=")
        if not eq:
            raise UsageError(f"Can't parse feature=level string {spec}: equals sign not found.")
        name, text = name.strip(), text.strip()
        try:
            level = int(text)
            if not -32768 <= level <= 32767:
                raise ValueError
        except ValueError:
            raise UsageError(f"Can't parse feature=level string {spec}: unable to parse {text} as a short.") from None
        out.append((name, level))
    return out


def bootstrap_features(release: str | None, specs: list[str] | None) -> tuple[str, int, dict[str, int]]:
    """(metadata.version name, level, every other feature's level) for ``--release-version``
    and ``--feature``, with Kafka 4.4's Formatter's checks and messages: ``--feature
    metadata.version`` only without ``--release-version``; unknown features and levels are
    refused; every feature not named gets its default for the metadata.version
    (Feature.defaultLevel); the dependencies of every level are checked. kraft.version is in
    the map as given (format decides it from the kind of quorum)."""
    parsed = _parse_features(specs or [])
    named = dict(parsed)
    if release is not None and features.METADATA_VERSION in named:
        raise UsageError("Use --release-version instead of --feature metadata.version=X to avoid ambiguity.")
    if features.METADATA_VERSION in named:
        level = named.pop(features.METADATA_VERSION)
        if level not in features.PRODUCTION_METADATA_VERSIONS.values():
            raise UsageError(f"Unknown metadata.version '{level}'. Supported metadata.version are: "
                             f"{', '.join(features.PRODUCTION_METADATA_VERSIONS)}")
        mv_name, mv_level = features.mv_name(level), level
    elif release is not None:
        try:
            mv_name, mv_level = parse_release_version(release)
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        mv_name, mv_level = LATEST_PRODUCTION, METADATA_VERSIONS[LATEST_PRODUCTION]
    for name, level in named.items():
        fdef = features.FEATURES.get(name)
        if fdef is None:
            raise UsageError(f"Unsupported feature: {name}. Supported features are: "
                             f"{', '.join(sorted(features.FEATURES))}")
        if fdef.level(level) is None or level > fdef.latest_production:
            raise UsageError(f"No feature:{name} with feature level {level}")
    levels = {**features.default_feature_levels(mv_level), **named}
    all_levels = {features.METADATA_VERSION: mv_level, **levels}
    for name, level in sorted(levels.items()):
        fl = features.FEATURES[name].level(level)
        for dep, dep_level in sorted((fl.dependencies if fl else {}).items()):
            if all_levels.get(dep, 0) < dep_level:
                raise UsageError(f"{name} could not be set to {level} because it depends on "
                                 f"{dep} level {dep_level}")
    return mv_name, mv_level, levels


def _java_bytes(b: bytes) -> str:
    """Arrays.toString of a Java byte[] (signed bytes)."""
    return "[" + ", ".join(str(x - 256 if x > 127 else x) for x in b) + "]"


def _bootstrap_metadata_string(mv_level: int, feature_levels: dict[str, int],
                               scram_values: list[bytes]) -> str:
    """BootstrapMetadata.toString, as Kafka 4.4's format prints it before formatting."""
    from kraftnode.log.metadata_records import decode_metadata_record
    from kraftnode.protocol.generated.metadata import UserScramCredentialRecord

    parts = [f"FeatureLevelRecord(name='{features.METADATA_VERSION}', featureLevel={mv_level})"]
    parts += [f"FeatureLevelRecord(name='{n}', featureLevel={lvl})"
              for n, lvl in sorted(feature_levels.items()) if lvl > 0 and n != features.KRAFT_VERSION]
    for v in scram_values:
        r = decode_metadata_record(v)[0]
        assert isinstance(r, UserScramCredentialRecord)
        parts.append(f"UserScramCredentialRecord(name='{r.name}', mechanism={r.mechanism}, "
                     f"salt={_java_bytes(r.salt)}, storedKey={_java_bytes(r.stored_key)}, "
                     f"serverKey={_java_bytes(r.server_key)}, iterations={r.iterations})")
    records = ", ".join(f"ApiMessageAndVersion({p} at version 0)" for p in parts)
    return f"BootstrapMetadata(records=[{records}], metadataVersionLevel={mv_level}, source=format command)"


__all__ = ["NAME", "HELP", "add_arguments", "bootstrap_features", "run", "random_uuid", "uuid_to_base64"]
