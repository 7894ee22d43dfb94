"""The request handlers' structure, read from the source (issue 40, must-show 3):

* no attribute of a handler object is assigned outside its constructor -- in the handler
  classes' own methods, or anywhere in kraftnode/server on a variable that holds a handler
  (the runtime side, :class:`~kraftnode.server.handlers.base.Sealed`, is checked in
  test_handlers_in_process.py);
* no literal API key number in server/handlers: an integer passed where an API key goes (a
  parameter named ``key``, ``api_key`` or ``api`` annotated ``int``, of a function in
  server/handlers or in the helpers they call), compared with an API key, or listed in a
  collection of API keys compared with one;
* Produce has one core: ``ApplicationHandlers._produce_core`` is the only caller of what
  validates and appends a partition's records, and both paths (the task's ``_produce``, the
  fast path's ``produce_nowait``) call it (at run time: test_handlers_in_process.py).

Each check is a function over source text, so that the tests below also show it failing on a
planted violation.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
SERVER = ROOT / "kraftnode" / "server"
HANDLERS = SERVER / "handlers"
#: modules outside server/handlers whose functions the handlers call with an API key
KEY_TAKERS = [ROOT / "kraftnode" / "security" / "api_checks.py",
              ROOT / "kraftnode" / "protocol" / "error_responses.py"]
API_KEY_PARAMS = {"key", "api_key", "api"}
CONSTRUCTORS = {"__init__", "__post_init__"}


def _sources(paths: Iterable[Path]) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(paths)}


def _server_sources() -> dict[str, str]:
    return _sources(SERVER.rglob("*.py"))


def _handler_sources() -> dict[str, str]:
    return _sources(HANDLERS.glob("*.py"))


# ------------------------------------------------------------------ attributes
def _handler_classes(sources: dict[str, str]) -> set[str]:
    """Classes of server/handlers deriving (by name, transitively) from Sealed."""
    bases: dict[str, set[str]] = {}
    for path, text in sources.items():
        if not path.startswith("kraftnode/server/handlers/"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                                    for b in node.bases}
    found = {"Sealed"}
    while True:
        more = {c for c, bs in bases.items() if c not in found and bs & found}
        if not more:
            return found
        found |= more


def _composed_attributes(sources: dict[str, str], classes: set[str]) -> set[str]:
    """Attributes a handler's constructor sets to another handler (NodeHandlers.groups ...)."""
    out: set[str] = set()
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and _called_name(node.value) in classes:
                for t in node.targets:
                    if isinstance(t, ast.Attribute):
                        out.add(t.attr)
    return out


def _called_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _annotation_names(ann: ast.expr | None) -> set[str]:
    if ann is None:
        return set()
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return set()
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(ann)
            if isinstance(n, ast.Name | ast.Attribute)}


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def attribute_assignments_outside_constructors(sources: dict[str, str]) -> list[str]:
    """``path:line`` of every assignment to an attribute of a handler object outside its
    constructor (``setattr`` and ``object.__setattr__`` on one included)."""
    classes = _handler_classes(sources)
    composed = _composed_attributes(sources, classes)
    found: list[str] = []
    for path, text in sources.items():
        tree = ast.parse(text)
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name in classes]:
            for fn in cls.body:
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or fn.name in CONSTRUCTORS:
                    continue
                if fn.name == "__setattr__" and cls.name == "Sealed":
                    continue    # the guard itself
                found += [f"{path}:{line} ({cls.name}.{fn.name})" for line in _assigned_on(fn, {"self"}, composed)]
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
            holders = {a.arg for a in fn.args.args + fn.args.kwonlyargs
                       if _annotation_names(a.annotation) & classes}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                        and _called_name(node.value) in classes:
                    holders |= {t.id for t in node.targets if isinstance(t, ast.Name)}
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                        and _annotation_names(node.annotation) & classes:
                    holders.add(node.target.id)
            holders.discard("self")
            if holders:
                found += [f"{path}:{line} ({fn.name})" for line in _assigned_on(fn, holders, composed)]
    return sorted(set(found))


def _is_handler_expr(e: ast.expr, holders: set[str], composed: set[str]) -> bool:
    if isinstance(e, ast.Name):
        return e.id in holders
    if isinstance(e, ast.Attribute) and e.attr in composed:
        return _is_handler_expr(e.value, holders, composed) or isinstance(e.value, ast.Name)
    return False


def _assigned_on(fn: ast.AST, holders: set[str], composed: set[str]) -> list[int]:
    lines = []
    for node in ast.walk(fn):
        for t in _targets(node):
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store | ast.Del) \
                        and _is_handler_expr(sub.value, holders, composed):
                    lines.append(sub.lineno)
        if isinstance(node, ast.Call) and _called_name(node) in ("setattr", "__setattr__", "delattr") \
                and node.args and _is_handler_expr(node.args[0], holders, composed):
            lines.append(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr == "__dict__" \
                and _is_handler_expr(node.value, holders, composed):
            lines.append(node.lineno)
    return lines


def test_no_handler_attribute_is_assigned_outside_its_constructor() -> None:
    assert attribute_assignments_outside_constructors(_server_sources()) == []


def test_the_attribute_check_sees_handler_classes_and_the_node_assembly() -> None:
    """The check looks at what it should: every audience's class, and node.py's handlers."""
    sources = _server_sources()
    classes = _handler_classes(sources)
    assert {"NodeHandlers", "HandlerBase", "RaftPeerHandlers", "ApplicationHandlers", "GroupHandlers",
            "ConsumerGroupHandlers", "AdminHandlers", "ControllerApiHandlers"} <= classes
    assert {"raft_peers", "applications", "groups", "consumer_groups", "admin",
            "controller_apis"} <= _composed_attributes(sources, classes)


def test_an_attribute_set_after_construction_would_be_reported() -> None:
    """What node.py did before issue 40, and a handler method poking itself."""
    sources = _server_sources()
    node = "kraftnode/server/node.py"
    planted = dict(sources)
    planted[node] = sources[node].replace(
        "    return NodeHandlers(HandlerServices(",
        "    handlers = NodeHandlers(HandlerServices(").replace(
        "        broker_properties=cfg.listed_properties))\n",
        "        broker_properties=cfg.listed_properties))\n    handlers.message_max_bytes = 1048588\n"
        "    handlers.groups.service = None\n    return handlers\n", 1)
    assert planted[node] != sources[node]
    found = attribute_assignments_outside_constructors(planted)
    assert len(found) == 2 and all(f.startswith(node) for f in found), found
    apps = "kraftnode/server/handlers/applications.py"
    planted = dict(sources)
    planted[apps] = sources[apps].replace(
        "        code = _produce_refusal(q)\n", "        code = _produce_refusal(q)\n        self.message_max_bytes += 1\n", 1)
    assert [f.split(" ")[1] for f in attribute_assignments_outside_constructors(planted)] == [
        "(ApplicationHandlers._produce_core)"]


# ------------------------------------------------------------------ API keys
def _key_parameters(sources: dict[str, str]) -> dict[str, list[tuple[int, str]]]:
    """Function name -> (position, name) of its API-key parameters (``self`` not counted)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for text in sources.values():
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = [a for a in fn.args.args if a.arg not in ("self", "cls")]
            params = [(i, a.arg) for i, a in enumerate(args)
                      if a.arg in API_KEY_PARAMS and _annotation_names(a.annotation) == {"int"}]
            params += [(-1, a.arg) for a in fn.args.kwonlyargs
                       if a.arg in API_KEY_PARAMS and _annotation_names(a.annotation) == {"int"}]
            if params:
                out.setdefault(fn.name, []).extend(params)
    return out


def _is_key_expr(e: ast.expr) -> bool:
    """An expression that holds an API key: ``key``, ``api_key``, ``api``, ``x.key``."""
    if isinstance(e, ast.Name):
        return e.id in API_KEY_PARAMS
    return isinstance(e, ast.Attribute) and e.attr in ("key", "api_key")


def _int_literals(e: ast.expr) -> list[ast.Constant]:
    return [n for n in ast.walk(e) if isinstance(n, ast.Constant) and type(n.value) is int]


def _is_dispatch_table(d: ast.Dict) -> bool:
    """A dict from API keys to handlers: a key is a registry constant (``api.VOTE``), or every
    value is a function or method named (not a literal)."""
    if any(isinstance(k, ast.Attribute) and isinstance(k.value, ast.Name) and k.value.id == "api"
           for k in d.keys):
        return True
    return len(d.values) > 1 and all(isinstance(v, ast.Attribute | ast.Name) for v in d.values) \
        and all(isinstance(k, ast.Constant) and type(k.value) is int for k in d.keys)


def literal_api_keys(sources: dict[str, str], takers: dict[str, str]) -> list[str]:
    """``path:line`` of every integer literal in ``sources`` used as an API key."""
    params = _key_parameters({**sources, **takers})
    found: list[str] = []
    for path, text in sources.items():
        tree = ast.parse(text)
        module_values = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                         for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                for pos, name in params.get(_called_name(node), []):
                    args = [a for a in node.args if not isinstance(a, ast.Starred)]
                    if 0 <= pos < len(args) and isinstance(args[pos], ast.Constant) \
                            and type(args[pos].value) is int:
                        found.append(f"{path}:{node.lineno}")
                    found += [f"{path}:{node.lineno}" for k in node.keywords
                              if k.arg == name and isinstance(k.value, ast.Constant) and type(k.value.value) is int]
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if not any(_is_key_expr(s) for s in sides):
                    continue
                for s in sides:
                    if isinstance(s, ast.Name) and s.id in module_values:
                        s = module_values[s.id]
                    found += [f"{path}:{c.lineno}" for c in _int_literals(s)]
            elif isinstance(node, ast.Dict) and _is_dispatch_table(node):
                found += [f"{path}:{k.lineno}" for k in node.keys
                          if isinstance(k, ast.Constant) and type(k.value) is int]
    return sorted(set(found))


def _takers() -> dict[str, str]:
    return _sources(KEY_TAKERS)


def test_no_literal_api_key_numbers_in_the_handlers() -> None:
    assert literal_api_keys(_handler_sources(), _takers()) == []


def test_a_planted_literal_api_key_would_be_reported() -> None:
    """``_run(63, ...)`` as it was before issue 40, a comparison, a forwardable set, a
    dispatch-table entry: each reported at its line."""
    sources = _handler_sources()
    ctl = "kraftnode/server/handlers/controller_apis.py"
    cases = [
        ("await self._run(api.BROKER_HEARTBEAT, v, q,", "await self._run(63, v, q,"),
        ("if key == api.DESCRIBE_DELEGATION_TOKEN:", "if key == 41:"),
        ("    api.CREATE_TOPICS, api.DELETE_TOPICS, api.CREATE_ACLS,", "    19, api.DELETE_TOPICS, api.CREATE_ACLS,"),
        ("az.DELETE, key)\n", "az.DELETE, 20)\n"),
        ("return self._not_controller(api.LIST_PARTITION_REASSIGNMENTS, v, q)",
         "return self._not_controller(46, v, q)"),
    ]
    for before, after in cases:
        assert before in sources[ctl], before
        planted = dict(sources)
        planted[ctl] = sources[ctl].replace(before, after, 1)
        line = planted[ctl][:planted[ctl].index(after)].count("\n") + 1
        assert literal_api_keys(planted, _takers()) == [f"{ctl}:{line}"], after
    init = "kraftnode/server/handlers/__init__.py"
    planted = dict(sources)
    planted[init] = sources[init].replace("api.VOTE: raft._vote,", "52: raft._vote,", 1)
    assert [f.split(":")[0] for f in literal_api_keys(planted, _takers())] == [init]


# ------------------------------------------------------------------ Produce
def produce_core_callers(sources: dict[str, str]) -> dict[str, set[str]]:
    """Callee -> the functions of server/handlers that call it, for Produce's pieces."""
    pieces = {"_produce_core", "_produce_partition", "_produce_append"}
    out: dict[str, set[str]] = {p: set() for p in pieces}
    for text in sources.values():
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call) and _called_name(node) in pieces:
                        out[_called_name(node)].add(fn.name)
    return out


def test_one_function_serves_produce_on_both_paths() -> None:
    callers = produce_core_callers(_handler_sources())
    assert callers == {"_produce_core": {"_produce", "produce_nowait"},
                       "_produce_partition": {"_produce_core"},
                       "_produce_append": {"_produce_partition"}}


def test_a_second_produce_core_would_be_reported() -> None:
    sources = _handler_sources()
    apps = "kraftnode/server/handlers/applications.py"
    planted = dict(sources)
    planted[apps] = sources[apps].replace(
        "        run = self._produce_core(q, v, self._leader()[0])\n",
        "        run = self._produce_fast_core(q, v, self._leader()[0])\n", 1) + '''

def _produce_fast_core(self, q, v, leader):
    pending = _PendingProduce()
    t = q.topic_data[0]
    pr = self._produce_partition(_produce_topic(t, v), t.partition_data[0], None, False, v, pending)
    return _ProduceRun([pr], pending, leader)
'''
    callers = produce_core_callers(planted)
    assert callers["_produce_core"] == {"_produce"}
    assert callers["_produce_partition"] == {"_produce_core", "_produce_fast_core"}
