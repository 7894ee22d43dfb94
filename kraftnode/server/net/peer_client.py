"""Async Kafka client connections to peers (other controllers), pooled per node.

Every connection starts with ApiVersions, as Kafka's NetworkClient does, and each
request is then sent at the highest version both sides speak.  Requests are
pipelined over one connection and matched to responses by correlation id; a
request that is not answered within the request timeout fails (and the connection
is dropped, since the response stream is then out of step), and reconnects back
off exponentially up to a cap.

Built on an asyncio protocol (the node runs on asyncio, uvloop when installed): a
request is one ``transport.write`` and a timer, and the response completes its
future inside ``data_received`` -- no reader task, no lock, no loop iteration per
send, since every hop of a commit is latency.
"""

from __future__ import annotations

import asyncio
import logging
import math
import struct
import time
from collections.abc import Callable
from ssl import SSLContext
from typing import Any

import anyio
from anyio.abc import TaskGroup

from kraftnode.errors import RemoteError
from kraftnode.protocol import ApiVersionsRequest, ApiVersionsResponse, Errors
from kraftnode.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameError, encode_request
from kraftnode.protocol.generated import ResponseHeader
from kraftnode.protocol.registry import API_VERSIONS, SERVED
from kraftnode.security.sasl import client_authenticate
from kraftnode.server.metrics import latency_trace
from kraftnode.server.net.listener import FrameReader, set_nodelay
from recordbatch.message import Message

log = logging.getLogger("kraftnode.peers")

_I32 = struct.Struct(">i")

SOFTWARE_NAME = "kraftnode"
SOFTWARE_VERSION = "0.1.0"


class PeerError(RemoteError):
    """A request to a peer failed: unreachable, timed out, closed, or no common version."""


#: what request_nowait's caller gets: (version, response, None) or (version, None, the error)
Answered = Callable[[int, Message | None, "PeerError | None"], None]


class _Pending:
    """A request in flight: its answer goes to ``future`` (request) or ``on_done``
    (request_nowait, which also owns its timeout ``timer``)."""

    __slots__ = ("api_key", "version", "future", "on_done", "timer")

    def __init__(self, api_key: int, version: int, future: asyncio.Future[Message] | None,
                 on_done: Answered | None = None, timer: asyncio.TimerHandle | None = None) -> None:
        self.api_key = api_key
        self.version = version
        self.future = future
        self.on_done = on_done
        self.timer = timer

    @property
    def waiting(self) -> bool:
        return self.on_done is not None if self.future is None else not self.future.done()

    def fail(self, error: PeerError) -> None:
        if self.on_done is not None:
            on_done, self.on_done = self.on_done, None
            if self.timer is not None:
                self.timer.cancel()
            on_done(self.version, None, error)
        elif self.future is not None and not self.future.done():
            self.future.set_exception(error)


class _PeerProtocol(asyncio.Protocol):
    """Reads response frames and completes the matching request's future in the
    callback itself: no reader task, no loop iteration between bytes and answer."""

    def __init__(self, conn: PeerConnection) -> None:
        self.conn = conn

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        try:
            frames = conn.reader.feed(data)
        except FrameError as e:
            conn._fail(f"bad frame: {e}")
            return
        for frame in frames:
            conn._on_frame(frame)

    def eof_received(self) -> bool | None:
        self.conn._fail("connection closed")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._fail(f"connection lost: {exc}" if exc is not None else "connection closed")


class PeerConnection:
    """One connection; create with :meth:`open`."""

    def __init__(self, node: str, transport: asyncio.Transport | None, client_id: str,
                 max_frame: int) -> None:
        self.node = node
        self.transport = transport
        self.client_id = client_id
        self.max_frame = max_frame
        self.reader = FrameReader(max_frame)
        self.versions: dict[int, tuple[int, int]] = {}
        self._next_cid = 0
        self._pending: dict[int, _Pending] = {}
        self.closed = False
        self.stream_addr: tuple[str, int] = ("", 0)

    @classmethod
    async def open(cls, node: str, host: str, port: int, client_id: str,
                   timeout_s: float, max_frame: int = DEFAULT_MAX_FRAME_BYTES,
                   ssl: SSLContext | None = None,
                   sasl_login: tuple[str, str, str] | None = None) -> PeerConnection:
        """Connect (over TLS with ``ssl``: the controller listener's security protocol) and
        negotiate versions (the connection needs no task of its own)."""
        loop = asyncio.get_running_loop()
        conn = cls(node, None, client_id, max_frame)
        with anyio.fail_after(timeout_s):
            if ssl is None:
                transport, _ = await loop.create_connection(lambda: _PeerProtocol(conn), host, port)
            else:
                transport, _ = await loop.create_connection(
                    lambda: _PeerProtocol(conn), host, port, ssl=ssl, server_hostname=host,
                    ssl_handshake_timeout=timeout_s)
        conn.transport = transport
        set_nodelay(transport)
        try:
            resp = await conn._request_at(API_VERSIONS, 3, ApiVersionsRequest(
                client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION),
                timeout_s)
            assert isinstance(resp, ApiVersionsResponse)
            if resp.error_code == Errors.UNSUPPORTED_VERSION and resp.api_keys:  # peer only speaks older ApiVersions
                resp = await conn._request_at(API_VERSIONS, 0, ApiVersionsRequest(), timeout_s)
                assert isinstance(resp, ApiVersionsResponse)
            if resp.error_code != 0:
                raise PeerError(f"{node}: ApiVersions failed with error {resp.error_code}")
            conn.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            if sasl_login is not None:  # SASL_* controller listener: log in first
                try:
                    await client_authenticate(conn._request_at, sasl_login, timeout_s, node)
                except PermissionError as e:
                    raise PeerError(str(e)) from None
        except BaseException:
            await conn.close()
            raise
        return conn

    def pick_version(self, api_key: int) -> int:
        ours = SERVED[api_key]
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise PeerError(f"{self.node} does not support {ours.name}")
        hi = min(ours.max_version, theirs[1])
        if hi < max(ours.min_version, theirs[0]):
            raise PeerError(f"{self.node}: no common version of {ours.name}")
        return hi

    async def request(self, api_key: int, build: Callable[[int], Message],
                      timeout_s: float, version: int | None = None) -> tuple[int, Message]:
        """Send ``build(version)`` at the best common version (or at ``version``, which the
        peer must support); return (version, response)."""
        best = self.pick_version(api_key)
        if version is not None:
            lo = max(SERVED[api_key].min_version, self.versions[api_key][0])
            if not lo <= version <= best:
                raise PeerError(f"{self.node} does not speak {SERVED[api_key].name} v{version}")
        version = best if version is None else version
        return version, await self._request_at(api_key, version, build(version), timeout_s)

    async def _request_at(self, api_key: int, version: int, body: Message,
                          timeout_s: float) -> Message:
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            raise PeerError(f"connection to {self.node} is closed")
        self._next_cid = (self._next_cid + 1) & 0x7FFFFFFF
        cid = self._next_cid
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Message] = loop.create_future()
        self._pending[cid] = _Pending(api_key, version, fut)
        timer = loop.call_later(timeout_s, self._timed_out, cid, timeout_s)
        try:
            data = encode_request(SERVED[api_key], version, cid, self.client_id, body)
            if latency_trace.ON:
                latency_trace.mark("peer.sent", api_key, latency_trace.request_keys(api_key, body, None)[0])
            transport.write(data)
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(cid, None)

    def request_nowait(self, api_key: int, build: Callable[[int], Message], timeout_s: float,
                       on_done: Answered) -> None:
        """:meth:`request` without a task to wait in: ``on_done(version, response, None)`` runs
        inside the protocol callback that reads the answer (or ``on_done(version, None,
        error)`` when the request fails or times out, or the connection drops), exactly
        once. Raises PeerError, without calling ``on_done``, when the request cannot go out."""
        version = self.pick_version(api_key)
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            raise PeerError(f"connection to {self.node} is closed")
        body = build(version)
        self._next_cid = (self._next_cid + 1) & 0x7FFFFFFF
        cid = self._next_cid
        timer = asyncio.get_running_loop().call_later(timeout_s, self._timed_out, cid, timeout_s)
        self._pending[cid] = _Pending(api_key, version, None, on_done, timer)
        data = encode_request(SERVED[api_key], version, cid, self.client_id, body)
        if latency_trace.ON:
            latency_trace.mark("peer.sent", api_key, latency_trace.request_keys(api_key, body, None)[0])
        transport.write(data)

    def _timed_out(self, cid: int, timeout_s: float) -> None:
        p = self._pending.pop(cid, None)
        if p is not None and p.waiting:
            p.timer = None
            p.fail(PeerError(f"{self.node}: {SERVED[p.api_key].name} timed out after {timeout_s:.1f}s"))
            self._abort()  # the response stream is out of step now

    def _on_frame(self, frame: bytes) -> None:
        if len(frame) < 4:
            self._fail("response frame without a header")
            return
        (cid,) = _I32.unpack_from(frame, 0)
        pending = self._pending.pop(cid, None)
        if pending is None or not pending.waiting:
            return  # answer to a request we gave up on
        spec = SERVED[pending.api_key]
        try:
            t_frame = time.monotonic_ns() if latency_trace.ON else 0
            mv = memoryview(frame)
            _, pos = ResponseHeader.decode_from(mv, 0, spec.response_header_version(pending.version))
            resp = spec.response.decode(mv[pos:], pending.version)
            if latency_trace.ON:
                end, hw = latency_trace.fetch_response_keys(resp) if pending.api_key == 1 else (-1, -1)
                latency_trace.mark("peer.frame", pending.api_key, end, hw, t_ns=t_frame)
                latency_trace.mark("peer.decoded", pending.api_key, end, hw)
        except Exception as e:  # noqa: BLE001 - a peer's bad bytes fail the request
            pending.fail(PeerError(f"{self.node}: undecodable {spec.name} response: {e}"))
            return
        on_done = pending.on_done
        if on_done is not None:
            pending.on_done = None
            if pending.timer is not None:
                pending.timer.cancel()
            on_done(pending.version, resp, None)
        elif pending.future is not None:
            pending.future.set_result(resp)

    def _fail(self, error: str) -> None:
        """The connection is unusable: fail every waiting request and drop it."""
        self.closed = True
        pending, self._pending = self._pending, {}
        for p in pending.values():
            p.fail(PeerError(f"{self.node}: {error}"))
        self._abort()

    def _abort(self) -> None:
        self.closed = True
        t = self.transport
        if t is not None and not t.is_closing():
            t.abort()

    async def close(self) -> None:
        if not self.closed:
            self._fail("connection closed")
        self._abort()


class PeerPool:
    """Connections to peers by node id (or any key), with reconnect backoff."""

    def __init__(self, tg: TaskGroup, client_id: str, request_timeout_s: float,
                 reconnect_backoff_s: float = 0.05, reconnect_backoff_max_s: float = 1.0,
                 ssl: SSLContext | None = None,
                 sasl_login: tuple[str, str, str] | None = None) -> None:
        self.tg = tg
        self.ssl = ssl
        self.sasl_login = sasl_login   # (mechanism, user, password): security.sasl
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.backoff_s = reconnect_backoff_s
        self.backoff_max_s = reconnect_backoff_max_s
        self._conns: dict[Any, PeerConnection] = {}
        self._failures: dict[Any, int] = {}
        self._retry_at: dict[Any, float] = {}
        self._locks: dict[Any, anyio.Lock] = {}
        #: the address and version ranges each peer advertised on its last successful
        #: connection (kept while it is unreachable: what it last said it speaks)
        self._last_versions: dict[Any, tuple[tuple[str, int], dict[int, tuple[int, int]]]] = {}

    def last_versions(self, key: Any, host: str, port: int) -> dict[int, tuple[int, int]] | None:
        """The ApiVersions ranges ``key`` advertised when last connected at this address;
        None if never (or only at another address)."""
        got = self._last_versions.get(key)
        return got[1] if got is not None and got[0] == (host, port) else None

    def open_connection(self, key: Any, host: str, port: int) -> PeerConnection | None:
        """The open connection to ``key`` at this address, if there is one (no connecting)."""
        conn = self._conns.get(key)
        if conn is not None and not conn.closed and conn.stream_addr == (host, port):
            return conn
        return None

    async def connection(self, key: Any, host: str, port: int) -> PeerConnection:
        conn = self._conns.get(key)
        if conn is not None and not conn.closed and (conn.stream_addr == (host, port)):
            return conn
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            conn = self._conns.get(key)
            if conn is not None and not conn.closed and conn.stream_addr == (host, port):
                return conn
            now = anyio.current_time()
            wait = self._retry_at.get(key, 0.0) - now
            if wait > 0:
                raise PeerError(f"{key}: reconnect backoff ({wait * 1000:.0f} ms left)")
            try:
                conn = await PeerConnection.open(str(key), host, port, self.client_id,
                                                 self.request_timeout_s, ssl=self.ssl,
                                                 sasl_login=self.sasl_login)
            except (OSError, TimeoutError, PeerError, anyio.BrokenResourceError) as e:
                n = self._failures.get(key, 0) + 1
                self._failures[key] = n
                delay = min(self.backoff_max_s, self.backoff_s * math.pow(2, n - 1))
                self._retry_at[key] = anyio.current_time() + delay
                raise PeerError(f"cannot connect to {key} at {host}:{port}: {e}") from None
            conn.stream_addr = (host, port)
            self._last_versions[key] = ((host, port), conn.versions)
            self._failures.pop(key, None)
            self._retry_at.pop(key, None)
            self._conns[key] = conn
            return conn

    async def request(self, key: Any, host: str, port: int, api_key: int,
                      build: Callable[[int], Message], timeout_s: float | None = None,
                      version: int | None = None) -> tuple[int, Message]:
        conn = await self.connection(key, host, port)
        return await conn.request(api_key, build, timeout_s or self.request_timeout_s, version)

    async def close(self) -> None:
        for c in list(self._conns.values()):
            await c.close()
        self._conns.clear()
