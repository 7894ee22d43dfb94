"""The HTTP endpoint of ``kraftnode.metrics.listener``: ``/metrics``, ``/healthz``, ``/readyz``.

It runs on the node's own event loop, so a scrape reads the raft core on the thread
that owns it (no locks, no torn reads) and costs the loop only while Prometheus
scrapes; nothing here runs per request or per commit.  The exposition itself is
prometheus_client's (text format 0.0.4, or OpenMetrics when the scraper asks for it).

HTTP/1.1 with keep-alive, GET and HEAD only, no request bodies.  Hostile input is
bounded: a request head over 8 KiB, a body, or a malformed request line gets a 4xx
answer and the connection is closed; idle connections close after 60 s; at most 64
connections are open at once (more are closed on accept).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import cast

import anyio
from anyio.abc import TaskStatus
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from kraftnode.server.metrics.collector import Health

log = logging.getLogger("kraftnode.metrics")

MAX_HEAD_BYTES = 8192
IDLE_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 64

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}

INDEX = (b"kraftnode metrics: /metrics (Prometheus), /healthz (live), /readyz (ready: knows a "
         b"leader and its log is within controller.quorum.fetch.timeout.ms of it)\n")


def _not_started() -> Health:
    return Health(False, "starting")


class MetricsServer:
    """Bind with :meth:`bind` (start-up errors surface there, before any task starts),
    then :meth:`serve` until cancelled."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry,
                 live: Callable[[], Health] = _not_started,
                 ready: Callable[[], Health] = _not_started) -> None:
        self.host = host
        self.port = port
        self.registry = registry
        self.live = live
        self.ready = ready
        self.bound_port: int | None = None
        self.connections = 0
        self._server: asyncio.AbstractServer | None = None

    async def bind(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _HttpConnection(self), self.host,
                                                self.port, reuse_address=True)
        self.bound_port = int(self._server.sockets[0].getsockname()[1])
        return self.bound_port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        if self._server is None:
            await self.bind()
        assert self.bound_port is not None
        try:
            task_status.started(self.bound_port)
            await anyio.sleep_forever()
        finally:
            self.close()

    def answer(self, method: str, target: str, accept: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request."""
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"only GET and HEAD\n"
        if path == "/metrics":
            try:
                encoder, ctype = choose_encoder(accept)
                return 200, ctype, encoder(self.registry)
            except Exception:  # noqa: BLE001 - a collector bug must not take the node down
                log.exception("collecting metrics failed")
                return 500, "text/plain; charset=utf-8", b"collecting metrics failed; see the log\n"
        if path in ("/healthz", "/readyz"):
            h = self.live() if path == "/healthz" else self.ready()
            return (200 if h.ok else 503), "text/plain; charset=utf-8", \
                (("ok: " if h.ok else "not ready: " if path == "/readyz" else "unhealthy: ")
                 + h.reason + "\n").encode()
        if path == "/":
            return 200, "text/plain; charset=utf-8", INDEX
        return 404, "text/plain; charset=utf-8", b"not found: try /metrics, /healthz or /readyz\n"


class _HttpConnection(asyncio.Protocol):
    def __init__(self, server: MetricsServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.server.connections += 1
        if self.server.connections > MAX_CONNECTIONS:
            self.transport.close()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections -= 1
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(IDLE_TIMEOUT_S, self._close)

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.buf += data
        self._arm()
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD_BYTES:
                    self._send(431, "text/plain", b"request head too large\n", close=True)
                return
            if end > MAX_HEAD_BYTES:
                self._send(431, "text/plain", b"request head too large\n", close=True)
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            del self.buf[:end + 4]
            if not self._handle(head):
                return

    def _handle(self, head: str) -> bool:
        """Answer one request; False when the connection is (being) closed."""
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._send(400, "text/plain", b"bad request line\n", close=True)
            return False
        method, target, version = parts
        headers: dict[str, str] = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(":")
            if not sep:
                self._send(400, "text/plain", b"bad header line\n", close=True)
                return False
            headers[k.strip().lower()] = v.strip()
        if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
            self._send(413, "text/plain", b"no request bodies here\n", close=True)
            return False
        conn = headers.get("connection", "").lower()
        close = conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive")
        status, ctype, body = self.server.answer(method, target, headers.get("accept", ""))
        self._send(status, ctype, body, close=close, head_only=method == "HEAD")
        return not close

    def _send(self, status: int, ctype: str, body: bytes, *, close: bool,
              head_only: bool = False) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                f"{'Connection: close' if close else 'Connection: keep-alive'}\r\n\r\n")
        t.write(head.encode("latin-1") + (b"" if head_only else body))
        if close:
            self.closed = True
            t.close()
