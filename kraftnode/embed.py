"""Run a kraftnode node inside your own program, with your own replicated state machine.

    from kraftnode.embed import EmbeddedNode
    from kraftnode.metadata.state_machine import KeyValueStateMachine

    async with EmbeddedNode("server.properties", KeyValueStateMachine()) as node:
        result = await node.append([(b"k", b"v")])      # returns once committed and applied
        print(result.first_offset, result.last_offset, node.state.data[b"k"])

The node is the same as ``kraftnode start`` runs (same storage, same wire protocol,
same snapshots and cleaning), except that committed records are applied to *your*
state machine (the :class:`~kraftnode.metadata.state_machine.StateMachine` protocol).
Its records are ordinary Kafka records of ``__cluster_metadata`` partition 0: any Kafka
consumer can read them.  They are application records, so the embedded node opts in to them
(``kraftnode.application.records.enable=true``, set whatever the file says): no Kafka broker can
register with its quorum.  See docs/embedding.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

import anyio
from anyio.abc import TaskGroup

from kraftnode.config import node_config
from kraftnode.config.node_config import NodeConfig
from kraftnode.errors import LocalError
from kraftnode.metadata.state_machine import StateMachine
from kraftnode.protocol import Errors
from kraftnode.server.node import RunningNode, run_node
from kraftnode.server.raft_io.disk_log import RawBatches
from recordbatch import Record, build_batch

__all__ = ["AppendResult", "EmbeddedNode", "NotLeaderError", "AppendError"]

S = TypeVar("S", bound=StateMachine)


class AppendError(LocalError):
    """An append did not commit (the message names Kafka's error)."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


class NotLeaderError(AppendError):
    """Appends go to the leader; ``leader_id`` is the current one (-1: none known)."""

    def __init__(self, leader_id: int) -> None:
        super().__init__(f"this node is not the leader (leader: {leader_id})", int(Errors.NOT_LEADER_OR_FOLLOWER))
        self.leader_id = leader_id


@dataclass(frozen=True)
class AppendResult:
    first_offset: int
    last_offset: int


class EmbeddedNode(Generic[S]):
    """A node running in this process's event loop (an ``async with`` block)."""

    def __init__(self, config: str | Path | NodeConfig, state_machine: S) -> None:
        config = config if isinstance(config, NodeConfig) else node_config.load(str(config))
        # your records are application records: the embedded node opts in, whatever the file says
        # (kraftnode.application.records.enable; no Kafka broker can register with this quorum)
        self.config = dataclasses.replace(config, application_records=True)
        self.state: S = state_machine
        self._running: RunningNode | None = None
        self._tg: TaskGroup | None = None
        self._started = anyio.Event()
        self._error: Exception | None = None

    # ------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> EmbeddedNode[S]:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run)
        await self._started.wait()
        if self._running is None:  # the node did not start (StartupError, OSError...)
            await self._tg.__aexit__(None, None, None)
            assert self._error is not None
            raise self._error
        return self

    async def _run(self) -> None:
        try:
            await run_node(self.config, self.state, on_started=self._on_started, handle_signals=False)
        except Exception as e:  # noqa: BLE001 - handed to __aenter__ (start-up) or re-raised
            if self._running is not None:
                raise
            self._error = e
        finally:
            self._started.set()

    def _on_started(self, running: RunningNode) -> None:
        self._running = running
        self._started.set()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        if self._running is not None:
            self._running.stop()
        assert self._tg is not None
        return await self._tg.__aexit__(et, e, tb)

    def _node(self) -> RunningNode:
        if self._running is None:
            raise RuntimeError("the node is not running")
        return self._running

    # ------------------------------------------------------------ queries
    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def is_leader(self) -> bool:
        return self._node().driver.is_leader

    @property
    def leader_id(self) -> int:
        return self._node().driver.leader_id

    @property
    def high_watermark(self) -> int:
        return self._node().driver.high_watermark

    @property
    def applied_offset(self) -> int:
        """The first offset not yet applied to the state machine."""
        return self._node().snapshots.runner.next_offset

    async def wait_for_leader(self, timeout: float = 30) -> int:
        with anyio.fail_after(timeout):
            while self._node().driver.leader_id < 0 or self.high_watermark < 0:
                await anyio.sleep(0.02)
        return self.leader_id

    async def wait_applied(self, offset: int, timeout: float = 30) -> None:
        """Wait until every record below ``offset`` is applied to the state machine."""
        running = self._node()
        with anyio.fail_after(timeout):
            while running.snapshots.runner.next_offset < offset:
                running.snapshots.catch_up(running.driver.high_watermark)
                if running.snapshots.runner.next_offset < offset:
                    await anyio.sleep(0.005)

    async def read_barrier(self, timeout: float = 30) -> int:
        """A linearizable read point (Raft's read index, docs/raft.md): on the leader, waits
        until a majority has confirmed this node still leads *after* the call, then until
        every record committed by then is applied to the state machine; returns that high
        watermark. Reading ``node.state`` afterwards sees every write committed before the
        call. Raises ``NotLeaderError`` on a follower, or when leadership was lost meanwhile
        (a deposed leader never answers from stale state), ``AppendError`` on a timeout."""
        running = self._node()
        if not running.driver.is_leader:
            raise NotLeaderError(running.driver.leader_id)
        confirmed: bool | None = None
        with anyio.move_on_after(timeout if timeout > 0 else math.inf):
            confirmed = await running.driver.read_barrier()
        if confirmed is False:
            raise NotLeaderError(running.driver.leader_id)
        if confirmed:
            hw = running.driver.high_watermark
            await self.wait_applied(hw, timeout)
            return hw
        raise AppendError("the read barrier did not complete in time", int(Errors.REQUEST_TIMED_OUT))

    # ------------------------------------------------------------ writes
    async def append(self, records: Sequence[tuple[bytes | None, bytes | None]],
                     timeout: float = 30, *, applied: bool = True) -> AppendResult:
        """Append ``(key, value)`` records as one batch; returns once they are committed
        (durable on a majority) and, unless ``applied=False``, applied to this node's state
        machine (``applied=False``: once committed, without waiting for the state machine --
        what a writer that only needs durability, or measures commit latency, waits for)."""
        if not records:
            raise ValueError("nothing to append")
        running = self._node()
        if not running.driver.is_leader:
            raise NotLeaderError(running.driver.leader_id)
        batch = build_batch([Record(k, v) for k, v in records])
        _, waiter = running.driver.append_nowait([RawBatches(batch)])
        with anyio.move_on_after(timeout if timeout > 0 else math.inf):
            await waiter.done.wait()
        done = waiter.value
        if done is None:
            raise AppendError("the append did not commit in time", int(Errors.REQUEST_TIMED_OUT))
        if done.error_code:
            if done.error_code == Errors.NOT_LEADER_OR_FOLLOWER:
                raise NotLeaderError(running.driver.leader_id)
            raise AppendError(f"the append failed: {Errors(done.error_code).name}", done.error_code)
        result = AppendResult(done.last_offset - len(records) + 1, done.last_offset)
        if applied:
            await self.wait_applied(result.last_offset + 1, timeout)
        return result
