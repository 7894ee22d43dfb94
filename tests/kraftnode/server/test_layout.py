"""The server's floor plan holds (issue 24): every module of ``kraftnode/server/`` lives in the
subpackage that owns its concern (only the assembly, ``node.py``, sits at the top), the
pure metadata state and the security code do not import the server, and no import cycle
runs through the server, security, metadata or command modules.

The import graph is read from the sources (every ``import`` statement, including those
inside functions and ``if TYPE_CHECKING:`` blocks: a cycle deferred to call time is still
a cycle in the design), not by importing anything.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "kraftnode"

#: What may sit directly in kraftnode/server/: the package, the assembly, and (until the
#: configuration package takes it) the node's configuration.
SERVER_TOP_LEVEL = {"__init__.py", "node.py", "node_config.py"}

#: The modules whose import cycles this test forbids (prefixes of dotted names).
CHECKED = ("kraftnode.server", "kraftnode.security", "kraftnode.metadata", "kraftnode.commands",
           "kraftnode.quorum_client", "kraftnode.embed")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py") if "generated" not in p.parts}


def _imports(path: Path, name: str, known: set[str]) -> Iterator[str]:
    """The kraftnode modules ``path`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _resolve(alias.name, known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield from _resolve(sub if sub in known else target, known)


def _resolve(dotted: str, known: set[str]) -> Iterator[str]:
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    if dotted.startswith("kraftnode"):
        yield dotted


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: {t for t in _imports(path, name, known) if t != name} for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _checked(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in CHECKED)


def test_only_the_assembly_sits_directly_in_server() -> None:
    loose = sorted(p.name for p in (PACKAGE / "server").glob("*.py") if p.name not in SERVER_TOP_LEVEL)
    assert loose == [], f"modules directly in kraftnode/server/ (give them a subpackage): {loose}"


def test_every_server_subpackage_is_a_package() -> None:
    for d in sorted(p for p in (PACKAGE / "server").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (d / "__init__.py").is_file(), f"{d} has no __init__.py"


@pytest.mark.parametrize("package", ["kraftnode.metadata", "kraftnode.security"])
def test_shared_packages_do_not_import_the_server(package: str) -> None:
    graph = _graph()
    bad = sorted((m, t) for m, targets in graph.items() if m == package or m.startswith(package + ".")
                 for t in targets if t == "kraftnode.server" or t.startswith("kraftnode.server."))
    assert bad == [], f"{package} imports the server: {bad}"


def test_the_metadata_state_imports_no_io_package() -> None:
    """The pure state (the controller and group coordinator build on it) imports neither the
    server, the security code nor the CLI."""
    graph = _graph()
    forbidden = ("kraftnode.server", "kraftnode.security", "kraftnode.commands", "kraftnode.embed")
    bad = sorted((m, t) for m, targets in graph.items() if m.startswith("kraftnode.metadata")
                 for t in targets if any(t == f or t.startswith(f + ".") for f in forbidden))
    assert bad == [], bad


def test_no_import_cycle_through_server_security_metadata_or_commands() -> None:
    cycles = [c for c in _cycles(_graph()) if any(_checked(m) for m in c)]
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_check_sees_a_cycle() -> None:
    """The cycle finder finds one when there is one (so the test above can fail)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    graph = _graph()
    graph["kraftnode.server.raft.wire"] = graph["kraftnode.server.raft.wire"] | {"kraftnode.server.node"}
    assert any("kraftnode.server.node" in c for c in _cycles(graph))
