"""The linearizability checker (tests/support/linearizability.py) on histories whose answer
is known: hand-written classics, and random small histories compared with a brute-force
search over every order."""

from __future__ import annotations

import itertools
import math
import random
import time

import pytest

from tests.support.linearizability import KV_REGISTER, Operation, Outcome, check, read, write

INF = math.inf


def outcome(ops: list[Operation], timeout_s: float = 10.0) -> Outcome:
    return check(KV_REGISTER, ops, timeout_s).outcome


def test_stale_read_after_a_completed_write_is_a_violation() -> None:
    ops = [write(0, "k", 1, 0, 1), read(1, "k", None, 2, 3)]
    assert outcome(ops) is Outcome.ILLEGAL
    ops = [write(0, "k", 1, 0, 1), write(0, "k", 2, 2, 3), read(1, "k", 1, 4, 5)]
    res = check(KV_REGISTER, ops)
    assert res.outcome is Outcome.ILLEGAL
    assert "could not place: client 1: read k -> 1" in res.violations[0]


def test_read_of_a_write_not_yet_started_is_a_violation() -> None:
    assert outcome([read(1, "k", 1, 0, 1), write(0, "k", 1, 2, 3)]) is Outcome.ILLEGAL


def test_concurrent_overlapping_ops_are_linearizable_in_either_order() -> None:
    # the read overlaps the write: it may see the value before or after it
    assert outcome([write(0, "k", 1, 0, 10), read(1, "k", 1, 1, 2)]) is Outcome.OK
    assert outcome([write(0, "k", 1, 0, 10), read(1, "k", None, 1, 2)]) is Outcome.OK
    # two overlapping writes: later reads may see either one last ...
    for last in (1, 2):
        ops = [write(0, "k", 1, 0, 5), write(1, "k", 2, 1, 6), read(2, "k", last, 7, 8)]
        assert outcome(ops) is Outcome.OK
    # ... but not flip back once one was seen after both completed
    ops = [write(0, "k", 1, 0, 5), write(1, "k", 2, 1, 6), read(2, "k", 2, 7, 8), read(2, "k", 1, 9, 10)]
    assert outcome(ops) is Outcome.ILLEGAL
    # touching intervals (one returns when the other is called) count as concurrent
    assert outcome([write(0, "k", 1, 0, 2), read(1, "k", None, 2, 3)]) is Outcome.OK


def test_reads_may_not_go_back_in_time() -> None:
    ops = [write(0, "k", 1, 0, 10), read(1, "k", 1, 1, 2), read(2, "k", None, 3, 4)]
    assert outcome(ops) is Outcome.ILLEGAL


def test_indeterminate_writes_may_happen_later_or_never() -> None:
    lost = write(0, "k", 1, 0, INF)
    assert outcome([lost, read(1, "k", None, 5, 6)]) is Outcome.OK  # never (so far)
    assert outcome([lost, read(1, "k", 1, 5, 6)]) is Outcome.OK  # took effect
    assert outcome([lost, read(1, "k", None, 5, 6), read(1, "k", 1, 7, 8)]) is Outcome.OK  # later
    assert outcome([lost, read(1, "k", 1, 5, 6), read(1, "k", None, 7, 8)]) is Outcome.ILLEGAL
    # but not before it was called
    assert outcome([read(1, "k", 1, 0, 1), write(0, "k", 1, 2, INF)]) is Outcome.ILLEGAL


def test_keys_are_checked_independently() -> None:
    ops = [write(0, "a", 1, 0, 1), write(0, "b", 2, 2, 3), read(1, "a", 1, 4, 5), read(1, "b", 2, 4, 5)]
    res = check(KV_REGISTER, ops)
    assert res.outcome is Outcome.OK and res.partitions == 2
    ops.append(read(2, "b", None, 6, 7))
    res = check(KV_REGISTER, ops)
    assert res.outcome is Outcome.ILLEGAL and len(res.violations) == 1
    assert "read b -> None" in res.violations[0]


def _brute_force(ops: list[Operation]) -> bool:
    """Some order of the ops (indeterminate ones optional) respects real time and the
    register."""
    n = len(ops)
    for order in itertools.permutations(range(n)):
        pos = {op: i for i, op in enumerate(order)}
        # real time: an op that returned before another was called comes first
        if any(ops[a].ret < ops[b].call and pos[a] > pos[b] for a in range(n) for b in range(n)):
            continue
        value = None
        ok = True
        for i in order:
            inp = ops[i].input
            if inp[0] == "w":
                value = inp[2]
            elif ops[i].output != value:
                ok = False
                break
        if ok:
            return True
    return False


def _random_history(rng: random.Random, n: int) -> list[Operation]:
    ops: list[Operation] = []
    values = list(range(1, n + 1))
    for i in range(n):
        call = rng.uniform(0, 10)
        ret = call + rng.uniform(0.1, 4)
        if rng.random() < 0.5:
            ops.append(write(i, "k", values[i], call, INF if rng.random() < 0.2 else ret))
        else:
            ops.append(read(i, "k", rng.choice([None, *values[:n]]), call, ret))
    return ops


def test_agrees_with_brute_force_on_random_small_histories() -> None:
    rng = random.Random(17)
    counts = {True: 0, False: 0}
    for _ in range(600):
        ops = _random_history(rng, rng.randint(1, 6))
        expected = _brute_force(ops)
        counts[expected] += 1
        got = check(KV_REGISTER, ops).outcome
        assert got is (Outcome.OK if expected else Outcome.ILLEGAL), ops
    assert min(counts.values()) > 50, counts  # both kinds were exercised


def _linearizable_history(rng: random.Random, clients: int, per_client: int) -> list[Operation]:
    """Clients run ops against a real register; each op takes effect at an instant inside
    its interval, so the history is linearizable by construction."""
    value = None
    t = [0.0] * clients
    events: list[tuple[float, int, str, int]] = []
    seq = 0
    for c in range(clients):
        for _ in range(per_client):
            start = t[c] + rng.uniform(0, 1)
            point = start + rng.uniform(0, 2)
            end = point + rng.uniform(0, 2)
            t[c] = end
            seq += 1
            events.append((point, c, "w" if rng.random() < 0.5 else "r", seq))
            events.append((start, c, "call", seq))
            events.append((end, c, "ret", seq))
    calls = {s: tm for tm, _, kind, s in events if kind == "call"}
    rets = {s: tm for tm, _, kind, s in events if kind == "ret"}
    ops = []
    for _, c, kind, s in sorted(e for e in events if e[2] in ("w", "r")):
        if kind == "w":
            value = s
            ops.append(write(c, "k", s, calls[s], rets[s]))
        else:
            ops.append(read(c, "k", value, calls[s], rets[s]))
    return ops


def test_large_linearizable_history_checks_within_its_bound() -> None:
    rng = random.Random(5)
    ops = _linearizable_history(rng, clients=6, per_client=80)
    start = time.monotonic()
    res = check(KV_REGISTER, ops, timeout_s=20)
    assert res.outcome is Outcome.OK, res.violations
    assert time.monotonic() - start < 20
    # one read made stale: the checker finds it
    reads = [i for i, op in enumerate(ops) if op.input[0] == "r" and op.output is not None]
    i = reads[len(reads) // 2]
    bad = ops[i]
    older = next(op.input[2] for op in ops if op.input[0] == "w" and op.ret < bad.call - 3
                 and op.input[2] != bad.output)
    ops[i] = read(bad.client, "k", older, bad.call, bad.ret)
    assert check(KV_REGISTER, ops, timeout_s=20).outcome is Outcome.ILLEGAL


def test_search_is_bounded_in_time() -> None:
    # many fully concurrent writes and reads of values nobody wrote last: exponential
    # without a bound; the answer is UNKNOWN, not a guess, once the time is up
    ops = [write(c, "k", c, 0, 100) for c in range(40)]
    ops += [read(100 + c, "k", c, 0, 100) for c in range(40)]
    ops.append(read(999, "k", -1, 0, 100))
    start = time.monotonic()
    res = check(KV_REGISTER, ops, timeout_s=0.5)
    assert time.monotonic() - start < 3
    assert res.outcome is Outcome.UNKNOWN


@pytest.mark.parametrize("n", [0, 1])
def test_trivial_histories(n: int) -> None:
    ops = [write(0, "k", 1, 0, 1)][:n]
    assert outcome(ops) is Outcome.OK
