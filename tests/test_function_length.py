"""No function in kraftnode/ longer than 80 lines (issue 40): a function that grows past the
limit, or a new long one, fails. (Generated code is left out: it is one decoder per message.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 80


def _long_functions() -> dict[str, int]:
    out = {}
    for path in sorted((ROOT / "kraftnode").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if "/generated/" in rel:
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LIMIT:
                    out[f"{rel}::{node.name}"] = length
    return out


def test_no_function_over_80_lines() -> None:
    assert _long_functions() == {}, f"functions over {LIMIT} lines"
