"""The server's floor plan holds (issue 24): every module of ``kraftnode/server/`` lives in the
subpackage that owns its concern; only the assembly, ``node.py``, sits at the top.

Who may import whom is checked elsewhere: the layering contracts by ``lint-imports``
(``[tool.importlinter]`` in pyproject.toml), import cycles anywhere in kraftnode by
tests/test_import_graph.py.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "kraftnode"

#: What may sit directly in kraftnode/server/: the package and the assembly.
SERVER_TOP_LEVEL = {"__init__.py", "node.py"}

def test_only_the_assembly_sits_directly_in_server() -> None:
    loose = sorted(p.name for p in (PACKAGE / "server").glob("*.py") if p.name not in SERVER_TOP_LEVEL)
    assert loose == [], f"modules directly in kraftnode/server/ (give them a subpackage): {loose}"


def test_every_server_subpackage_is_a_package() -> None:
    for d in sorted(p for p in (PACKAGE / "server").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (d / "__init__.py").is_file(), f"{d} has no __init__.py"


#: Issue 24: the typed core and server silence mypy at most this many times.
MAX_TYPE_IGNORES = 3


def test_the_core_and_the_server_hardly_silence_mypy() -> None:
    ignores = [f"{p.relative_to(ROOT)}:{n}" for d in ("raft", "server")
               for p in sorted((PACKAGE / d).rglob("*.py"))
               for n, line in enumerate(p.read_text().splitlines(), 1) if "type: ignore" in line]
    assert len(ignores) <= MAX_TYPE_IGNORES, f"{len(ignores)} type: ignore (at most {MAX_TYPE_IGNORES}): {ignores}"
