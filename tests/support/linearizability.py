"""A linearizability checker for recorded histories (Porcupine-style; no maintained PyPI
library does this, so it lives here).

Algorithm: Wing & Gong's search as improved by Lowe ("Testing for linearizability",
2017) and implemented by Porcupine (github.com/anishathalye/porcupine):

- P-compositionality: a history is linearizable iff each of its partitions (here: one
  per key) is, so the model splits the history and each part is searched alone.
- The history becomes a doubly linked list of call and return entries ordered by time
  (a call before a return at the same instant: such ops count as concurrent). The
  search takes the first call entry whose operation the sequential model accepts in
  the current state, "lifts" it (removes its call and return from the list) and starts
  over from the head; when it reaches a return entry (an operation that must have taken
  effect by now but could not be placed) it backtracks: the last lifted op is put back
  and the search continues after it.
- Lowe's cache: a configuration (set of linearized ops as a bitset, model state) that
  was already explored is never explored again; this is what makes the search fast on
  real histories.

An indeterminate operation (a write whose outcome the client never learned: a timeout,
a dropped connection, an error after the request left) is Knossos's ``:info`` op: it
may take effect at any point after its call, or never. It is recorded with
``ret = math.inf``: its return entry sorts last, where placing it is the same as never
having happened for a write.

Every search is bounded: past ``timeout_s`` the answer is ``UNKNOWN``, never a guess.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar

S = TypeVar("S", bound=Hashable)


@dataclass(frozen=True)
class Operation:
    """One client operation: invoked at ``call``, answered ``output`` at ``ret``
    (``math.inf``: indeterminate)."""

    client: int
    input: Any
    call: float
    output: Any
    ret: float

    @property
    def indeterminate(self) -> bool:
        return math.isinf(self.ret)


@dataclass(frozen=True)
class Model(Generic[S]):
    """A sequential specification: ``step(state, input, output)`` -> (legal?, new state)."""

    init: Callable[[], S]
    step: Callable[[S, Any, Any], tuple[bool, S]]
    partition: Callable[[Sequence[Operation]], list[list[Operation]]] = field(
        default=lambda ops: [list(ops)])
    describe: Callable[[Operation], str] = field(default=repr)


class Outcome(Enum):
    OK = "linearizable"
    ILLEGAL = "not linearizable"
    UNKNOWN = "unknown (timed out)"


@dataclass
class Result:
    outcome: Outcome
    #: per non-linearizable partition: a readable explanation (the longest prefix found and
    #: the operation that could not be placed)
    violations: list[str] = field(default_factory=list)
    partitions: int = 0
    operations: int = 0
    seconds: float = 0.0


class _Entry:
    __slots__ = ("id", "is_call", "value", "match", "prev", "next", "time")

    def __init__(self, id_: int, is_call: bool, value: Any, time_: float) -> None:
        self.id = id_
        self.is_call = is_call
        self.value = value
        self.time = time_
        self.match: _Entry | None = None  # a call's return entry
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


def _lift(e: _Entry) -> None:
    assert e.prev is not None and e.match is not None
    e.prev.next = e.next
    if e.next is not None:
        e.next.prev = e.prev
    m = e.match
    assert m.prev is not None
    m.prev.next = m.next
    if m.next is not None:
        m.next.prev = m.prev


def _unlift(e: _Entry) -> None:
    m = e.match
    assert m is not None and m.prev is not None and e.prev is not None
    m.prev.next = m
    if m.next is not None:
        m.next.prev = m
    e.prev.next = e
    if e.next is not None:
        e.next.prev = e


def _build(ops: Sequence[Operation]) -> _Entry:
    entries: list[tuple[float, int, _Entry]] = []
    for i, op in enumerate(ops):
        c = _Entry(i, True, op.input, op.call)
        r = _Entry(i, False, op.output, op.ret)
        c.match = r
        entries.append((op.call, 0, c))  # kind 0 (call) sorts before 1 (return) on ties
        entries.append((op.ret, 1, r))
    entries.sort(key=lambda t: (t[0], t[1], t[2].id))
    head = _Entry(-1, False, None, -math.inf)
    prev = head
    for _, _, e in entries:
        prev.next = e
        e.prev = prev
        prev = e
    return head


def _check_one(model: Model[Any], ops: Sequence[Operation], deadline: float) -> tuple[Outcome, str]:
    if not ops:
        return Outcome.OK, ""
    head = _build(ops)
    state = model.init()
    linearized = 0
    cache: set[tuple[int, Hashable]] = set()
    calls: list[tuple[_Entry, Any]] = []
    best: tuple[int, list[int], int] = (-1, [], -1)  # (depth, linearized order, blocking op)
    entry = head.next
    steps = 0
    while head.next is not None:
        steps += 1
        if steps & 255 == 0 and time.monotonic() > deadline:
            return Outcome.UNKNOWN, ""
        assert entry is not None
        if entry.is_call:
            assert entry.match is not None
            ok, new_state = model.step(state, entry.value, entry.match.value)
            if ok:
                new_linearized = linearized | (1 << entry.id)
                key = (new_linearized, new_state)
                if key not in cache:
                    cache.add(key)
                    calls.append((entry, state))
                    state = new_state
                    linearized = new_linearized
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        else:
            # a return entry: its operation must have been linearized by now
            if len(calls) > best[0]:
                best = (len(calls), [c.id for c, _ in calls], entry.id)
            if not calls:
                return Outcome.ILLEGAL, _explain(model, ops, best)
            top, state = calls.pop()
            linearized &= ~(1 << top.id)
            _unlift(top)
            entry = top.next
    return Outcome.OK, ""


def _explain(model: Model[Any], ops: Sequence[Operation], best: tuple[int, list[int], int]) -> str:
    depth, order, blocked = best
    lines = [f"longest linearizable prefix ({depth} of {len(ops)} ops):"]
    for i in order[-8:]:
        lines.append(f"  {model.describe(ops[i])}")
    b = ops[blocked]
    lines.append(f"then could not place: {model.describe(b)}")
    done = set(order)
    pending = [op for i, op in enumerate(ops) if i not in done and i != blocked and op.call <= b.ret]
    for op in pending[:8]:
        lines.append(f"  (also pending: {model.describe(op)})")
    before = sorted((op for op in ops if op.ret < b.call), key=lambda op: op.ret)[-6:]
    during = [op for op in ops if op is not b and op.call <= b.ret and op.ret >= b.call]
    lines.append("ops completed just before it:")
    lines.extend(f"  {model.describe(op)}" for op in before)
    if during:
        lines.append("ops overlapping it:")
        lines.extend(f"  {model.describe(op)}" for op in during[:8])
    return "\n".join(lines)


def check(model: Model[Any], ops: Sequence[Operation], timeout_s: float = 30.0) -> Result:
    """Is the history linearizable with respect to ``model``? Bounded by ``timeout_s``."""
    start = time.monotonic()
    deadline = start + timeout_s
    parts = model.partition(ops)
    result = Result(Outcome.OK, partitions=len(parts), operations=len(ops))
    unknown = False
    for part in parts:
        outcome, why = _check_one(model, part, deadline)
        if outcome is Outcome.ILLEGAL:
            result.violations.append(why)
        elif outcome is Outcome.UNKNOWN:
            unknown = True
            break
    if result.violations:
        result.outcome = Outcome.ILLEGAL
    elif unknown:
        result.outcome = Outcome.UNKNOWN
    result.seconds = time.monotonic() - start
    return result


# ------------------------------------------------------------------ a key-value register
#: inputs of the key-value model: ("w", key, value, where) or ("r", key, where); a read's
#: output is the value it saw (None: the key was never written); a write's output is ignored.
#: ``where`` (e.g. the node that answered, an offset) is only shown in explanations.
NO_VALUE = None


def _kv_step(state: Any, inp: Any, out: Any) -> tuple[bool, Any]:
    if inp[0] == "w":
        return True, inp[2]
    return out == state, state


def _kv_partition(ops: Sequence[Operation]) -> list[list[Operation]]:
    """One partition per key. An indeterminate write whose value no read ever saw is
    dropped: placing it anywhere or nowhere cannot change what any read returned, so
    the history is linearizable with it iff it is without it (it only costs search)."""
    seen: set[tuple[Any, Any]] = {(op.input[1], op.output) for op in ops if op.input[0] == "r"}
    by_key: dict[Any, list[Operation]] = {}
    for op in ops:
        if op.input[0] == "w" and op.indeterminate and (op.input[1], op.input[2]) not in seen:
            continue
        by_key.setdefault(op.input[1], []).append(op)
    return [by_key[k] for k in sorted(by_key, key=repr)]


def _kv_describe(op: Operation) -> str:
    end = "?" if op.indeterminate else f"{op.ret:.3f}"
    what = (f"write {op.input[1]}={op.input[2]}{op.input[3]}" if op.input[0] == "w"
            else f"read {op.input[1]} -> {op.output}{op.input[2]}")
    return f"client {op.client}: {what} [{op.call:.3f}, {end}]"


KV_REGISTER: Model[Any] = Model(init=lambda: NO_VALUE, step=_kv_step, partition=_kv_partition,
                                describe=_kv_describe)


def write(client: int, key: Any, value: Any, call: float, ret: float, where: str = "") -> Operation:
    return Operation(client, ("w", key, value, f" ({where})" if where else ""), call, None, ret)


def read(client: int, key: Any, value: Any, call: float, ret: float, where: str = "") -> Operation:
    return Operation(client, ("r", key, f" ({where})" if where else ""), call, value, ret)
