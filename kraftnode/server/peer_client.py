"""Async Kafka client connections to peers (other controllers), pooled per node.

Every connection starts with ApiVersions, as Kafka's NetworkClient does, and each
request is then sent at the highest version both sides speak.  Requests are
pipelined over one connection and matched to responses by correlation id; a
request that is not answered within the request timeout fails (and the connection
is dropped, since the response stream is then out of step), and reconnects back
off exponentially up to a cap.
"""

from __future__ import annotations

import logging
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import SocketStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from kraftnode.protocol import ApiVersionsRequest, ApiVersionsResponse
from kraftnode.protocol.framing import DEFAULT_MAX_FRAME_BYTES, check_frame_size, encode_request
from kraftnode.protocol.generated import ResponseHeader
from kraftnode.protocol.registry import API_VERSIONS, SERVED
from recordbatch.message import Message

log = logging.getLogger("kraftnode.peers")

_I32 = struct.Struct(">i")

SOFTWARE_NAME = "kraftnode"
SOFTWARE_VERSION = "0.1.0"


class PeerError(Exception):
    """A request to a peer failed: unreachable, timed out, closed, or no common version."""


@dataclass
class _Pending:
    api_key: int
    version: int
    done: anyio.Event = field(default_factory=anyio.Event)
    response: Message | None = None
    error: str | None = None


class PeerConnection:
    """One connection; create with :meth:`open`."""

    def __init__(self, node: str, stream: SocketStream, client_id: str, max_frame: int) -> None:
        self.node = node
        self.stream = stream
        self.client_id = client_id
        self.max_frame = max_frame
        self.versions: dict[int, tuple[int, int]] = {}
        self._next_cid = 0
        self._pending: dict[int, _Pending] = {}
        self._send_lock = anyio.Lock()
        self.closed = False
        self.stream_addr: tuple[str, int] = ("", 0)

    @classmethod
    async def open(cls, tg: TaskGroup, node: str, host: str, port: int, client_id: str,
                   timeout_s: float, max_frame: int = DEFAULT_MAX_FRAME_BYTES) -> PeerConnection:
        with anyio.fail_after(timeout_s):
            stream = await anyio.connect_tcp(host, port)
        conn = cls(node, stream, client_id, max_frame)
        tg.start_soon(conn._reader)
        try:
            resp = await conn._request_at(API_VERSIONS, 3, ApiVersionsRequest(
                client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION),
                timeout_s)
            assert isinstance(resp, ApiVersionsResponse)
            if resp.error_code == 35 and resp.api_keys:  # peer only speaks older ApiVersions
                resp = await conn._request_at(API_VERSIONS, 0, ApiVersionsRequest(), timeout_s)
                assert isinstance(resp, ApiVersionsResponse)
            if resp.error_code != 0:
                raise PeerError(f"{node}: ApiVersions failed with error {resp.error_code}")
            conn.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
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
        if self.closed:
            raise PeerError(f"connection to {self.node} is closed")
        self._next_cid = (self._next_cid + 1) & 0x7FFFFFFF
        cid = self._next_cid
        pending = _Pending(api_key, version)
        self._pending[cid] = pending
        frame = encode_request(SERVED[api_key], version, cid, self.client_id, body)
        try:
            async with self._send_lock:
                await self.stream.send(frame)
            with anyio.move_on_after(timeout_s):
                await pending.done.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
            await self.close()
            raise PeerError(f"{self.node}: send failed: {e}") from None
        finally:
            self._pending.pop(cid, None)
        if not pending.done.is_set():
            await self.close()  # the response stream is out of step now
            raise PeerError(f"{self.node}: {SERVED[api_key].name} timed out after {timeout_s:.1f}s")
        if pending.error is not None:
            raise PeerError(f"{self.node}: {pending.error}")
        assert pending.response is not None
        return pending.response

    async def _reader(self) -> None:
        reader = BufferedByteReceiveStream(self.stream)
        error = "connection closed"
        try:
            while True:
                (size,) = _I32.unpack(await reader.receive_exactly(4))
                check_frame_size(size, self.max_frame)
                frame = memoryview(await reader.receive_exactly(size))
                (cid,) = _I32.unpack_from(frame, 0)
                pending = self._pending.get(cid)
                if pending is None:
                    continue  # answer to a request we gave up on
                spec = SERVED[pending.api_key]
                try:
                    _, pos = ResponseHeader.decode_from(
                        frame, 0, spec.response_header_version(pending.version))
                    pending.response = spec.response.decode(frame[pos:], pending.version)
                except Exception as e:  # noqa: BLE001 - a peer's bad bytes fail the request
                    pending.error = f"undecodable {spec.name} response: {e}"
                pending.done.set()
        except Exception as e:  # noqa: BLE001 - any read failure ends the connection
            error = f"connection lost: {e or type(e).__name__}"
        finally:
            self.closed = True
            for p in list(self._pending.values()):
                if not p.done.is_set():
                    p.error = error
                    p.done.set()
            with anyio.CancelScope(shield=True):
                await self.stream.aclose()

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            with anyio.CancelScope(shield=True):
                await self.stream.aclose()


class PeerPool:
    """Connections to peers by node id (or any key), with reconnect backoff."""

    def __init__(self, tg: TaskGroup, client_id: str, request_timeout_s: float,
                 reconnect_backoff_s: float = 0.05, reconnect_backoff_max_s: float = 1.0) -> None:
        self.tg = tg
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.backoff_s = reconnect_backoff_s
        self.backoff_max_s = reconnect_backoff_max_s
        self._conns: dict[Any, PeerConnection] = {}
        self._failures: dict[Any, int] = {}
        self._retry_at: dict[Any, float] = {}
        self._locks: dict[Any, anyio.Lock] = {}

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
                conn = await PeerConnection.open(self.tg, str(key), host, port, self.client_id,
                                                 self.request_timeout_s)
            except (OSError, TimeoutError, PeerError, anyio.BrokenResourceError) as e:
                n = self._failures.get(key, 0) + 1
                self._failures[key] = n
                delay = min(self.backoff_max_s, self.backoff_s * math.pow(2, n - 1))
                self._retry_at[key] = anyio.current_time() + delay
                raise PeerError(f"cannot connect to {key} at {host}:{port}: {e}") from None
            conn.stream_addr = (host, port)
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
