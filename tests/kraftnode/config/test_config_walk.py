"""A configuration key's walk from ``server.properties`` to its use: through the key table and
one typed config object the consumer owns (issue 40).

For ``controller.quorum.election.timeout.ms``, ``group.consumer.session.timeout.ms`` and
``metadata.log.max.snapshot.interval.ms`` (and the families they belong to): the key's name is
read in ``kraftnode/config/`` only (no second parser elsewhere); the value arrives in the
consumer's dataclass (``RaftConfig``, ``GroupConfig``, ``SnapshotConfig``); that field is read
by its consumer only (no renamed copy travels); and no dictionary of raw properties is a field
of ``NodeConfig`` or is read outside ``kraftnode/config/`` but the one typed listing
(``ListedProperties``), which ``server/node.py`` hands to DescribeConfigs and the controller.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from collections import abc
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.config import keys
from kraftnode.config.node_config import NodeConfig, load
from kraftnode.config.properties import ListedProperties

ROOT = Path(__file__).resolve().parents[3]
PKG = ROOT / "kraftnode"
CONFIG = PKG / "config"

BASE = ("node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:9093\n"
        "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n")

#: key -> (the NodeConfig attribute holding the consumer's object, its field,
#:         the modules allowed to read that field: the consumer's, and config/'s own checks)
WALKS = {
    "controller.quorum.election.timeout.ms": ("raft", "election_timeout_ms", ("kraftnode/raft/",)),
    "group.consumer.session.timeout.ms": ("group_config", "consumer_session_timeout_ms",
                                          ("kraftnode/groups/", "kraftnode/config/consumers.py")),
    "metadata.log.max.snapshot.interval.ms": ("snapshot_config", "max_snapshot_interval_ms",
                                              ("kraftnode/server/controller_io/snapshot_manager.py",)),
}

#: the key families the consumers' configs are filled from: named in kraftnode/config/ only
FAMILIES = ("controller.quorum.", "group.", "offset.metadata.max.bytes", "metadata.log.max.",
            "metadata.max.retention.", "kraftnode.raft.pre.vote.enable", "broker.session.timeout.ms",
            "broker.heartbeat.interval.ms", "num.partitions", "default.replication.factor",
            "delete.topic.enable", "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
            "unclean.leader.election.interval.ms", "metadata.max.idle.interval.ms")


def _modules() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("kraftnode/protocol/generated/"):
            continue
        yield rel, ast.parse(path.read_text(), rel)


def test_the_three_walks_end_in_the_consumers_typed_config(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_text(BASE + "controller.quorum.election.timeout.ms=1234\n"
                        "group.consumer.session.timeout.ms=50000\n"
                        "metadata.log.max.snapshot.interval.ms=777\n")
    cfg = load(str(p))
    got = {key: getattr(getattr(cfg, holder), fld) for key, (holder, fld, _r) in WALKS.items()}
    assert got == {"controller.quorum.election.timeout.ms": 1234,
                   "group.consumer.session.timeout.ms": 50000,
                   "metadata.log.max.snapshot.interval.ms": 777}
    # unset: the key table's default, the one place it is written
    p.write_text(BASE)
    cfg = load(str(p))
    for key, (holder, fld, _r) in WALKS.items():
        assert getattr(getattr(cfg, holder), fld) == keys.value({}, key), key


@pytest.mark.parametrize("key", sorted(WALKS))
def test_the_typed_field_is_read_by_its_consumer_only(key: str) -> None:
    _holder, fld, readers = WALKS[key]
    found = sorted({rel for rel, tree in _modules() for node in ast.walk(tree)
                    if isinstance(node, ast.Attribute) and node.attr == fld and isinstance(node.ctx, ast.Load)})
    assert found, f"nothing reads {fld}: the walk of {key} is broken"
    strays = [rel for rel in found if not rel.startswith(readers)]
    assert strays == [], f"{fld} ({key}) is read outside its consumer: {strays}"


def test_the_consumers_keys_are_named_in_the_configuration_package_only() -> None:
    names = {k.name for k in keys.KEYS if k.name.startswith(FAMILIES)}
    assert set(WALKS) <= names
    strays = sorted(f"{rel}:{node.lineno} {node.value}" for rel, tree in _modules()
                    if not rel.startswith("kraftnode/config/") for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and node.value in names)
    assert strays == [], f"a second reader of a consumer's key: {strays}"


def test_no_second_parser_outside_the_configuration_package() -> None:
    """Below the entry points nothing reads the key table itself; DescribeConfigs lists it."""
    listing = {"kraftnode/server/handlers/broker_configs.py"}
    below = ("kraftnode/server/", "kraftnode/raft/", "kraftnode/groups/", "kraftnode/controller/",
             "kraftnode/log/", "kraftnode/security/", "kraftnode/metadata/")
    strays = []
    for rel, tree in _modules():
        if not rel.startswith(below) or rel in listing:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                imported = [f"{node.module}.{a.name}" for a in node.names]
                if any(m in ("kraftnode.config.keys", "kraftnode.config.server_config",
                             "kraftnode.config.ServerConfig", "kraftnode.config.server_config.ServerConfig")
                       for m in [node.module, *imported]):
                    strays.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name.startswith("kraftnode.config.") for a in node.names):
                strays.append(f"{rel}:{node.lineno}")
    assert strays == [], f"a second parser of server.properties: {strays}"


def test_no_raw_properties_travel() -> None:
    hints = typing.get_type_hints(NodeConfig)
    raw = [f.name for f in dataclasses.fields(NodeConfig)
           if typing.get_origin(hints[f.name]) in (dict, abc.Mapping, typing.Mapping)
           and typing.get_args(hints[f.name]) == (str, str)]
    assert raw == []
    listings = [f.name for f in dataclasses.fields(NodeConfig) if hints[f.name] is ListedProperties]
    assert listings == ["listed_properties"]
    readers = sorted({rel for rel, tree in _modules() for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                      and node.attr in ("listed_properties", "properties")
                      and not rel.startswith("kraftnode/config/")})
    assert readers == ["kraftnode/server/node.py"]
