"""The active controller's I/O: runs the sans-IO :mod:`kraftnode.controller` on the raft leader.

Kafka's QuorumController runs every operation on one event thread against its in-memory state,
which includes the records it has appended but not yet seen committed; it answers once they
commit. This shell does the same on the node's event loop:

* **Who is active.** The raft leader once its activation records are appended
  (``ControllerDuties.is_active``). A standby keeps a
  :class:`~kraftnode.controller.view.ControllerView` at the committed end of the log (made once
  from a copy of the committed metadata state -- by the duty loop, in steps that let the event
  loop serve between them, once the node has caught up with the leader: a restarted standby
  fetches first -- then advanced over every committed batch, as
  Kafka's standby QuorumController replays committed records -- from the records the committed
  state just decoded, so each batch is decoded once), so becoming active costs no copy:
  it replays the log after the view (its own activation records included); a
  :class:`~kraftnode.controller.quorum_controller.QuorumController` then gives every registered
  broker a fresh session. When leadership is lost both are dropped (uncommitted records are
  truncated by the next leader or committed by it; the standby view is rebuilt from the
  committed state).
  Everyone else answers NOT_CONTROLLER, so brokers and clients look for the active one again.
* **One operation at a time.** An operation replays whatever the log holds beyond the view
  (records other writers appended: Produce, controller registrations, ACLs), decides, appends its
  records (one batch if atomic, else batches of at most 10,000) and replays them into the view --
  all synchronously, so no other operation interleaves and the broker epoch of a registration is
  the offset its batch gets. The node's committed state later replays those same objects when
  the batch commits (not its bytes decoded back). The answer goes back once the last batch commits; an operation that
  writes nothing waits for the writes before it to commit (it may have read them).
* **Periodic duties** (fencing brokers whose sessions expired, NoOpRecords, leader balancing,
  unclean elections) are one timer task calling :meth:`QuorumController.run_due`.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import anyio

from kraftnode.controller import (
    ApiError,
    ControllerConfig,
    ControllerResult,
    ControllerView,
    QuorumController,
)
from kraftnode.controller.view import ViewBuilder
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.registry import BROKER_HEARTBEAT
from kraftnode.raft.actions import AppendCompleted
from kraftnode.server.controller_io.controller_duties import ControllerDuties
from kraftnode.server.metrics.controller import count_elections
from kraftnode.server.raft_io.driver import RaftDriver, Waiter

if TYPE_CHECKING:
    from kraftnode.server.metrics.controller import ControllerMetrics
    from recordbatch.view import BatchView

__all__ = ["ControllerRead", "ControllerShell", "ControllerWrite", "NotController", "monotonic_ms"]

log = logging.getLogger("kraftnode.controller")

T = TypeVar("T")

#: A write on the active controller (:meth:`ControllerShell.write`): called with the
#: QuorumController and the controller's clock (ms), it returns the records to append and
#: the answer (``T``) to give once they commit -- Kafka's ControllerWriteOperation.
ControllerWrite: TypeAlias = Callable[[QuorumController, int], ControllerResult[T]]
#: A read of the active controller's view (:meth:`ControllerShell.read`).
ControllerRead: TypeAlias = Callable[[QuorumController], T]


#: partitions indexed per step of a standby's view build (tens of ms of CPU) before other tasks run
VIEW_BUILD_STEP = 20_000
#: how long a standby without a view waits to catch up with the leader before building it anyway
VIEW_BUILD_WAIT_S = 5.0


def monotonic_ms() -> int:
    """The controller's clock: broker sessions must not jump with the wall clock."""
    return int(time.monotonic() * 1000)


class NotController(ApiError):
    def __init__(self) -> None:
        super().__init__(Errors.NOT_CONTROLLER)


class ControllerShell:
    """Owns the QuorumController while this node is the active controller."""

    def __init__(self, driver: RaftDriver, duties: ControllerDuties, config: ControllerConfig,
                 kraft_version: Callable[[], int], rng: random.Random | None = None) -> None:
        self.driver = driver
        self.duties = duties
        self.config = config
        self.kraft_version = kraft_version
        self.rng = rng or random.Random()
        self.controller: QuorumController | None = None
        self.view: ControllerView | None = None
        #: the view holds committed records only (a standby's, kept ready to become active)
        self._view_committed = False
        self._started = time.monotonic()
        #: Kafka's controller metrics (kraftnode.metrics.listener set), else None: nothing timed
        self.metrics: ControllerMetrics | None = None
        self._leader_seen: tuple[int, int] = (-1, -1)
        self._epoch: int | None = None
        self._last_waiter: Waiter[AppendCompleted] | None = None
        self._wake = anyio.Event()
        self._stopped = False
        #: how long an answer waits for its records to commit
        self.commit_timeout_s = max(driver.request_timeout_s, 5.0)
        self.attach()

    # ------------------------------------------------------------------ activity
    def active(self) -> QuorumController:
        """The controller, built on first use in this term; NotController elsewhere."""
        if not self.duties.is_active:
            self._renounce()
            raise NotController()
        epoch = self.driver.leader_and_epoch()[1]
        if self.controller is None or self._epoch != epoch or self.view is None:
            self._claim(epoch)
        assert self.controller is not None
        self._advance()
        return self.controller

    @property
    def is_active(self) -> bool:
        return self.duties.is_active

    def _claim(self, epoch: int) -> None:
        view = self.view if self._view_committed else None
        how = "the standby's view kept ready"
        if view is None or view.next_offset < self.driver.log_start_offset():
            view = ControllerView.of(self.duties.state)
            how = "a view copied from the committed state"
        self.view = view
        self._view_committed = False
        self._epoch = epoch
        self._last_waiter = None
        now = monotonic_ms()
        self._advance()
        view = self.view
        assert view is not None
        self.controller = QuorumController(self.config, view, now, self.rng, self._uuid, log.info)
        log.info("active controller in epoch %d: %d broker(s), %d topic(s) at offset %d (%s)", epoch,
                 len(view.image.brokers), len(view.image.topics), view.next_offset, how)
        self._wake.set()

    def _renounce(self) -> None:
        if self.controller is not None:
            log.info("no longer the active controller (epoch %s)", self._epoch)
        self.controller = None
        if not self._view_committed:
            self.view = None
        self._epoch = None
        self._last_waiter = None

    # ------------------------------------------------------------------ standby
    def attach(self) -> None:
        """Follow the committed state as it replays: a standby's view replays the records the
        committed state just decoded (the same objects, decoded once), batch by batch; a batch
        it cannot take that way is left to :meth:`follow`, which reads it from the log."""
        self.duties.state.on_replayed = self._replayed

    def _replayed(self, b: BatchView, start: int, end_offset: int, decoded: list[tuple[int, Any, int]] | None) -> None:
        view = self.view
        if view is None or not self._view_committed or self.controller is not None or view.next_offset != start:
            return
        try:
            view.replay_decoded(b, end_offset, decoded)
        except Exception:  # noqa: BLE001 - the committed state replayed it: the view is rebuilt
            log.exception("the standby controller view could not replay the batch at offset %d", b.base_offset)
            self._view_committed, self.view = False, None
            if self.metrics is not None:
                self.metrics.metadata_errors += 1
            return
        if self.metrics is not None and b.last_offset < end_offset:
            self.metrics.last_applied_timestamp = b.max_timestamp

    def follow(self) -> None:
        """A standby's view follows the committed end of the log, so that becoming active
        replays only the records after it (no copy of the image)."""
        if self.controller is not None or self.duties.is_active:
            return
        drv = self.driver
        if self.needs_standby_view():
            return  # the duty loop builds it, step by step (build_standby_view)
        view = self.view
        assert view is not None
        # no further than the committed state, which hands the view each batch it replays
        # (``_replayed``): what the view reads here is only what it missed that way
        end = min(drv.high_watermark, drv.log_end_offset(), self.duties.state.next_offset)
        if view.next_offset < end:
            view.replay_batches(self._batches(view.next_offset, end), end)

    def needs_standby_view(self) -> bool:
        """A standby without a view at the committed end of the log (at start-up, after losing
        leadership, or after the log was replaced by a snapshot past the view)."""
        if self.controller is not None or self.duties.is_active:
            return False
        view = self.view if self._view_committed else None
        return view is None or view.next_offset < self.driver.log_start_offset()

    def standby_view_due(self) -> bool:
        """Whether to build the missing standby view now: once the committed state has caught up
        with the leader's high watermark -- a restarted standby fetches first, and its view (only
        needed to become active, which a voter behind the log cannot) comes after -- or
        ``VIEW_BUILD_WAIT_S`` after start-up without that (no leader yet)."""
        hw = self.driver.high_watermark
        caught_up = hw > 0 and self.duties.state.next_offset >= hw
        return caught_up or time.monotonic() - self._started >= VIEW_BUILD_WAIT_S

    async def build_standby_view(self, partitions_per_step: int = VIEW_BUILD_STEP) -> bool:
        """Build the standby's view from the committed state without holding the event loop:
        the copy at once, then the indexes ``partitions_per_step`` partitions at a time, letting
        other tasks run between steps (at a million partitions the whole build is seconds of
        CPU: the restarted node fetches and catches up meanwhile). Abandoned when this node
        becomes the active controller meanwhile (``_claim`` makes its view from the committed
        state then). True once the view is in place; :meth:`follow` then replays what was
        committed during the build."""
        t0 = time.perf_counter()
        builder = ViewBuilder(self.duties.state)
        steps = 1
        while not builder.step(partitions_per_step):
            await anyio.sleep(0)
            steps += 1
            if self.controller is not None or self.duties.is_active:
                return False
        if self.controller is not None or self.duties.is_active:
            return False
        view = builder.view
        self.view, self._view_committed = view, True
        log.info("standby controller view built at offset %d: %d partition(s) indexed in %d step(s), "
                 "%.2f s", view.next_offset, view.indexes.partition_count, steps, time.perf_counter() - t0)
        return True

    def _batches(self, start: int, end: int) -> Iterator[BatchView]:
        """The log's batches, noting the timestamp of each one replayed (LastAppliedRecordTimestamp)."""
        m = self.metrics
        for b in self.driver.batches(start, end):
            yield b
            if m is not None and b.last_offset < end:
                m.last_applied_timestamp = b.max_timestamp

    def active_view(self) -> ControllerView | None:
        """The active controller's view (None on a standby)."""
        return self.view if self.controller is not None and self.duties.is_active else None

    def metrics_view(self) -> ControllerView | None:
        """The view the controller metrics read: the active one, else the standby's (advanced
        to the committed end first)."""
        if self.active_view() is None:
            try:
                self.follow()
            except Exception:  # noqa: BLE001 - a scrape must answer; the duty loop logs it
                log.exception("the standby controller view could not follow the log")
                self._view_committed, self.view = False, None
                if self.metrics is not None:
                    self.metrics.metadata_errors += 1
        return self.view

    def observe_leader(self) -> None:
        """NewActiveControllersCount: a known leader in a new epoch."""
        leader, epoch = self.driver.leader_and_epoch()
        if leader >= 0 and (leader, epoch) != self._leader_seen:
            self._leader_seen = (leader, epoch)
            if self.metrics is not None:
                self.metrics.new_active_controllers += 1

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128))

    def _advance(self) -> None:
        """Replay what the log holds beyond the view (everything: committed or not, ours or
        another writer's on this leader)."""
        view = self.view
        if view is None:
            return
        end = self.driver.log_end_offset()
        start = self.driver.log_start_offset()
        if view.next_offset < start:
            # the log was cleaned behind a snapshot past records the view has not replayed: records
            # of other writers (a VotersRecord, Produce) committed and snapshotted between two
            # operations, under a small metadata.max.retention.bytes. Those records are committed,
            # so the committed state covers them: rebuild the view from it, as a new term does
            log.info("the metadata log now starts at %d, past the controller's view (%d): the view is "
                     "rebuilt from the committed state", start, view.next_offset)
            view = ControllerView.of(self.duties.state)
            if view.next_offset < start:
                self._renounce()
                raise NotController()
            self.view = view
            assert self.controller is not None
            self.controller.rebase(view)
        if view.next_offset < end:
            view.replay_batches(self._batches(view.next_offset, end), end)

    # ------------------------------------------------------------------ operations
    async def write(self, op: ControllerWrite[T], api_key: int = -1) -> T:
        """Run one operation: decide, append, answer once committed. Raises ApiError (Kafka's
        error for the client) or NotController. ``api_key``: the request's (the metrics count
        BrokerHeartbeats that time out)."""
        m = self.metrics
        t0 = time.perf_counter() if m is not None else 0.0
        try:
            ctl = self.active()
            now = monotonic_ms()
            result = op(ctl, now)
            waiter = self._append(ctl, result, now)
        finally:
            if m is not None:
                m.processed(time.perf_counter() - t0)
        try:
            await self._committed(waiter)
        except ApiError as e:
            if m is not None and e.code == Errors.REQUEST_TIMED_OUT:
                m.operations_timed_out += 1
                if api_key == BROKER_HEARTBEAT:
                    m.timed_out_heartbeats += 1
            raise
        return result.response

    def _append(self, ctl: QuorumController, result: ControllerResult[Any], now: int) -> Waiter[AppendCompleted] | None:
        """Append the result's batches and replay them; the waiter of the last one (or of the
        last write still pending, for a result without records).

        As Kafka's QuorumController does, the records are replayed into the view as they were
        generated, at the offsets the log gave them -- not read back from the log and decoded;
        only what other writers appended is read from the log (the codec refuses to encode a
        field its version lacks, so the bytes hold what the objects hold)."""
        waiter: Waiter[AppendCompleted] | None = None
        m = self.metrics
        if m is not None:
            self._count_elections(result)
        for batch in result.batches():
            self._advance()   # another writer's records first (none, usually)
            base, waiter = self.driver.append([encode_metadata_record(r, v) for r, v in batch])
            if base < 0:
                self._renounce()
                raise NotController()
            # the committed state replays these objects once they commit, not their bytes decoded
            self.duties.state.replay_known(base, self.driver.leader_and_epoch()[1], batch)
            view = self.view
            if view is not None and view.next_offset == base:
                for i, (r, v) in enumerate(batch):
                    view.replay(r, v, base + i)
                if view.features_changed and view.transaction_start == -1:
                    view.features_epoch = base + len(batch) - 1   # as replay_batches marks it
                    view.features_changed = False
                if m is not None:
                    m.last_applied_timestamp = int(time.time() * 1000)
        self._advance()
        if waiter is not None:
            self._last_waiter = waiter
        elif self._last_waiter is not None and not self._last_waiter.done.is_set():
            waiter = self._last_waiter
        if result.on_offset is not None:
            result.on_offset(self.driver.log_end_offset() - 1)
        ctl.after_write(now)
        self._wake.set()
        return waiter

    def _count_elections(self, result: ControllerResult[Any]) -> None:
        """ControllerStats: leaders this write elects outside the ISR (unclean) or from the ELR."""
        if self.view is not None and self.metrics is not None:
            count_elections(self.view, result.batches(), self.metrics)

    async def _committed(self, waiter: Waiter[AppendCompleted] | None) -> None:
        if waiter is None:
            return
        with anyio.move_on_after(self.commit_timeout_s):
            await waiter.done.wait()
        done = waiter.value
        if done is None:
            raise ApiError(Errors.REQUEST_TIMED_OUT)
        if done.error_code:
            self._renounce()
            raise NotController()

    def read(self, op: ControllerRead[T]) -> T:
        """A read on the active controller's view (after replaying the log)."""
        m = self.metrics
        if m is None:
            return op(self.active())
        t0 = time.perf_counter()
        try:
            return op(self.active())
        finally:
            m.processed(time.perf_counter() - t0)

    # ------------------------------------------------------------------ periodic duties
    async def run(self) -> None:
        """The timer: periodic duties on the active controller; claims the controller as soon
        as this node becomes active, so broker sessions start then."""
        while not self._stopped:
            delay = 1.0
            m = self.metrics
            try:
                self.observe_leader()
                if self.duties.is_active:
                    ctl = self.active()
                    now = monotonic_ms()
                    for _ in range(100):  # bounded: the rest next time round
                        t0 = time.perf_counter()
                        result = ctl.run_due(now, noop_allowed=bool(ctl.view.image.brokers))
                        if result is None:
                            break
                        self._append(ctl, result, now)
                        if m is not None:
                            m.processed(time.perf_counter() - t0)
                    deadline = ctl.next_deadline_ms()
                    if deadline is not None:
                        delay = min(delay, max(deadline - monotonic_ms(), 1) / 1000)
                else:
                    self._renounce()
                    if self.needs_standby_view() and self.standby_view_due():
                        await self.build_standby_view()
                    self.follow()
                    delay = 0.1
            except ApiError as e:
                log.info("controller duty failed: %s", e)
                delay = 0.1
            except Exception:  # noqa: BLE001 - a bug in a duty must not stop the raft node
                log.exception("controller duty failed; the controller is rebuilt from the log")
                if m is not None:
                    m.metadata_errors += 1
                self._view_committed = False
                self._renounce()
                delay = 1.0
            self._wake = anyio.Event()
            due_at = time.monotonic() + delay
            with anyio.move_on_after(delay):
                await self._wake.wait()
            if m is not None and not self._wake.is_set():
                # the timer was due at due_at: how late the event loop ran it (EventQueueTimeMs)
                m.queue_time.record(max(0.0, time.monotonic() - due_at) * 1000)

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
