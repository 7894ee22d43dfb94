"""TCP listener speaking Kafka framing, on asyncio protocols.

One task per connection answers that connection's requests strictly in order, one
at a time -- as Kafka does (it mutes a channel while a request is in flight).  A
frame that cannot be parsed, names an API we do not serve, or exceeds the size
limit closes the connection with a log line; nothing a peer sends can crash the node.

Why protocols and not anyio streams: a commit is a chain of request/response hops
across three processes, and on a small host each hop's CPU is latency.  anyio's
``SocketStream`` yields to the loop on every send, re-registers the socket with the
selector on every receive, and a timeout is a cancel scope per read.  Here bytes
arrive in ``data_received``, complete frames are queued there, the connection task
takes the next frame without a loop iteration when one is queued, and a response
is one ``transport.write``.  The idle timeout is one timer per connection.

Memory per connection is bounded: reading pauses while more than
``_MAX_QUEUED_FRAMES`` complete frames (or ``_MAX_QUEUED_BYTES``) wait, and a
partial frame is never larger than the frame size limit.  The node runs on asyncio
(uvloop when installed), which this module requires.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any, Protocol, cast

import anyio
from anyio.abc import TaskGroup, TaskStatus

from kraftnode.errors import LocalError
from kraftnode.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameError,
    Request,
    check_frame_size,
    encode_response,
    parse_request,
)
from kraftnode.server.metrics import latency_trace
from recordbatch.message import Message
from recordbatch.wire import DecodeError

log = logging.getLogger("kraftnode.network")

_I32 = struct.Struct(">i")
_MAX_QUEUED_FRAMES = 16            # pipelined requests read ahead before reading pauses
_MAX_QUEUED_BYTES = 4 * 1024 * 1024


@dataclass
class Reply:
    """A response body and the version to encode it at (differs from the request's
    version only for the ApiVersions downgrade)."""

    body: Message
    version: int


# A handler returns a Reply, or None when no response is due (Produce with acks=0).
Handler = Callable[[Request, str], Awaitable[Reply | None]]
# A handler's synchronous path (NodeHandlers.fast): (request, peer, done) -> taken; when
# taken, ``done`` is called once with the function that builds the answer.
FastHandler = Callable[[Request, str, Callable[[Callable[[], Reply]], None]], bool]
#: a request frame's first two bytes, the API key, of what the fast path may serve (Produce
#: = 0, Fetch = 1; the handler's ``fast`` decides)
_FAST_KEYS = (b"\x00\x00", b"\x00\x01")


class RequestRecorder(Protocol):
    """What the listener reports each answered request to (the metrics'
    :class:`~kraftnode.server.metrics.recording.RequestMetrics`; the listener needs only
    this method)."""

    def record(self, request: Request, reply: Reply | None, seconds: float) -> None: ...


@dataclass
class ServerLimits:
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    idle_timeout_s: float = 600.0  # Kafka's connections.max.idle.ms default: 10 minutes


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Nagle off: every frame here is a complete request or response that someone waits for."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):
            pass


class FrameReader:
    """Splits a byte stream into size-prefixed frames (shared by server and peer client).

    ``feed`` returns the complete frames; a size outside ``[0, max_frame]`` raises
    :class:`FrameError`.  The partial frame kept is at most ``max_frame + 4`` bytes
    plus one chunk."""

    __slots__ = ("_buf", "_pos", "max_frame")

    def __init__(self, max_frame: int) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_frame = max_frame

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        buf = self._buf
        buf += data
        pos = self._pos
        end = len(buf)
        out: list[bytes] = []
        while end - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            check_frame_size(size, self.max_frame)
            if end - pos - 4 < size:
                break
            out.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if pos == end:
            buf.clear()
            pos = 0
        elif pos > 65536:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos


class _EagerStart:
    """A coroutine whose first step (up to its first suspension) runs at construction; awaiting
    the object runs the rest. (Python 3.12's eager tasks, for one coroutine.)"""

    __slots__ = ("_coro", "_pending", "_done", "_result")

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self._done = False
        self._result: Any = None
        try:
            self._pending = coro.send(None)
        except StopIteration as e:
            self._done, self._result = True, e.value

    def __await__(self) -> Any:
        if self._done:
            return self._result
        pending = self._pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                self._coro.close()
                raise
            except BaseException as e:  # noqa: BLE001 - cancellation goes into the coroutine
                try:
                    pending = self._coro.throw(e)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = self._coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class _Connection(asyncio.Protocol):
    """One client connection: frames queued by the protocol, answered by one task."""

    def __init__(self, listener: KafkaListener, tg: TaskGroup) -> None:
        self.listener = listener
        self.tg = tg
        self.reader = FrameReader(listener.limits.max_frame_bytes)
        self.frames: deque[bytes] = deque()
        #: when each queued frame arrived (only while latency_trace is on)
        self.frame_times: deque[int] = deque()
        self.queued_bytes = 0
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.error: Exception | None = None    # a framing error seen by data_received
        self.reading_paused = False
        self.writing_paused = False
        self.frame_waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None
        self.idle_timer: asyncio.TimerHandle | None = None
        self.last_activity = 0.0
        self.in_request = False
        self.handshaking = False   # a TLS handshake under way (it has its own timeout)
        # The handler's synchronous path for raft replica Fetches (NodeHandlers.fast), used
        # while the connection's task is idle; not on SASL listeners (their frames go
        # through the login first). fast_busy: such a request is in progress (its answer
        # not yet written), so nothing else on the connection is served meanwhile.
        handler_fast = getattr(listener.handler, "fast", None)
        self.fast: FastHandler | None = handler_fast if listener.authenticator is None else None
        self.fast_busy = False
        # a frame the fast path parsed but left to the task (a consumer's Fetch)
        self.parsed_front: tuple[bytes, Request] | None = None
        self.task_frame_time = 0   # latency_trace: when the frame the task serves arrived

    # ------------------------------------------------------------ protocol side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        set_nodelay(transport)
        addr = transport.get_extra_info("peername")
        self.peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
        # connection chatter is DEBUG (KRAFTNODE_LOG_LEVEL=DEBUG): a client per connection
        log.debug("accepted connection from %s on %s:%s", self.peer, self.listener.host,
                  self.listener.bound_port)
        self.listener.connections_created += 1
        self.listener.connections_open += 1
        loop = asyncio.get_running_loop()
        self.last_activity = loop.time()
        self._arm_idle_timer(self.listener.limits.idle_timeout_s)
        if self.listener.ssl is not None:
            # TLS: loop.start_tls, awaited by the connection task, so that a failed handshake
            # is logged with its reason (the loop's own TLS server logs nothing). Its first
            # step runs now: the TLS protocol must own the transport before the loop starts
            # reading it (uvloop starts reading right after connection_made returns).
            loop = asyncio.get_running_loop()
            self.handshaking = True
            handshake = _EagerStart(loop.start_tls(
                self.transport, self, self.listener.ssl, server_side=True,
                ssl_handshake_timeout=self.listener.limits.idle_timeout_s))
            self.tg.start_soon(self._tls_then_serve, handshake)
        else:
            self.tg.start_soon(self._serve)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameError as e:
            self.error = e
            self._pause_reading()
            self._wake_reader()
            return
        if frames:
            if latency_trace.ON:
                self.frame_times.extend([time.monotonic_ns()] * len(frames))
            self.frames.extend(frames)
            self.queued_bytes += sum(len(f) for f in frames)
            if len(self.frames) >= _MAX_QUEUED_FRAMES or self.queued_bytes >= _MAX_QUEUED_BYTES:
                self._pause_reading()
            if self.fast_busy:
                return      # served when the request in progress is answered
            if self.fast is not None:
                self._fast_next()
            else:
                self._wake_reader()

    def eof_received(self) -> bool | None:
        self._wake_reader()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        log.debug("closed connection from %s", self.peer)
        self.listener.connections_open -= 1
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        self._wake_reader()
        w = self.drain_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        w = self.drain_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _pause_reading(self) -> None:
        if not self.reading_paused and self.transport is not None and not self.closed:
            self.reading_paused = True
            self.transport.pause_reading()

    def _wake_reader(self) -> None:
        w = self.frame_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _arm_idle_timer(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self.idle_timer = loop.call_later(max(delay, 0.001), self._idle_check)

    def _idle_check(self) -> None:
        if self.closed:
            return
        idle = self.listener.limits.idle_timeout_s
        left = self.last_activity + idle - asyncio.get_running_loop().time()
        if left <= 0 and not self.in_request and not self.frames and not self.handshaking:
            log.debug("closing idle connection from %s", self.peer)
            self._close()
            return
        self._arm_idle_timer(left if left > 0 else idle)

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True
        self._wake_reader()

    def _pop_frame(self) -> tuple[bytes, int]:
        """The next queued frame and when it arrived (latency_trace; else 0); reading
        resumes once the queue is short again."""
        frame = self.frames.popleft()
        t_frame = self.frame_times.popleft() if self.frame_times else 0
        self.queued_bytes -= len(frame)
        if self.reading_paused and len(self.frames) < _MAX_QUEUED_FRAMES // 2 \
                and self.queued_bytes < _MAX_QUEUED_BYTES // 2 and self.error is None \
                and self.transport is not None and not self.closed:
            self.reading_paused = False
            self.transport.resume_reading()
        return frame, t_frame

    # ------------------------------------------------------------ fast path
    def _fast_next(self) -> None:
        """Serve queued raft replica Fetches and acks=-1 Produces here, in the protocol
        callback, while the connection's task is idle (waiting for a frame): no task is
        woken, and an answer the core gives at once is written before this returns. Anything
        else -- another request, a consumer's Fetch, the end of the connection -- wakes the task, which
        serves it as before, so requests stay answered in order, one at a time."""
        fast = self.fast
        while not self.fast_busy:
            w = self.frame_waiter
            if (fast is None or not self.frames or w is None or w.done() or self.closed
                    or self.error is not None or self.frames[0][:2] not in _FAST_KEYS):
                self._wake_reader()
                return
            frame, t_frame = self._pop_frame()
            started = time.perf_counter()
            self.in_request = self.fast_busy = True
            try:
                request = parse_request(frame)
                t_parsed = time.monotonic_ns() if latency_trace.ON else 0

                def done(build: Callable[[], Reply], request: Request = request, t_frame: int = t_frame,
                         t_parsed: int = t_parsed, started: float = started) -> None:
                    self._fast_done(request, build, started, t_frame, t_parsed)

                accepted = fast(request, self.peer, done)
            except (FrameError, DecodeError) as e:
                log.warning("closing connection from %s: %s", self.peer, e)
                self.in_request = self.fast_busy = False
                self._close()
                return
            except Exception:  # noqa: BLE001 - a bug in one handler must not take the node down
                log.exception("internal error serving %s; closing its connection", self.peer)
                self.in_request = self.fast_busy = False
                self._close()
                return
            if not accepted:
                # not one for here (a consumer's Fetch, an acks=1 Produce ...): the task serves it, already parsed
                self.in_request = self.fast_busy = False
                self.frames.appendleft(frame)
                self.queued_bytes += len(frame)
                if latency_trace.ON:
                    self.frame_times.appendleft(t_frame)
                self.parsed_front = (frame, request)
                self._wake_reader()
                return

    def _fast_done(self, request: Request, build: Callable[[], Reply], started: float,
                   t_frame: int, t_parsed: int) -> None:
        """Write a fast-path answer (called from the driver's action loop: never raises)."""
        loop = asyncio.get_running_loop()
        try:
            reply = build()
            t_replied = time.monotonic_ns() if latency_trace.ON else 0
            if not self.closed and self.transport is not None:
                out = encode_response(request.spec, request.api_version, request.correlation_id,
                                      reply.body, reply.version)
                if latency_trace.ON:
                    _trace_request(request, reply, t_frame or t_parsed, t_parsed, t_replied)
                self.transport.write(out)
            metrics = self.listener.request_metrics
            if metrics is not None:
                metrics.record(request, reply, time.perf_counter() - started)
        except Exception:  # noqa: BLE001 - a bug in one handler must not take the node down
            log.exception("internal error serving %s; closing its connection", self.peer)
            self._close()
        finally:
            self.in_request = self.fast_busy = False
            self.last_activity = loop.time()
        if self.frames or self.closed or self.error is not None:
            loop.call_soon(self._fast_next)

    # ------------------------------------------------------------ task side
    async def _next_frame(self) -> bytes | None:
        """The next queued frame; None once the peer has closed (or we did). While a
        fast-path request is in progress, queued frames wait for its answer."""
        while not self.frames or self.fast_busy:
            if self.error is not None:
                raise self.error
            if self.closed or self.transport is None or self.transport.is_closing():
                return None
            w = self.frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await w
            finally:
                self.frame_waiter = None
        frame, self.task_frame_time = self._pop_frame()
        return frame

    async def _tls_then_serve(self, handshake: _EagerStart) -> None:
        raw = self.transport
        assert raw is not None
        try:
            tls = await handshake
        except (TimeoutError, OSError) as e:  # ssl.SSLError is an OSError
            # as Kafka's Selector: "Failed authentication with /IP (SSL handshake failed)"
            # a client that just connects and closes (a port probe) is DEBUG chatter
            level = logging.DEBUG if isinstance(e, ConnectionError) and \
                not isinstance(e, ConnectionAbortedError) else logging.WARNING
            log.log(level, "TLS handshake with %s on listener %s failed: %s; closing the connection",
                    self.peer, self.listener.label, tls_failure(e, self.listener.limits))
            if not raw.is_closing():
                raw.close()
            self._close()
            return
        if tls is None or self.closed:
            return
        self.handshaking = False
        self.last_activity = asyncio.get_running_loop().time()
        self.transport = tls
        await self._serve()

    def _set_session(self, sasl_principal: str | None) -> None:
        """The connection's principal (Kafka's DefaultKafkaPrincipalBuilder) and address, for
        the authorizer: the SASL user, else the client certificate's mapped subject, else
        ANONYMOUS. Set in this connection's task, so every request it answers sees it."""
        from kraftnode.security import authorizer

        principal = sasl_principal
        mapper = self.listener.principal_mapper
        if principal is None and mapper is not None and self.transport is not None:
            from kraftnode.security.tls import peer_principal

            principal = peer_principal(self.transport.get_extra_info("ssl_object"), mapper)
        protocol = ("SASL_" if self.listener.authenticator is not None else "") + \
            ("SSL" if self.listener.ssl is not None else "PLAINTEXT")
        authorizer.CURRENT_SESSION.set(authorizer.Session(principal or authorizer.ANONYMOUS,
                                                          authorizer.host_of(self.peer), protocol))

    async def _serve(self) -> None:
        handler = self.listener.handler
        metrics = self.listener.request_metrics
        clock = time.perf_counter
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        make_auth = self.listener.authenticator
        auth = make_auth(self.peer) if make_auth is not None else None
        if auth is None:
            self._set_session(None)
        try:
            while True:
                frame = await self._next_frame()
                if frame is None:
                    return
                self.in_request = True
                if auth is not None and not auth.complete:
                    out, keep_open = await auth.on_frame(frame, handler)
                    for data in out:
                        transport.write(data)
                    if not keep_open:
                        return
                    if auth.complete:
                        self._set_session(auth.principal)
                    self.in_request = False
                    self.last_activity = loop.time()
                    continue
                started = clock() if metrics is not None else 0.0
                pre = self.parsed_front
                self.parsed_front = None
                request = pre[1] if pre is not None and pre[0] is frame else parse_request(frame)
                t_parsed = time.monotonic_ns() if latency_trace.ON else 0
                reply = await handler(request, self.peer)
                t_replied = time.monotonic_ns() if latency_trace.ON else 0
                if reply is not None and not self.closed:
                    out = encode_response(request.spec, request.api_version,
                                          request.correlation_id, reply.body, reply.version)
                    if latency_trace.ON:
                        _trace_request(request, reply, self.task_frame_time or t_parsed,
                                       t_parsed, t_replied)
                    transport.write(out)
                if metrics is not None:
                    metrics.record(request, reply, clock() - started)
                    if self.writing_paused:
                        self.drain_waiter = loop.create_future()
                        try:
                            await self.drain_waiter
                        finally:
                            self.drain_waiter = None
                self.in_request = False
                self.last_activity = loop.time()
        except (FrameError, DecodeError) as e:
            log.warning("closing connection from %s: %s", self.peer, e)
        except ConnectionError as e:
            if not self.closed:
                log.debug("connection from %s failed: %s", self.peer, e)
        except Exception:  # noqa: BLE001 - a bug in one handler must not take the node down
            log.exception("internal error serving %s; closing its connection", self.peer)
        finally:
            self._close()


def _trace_request(request: Request, reply: Reply | None, t_frame: int, t_parsed: int,
                   t_replied: int) -> None:
    """latency_trace: a request's frame arrival, parse, answer and write (stamped as the
    encoded answer is handed to the transport), keyed by what identifies it on the commit
    path (latency_trace.request_keys)."""
    t_written = time.monotonic_ns()
    api = request.spec.key
    k1, k2, who = latency_trace.request_keys(api, request.body, reply.body if reply else None)
    for event, t in (("req.frame", t_frame), ("req.parsed", t_parsed),
                     ("req.replied", t_replied), ("req.written", t_written)):
        latency_trace.mark(event, api, k1, k2, who, t_ns=t)


def tls_failure(e: BaseException, limits: ServerLimits) -> str:
    """Why a server-side TLS handshake failed, in an operator's words (and OpenSSL's)."""
    import ssl

    if isinstance(e, ssl.SSLCertVerificationError):
        return f"the client's certificate was refused: {e.verify_message} ({e.reason})"
    reason = getattr(e, "reason", None) or ""
    if isinstance(e, ssl.SSLError):
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE",
                      "PACKET_LENGTH_TOO_LONG", "UNEXPECTED_RECORD"):
            return f"the client did not start a TLS handshake (a plaintext client on a TLS port?) ({reason})"
        if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "the client sent no certificate, and ssl.client.auth requires one"
        if "ALERT" in reason:
            alert = reason.split("ALERT_", 1)[-1].replace("_", " ").lower()
            return f"the client refused the handshake with TLS alert '{alert}' (does it trust this node's certificate?)"
        if reason in ("NO_SHARED_CIPHER", "NO_PROTOCOLS_AVAILABLE", "UNSUPPORTED_PROTOCOL",
                      "VERSION_TOO_LOW", "TLSV1_ALERT_PROTOCOL_VERSION"):
            return f"no protocol version or cipher suite in common ({reason}; see ssl.enabled.protocols, ssl.cipher.suites)"
        return f"{e}"
    if isinstance(e, (asyncio.TimeoutError, ConnectionAbortedError)):
        return (f"the handshake did not complete within {limits.idle_timeout_s * 1000:.0f} ms "
                "(connections.max.idle.ms)")
    if isinstance(e, ConnectionError):
        return f"the client closed the connection during the handshake ({type(e).__name__})"
    return f"{type(e).__name__}: {e}"


class ListenerError(LocalError):
    """A listener cannot bind (port in use, unresolvable host, ...): one line for the operator."""


class KafkaListener:
    """Accepts connections on one host:port and feeds parsed requests to ``handler``."""

    def __init__(self, host: str, port: int, handler: Handler,
                 limits: ServerLimits | None = None,
                 request_metrics: RequestRecorder | None = None, ssl: SSLContext | None = None,
                 authenticator: Callable[[str], Any] | None = None,
                 principal_mapper: Any = None, name: str = "") -> None:
        self.name = name
        self.ssl = ssl   # TLS (an SSL / SASL_SSL listener): kraftnode.security.tls
        # SASL (a SASL_* listener): a per-connection kraftnode.security.sasl.Authenticator
        # that sees every frame until it is complete
        self.authenticator = authenticator
        # an SSL listener's ssl.principal.mapping.rules (security.tls.PrincipalMapper)
        self.principal_mapper = principal_mapper
        self.host = host
        self.port = port
        self.handler = handler
        self.limits = limits or ServerLimits()
        self.bound_port: int | None = None
        #: Kafka's RequestMetrics, when kraftnode.metrics.listener is set (else no timing)
        self.request_metrics = request_metrics
        self.connections_open = 0
        self.connections_created = 0

    @property
    def label(self) -> str:
        """For log lines: ``NAME (host:port)``."""
        where = f"{self.host}:{self.bound_port if self.bound_port is not None else self.port}"
        return f"{self.name} ({where})" if self.name else where

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        loop = asyncio.get_running_loop()
        async with anyio.create_task_group() as tg:
            try:
                server = await loop.create_server(
                    # TLS is started per connection (_Connection._tls_then_serve); a handshake
                    # that never completes is closed after connections.max.idle.ms, as
                    # Kafka's Selector expires idle channels
                    lambda: _Connection(self, tg), self.host, self.port, reuse_address=True)
            except socket.gaierror as e:
                raise ListenerError(f"Socket server failed to bind to {self.host}:{self.port}: "
                                    f"cannot resolve host {self.host!r} ({e.strerror})") from None
            except OSError as e:
                # Kafka's SocketServer: "Socket server failed to bind to host:port: <reason>."
                # asyncio rewrites strerror ("error while attempting to bind ..."): use errno's
                reason = os.strerror(e.errno) if e.errno else str(e)
                raise ListenerError(f"Socket server failed to bind to {self.host}:{self.port}: "
                                    f"{reason}.") from None
            try:
                self.bound_port = int(server.sockets[0].getsockname()[1])
                log.debug("listening on %s:%d", self.host, self.bound_port)
                task_status.started(self.bound_port)
                await anyio.sleep_forever()
            finally:
                server.close()
                tg.cancel_scope.cancel()
