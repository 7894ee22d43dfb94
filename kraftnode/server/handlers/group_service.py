"""The group coordinator's I/O shell: the leader's coordinator for its epoch, its timers,
and its log writes (the group APIs that use it: kraftnode.server.handlers.groups and
kraftnode.server.handlers.consumer_groups).

The rules are the sans-IO coordinator's (:mod:`kraftnode.groups`); this module feeds it
requests, the time and new member ids, appends the records it returns to the raft log
(one batch per operation, no producer id), and answers each request once those records
are committed -- a JoinGroup or SyncGroup may wait, parked, for another member's request
or a timer (:meth:`GroupService.run` polls the coordinator's timers).

Who coordinates: the raft leader, once its epoch's first entry is committed, its
controller activation records are written, and its state machine has replayed every
committed record; it then builds its coordinator from the committed group records (the
state machine's keyed records, which snapshots carry) and keeps it for its epoch.  Other
nodes answer NOT_COORDINATOR (ListGroups: NONE and no groups, as a Kafka broker that
coordinates nothing); a leader not ready yet COORDINATOR_LOAD_IN_PROGRESS.  A
leader that loses its leadership drops its coordinator: parked requests get
NOT_COORDINATOR, the clients find the new leader with FindCoordinator, and it serves
the same groups and offsets from the log.

Metadata-only mode: while a Kafka (Java) node votes, or genuine Kafka brokers are
registered, every committed record must be a KRaft metadata record, so nothing is
written: FindCoordinator for a group answers INVALID_REQUEST naming the reason (clients
fail at once instead of retrying), the writing APIs answer COORDINATOR_NOT_AVAILABLE, and
reads (OffsetFetch, DescribeGroups, ListGroups, ConsumerGroupDescribe) are still served.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio

from kraftnode.groups import GroupConfig, GroupCoordinator, Result
from kraftnode.groups.records import RECORD_KEY_PREFIX
from kraftnode.protocol import Errors
from kraftnode.server.handlers.base import HandlerBase
from kraftnode.server.raft_io import wire as rw
from kraftnode.server.raft_io.disk_log import RawBatches
from recordbatch import Record, build_batch
from recordbatch.wire import ZERO_UUID

log = logging.getLogger("kraftnode.groups")


GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2   # FindCoordinator v6 (KIP-932): "groupId:topicId:partition"
#: (client id, client host as Kafka prints it: "/127.0.0.1") of the request being handled
CLIENT: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("kraftnode_group_client",
                                                                          default=("", "/"))
TRANSACTIONS_UNSUPPORTED = ("Transactions are not supported: kraftnode has no transaction coordinator "
                            "(use a producer without transactional.id)")
UNAUTHORIZED_OPS = -2147483648
# how long a parked JoinGroup/SyncGroup may wait beyond its rebalance timeout
PARK_MARGIN_S = 5.0
#: the response type of the request a coordinator call answers
Resp = TypeVar("Resp")


def current_client() -> tuple[str, str]:
    """(client id, client host) of the request being handled (:data:`CLIENT`)."""
    return CLIENT.get()


def now_ms() -> int:
    return int(time.time() * 1000)


class _Pending(Generic[Resp]):
    """A request waiting for its answer: the coordinator's opaque token. The coordinator
    answers it with the response type of the request it was handed (``Resp``)."""

    __slots__ = ("future", "error")

    def __init__(self, error: Callable[[int], Resp]) -> None:
        self.future: asyncio.Future[Resp] = asyncio.get_running_loop().create_future()
        self.error = error

    def answer(self, response: Resp) -> None:
        if not self.future.done():
            self.future.set_result(response)

    def fail(self, code: int) -> None:
        self.answer(self.error(code))


class GroupService:
    """The leader's coordinator for its epoch, the timers, and the log writes."""

    def __init__(self, h: HandlerBase, config: GroupConfig, application_records: bool) -> None:
        self.h = h
        self.config = config
        #: kraftnode.application.records.enable: group records may be written
        self.application_records = application_records
        self.coordinator: GroupCoordinator | None = None
        self.epoch = -1
        self._wake = anyio.Event()
        #: (epoch, log end) when this node last dropped its coordinator: in that epoch a new
        #: one is built only from a state that has replayed everything appended until then
        self._reload_after = (-1, 0)

    # ------------------------------------------------------------------ who coordinates
    def metadata_only_reason(self) -> str | None:
        """Why no group record may be written now (None: they may)."""
        h = self.h
        if h.duties is None:
            return ("this quorum's log is not a KRaft metadata log with kraftnode's state machine "
                    "(kraftnode.raft.topic or an embedded state machine): groups are not served")
        if not self.application_records:
            return ("group records (offsets, members) are not KRaft metadata records, and this quorum "
                    "takes none: consumer groups are served with kraftnode.application.records.enable=true "
                    "(docs/server.md)")
        java = h.kafka_controllers()
        if java:
            return (f"a Kafka controller votes in this quorum ({', '.join(map(str, sorted(java)))}): every "
                    "record must be a KRaft metadata record, so consumer groups are not served "
                    "(metadata-only mode)")
        if h.duties.state.image.brokers:
            return ("genuine Kafka brokers are registered with this quorum: every record must be a KRaft "
                    "metadata record, so consumer groups are not served (metadata-only mode)")
        return None

    def coordinator_error(self) -> int:
        """NOT_COORDINATOR off the leader; COORDINATOR_LOAD_IN_PROGRESS on a leader that has
        not yet committed its epoch's first entry or replayed what was committed before."""
        h = self.h
        if not h.driver.is_leader:
            self._drop()
            return int(Errors.NOT_COORDINATOR)
        epoch = h.driver.leader_and_epoch()[1]
        if self.coordinator is not None and self.epoch == epoch:
            return 0
        self._drop()
        hw = h.driver.high_watermark
        if hw <= h._epoch_start_offset():
            return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        if h.duties is None:
            self._load(epoch, {})
            return 0
        if not h.duties.is_active:
            return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        state = h.duties.state
        for _ in range(50):
            if state.next_offset >= hw or not h.duties.catch_up():
                break
        drop_epoch, drop_end = self._reload_after
        if state.next_offset < hw or (drop_epoch == epoch and hw < drop_end):
            # a coordinator this leader dropped (an append that did not commit in time) may
            # have records in flight: the new one starts once they are committed and replayed
            return int(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        self._load(epoch, state.app)
        return 0

    def _load(self, epoch: int, app: dict[bytes, bytes]) -> None:
        c = GroupCoordinator(self.config, group_topics)
        c.replay_all((k, v) for k, v in app.items() if k.startswith(RECORD_KEY_PREFIX))
        c.on_loaded(now_ms())
        self.coordinator, self.epoch = c, epoch
        log.info("coordinating %d group(s) in epoch %d", len(c.groups), epoch)
        self._wake.set()

    def _drop(self) -> None:
        c, self.coordinator = self.coordinator, None
        if c is not None:
            self._reload_after = (self.epoch, self.h.driver.log_end_offset())
            log.info("no longer coordinating groups (epoch %d)", self.epoch)
            for token, resp in c.unload().replies:
                token.answer(resp)

    # ------------------------------------------------------------------ executing results
    async def execute(self, result: Result) -> None:
        """Append the result's records; answer once they are committed (or fail them all)."""
        if not result.records:
            for token, resp in result.replies:
                token.answer(resp)
            return
        now = now_ms()
        batch = build_batch([Record(key=k, value=v) for k, v in result.records], now_ms=now)
        _, waiter = self.h.driver.append_nowait([RawBatches(batch)])
        with anyio.move_on_after(self.h.driver.request_timeout_s):
            await waiter.done.wait()
        done = waiter.value
        if done is None or done.error_code:
            why = "timed out" if done is None else Errors(done.error_code).name
            log.info("group records not committed (%s): the coordinator starts over from the log", why)
            self._drop()
            for token, _resp in result.replies:
                token.fail(Errors.NOT_COORDINATOR)
            return
        for token, resp in result.replies:
            token.answer(resp)

    async def call(self, error: Callable[[int], Resp], op: Callable[[GroupCoordinator, _Pending[Resp]], Result],
                   wait_s: float = 0.0) -> Resp:
        """Run ``op`` on the coordinator and return the answer to this request (waiting for
        it up to ``wait_s`` beyond the commit, for a parked JoinGroup/SyncGroup)."""
        code = self.coordinator_error()
        if code:
            return error(code)
        assert self.coordinator is not None
        token = _Pending(error)
        try:
            result = op(self.coordinator, token)
        except Exception:
            # a coordinator bug: its state may be half changed, start over from the log
            log.exception("the group coordinator failed; it starts over from the log")
            self._drop()
            raise
        self._wake.set()
        await self.execute(result)
        if wait_s > 0:
            with anyio.move_on_after(wait_s):
                return await token.future
            return error(Errors.REBALANCE_IN_PROGRESS)
        if not token.future.done():
            return error(Errors.UNKNOWN_SERVER_ERROR)
        return token.future.result()

    async def run(self) -> None:
        """Fire the coordinator's timers; drop it when this node stops leading."""
        while True:
            c = self.coordinator
            delay = 0.2
            if c is not None:
                if not self.h.driver.is_leader or self.h.driver.leader_and_epoch()[1] != self.epoch:
                    self._drop()
                    continue
                deadline = c.next_deadline()
                if deadline is not None:
                    delay = min(delay, max(0.0, (deadline - now_ms()) / 1000))
            self._wake = anyio.Event()
            with anyio.move_on_after(delay):
                await self._wake.wait()
            c = self.coordinator
            if c is not None and self.h.driver.is_leader:
                try:
                    result = c.poll(now_ms())
                except Exception:
                    log.exception("the group coordinator's timers failed; it starts over from the log")
                    self._drop()
                    continue
                if result.records or result.replies:
                    asyncio.get_running_loop().create_task(self.execute(result))

    def write_refusal(self) -> int:
        """The error of a write while group records may not be written (metadata-only mode)."""
        code = self.coordinator_error()
        if code:
            return code
        reason = self.metadata_only_reason()
        if reason is not None:
            log.info("group write refused: %s", reason)
            return int(Errors.COORDINATOR_NOT_AVAILABLE)
        return 0


def group_topics() -> dict[str, tuple[uuid.UUID, int]]:
    """The topics a consumer group may subscribe to: the quorum's one partition."""
    return {rw.METADATA_TOPIC: (rw.METADATA_TOPIC_ID, 1)}


def topic_name_of(topic_id: uuid.UUID) -> str:
    """The name of a topic asked for by id (OffsetCommit/OffsetFetch v10), "" for an id
    this quorum does not have."""
    return next((name for name, (tid, _n) in group_topics().items() if tid == topic_id), "")


def topic_id_of(name: str) -> uuid.UUID:
    """The id of a topic by name (the zero uuid for one this quorum does not have)."""
    known = group_topics().get(name)
    return known[0] if known is not None else ZERO_UUID
