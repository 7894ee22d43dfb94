"""Runs the deterministic Raft core against real time, disk and network.

The core (``kraftnode.raft.RaftNode``) only emits actions; this driver executes
them in order on one anyio task.  ``PersistElectionState`` and ``FlushLog`` are
barriers: they are awaited (fsync in a worker thread) before any later action
runs, so a vote is on disk before the answer that grants it leaves, and an offset
counts towards the high watermark only once it is durable.  Several appends that
queue up behind one fsync are covered by it (group commit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from kraftnode.log.quorum_state import QuorumStateData, QuorumStateStore
from kraftnode.protocol.registry import (
    BEGIN_QUORUM_EPOCH,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    VOTE,
)
from kraftnode.raft import messages as m
from kraftnode.raft.actions import (
    AppendCompleted,
    FatalError,
    FlushLog,
    HighWatermarkAdvanced,
    PersistElectionState,
    SendRequest,
    SendResponse,
    StateChanged,
)
from kraftnode.raft.election import ElectionState
from kraftnode.raft.node import RaftNode
from kraftnode.raft.voters import ReplicaKey
from kraftnode.server import raft_wire as rw
from kraftnode.server.peer_client import PeerError, PeerPool
from kraftnode.server.producers import ProducerIds
from kraftnode.server.raft_log import DiskRaftLog
from recordbatch.wire import ZERO_UUID

log = logging.getLogger("kraftnode.raft")


def now_ms() -> int:
    return int(time.time() * 1000)


def election_to_quorum_state(e: ElectionState, kraft_version: int,
                             voter_ids: Sequence[int]) -> QuorumStateData:
    if kraft_version == 0:
        return QuorumStateData(leader_id=e.leader_id, leader_epoch=e.epoch, voted_id=e.voted_id,
                               cluster_id="", applied_offset=0, current_voters=sorted(voter_ids),
                               data_version=0)
    vd = e.voted_key.directory_id if e.voted_key is not None else None
    return QuorumStateData(leader_id=e.leader_id, leader_epoch=e.epoch, voted_id=e.voted_id,
                           voted_directory_id=vd if vd is not None else ZERO_UUID, data_version=1)


def quorum_state_to_election(d: QuorumStateData | None) -> ElectionState:
    if d is None:
        return ElectionState(0)
    voted = ReplicaKey.of(d.voted_id, d.voted_directory_id) if d.voted_id >= 0 else None
    return ElectionState(max(d.leader_epoch, 0), d.leader_id, voted)


@dataclass
class _Waiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    value: Any = None


class RaftDriver:
    """Owns the core; every call into it happens on the event loop thread."""

    def __init__(self, node: RaftNode, log_: DiskRaftLog, store: QuorumStateStore, pool: PeerPool,
                 addresses: dict[int, tuple[str, int]], bootstrap: Sequence[tuple[str, int]],
                 kraft_version: int, request_timeout_s: float) -> None:
        self.node = node
        self.log = log_
        self.store = store
        self.pool = pool
        self.addresses = dict(addresses)
        self.bootstrap = list(bootstrap)
        self.kraft_version = kraft_version
        self.request_timeout_s = request_timeout_s
        self.producers = ProducerIds(node.local_key.id)
        log_.on_append = self.producers.observe
        log_.on_truncate = self.producers.truncate
        # learn the producers of the log's tail (the last 8 MiB) written before a restart
        tail_start = log_.start_offset
        scanned = 0
        for base, _end, size in reversed(log_.log.segments()):
            tail_start = base
            scanned += size
            if scanned > 8 * 1024 * 1024:
                break
        self.producers.observe([v for v in log_.log.batches(tail_start)])
        self.high_watermark = node.high_watermark
        self.hw_changed = anyio.Event()
        self.state_changed = anyio.Event()
        self.fatal: str | None = None
        self._wake = anyio.Event()
        self._next_request_id = 1
        self._requests: dict[int, _Waiter] = {}
        self._appends: dict[int, _Waiter] = {}
        self._tg: TaskGroup | None = None
        self._stopped = False

    # -------------------------------------------------------------- interface
    def wake(self) -> None:
        self._wake.set()

    async def call(self, request: m.Request) -> m.Response:
        """Hand an inbound raft request to the core and wait for its answer."""
        rid = self._next_request_id
        self._next_request_id += 1
        waiter = _Waiter()
        self._requests[rid] = waiter
        self.node.handle_request(rid, request, now_ms())
        self.wake()
        try:
            await waiter.done.wait()
        finally:
            self._requests.pop(rid, None)
        return waiter.value  # type: ignore[no-any-return]

    def append_nowait(self, records: Sequence[object]) -> tuple[int, _Waiter]:
        """Append on the leader; returns (handle, waiter completed at commit or failure)."""
        waiter = _Waiter()
        handle = self.node.append(records, now_ms())
        self._appends[handle] = waiter
        self.wake()
        return handle, waiter

    async def resign(self) -> None:
        self.node.resign(now_ms())
        self.wake()
        await self._drain()

    # -------------------------------------------------------------- loop
    async def run(self, tg: TaskGroup) -> None:
        self._tg = tg
        while not self._stopped and self.fatal is None:
            self.node.tick(now_ms())
            await self._drain()
            deadline = self.node.next_deadline_ms()
            # at least 1 ms between ticks: a deadline already in the past must not turn
            # this loop into a busy loop that starves every connection
            delay = 0.5 if deadline is None else max(0.001, (deadline - now_ms()) / 1000)
            if not self._wake.is_set():
                with anyio.move_on_after(delay):
                    await self._wake.wait()
            else:
                await anyio.sleep(0)
            self._wake = anyio.Event()

    def stop(self) -> None:
        self._stopped = True
        self.wake()

    async def _drain(self) -> None:
        while True:
            actions = self.node.take_actions()
            if not actions:
                return
            for a in actions:
                await self._execute(a)

    async def _execute(self, a: object) -> None:
        if isinstance(a, SendRequest):
            assert self._tg is not None
            self._tg.start_soon(self._send, a)
        elif isinstance(a, SendResponse):
            w = self._requests.get(a.request_id)
            if w is not None:
                w.value = a.response
                w.done.set()
        elif isinstance(a, PersistElectionState):
            data = election_to_quorum_state(a.state, self.kraft_version, sorted(self.node.voters.ids))
            await anyio.to_thread.run_sync(self.store.write, data)
        elif isinstance(a, FlushLog):
            if self.log.log.flushed_offset < a.end_offset:
                await anyio.to_thread.run_sync(self.log.flush)
        elif isinstance(a, HighWatermarkAdvanced):
            self.high_watermark = a.high_watermark
            self.hw_changed.set()
            self.hw_changed = anyio.Event()
        elif isinstance(a, AppendCompleted):
            w = self._appends.pop(a.handle, None)
            if w is not None:
                w.value = a
                w.done.set()
        elif isinstance(a, StateChanged):
            log.info("became %s in epoch %d (leader %s)%s; log end offset %d, high watermark %d",
                     a.state, a.epoch, a.leader_id if a.leader_id >= 0 else "unknown",
                     "" if a.is_voter else " as an observer", self.log.end_offset,
                     self.high_watermark)
            self.state_changed.set()
            self.state_changed = anyio.Event()
        elif isinstance(a, FatalError):
            log.error("fatal: %s (error %d); stopping", a.message, a.error_code)
            self.fatal = a.message

    # -------------------------------------------------------------- network
    def _address(self, a: SendRequest) -> tuple[str, int] | None:
        if a.destination < 0:
            i = -1 - a.destination
            return self.bootstrap[i] if i < len(self.bootstrap) else None
        # the endpoint of our own controller listener, as Kafka picks it; else the first
        listener = self.node.config.listener_name
        for ep in a.endpoints:
            if ep.name == listener:
                return ep.host, ep.port
        if a.endpoints:
            return a.endpoints[0].host, a.endpoints[0].port
        return self.addresses.get(a.destination)

    async def _send(self, a: SendRequest) -> None:
        addr = self._address(a)
        try:
            if addr is None:
                raise PeerError(f"no address for node {a.destination}")
            response = await self._roundtrip(a.destination, addr, a.request)
        except PeerError as e:
            log.debug("request to %d failed: %s", a.destination, e)
            self.node.request_failed(a.destination, a.correlation_id, now_ms())
        else:
            self.node.handle_response(a.destination, a.correlation_id, response, now_ms())
        self.wake()

    async def _roundtrip(self, dest: int, addr: tuple[str, int], r: m.Request) -> m.Response:
        host, port = addr
        timeout = self.request_timeout_s
        if isinstance(r, m.VoteRequest):
            _, resp = await self.pool.request(dest, host, port, VOTE,
                                              lambda v: rw.vote_request_to_wire(r, v), timeout)
            return rw.vote_response_from_wire(resp)  # type: ignore[arg-type]
        if isinstance(r, m.BeginQuorumEpochRequest):
            _, resp = await self.pool.request(dest, host, port, BEGIN_QUORUM_EPOCH,
                                              lambda v: rw.begin_request_to_wire(r, v), timeout)
            return rw.begin_response_from_wire(resp)  # type: ignore[arg-type]
        if isinstance(r, m.EndQuorumEpochRequest):
            _, resp = await self.pool.request(dest, host, port, END_QUORUM_EPOCH,
                                              lambda v: rw.end_request_to_wire(r, v), timeout)
            return rw.end_response_from_wire(resp)  # type: ignore[arg-type]
        if isinstance(r, m.FetchRequest):
            # a long poll: allow MaxWaitMs on top of the request timeout
            v, resp = await self.pool.request(dest, host, port, FETCH,
                                              lambda v: rw.fetch_request_to_wire(r, v),
                                              timeout + r.max_wait_ms / 1000)
            return rw.fetch_response_from_wire(resp, v)  # type: ignore[arg-type]
        if isinstance(r, m.FetchSnapshotRequest):
            _, resp = await self.pool.request(dest, host, port, FETCH_SNAPSHOT,
                                              lambda v: rw.fetch_snapshot_request_to_wire(r, v), timeout)
            return rw.fetch_snapshot_response_from_wire(resp)  # type: ignore[arg-type]
        return await rw.voter_rpc_roundtrip(self.pool, dest, host, port, r, timeout)  # KIP-853 RPCs
