"""docs/architecture.md and README.md's layout table match the code.

The rules, kept simple on purpose:

* **Every module and package is named.** Each module under ``kraftnode/`` (``__init__.py``,
  ``__main__.py`` and anything under a ``generated/`` directory excepted) must appear in
  docs/architecture.md as its path relative to ``kraftnode/`` (``raft/rules/elections.py``, with or
  without a leading ``kraftnode/``), or as its dotted name (``kraftnode.raft.rules.elections``). Each
  package (a directory with an ``__init__.py``, ``generated/`` ones included) must appear as its
  path with a trailing slash (``raft/rules/``) or as its dotted name. A path counts only where it
  starts: ``server/raft/wire.py`` does not name a ``raft/wire.py``.
* **Every path named exists.** Every backquoted path in the document -- a ``.py``, ``.md``,
  ``.sh``, ``.json`` or ``.toml`` file or a directory ending in ``/``, with a ``/`` in it or ending
  in ``.py`` (``kafka-storage.sh`` is Kafka's, not a path) -- must exist relative to
  ``kraftnode/`` or to the repository; every relative Markdown link must point at a file beside
  the document. Lines that start with ``- (planned)`` name packages still being built on other
  branches and are exempt.
* **Every ``path.py::name`` resolves**: the module imports and ``name`` (``Class.method`` too) is an
  attribute of it. The KIP table and the two request paths are written this way, so a renamed
  rule fails here.
* **README's layout table** names every top-level package of ``kraftnode/`` as ``kraftnode/<name>/``
  and every top-level module as ``<name>.py``, and links to docs/architecture.md.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kraftnode"
DOC = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"

PLANNED_LINE = "- (planned)"
_PATH_TOKEN = re.compile(r"^[\w.-]+(/[\w.-]+)*(\.(py|md|sh|json|toml)|/)$")
_REFERENCE = re.compile(r"`([\w./-]+\.py)::([\w.]+)`")
_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def _doc() -> str:
    return DOC.read_text()


def _is_generated(path: Path) -> bool:
    return "generated" in path.relative_to(PACKAGE).parts[:-1]


def modules() -> list[Path]:
    """The modules the document must name."""
    return sorted(p for p in PACKAGE.rglob("*.py")
                  if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts
                  and not _is_generated(p))


def packages() -> list[Path]:
    """The packages (directories with an ``__init__.py``) the document must name."""
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py")
                  if p.parent != PACKAGE and "__pycache__" not in p.parts
                  and "generated" not in p.parent.relative_to(PACKAGE).parts[:-1])


def names(text: str, relative: str, dotted: str) -> bool:
    """Whether ``text`` names ``relative`` (a path under kraftnode/) or ``dotted``, at its start."""
    as_path = rf"(?<![\w/.])(kraftnode/)?{re.escape(relative)}(?![\w/])"
    as_dotted = rf"(?<![\w.]){re.escape(dotted)}(?!\w)"
    return re.search(as_path, text) is not None or re.search(as_dotted, text) is not None


def unnamed(text: str) -> list[str]:
    """What exists under kraftnode/ and ``text`` does not name."""
    missing = []
    for path in modules():
        rel = path.relative_to(PACKAGE)
        if not names(text, rel.as_posix(), ".".join(("kraftnode", *rel.with_suffix("").parts))):
            missing.append(f"kraftnode/{rel.as_posix()}")
    for path in packages():
        rel = path.relative_to(PACKAGE)
        if not names(text, rel.as_posix() + "/", ".".join(("kraftnode", *rel.parts))):
            missing.append(f"kraftnode/{rel.as_posix()}/")
    return missing


def _resolve(path: str) -> Path | None:
    for base in (PACKAGE, ROOT):
        candidate = base / path
        if candidate.exists():
            return candidate
    return None


def _checked_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.lstrip().startswith(PLANNED_LINE)]


def dangling_paths(text: str) -> list[str]:
    """Backquoted paths and relative links in ``text`` that do not exist."""
    out = []
    for line in _checked_lines(text):
        for token in re.findall(r"`([^`\s]+)`", line):
            path = token.split("::")[0]
            if (_PATH_TOKEN.match(path) and ("/" in path or path.endswith(".py"))
                    and _resolve(path) is None):
                out.append(path)
        for target, _anchor in _LINK.findall(line):
            if "://" not in target and not (DOC.parent / target).exists():
                out.append(target)
    return out


def _module_name(path: str) -> str:
    file = _resolve(path)
    assert file is not None, f"{path} does not exist"
    rel = file.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts)


def unresolved_references(text: str) -> list[str]:
    """``path.py::name`` references in ``text`` whose module or attribute does not exist."""
    out = []
    for line in _checked_lines(text):
        for path, attr in _REFERENCE.findall(line):
            if _resolve(path) is None:
                out.append(f"{path}::{attr} (no such module)")
                continue
            obj: object = importlib.import_module(_module_name(path))
            for part in attr.split("."):
                if not hasattr(obj, part):
                    out.append(f"{path}::{attr}")
                    break
                obj = getattr(obj, part)
    return out


# ----------------------------------------------------------------------------- the document
def test_every_module_and_package_is_named_in_the_architecture_doc() -> None:
    missing = unnamed(_doc())
    assert missing == [], (
        "docs/architecture.md does not name these (add each to its package's table): "
        f"{missing}")


def test_every_path_the_architecture_doc_names_exists() -> None:
    assert dangling_paths(_doc()) == []


def test_every_module_function_reference_resolves() -> None:
    text = _doc()
    assert len(_REFERENCE.findall(text)) > 100  # the KIP table and both request paths use them
    assert unresolved_references(text) == []


def test_the_doc_has_the_sections_issue_24_asks_for() -> None:
    headings = re.findall(r"^#+ (.+)$", _doc(), re.M)
    for wanted in ("The layers", "The event/action loop", "What each package owns",
                   "The path of an acks=all Produce", "The path of a follower Fetch",
                   "The three forms of a raft RPC", "KIP rules: where each one lives"):
        assert wanted in headings, wanted
    for kip in ("KIP-595", "KIP-630", "KIP-836", "KIP-853", "KIP-996"):
        assert any(h.startswith(kip) for h in headings), kip


# ---------------------------------------------------------------- the checks can fail
def test_a_module_left_out_would_be_reported() -> None:
    """The rules on text: a module path inside a longer one does not count, a dotted name does."""
    assert names("`server/raft/wire.py`", "raft/wire.py", "kraftnode.raft.wire") is False
    assert names("see `kraftnode/raft/wire.py`", "raft/wire.py", "kraftnode.raft.wire") is True
    assert names("`kraftnode.raft.wire`", "raft/wire.py", "kraftnode.raft.wire") is True
    assert names("`raft/rules/elections.py`", "raft/rules/", "kraftnode.raft.rules") is False
    assert names("`raft/rules/` |", "raft/rules/", "kraftnode.raft.rules") is True
    text = _doc()
    assert "kraftnode/raft/rules/timers.py" not in unnamed(text)
    assert "kraftnode/raft/rules/timers.py" in unnamed(text.replace("raft/rules/timers.py", "raft/rules/clocks.py"))


def test_a_dangling_path_or_reference_would_be_reported() -> None:
    assert dangling_paths("`raft/nothing_here.py` and `docs/nowhere.md` and [x](nowhere.md)") == [
        "raft/nothing_here.py", "docs/nowhere.md", "nowhere.md"]
    assert dangling_paths("- (planned) `kraftnode/not_yet/` with `server/handlers/not_yet.py`") == []
    assert unresolved_references("`raft/rules/elections.py::no_such_rule`") == [
        "raft/rules/elections.py::no_such_rule"]
    assert unresolved_references("`raft/raft_node.py::RaftNode.transition`") == []


# ------------------------------------------------------------------------------- README
def _layout_table() -> str:
    text = README.read_text()
    start = text.index("## Layout")
    end = text.index("\n## ", start + 1)
    return text[start:end]


@pytest.mark.parametrize("package", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()))
def test_readme_layout_names_every_top_level_package(package: str) -> None:
    assert f"`kraftnode/{package}/`" in _layout_table()


def test_readme_layout_names_every_top_level_module_and_links_the_architecture_doc() -> None:
    table = _layout_table()
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert [name for name in loose if f"`{name}`" not in table] == []
    assert "docs/architecture.md" in table
