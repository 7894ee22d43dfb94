"""A running node: listeners plus the handlers behind them.

This is the process ``kraftnode start`` runs.  Today it serves the protocol
layer (ApiVersions negotiation); the raft-backed handlers plug into
:class:`NodeHandlers` as they arrive, so the command and the listener stay the same.
"""

from __future__ import annotations

import logging
import signal

import anyio

from kraftnode.config import ServerConfig
from kraftnode.protocol.framing import FrameError, Request
from kraftnode.protocol.registry import API_VERSIONS
from kraftnode.server import api_versions
from kraftnode.server.network import KafkaListener, Reply

log = logging.getLogger("kraftnode.node")


class NodeHandlers:
    """Routes parsed requests to the code that answers them."""

    def __init__(self, features: api_versions.FeatureView | None = None) -> None:
        self.features = features or api_versions.FeatureView()

    async def __call__(self, request: Request, peer: str) -> Reply | None:
        if request.spec.key == API_VERSIONS:
            body, version = api_versions.answer(request, self.features)
            sw = ""
            if request.body is not None and request.api_version >= 3:
                sw = f" ({request.body.client_software_name} {request.body.client_software_version})"  # type: ignore[attr-defined]
            log.info("ApiVersions v%d from %s%s: answered v%d, error %d",
                     request.api_version, peer, sw, version, body.error_code)
            return Reply(body, version)
        raise FrameError(f"{request.spec.name} v{request.api_version} is not served by this node yet")


async def run_node(config: ServerConfig) -> None:
    handlers = NodeHandlers()
    async with anyio.create_task_group() as tg:
        for lst in config.listeners:
            host = lst.host or "0.0.0.0"
            listener = KafkaListener(host, lst.port, handlers)
            port = await tg.start(listener.serve)
            print(f"node {config.node_id} listening on {lst.name}://{host}:{port}", flush=True)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for sig in signals:
                log.info("received %s, shutting down", signal.Signals(sig).name)
                tg.cancel_scope.cancel()
                break
