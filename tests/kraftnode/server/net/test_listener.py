"""The listener on real loopback sockets: framing split across packets, pipelined
requests answered in order, no answer when the handler returns None, hostile frames
and idle connections closed -- on the stock asyncio loop and on uvloop."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import anyio
import pytest

from kraftnode.protocol import ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse
from kraftnode.protocol.framing import FrameError, Request, encode_request, parse_response
from kraftnode.protocol.registry import API_VERSIONS, FETCH, SERVED
from kraftnode.server.net import listener as network
from kraftnode.server.net.listener import FrameReader, KafkaListener, Reply, ServerLimits

try:
    import uvloop  # noqa: F401
    LOOPS = [False, True]
except ImportError:  # pragma: no cover - uvloop is a dependency
    LOOPS = [False]

SPEC = SERVED[API_VERSIONS]


def _frame(cid: int, name: str = "t") -> bytes:
    return encode_request(SPEC, 3, cid, "test", ApiVersionsRequest(
        client_software_name=name, client_software_version="1"))


def _run(main: Callable[[], Awaitable[None]], use_uvloop: bool) -> None:
    anyio.run(main, backend="asyncio", backend_options={"use_uvloop": use_uvloop})


async def _echo(request: Request, peer: str) -> Reply | None:
    """Answers ApiVersions with its client name as the error code; 'none' gets no answer,
    'slow' waits a little (so later pipelined frames queue up meanwhile)."""
    name = request.body.client_software_name  # type: ignore[union-attr]
    if name == "none":
        return None
    if name == "slow":
        await anyio.sleep(0.05)
    return Reply(ApiVersionsResponse(error_code=request.correlation_id % 100), 3)


async def _recv_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def _cid(frame: bytes) -> int:
    cid, body = parse_response(SPEC, 3, frame)
    assert isinstance(body, ApiVersionsResponse)
    assert body.error_code == cid % 100
    return cid


async def _with_listener(body: Callable[[int], Awaitable[None]],
                         limits: ServerLimits | None = None) -> None:
    async with anyio.create_task_group() as tg:
        port = await tg.start(KafkaListener("127.0.0.1", 0, _echo, limits).serve)
        with anyio.fail_after(10):
            await body(port)
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("use_uvloop", LOOPS)
def test_pipelined_requests_split_across_packets_answered_in_order(use_uvloop: bool) -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frames = [_frame(1, "slow")] + [_frame(i, "none" if i == 5 else "t") for i in range(2, 30)]
        blob = b"".join(frames)
        for i in range(0, len(blob), 7):  # dribble: frames and size prefixes split anywhere
            writer.write(blob[i:i + 7])
            await writer.drain()
        got = [_cid(await _recv_frame(reader)) for _ in range(28)]
        assert got == [1] + list(range(2, 5)) + list(range(6, 30))  # 5: handler said no answer
        writer.close()

    _run(lambda: _with_listener(body), use_uvloop)


@pytest.mark.parametrize("use_uvloop", LOOPS)
@pytest.mark.parametrize("bad", [
    struct.pack(">i", 1 << 30),                  # beyond the frame limit
    struct.pack(">i", -5),                        # negative size
    struct.pack(">i", 3) + b"\x00\x12\x00",       # too short for a request header
    struct.pack(">i", 8) + b"\x7f\x7f\x00\x00\x00\x00\x00\x01",  # unknown API key
])
def test_hostile_frames_close_only_that_connection(use_uvloop: bool, bad: bytes) -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(bad)
        assert await reader.read(100) == b""        # closed, nothing answered
        writer.close()
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", port)
        writer2.write(_frame(7))
        assert _cid(await _recv_frame(reader2)) == 7   # the listener still serves
        writer2.close()

    _run(lambda: _with_listener(body, ServerLimits(max_frame_bytes=1 << 20)), use_uvloop)


@pytest.mark.parametrize("use_uvloop", LOOPS)
def test_idle_connection_is_closed_and_active_one_is_not(use_uvloop: bool) -> None:
    async def body(port: int) -> None:
        idle_r, idle_w = await asyncio.open_connection("127.0.0.1", port)
        busy_r, busy_w = await asyncio.open_connection("127.0.0.1", port)
        idle_w.write(_frame(1)[:6])  # a partial frame does not count as activity
        t0 = anyio.current_time()
        for i in range(8):  # 0.4 s of traffic on the busy connection
            busy_w.write(_frame(10 + i))
            assert _cid(await _recv_frame(busy_r)) == 10 + i
            await anyio.sleep(0.05)
        assert await idle_r.read(100) == b""
        assert 0.2 <= anyio.current_time() - t0 < 2
        busy_w.write(_frame(42))
        assert _cid(await _recv_frame(busy_r)) == 42
        idle_w.close()
        busy_w.close()

    _run(lambda: _with_listener(body, ServerLimits(idle_timeout_s=0.25)), use_uvloop)


def test_a_flood_of_pipelined_frames_is_read_with_bounded_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading pauses while frames queue up behind a slow request; every one is still
    answered, in order."""
    N = 50000  # ~1.2 MB of requests sent at once
    most = [0]
    original = network._Connection.data_received

    def observed(self: network._Connection, data: bytes) -> None:
        original(self, data)
        most[0] = max(most[0], self.queued_bytes + self.reader.buffered)

    monkeypatch.setattr(network._Connection, "data_received", observed)

    async def body(port: int) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        frames = [_frame(1, "slow")] + [_frame(i) for i in range(2, N + 1)]
        await loop.sock_sendall(sock, b"".join(frames))
        reader, writer = await asyncio.open_connection(sock=sock)
        got = [_cid(await _recv_frame(reader)) for _ in range(N)]
        assert got == list(range(1, N + 1))
        writer.close()
        # one chunk past the pause threshold at most (a chunk holds < 64 KiB of frames)
        # what was queued when reading paused plus one read (the loop reads at most
        # 256 KiB at a time): never the whole flood
        assert sum(map(len, frames)) > 1_000_000
        assert most[0] < 300 * 1024

    _run(lambda: _with_listener(body), False)


def test_frame_reader_splits_and_limits() -> None:
    r = FrameReader(max_frame=10)
    data = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 0) + struct.pack(">i", 5) + b"xy"
    assert r.feed(data[:2]) == []
    assert r.feed(data[2:]) == [b"abc", b""]
    assert r.buffered == 6
    assert r.feed(b"zuv") == [b"xyzuv"]
    assert r.buffered == 0
    with pytest.raises(FrameError):
        r.feed(struct.pack(">i", 11))


class _FastAndSlow:
    """A handler with the synchronous path for Fetch (KafkaListener uses ``fast`` when the
    handler has it): ReplicaId 7 is answered at once, 8 after 50 ms (a parked long poll),
    -1 (a consumer) is declined and goes to the task with everything else. Every answer
    says which path served it in its error code: 1 fast, 2 task."""

    def __init__(self) -> None:
        self.fast_seen: list[int] = []

    async def __call__(self, request: Request, peer: str) -> Reply | None:
        if request.spec.key == FETCH:
            return Reply(FetchResponse(error_code=2, session_id=request.correlation_id), 12)
        return await _echo(request, peer)

    def fast(self, request: Request, peer: str, done: Callable[[Callable[[], Reply]], None]) -> bool:
        body = request.body
        assert request.spec.key == FETCH and isinstance(body, FetchRequest)
        if body.replica_id < 0:
            return False
        self.fast_seen.append(request.correlation_id)

        def build() -> Reply:
            return Reply(FetchResponse(error_code=1, session_id=request.correlation_id), 12)

        if body.replica_id == 8:
            asyncio.get_running_loop().call_later(0.05, done, build)
        else:
            done(build)
        return True


def _fetch(cid: int, replica: int) -> bytes:
    return encode_request(SERVED[FETCH], 12, cid, "test", FetchRequest(
        replica_id=replica, max_wait_ms=500, topics=[]))


@pytest.mark.parametrize("use_uvloop", LOOPS)
def test_fast_path_keeps_one_request_at_a_time_in_order(use_uvloop: bool) -> None:
    """Replica Fetches served in the protocol callback (no task) and everything else through
    the connection's task answer in request order, one at a time: a parked fast request holds
    back what was pipelined after it, a declined one is served by the task."""
    handler = _FastAndSlow()

    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(1))                     # the task's first request
        assert _cid(await _recv_frame(reader)) == 1
        await asyncio.sleep(0.05)                   # the task is idle again
        plan = [(10, 7), (11, None), (12, 8), (13, None), (14, -1), (15, 7), (16, 8), (17, 7)]
        writer.write(b"".join(_fetch(cid, r) if r is not None else _frame(cid) for cid, r in plan))
        got = []
        for _, replica in plan:
            frame = await _recv_frame(reader)
            if replica is None:
                got.append((_cid(frame), "api"))
            else:
                rcid, resp = parse_response(SERVED[FETCH], 12, frame)
                assert isinstance(resp, FetchResponse) and resp.session_id == rcid
                got.append((rcid, "fast" if resp.error_code == 1 else "task"))
        assert [c for c, _ in got] == [c for c, _ in plan]           # in order
        assert dict(got)[14] == "task"                               # declined: the task's
        assert dict(got)[10] == "fast"                               # the task was idle
        assert set(handler.fast_seen) <= {10, 12, 15, 16, 17}
        # one more on an idle connection: the fast path again
        await asyncio.sleep(0.05)
        writer.write(_fetch(20, 7))
        rcid, resp = parse_response(SERVED[FETCH], 12, await _recv_frame(reader))
        assert rcid == 20 and resp.error_code == 1  # type: ignore[attr-defined]
        writer.close()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            port = await tg.start(KafkaListener("127.0.0.1", 0, handler).serve)
            with anyio.fail_after(10):
                await body(port)
            tg.cancel_scope.cancel()

    _run(main, use_uvloop)
