"""The peer client against a real node: ApiVersions first, version negotiation,
pipelined requests, timeouts and reconnect backoff."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from kraftnode.protocol import ApiVersionsRequest, ApiVersionsResponse
from kraftnode.protocol.registry import API_VERSIONS, SERVED, VOTE
from kraftnode.server.net.peer_client import PeerError, PeerPool
from tests.support.node import running_node


def test_negotiates_and_pipelines(tmp_path: Path) -> None:
    with running_node(tmp_path) as node:
        async def main() -> None:
            async with anyio.create_task_group() as tg:
                pool = PeerPool(tg, "test-peer", request_timeout_s=5)
                conn = await pool.connection(1, "127.0.0.1", node.port)
                expected = {s.key: (s.advertised_min_version, s.max_version) for s in SERVED.values()}
                # Vote v2 (KIP-996): pre-vote is on by default, so it is advertised
                assert conn.versions == expected and expected[VOTE] == (0, 2)
                assert conn.pick_version(VOTE) == 2
                results: list[int] = []

                async def one(i: int) -> None:
                    v, resp = await pool.request(1, "127.0.0.1", node.port, API_VERSIONS,
                                                 lambda v: ApiVersionsRequest(
                                                     client_software_name="t",
                                                     client_software_version=str(i)))
                    assert isinstance(resp, ApiVersionsResponse) and resp.error_code == 0
                    results.append(v)

                async with anyio.create_task_group() as inner:
                    for i in range(20):
                        inner.start_soon(one, i)
                assert results == [SERVED[API_VERSIONS].max_version] * 20  # ours, the highest both speak
                await pool.close()

        anyio.run(main)


def test_unreachable_peer_backs_off() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            pool = PeerPool(tg, "test-peer", request_timeout_s=1, reconnect_backoff_s=0.5)
            with pytest.raises(PeerError, match="cannot connect"):
                await pool.connection(7, "127.0.0.1", port)
            with pytest.raises(PeerError, match="backoff"):
                await pool.connection(7, "127.0.0.1", port)

    anyio.run(main)


def test_silent_peer_times_out() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            pool = PeerPool(tg, "test-peer", request_timeout_s=0.3)
            with pytest.raises(PeerError, match="timed out"):
                await pool.connection(3, "127.0.0.1", port)

    try:
        anyio.run(main)
    finally:
        listener.close()
