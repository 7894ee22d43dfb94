"""anyio TCP listener speaking Kafka framing.

One task per connection reads size-prefixed frames and answers them strictly in
order, one at a time -- as Kafka does (it mutes a channel while a request is in
flight), which keeps per-connection memory bounded by one frame.  A frame that
cannot be parsed, names an API we do not serve, or exceeds the size limit closes
the connection with a log line; nothing a peer sends can crash the node.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream

from kraftnode.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameError,
    Request,
    check_frame_size,
    encode_response,
    parse_request,
)
from recordbatch.message import Message
from recordbatch.wire import DecodeError

log = logging.getLogger("kraftnode.network")

_I32 = struct.Struct(">i")


@dataclass
class Reply:
    """A response body and the version to encode it at (differs from the request's
    version only for the ApiVersions downgrade)."""

    body: Message
    version: int


# A handler returns a Reply, or None when no response is due (Produce with acks=0).
Handler = Callable[[Request, str], Awaitable[Reply | None]]


@dataclass
class ServerLimits:
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    idle_timeout_s: float = 600.0  # Kafka's connections.max.idle.ms default: 10 minutes


class KafkaListener:
    """Accepts connections on one host:port and feeds parsed requests to ``handler``."""

    def __init__(self, host: str, port: int, handler: Handler,
                 limits: ServerLimits | None = None) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.limits = limits or ServerLimits()
        self.bound_port: int | None = None

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port,
                                                   reuse_port=False)
        self.bound_port = int(listener.extra(SocketAttribute.local_port))
        log.info("listening on %s:%d", self.host, self.bound_port)
        task_status.started(self.bound_port)
        async with listener:
            await listener.serve(self._connection)

    async def _connection(self, stream: SocketStream) -> None:
        addr = stream.extra(SocketAttribute.remote_address, None)
        peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
        reader = BufferedByteReceiveStream(stream)
        async with stream:
            try:
                while True:
                    with anyio.move_on_after(self.limits.idle_timeout_s) as scope:
                        raw = await reader.receive_exactly(4)
                    if scope.cancelled_caught:
                        log.info("closing idle connection from %s", peer)
                        return
                    (size,) = _I32.unpack(raw)
                    check_frame_size(size, self.limits.max_frame_bytes)
                    frame = await reader.receive_exactly(size) if size else b""
                    request = parse_request(frame)
                    reply = await self.handler(request, peer)
                    if reply is not None:
                        await stream.send(encode_response(
                            request.spec, request.api_version, request.correlation_id,
                            reply.body, reply.version))
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError,
                    anyio.ClosedResourceError, ConnectionError):
                return
            except (FrameError, DecodeError) as e:
                log.warning("closing connection from %s: %s", peer, e)
                return
            except Exception:  # noqa: BLE001 - a bug in one handler must not take the node down
                log.exception("internal error serving %s; closing its connection", peer)
                return
