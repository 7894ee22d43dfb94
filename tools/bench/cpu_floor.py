"""What the CPU of one commit is made of, in Python on this host (issue 28, must show 2).

kraftnode's three servers spend CPU per commit at 1 outstanding on two things: what the
protocol makes the kernel do (a frame read and written per hop, one append and one fdatasync
per voter) and the Python that decides what to do (decoding, the raft rules, the log's
bookkeeping, the Kafka checks). This bench measures, in one run:

1. **the skeleton**: the kernel's part with the least Python that can drive it -- kraftnode's
   messages at 1 outstanding on the same event loop (uvloop, asyncio protocol callbacks, as
   kraftnode's listener fast path), with no codec, no rules and no state beyond offsets:

     client --Produce--> leader: pwrite, answer each parked follower Fetch with the batch,
                          fdatasync
     follower: pwrite, fdatasync, next Fetch --> leader: a majority has it (the leader's
                          flush and one follower's Fetch) --> answer to the client

   three server processes and a client, framed as Kafka frames are (a 4-byte size), with sizes
   near kraftnode's (a 170-byte batch of one 100-byte record in ~270-byte Fetch answers,
   ~100-byte Fetches, ~190-byte Produces, ~60-byte Produce answers);
2. **kraftnode** (``--kraftnode``): a fresh 3-voter quorum driven the same way (confluent-kafka,
   acks=all, 100-byte values, one at a time), each server's user and system CPU per commit;
3. **the bound** (``--kraftnode`` with py-spy installed): a second quorum sampled by
   ``py-spy --native`` on every node; each sample's leaf goes to a layer (codec, raft core,
   log, metadata, server glue, asyncio/anyio, uvloop, or a libc call: system calls, waits).
   The user CPU the interpreter spends in the sans-IO layers (codec, raft core, log,
   metadata: the typed code a compiler such as mypyc could take) is taken away: what a node
   would spend per commit if those layers cost nothing and everything else stayed.

Whatever kraftnode does beyond the skeleton costs CPU on top of it; a CPU target below the
bound cannot be met by compiling the sans-IO layers, however well.

Usage: python tools/bench/cpu_floor.py [--ops 5000] [--warm 500] [--kraftnode] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.commands.dev_cluster import free_ports  # noqa: E402
from kraftnode.quorum_client import _recv_exactly  # noqa: E402
from tools.bench import latency_budget, quorum  # noqa: E402
from tools.bench.raft_compare import proc_cpu_ticks  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
BATCH = b"b" * 170               # a v2 batch of one record with a 100-byte value
PRODUCE = b"P" + b"p" * 19 + BATCH                  # ~190 bytes, as confluent-kafka's
PRODUCE_ANSWER = b"R" + b"r" * 59                   # ~60 bytes
FETCH_PAD = b"f" * 91                               # a raft Fetch is ~100 bytes
ANSWER_PAD = b"a" * 91                              # a Fetch answer's headers
SIZE = struct.Struct(">i")
OFFSET = struct.Struct(">q")


def _frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


def _fetch(offset: int) -> bytes:
    return _frame(b"F" + OFFSET.pack(offset) + FETCH_PAD)


def _answer(offset: int, batch: bytes) -> bytes:
    return _frame(b"A" + OFFSET.pack(offset) + ANSWER_PAD + batch)


class _Framed(asyncio.Protocol):
    """Splits the byte stream into frames and hands each to ``on_frame``."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)   # uvloop's: not a subclass; TCP_NODELAY on

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            (n,) = SIZE.unpack_from(buf)
            if len(buf) < 4 + n:
                return
            frame = bytes(buf[4:4 + n])
            del buf[:4 + n]
            self.on_frame(frame)

    def on_frame(self, frame: bytes) -> None:
        raise NotImplementedError


class _Log:
    """An append-only file: pwrite at its end, fdatasync."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.pos = 0

    def append(self, batch: bytes) -> None:
        self.pos += os.pwrite(self.fd, batch, self.pos)

    def sync(self) -> None:
        os.fdatasync(self.fd)


class _LeaderState:
    def __init__(self, log: _Log) -> None:
        self.log = log
        self.flushed = 0                               # records fsynced here
        self.batches: list[bytes] = []                 # every batch, served from memory
        self.parked: dict[_LeaderConn, int] = {}       # follower -> offset it waits at
        self.fetched: dict[_LeaderConn, int] = {}      # follower -> offset it asked for
        self.waiting: tuple[_LeaderConn, int] | None = None   # the outstanding Produce

    def commit_check(self) -> None:
        if self.waiting is None:
            return
        acked = sorted([self.flushed, *self.fetched.values()], reverse=True)
        if len(acked) < 2:   # a Produce before any follower's first Fetch: no majority holds it yet
            return
        hw = acked[1]   # 2 of 3
        conn, offset = self.waiting
        if offset < hw:
            self.waiting = None
            assert conn.transport is not None
            conn.transport.write(_frame(PRODUCE_ANSWER))


class _LeaderConn(_Framed):
    def __init__(self, state: _LeaderState) -> None:
        super().__init__()
        self.state = state

    def on_frame(self, frame: bytes) -> None:
        st = self.state
        kind = frame[0]
        if kind == 0x50:                               # P: Produce
            batch = frame[20:]
            st.log.append(batch)
            offset = len(st.batches)
            st.batches.append(batch)
            for conn, at in list(st.parked.items()):
                if at == offset:
                    del st.parked[conn]
                    assert conn.transport is not None
                    conn.transport.write(_answer(offset, batch))
            st.log.sync()
            st.flushed = len(st.batches)
            st.waiting = (self, offset)
            st.commit_check()
        elif kind == 0x46:                             # F: a follower's Fetch
            (at,) = OFFSET.unpack_from(frame, 1)
            st.fetched[self] = at
            if at < len(st.batches):                   # a follower one or more behind
                assert self.transport is not None
                self.transport.write(_answer(at, st.batches[at]))
            else:
                st.parked[self] = at
            st.commit_check()


class _FollowerConn(_Framed):
    def __init__(self, log: _Log) -> None:
        super().__init__()
        self.log = log

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.transport is not None
        self.transport.write(_fetch(0))

    def on_frame(self, frame: bytes) -> None:
        (offset,) = OFFSET.unpack_from(frame, 1)
        self.log.append(frame[9 + len(ANSWER_PAD):])
        self.log.sync()
        assert self.transport is not None
        self.transport.write(_fetch(offset + 1))


async def _serve(role: str, port: int, path: Path) -> None:
    loop = asyncio.get_running_loop()
    log = _Log(path)
    if role == "leader":
        state = _LeaderState(log)
        server = await loop.create_server(lambda: _LeaderConn(state), "127.0.0.1", port)
        async with server:
            await server.serve_forever()
    else:
        for _ in range(100):
            try:
                await loop.create_connection(lambda: _FollowerConn(log), "127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)
        await asyncio.Event().wait()


def _cpu(pids: list[int]) -> list[tuple[int, int]]:
    """(user, system) CPU ticks of each process."""
    ticks = [proc_cpu_ticks(p) for p in pids]
    if any(t is None for t in ticks):
        raise RuntimeError("a server exited during the measurement")
    return cast(list[tuple[int, int]], ticks)


def _per_commit(before: list[tuple[int, int]], after: list[tuple[int, int]],
                ops: int) -> list[tuple[float, float]]:
    """(user, system) microseconds per commit of each process."""
    return [((a[0] - b[0]) / CLK_TCK / ops * 1e6, (a[1] - b[1]) / CLK_TCK / ops * 1e6)
            for b, a in zip(before, after, strict=True)]


def _totals(per_node: list[tuple[float, float]]) -> dict[str, float]:
    user, system = sum(u for u, _ in per_node), sum(s for _, s in per_node)
    return {"user_us_per_commit": round(user, 1), "system_us_per_commit": round(system, 1),
            "cpu_us_per_commit": round(user + system, 1)}


def measure_skeleton(ops: int, warm: int, root: Path) -> dict[str, Any]:
    """Start the skeleton's three servers, commit ``warm`` then ``ops`` records one at a
    time: the servers' CPU per commit and the client's latency."""
    (port,) = free_ports(1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, __file__, "--role", role, "--port", str(port),
                               "--file", str(root / f"{role}{i}.log")], env=env)
             for i, role in enumerate(["leader", "follower", "follower"])]
    pids = [p.pid for p in procs]
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise RuntimeError("the skeleton's leader did not start") from None
                time.sleep(0.05)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        time.sleep(0.5)                                 # both followers connected and parked
        frame = _frame(PRODUCE)

        def commit_one() -> float:
            t0 = time.perf_counter()
            s.sendall(frame)
            (n,) = SIZE.unpack(_recv_exactly(s, 4))
            _recv_exactly(s, n)
            return time.perf_counter() - t0

        for _ in range(warm):
            commit_one()
        before = _cpu(pids)
        lat = [commit_one() for _ in range(ops)]
        after = _cpu(pids)
        s.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return {"system": "skeleton", **quorum._lat_summary(lat), **_totals(_per_commit(before, after, ops))}


# --------------------------------------------------------------------------- kraftnode

#: a sample's layer, by the path of its innermost Python frame (first prefix that matches)
LAYERS = (("codec", ("kraftnode/protocol/", "recordbatch/", "kraftnode/server/raft_io/wire.py")),
          ("raft core", ("kraftnode/raft/",)),
          ("log", ("kraftnode/log/",)),
          ("metadata", ("kraftnode/metadata/", "kraftnode/controller/", "kraftnode/groups/")),
          ("server glue", ("kraftnode/",)),
          ("asyncio/anyio", ("asyncio/", "anyio/")))
#: the sans-IO layers: typed code with no event loop in it, what mypyc could compile
SANS_IO = ("codec", "raft core", "log", "metadata")
LIBC = "libc call (system calls, waits)"
UVLOOP = "uvloop/libuv"


def layer_of(stack: str) -> str:
    """The layer of one ``py-spy --native`` raw sample (frames joined by ``;``)."""
    frames = stack.split(";")
    leaf = frames[-1]
    if "libc.so" in leaf or "libpthread" in leaf:
        return LIBC
    py = [i for i, f in enumerate(frames) if f.endswith(")") and ".py:" in f]
    if not py:
        return UVLOOP
    after = frames[py[-1] + 1:]
    if any(x in f for f in after for x in ("loop.c", "uv_")):
        return UVLOOP                    # the event loop's C code, called from Python
    _, rel = quorum._frame_name(frames[py[-1]])
    return next((name for name, prefixes in LAYERS if rel.startswith(prefixes)), "other Python")


def layer_shares(raw: Path) -> dict[str, float]:
    """Each layer's share (%) of the samples in a py-spy raw file."""
    counts: dict[str, int] = {}
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            lay = layer_of(stack)
            counts[lay] = counts.get(lay, 0) + int(n)
    total = sum(counts.values()) or 1
    return {k: round(100 * v / total, 1) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


@contextmanager
def _warm_quorum(root: Path, warm: int) -> Iterator[tuple[quorum.Quorum, int]]:
    """A fresh 3-voter kraftnode quorum that has committed ``warm`` records one at a time;
    (the quorum, its leader's id)."""
    q = quorum.Quorum(root)
    try:
        q.start()
        leader, _ = q.wait_ready()
        time.sleep(1.0)
        latency_budget.produce_one_at_a_time(q.bootstrap, warm, 0, 120)
        yield q, leader
    finally:
        q.stop()


def measure_kraftnode(ops: int, warm: int, root: Path) -> dict[str, Any]:
    """Each server's user and system CPU per commit at 1 outstanding, and the latency."""
    with _warm_quorum(root, warm) as (q, leader):
        before = _cpu(q.pids)
        done, errors = latency_budget.produce_one_at_a_time(q.bootstrap, ops, 0, 120)
        per_node = _per_commit(before, _cpu(q.pids), len(done))
    return {"system": "kraftnode", **quorum._lat_summary([(t1 - t0) / 1e9 for t0, t1, _ in done]),
            "errors": errors, "leader": leader,
            "nodes": {n + 1: {"user_us_per_commit": round(u, 1), "system_us_per_commit": round(s, 1)}
                      for n, (u, s) in enumerate(per_node)},
            **_totals(per_node)}


def profile_kraftnode(ops: int, warm: int, root: Path, out: Path) -> dict[str, Any]:
    """Every server sampled by py-spy --native during ``ops`` commits at 1 outstanding: each
    layer's share of each node's samples (no CPU figures: py-spy pauses it for every sample)."""
    with _warm_quorum(root, warm) as (q, leader):
        files = {n + 1: out / f"node{n + 1}.txt" for n in range(len(q.pids))}
        with ExitStack() as stack:
            for n, pid in enumerate(q.pids):
                stack.enter_context(quorum.py_spy(pid, files[n + 1], native=True))
            latency_budget.produce_one_at_a_time(q.bootstrap, ops, 0, 120)
    return {"leader": leader, "layers": {n: layer_shares(f) for n, f in files.items() if f.exists()}}


def sans_io_free_bound(kn: dict[str, Any], prof: dict[str, Any]) -> dict[str, Any]:
    """kraftnode's CPU per commit if its sans-IO layers cost nothing: on each node (matched
    by role: leader or follower), the user CPU times the share of the Python-running samples
    that are not in those layers, plus the system CPU unchanged."""
    def role(leader: int, n: int) -> str:
        return "leader" if n == leader else "follower"

    shares = {role(prof["leader"], n): lay for n, lay in prof["layers"].items()}
    total = 0.0
    nodes = {}
    for n, cpu in kn["nodes"].items():
        lay = shares.get(role(kn["leader"], n))
        if lay is None:
            return {"error": "no profile of a " + role(kn["leader"], n)}
        running = sum(v for k, v in lay.items() if k != LIBC) or 1.0
        sans_io = sum(lay.get(k, 0.0) for k in SANS_IO)
        user_left = cpu["user_us_per_commit"] * (1 - sans_io / running)
        nodes[n] = {"sans_io_share_of_running": round(sans_io / running, 3),
                    "user_left_us": round(user_left, 1)}
        total += user_left + cpu["system_us_per_commit"]
    return {"cpu_us_per_commit": round(total, 1), "nodes": nodes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=5000, help="records committed one at a time")
    ap.add_argument("--warm", type=int, default=500, help="records before the measurement")
    ap.add_argument("--kraftnode", action="store_true",
                    help="also measure a kraftnode quorum the same way, and the bound (py-spy)")
    ap.add_argument("--dir", type=Path, help="where the servers' files go (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--role", choices=["leader", "follower"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role:
        import uvloop

        uvloop.run(_serve(args.role, args.port, args.file))
        return 0
    if args.ops < 1 or args.warm < 0:
        ap.error("--ops must be at least 1 and --warm at least 0")
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        out.append(measure_skeleton(args.ops, args.warm, Path(d)))
        if args.kraftnode:
            kn = measure_kraftnode(args.ops, args.warm, Path(d) / "kraftnode")
            out.append(kn)
            if quorum.find_py_spy() is None:
                out.append({"system": "bound", "error": "py-spy not found (pip install py-spy)"})
            else:
                (Path(d) / "profile").mkdir()
                prof = profile_kraftnode(args.ops, args.warm, Path(d) / "profiled",
                                         Path(d) / "profile")
                out.append({"system": "bound", "what": "kraftnode with its sans-IO layers free",
                            "layers": prof["layers"], "profile_leader": prof["leader"],
                            **sans_io_free_bound(kn, prof)})
    if args.json:
        for r in out:
            print(json.dumps(r))
        return 0
    for r in out:
        if r["system"] == "bound":
            if "error" in r:
                print(f"bound: {r['error']}")
                continue
            for n, lay in sorted(r["layers"].items()):
                role = "leader" if n == r["profile_leader"] else "follower"
                print(f"py-spy --native, node {n} ({role}): "
                      + ", ".join(f"{k} {v:.1f}%" for k, v in lay.items()))
            print(f"bound: kraftnode with its sans-IO layers ({', '.join(SANS_IO)}) free: "
                  f"{r['cpu_us_per_commit']:.0f} us per commit")
            continue
        print(f"{r['system']}: {r['ops']} commits at 1 outstanding, servers' CPU "
              f"{r['cpu_us_per_commit']:.0f} us per commit (user {r['user_us_per_commit']:.0f}, "
              f"system {r['system_us_per_commit']:.0f}); latency p50 {r['p50_ms']:.3f} ms, "
              f"p99 {r['p99_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
