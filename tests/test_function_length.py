"""No function in kraftnode/ longer than 80 lines (issue 40), but the ones listed here, each
waiting for its own split; a function that grows past the limit, or a new long one, fails."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 80

#: (module, function) -> why it is still longer; remove an entry once the function is split
NOT_YET_SPLIT = {
    ("kraftnode/controller/cluster.py", "register_broker"): "issue 40: not in the config helper's list",
    ("kraftnode/groups/consumer_protocol.py", "_consumer_heartbeat"): "issue 40: not in the config helper's list",
    ("kraftnode/log/recovery.py", "recover"): "issue 40: not in the config helper's list",
    ("kraftnode/log/segment.py", "recover"): "issue 40: not in the config helper's list",
    ("kraftnode/server/handlers/controller_apis.py", "_delete_topics"): "the handlers helper's scope",
    ("kraftnode/server/raft_io/driver.py", "_execute"): "issue 40: not in the config helper's list",
}


def _long_functions() -> dict[tuple[str, str], int]:
    out = {}
    for path in sorted((ROOT / "kraftnode").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if "/generated/" in rel:
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LIMIT:
                    out[(rel, node.name)] = length
    return out


def test_no_function_over_80_lines_but_the_listed_ones() -> None:
    new = {f"{rel}::{name}": n for (rel, name), n in _long_functions().items()
           if (rel, name) not in NOT_YET_SPLIT}
    assert new == {}, f"functions over {LIMIT} lines: {new}"


def test_the_functions_split_for_issue_40_stay_short() -> None:
    long = _long_functions()
    for fn in [("kraftnode/server/node.py", "run_node"), ("kraftnode/commands/format.py", "run"),
               ("kraftnode/commands/audit.py", "run"), ("kraftnode/commands/dev_cluster.py", "run"),
               ("kraftnode/spark/audit.py", "run_audit")]:
        assert fn not in long, fn
