"""The core's internal API holds: the rules use the node only through rules.port.RaftCore,
and RaftNode's table of replaceable rules holds only what a test replaces."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import kraftnode.raft.rules as rules_package
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.rules.port import RaftCore
from tests.simulation import plants, upgrade_sim

RULES_DIR = Path(rules_package.__file__).parent
PRIVATE = re.compile(r"\bnode\._")


def test_no_rule_reaches_into_the_node() -> None:
    """No ``node._`` anywhere in kraftnode/raft/rules/ (code, comments and docstrings)."""
    found = [f"{path.name}:{n}: {line.strip()}"
             for path in sorted(RULES_DIR.glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if PRIVATE.search(line)]
    assert found == []


def test_the_check_sees_a_private_access() -> None:
    assert PRIVATE.search("    node._actions.append(x)")
    assert not PRIVATE.search("    node.emit(x)  # my_node._x is another name")


def _bound_rules() -> dict[str, object]:
    """RaftNode's class attributes that are functions of kraftnode.raft.rules."""
    return {name: value for name, value in vars(RaftNode).items()
            if inspect.isfunction(value) and value.__module__.startswith("kraftnode.raft.rules.")}


def test_the_replaceable_rules_are_the_ones_tests_replace() -> None:
    """Every rule bound on RaftNode is overridden by a planted bug (and nothing else is bound)."""
    bound = _bound_rules()
    planted = [*plants.CLASSES.values(), *upgrade_sim.PLANTS.values()]
    replaced = {name for cls in planted for name in vars(cls) if name in bound}
    assert set(bound) == replaced
    # ... and the rules call each of them through the node (RaftCore declares them),
    # except on_vote_request, which only the node's dispatch calls.
    declared = {name for name in dir(RaftCore) if name in bound}
    assert declared == set(bound) - {"on_vote_request"}
