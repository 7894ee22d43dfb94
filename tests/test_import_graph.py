"""kraftnode's modules import one another without cycles.

The graph is built from the source with :mod:`ast` (nothing is imported): every
``import`` and ``from ... import`` counts, at module level, inside functions and under
``if TYPE_CHECKING``; ``from package import name`` is an edge to ``package.name`` when that
is a module, else to the package. A package's parent ``__init__`` that Python runs on the
way is not an edge (it is not what the importing module asked for).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_files(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``package`` (a dotted name under ``root``): dotted name -> file."""
    base = root.joinpath(*package.split("."))
    out: dict[str, Path] = {}
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` (at ``path``) imports."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                if not is_package:
                    anchor.pop()
                anchor = anchor[:len(anchor) - (node.level - 1)]
                source = ".".join(anchor + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                child = f"{source}.{alias.name}"
                out.add(child if child in known else source)
    return {name for name in out if name in known and name != module}


def import_graph(package: str = "kraftnode", root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports."""
    files = module_files(package, root)
    known = set(files)
    return {module: _imported(module, path, known) for module, path in files.items()}


def cycles(graph: dict[str, set[str]], within: str | None = None) -> list[list[str]]:
    """The import cycles (strongly connected components of more than one module) among the
    modules named ``within`` or below it (all of ``graph`` when None), each sorted."""
    def inside(name: str) -> bool:
        return within is None or name == within or name.startswith(within + ".")

    nodes = sorted(n for n in graph if inside(n))
    edges = {n: sorted(m for m in graph[n] if inside(m)) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(start: str) -> None:
        # Tarjan's algorithm, iteratively (the graph is a few hundred modules deep at most).
        work: list[tuple[str, Iterable[str]]] = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(edges[succ])))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for n in nodes:
        if n not in index:
            strongconnect(n)
    return sorted(found)


def test_the_helper_finds_a_cycle(tmp_path: Path) -> None:
    """The checker can fail: a planted two-module cycle (one import inside a function,
    one relative) and a three-module one are found; an acyclic chain is not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "x.py").write_text("import pkg.sub.y\n")
    (pkg / "sub" / "y.py").write_text("from pkg.sub.z import thing\n")
    (pkg / "sub" / "z.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import x\n")
    (pkg / "c.py").write_text("from pkg import a\nfrom pkg.sub import y\n")
    graph = import_graph("pkg", tmp_path)
    assert graph["pkg.c"] == {"pkg.a", "pkg.sub.y"}
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.sub.x", "pkg.sub.y", "pkg.sub.z"]]
    assert cycles(graph, within="pkg.sub") == [["pkg.sub.x", "pkg.sub.y", "pkg.sub.z"]]
    (pkg / "b.py").write_text("")
    assert cycles(import_graph("pkg", tmp_path), within="pkg.a") == []


@cache
def kraftnode_graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_raft_core_has_no_import_cycle() -> None:
    graph = kraftnode_graph()
    assert "kraftnode.raft.rules.port" in graph  # the walk found the core
    assert cycles(graph, within="kraftnode.raft") == []


def test_the_rules_do_not_import_the_node() -> None:
    """The rules see the node only through rules.port.RaftCore."""
    graph = kraftnode_graph()
    rules = [m for m in graph if m.startswith("kraftnode.raft.rules.")]
    assert len(rules) >= 8
    assert [m for m in rules if "kraftnode.raft.raft_node" in graph[m]] == []


def test_kraftnode_has_no_import_cycle() -> None:
    assert cycles(kraftnode_graph()) == []


# ------------------------------------------------------------------ packages (issue 40)
def package_of(module: str) -> str:
    """The package a module counts for: ``root.X`` (a top-level package or module of the root,
    e.g. ``kraftnode.raft``, ``kraftnode.cli``), and inside the server ``root.server.Y``
    (``kraftnode.server.raft_io``, ``kraftnode.server.node``)."""
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) > 2 and parts[1] == "server" else parts[:2])


def two_way_packages(graph: dict[str, set[str]]) -> list[str]:
    """Every pair of packages (:func:`package_of`) that import each other, one line each with
    an import either way (the graph counts imports inside functions and under TYPE_CHECKING)."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for module, imported in graph.items():
        for target in imported:
            a, b = package_of(module), package_of(target)
            if a != b:
                edges.setdefault((a, b), []).append((module, target))
    out = []
    for (a, b), there in sorted(edges.items()):
        back = edges.get((b, a))
        if a < b and back:
            out.append(f"{a} <-> {b}: {min(there)[0]} imports {min(there)[1]}, "
                       f"{min(back)[0]} imports {min(back)[1]}")
    return out


def test_the_package_check_finds_a_two_way_import(tmp_path: Path) -> None:
    """The check can fail: two packages importing each other only inside a function and under
    TYPE_CHECKING are found, so are two server subpackages; one-way imports are not."""
    pkg = tmp_path / "pkg"
    for d in ("a", "b", "server", "server/io", "server/net"):
        (pkg / d).mkdir(parents=True, exist_ok=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from pkg.b import y\n")
    (pkg / "b" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a.x import f\n")
    (pkg / "server" / "io" / "d.py").write_text("from pkg.server.net import n\nfrom pkg.a import x\n")
    (pkg / "server" / "net" / "n.py").write_text("from ..io import d\n")
    (pkg / "leaf.py").write_text("import pkg.a.x\n")
    found = two_way_packages(import_graph("pkg", tmp_path))
    assert found == ["pkg.a <-> pkg.b: pkg.a.x imports pkg.b.y, pkg.b.y imports pkg.a.x",
                     "pkg.server.io <-> pkg.server.net: pkg.server.io.d imports pkg.server.net.n, "
                     "pkg.server.net.n imports pkg.server.io.d"]
    (pkg / "b" / "y.py").write_text("")
    (pkg / "server" / "net" / "n.py").write_text("")
    assert two_way_packages(import_graph("pkg", tmp_path)) == []


def test_no_two_kraftnode_packages_import_each_other() -> None:
    """Packages are kraftnode.X and, inside the server, kraftnode.server.Y (its floors); an
    import counts wherever it is written, inside functions and under TYPE_CHECKING too."""
    graph = kraftnode_graph()
    assert {package_of(m) for m in graph} >= {"kraftnode.server.raft_io", "kraftnode.server.metrics",
                                               "kraftnode.raft", "kraftnode.controller", "kraftnode.cli"}
    assert two_way_packages(graph) == []


#: the leaves: modules that import nothing of kraftnode (docs/architecture.md, "The layers")
LEAVES = ("kraftnode.vocabulary", "kraftnode.errors", "kraftnode.java_order")


def test_the_leaves_import_nothing_of_kraftnode() -> None:
    graph = kraftnode_graph()
    assert {leaf: sorted(graph[leaf]) for leaf in LEAVES} == {leaf: [] for leaf in LEAVES}


def private_names_across_packages(package: str = "kraftnode", root: Path = ROOT) -> list[str]:
    """``from X import _name`` where X is in another package (:func:`package_of`) than the
    importing module. The generated codecs' nested message types (``_FooRequest_Bar``, named so
    by codegen) are their public type names and do not count."""
    out = []
    for module, path in module_files(package, root).items():
        if ".generated" in module:
            continue   # the codecs import only one another (and recordbatch)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if package_of(node.module) == package_of(module) or ".generated" in node.module:
                continue
            out += [f"{module}: from {node.module} import {a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                    and node.module.split(".")[0] == package]
    return sorted(out)


def test_the_private_name_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    for d in (pkg, pkg / "a", pkg / "b"):
        (d / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def _merge():\n    pass\n")
    (pkg / "a" / "y.py").write_text("from pkg.a.x import _merge\n")   # same package: fine
    (pkg / "b" / "z.py").write_text("def f():\n    from pkg.a.x import _merge\n")
    assert private_names_across_packages("pkg", tmp_path) == ["pkg.b.z: from pkg.a.x import _merge"]


def test_no_private_name_is_imported_across_packages() -> None:
    assert private_names_across_packages() == []
