"""Runs the deterministic Raft core against real time, disk and network.

The core (``kraftnode.raft.RaftNode``) only emits actions; this driver executes
them strictly in order.  ``PersistElectionState`` and ``FlushLog`` are barriers:
they complete (fsync) before any later action runs, so a vote is on disk before
the answer that grants it leaves, and an offset counts towards the high watermark
only once it is durable.  Appends made while earlier actions wait in the queue are
covered by the next flush (group commit).  See :class:`RaftDriver` for who runs
the actions and when.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio
from anyio.abc import TaskGroup

from kraftnode.log.metadata_log import MetadataLog
from kraftnode.log.producer_state import ProducerIds
from kraftnode.log.quorum_state_store import QuorumStateData, QuorumStateStore
from kraftnode.logsetup import os_error_text
from kraftnode.raft import RaftNode, errors
from kraftnode.raft import messages as m
from kraftnode.raft.actions import (
    AppendCompleted,
    FatalError,
    FlushLog,
    HighWatermarkAdvanced,
    PersistElectionState,
    ReadIndexCompleted,
    SendRequest,
    SendResponse,
    StateChanged,
)
from kraftnode.raft.election import ElectionState
from kraftnode.raft.messages import DescribeQuorumData
from kraftnode.raft.states import LeaderState, VotedState
from kraftnode.raft.voters import ReplicaKey, VoterSet
from kraftnode.server.metrics import latency_trace
from kraftnode.server.net.peer_client import PeerPool
from kraftnode.server.raft_io.disk_log import DiskRaftLog
from kraftnode.server.raft_io.send import PeerSending, now_ms
from recordbatch import BatchView
from recordbatch.wire import ZERO_UUID

if TYPE_CHECKING:
    from kraftnode.server.metrics.recording import RaftMetrics

__all__ = ["LeaderTracking", "RaftDriver", "RaftStatus", "Waiter", "election_to_quorum_state", "now_ms", "quorum_state_to_election"]

log = logging.getLogger("kraftnode.raft")


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


@dataclass(frozen=True)
class RaftStatus:
    """The core's epoch state as the server reads it (:meth:`RaftDriver.status`)."""

    #: the core's state name: leader, candidate, voted, follower, prospective, unattached, resigned
    state: str
    epoch: int
    #: -1 when no leader is known
    leader_id: int
    #: the core's high watermark (0 until one is learnt)
    high_watermark: int
    #: False on a leader until a record of its epoch has committed (Kafka's
    #: LeaderState.highWatermark() is empty until then); True in every other state
    high_watermark_known: bool
    #: the candidate a replica in the voted state voted for (None in every other state)
    voted_key: ReplicaKey | None


@dataclass(frozen=True)
class LeaderTracking:
    """What a leader tracks beyond the voters (:meth:`RaftDriver.leader_tracking`)."""

    observers: int
    #: an AddRaftVoter or RemoveRaftVoter whose VotersRecord has not committed yet
    voter_change_pending: bool


T = TypeVar("T")


@dataclass
class Waiter(Generic[T]):
    """What a caller of the core waits on: ``done`` is set with ``value`` -- the core's
    answer to a request, an append's AppendCompleted, a read barrier's ReadIndexCompleted.
    ``value`` stays None when the node stops first (or the caller gave up waiting)."""

    done: anyio.Event = field(default_factory=anyio.Event)
    value: T | None = None
    #: (append time ms, records) when metrics are on: commit-latency is per record
    appended: tuple[int, int] | None = None
    #: called with the value instead of setting ``done``, inside the driver's action loop
    #: (a caller with no task to wake: an acks=-1 Produce on the listener's fast path); it
    #: must not raise
    on_done: Callable[[T], None] | None = None


class RaftDriver(PeerSending):
    """Owns the core; every call into it happens on the event loop thread.

    Actions run in the order the core emitted them, from one FIFO queue, and each is
    executed synchronously by whoever fed the core the event (a handler, a peer
    response, the timer): an answer the core produces at once is returned to
    the handler without waking any other task.  ``FlushLog`` and
    ``PersistElectionState`` run inline on the loop thread -- fdatasync of an append
    costs tens of microseconds here, less than handing it to a worker thread and
    back -- so the barrier is trivially kept: nothing later in the queue runs before
    they return.  One exception to "inline": when a ``FlushLog`` follows actions
    that woke other tasks (typically the answers to parked follower fetches that
    ``RaftNode.append`` emits before the leader's flush), the rest of the queue is
    left to a loop callback, which the loop runs after those tasks; so the followers
    get the new records before the leader's fsync, not after it.  A failed flush
    or election-state write stops the node (``fatal``) without running anything
    queued behind it.
    """

    def __init__(self, node: RaftNode, log_: DiskRaftLog, store: QuorumStateStore, pool: PeerPool,
                 addresses: dict[int, tuple[str, int]], bootstrap: Sequence[tuple[str, int]],
                 kraft_version: int, request_timeout_s: float,
                 metrics: RaftMetrics | None = None) -> None:
        self.node = node
        #: kraftnode.metrics.listener set: what is recorded as it happens (else None: nothing)
        self.metrics = metrics
        log_.metrics = metrics
        self.log = log_
        self.store = store
        self.pool = pool
        self.addresses = dict(addresses)
        self.bootstrap = list(bootstrap)
        self.kraft_version = kraft_version
        #: kraftnode.read.linearizable: consumer Fetch and ListOffsets LATEST wait for a read barrier.
        self.linearizable_reads = False
        self.request_timeout_s = request_timeout_s
        self.producers = ProducerIds(node.local_key.id)
        self._started = False
        self.high_watermark = node.high_watermark
        self._hw_changed: anyio.Event | None = None
        self.state_changed = anyio.Event()
        self.fatal: str | None = None
        self._done = anyio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tick_soon = False
        self._left_over_soon = False
        self._commits = 0          # appends completed so far (see call)
        self._next_request_id = 1
        self._requests: dict[int, Waiter[m.Response]] = {}
        # call_nowait's requests: the function each answer goes to
        self._answer_to: dict[int, Callable[[m.Response], None]] = {}
        self._appends: dict[int, Waiter[AppendCompleted]] = {}
        self._reads: dict[int, Waiter[ReadIndexCompleted]] = {}
        self._tg: TaskGroup | None = None
        self._stopped = False
        self._queue: deque[object] = deque()
        self._pumping = False
        self._sleep_until_ms: float = 0.0   # when the timer will next tick on its own
        # the in-flight request a ``_send`` task will carry on with itself (see _send)
        self._claim_dest: int | None = None
        self._claimed: SendRequest | None = None
        # whether the latest voter set held this node when last looked (see _note_voter_change)
        self._was_voter = node.is_voter

    # -------------------------------------------------------------- start-up
    def start(self) -> None:
        """The start-up work, out of the constructor: hook the producer-state tracker to
        the log and learn the producers of the log's tail (the last 8 MiB) written before
        a restart. Idempotent; :meth:`run` calls it if the owner has not."""
        if self._started:
            return
        self._started = True
        log_ = self.log
        log_.on_append = self.producers.observe
        log_.on_truncate = self.producers.truncate
        tail_start = log_.start_offset
        scanned = 0
        for base, _end, size in reversed(log_.log.segments()):
            tail_start = base
            scanned += size
            if scanned > 8 * 1024 * 1024:
                break
        self.producers.observe(log_.log.batches(tail_start))

    # -------------------------------------------------------------- read API
    # What request handlers may ask: typed queries, so that no handler reaches through the
    # driver into the core's state classes or the log's segments.
    @property
    def is_leader(self) -> bool:
        return self.node.is_leader

    def leader_and_epoch(self) -> tuple[int, int]:
        """(leader id or -1, epoch) as the core knows them."""
        return self.node.leader_and_epoch()

    def epoch_start_offset(self) -> int | None:
        """The leader's epoch start offset; None when not the leader."""
        return self.node.epoch_start_offset()

    def log_start_offset(self) -> int:
        return self.log.start_offset

    def log_end_offset(self) -> int:
        return self.log.end_offset

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> bytes:
        """Raw batches from ``offset`` below ``max_offset``, at most ``max_bytes`` (but at
        least one batch with ``min_one_batch``), as Kafka's LocalLog.read."""
        return bytes(self.log.log.read(offset, max_bytes, max_offset=max_offset,
                                       min_one_batch=min_one_batch).records)

    def batches(self, start: int, end: int) -> Iterator[BatchView]:
        """The batches holding offsets ``start`` up to (not including) ``end``."""
        return self.log.log.batches(start, end)

    @property
    def metadata_log(self) -> MetadataLog:
        """The log itself, for the readers that replay it (group offsets, snapshots)."""
        return self.log.log

    @property
    def voters(self) -> VoterSet:
        return self.node.voters

    @property
    def leader_id(self) -> int:
        """The leader the core knows of in this epoch; -1 when none."""
        return self.node.leader_id

    @property
    def epoch(self) -> int:
        return self.node.epoch

    @property
    def local_key(self) -> ReplicaKey:
        """This replica's id and directory id."""
        return self.node.local_key

    @property
    def is_voter(self) -> bool:
        """This replica is in the voter set in force (else an observer)."""
        return self.node.is_voter

    def status(self) -> RaftStatus:
        """The core's epoch state in one read (metrics, health checks)."""
        st = self.node.state
        return RaftStatus(
            state=st.name, epoch=st.epoch, leader_id=st.leader_id,
            high_watermark=self.node.high_watermark,
            high_watermark_known=st.tracker.high_watermark_known if isinstance(st, LeaderState) else True,
            voted_key=st.voted_key if isinstance(st, VotedState) else None)

    def leader_tracking(self, now: int) -> LeaderTracking | None:
        """A leader's view of the replicas it tracks; None when not the leader. Observers
        that stopped fetching are dropped first, as Kafka's number-of-observers gauge does."""
        st = self.node.state
        if not isinstance(st, LeaderState):
            return None
        tracker = st.tracker
        tracker.clear_inactive_observers(now)
        return LeaderTracking(observers=len(tracker.observers),
                              voter_change_pending=tracker.pending_add is not None
                              or tracker.pending_remove is not None)

    def describe_quorum(self, now: int | None = None) -> DescribeQuorumData:
        return self.node.describe_quorum(now_ms() if now is None else now)

    def current_kraft_version(self) -> int:
        """The kraft.version in force now (the log's KRaftVersionRecords)."""
        return self.node.history.kraft_version()

    # -------------------------------------------------------------- interface
    async def call(self, request: m.Request) -> m.Response:
        """Hand an inbound raft request to the core and wait for its answer."""
        rid = self._next_request_id
        self._next_request_id += 1
        waiter: Waiter[m.Response] = Waiter()
        self._requests[rid] = waiter
        try:
            commits = self._commits
            self.node.handle_request(rid, request, now_ms())
            self._after_event()
            if not waiter.done.is_set():
                await waiter.done.wait()
            elif self._commits != commits:
                # This request (a follower's Fetch) committed appends: let their
                # producers' answers leave before this one, which only carries the
                # new high watermark back to the follower.
                await asyncio.sleep(0)
        finally:
            self._requests.pop(rid, None)
        answer = waiter.value
        assert answer is not None   # set before done (or the call was cancelled)
        return answer

    def call_nowait(self, request: m.Request, on_answer: Callable[[m.Response], None]) -> None:
        """:meth:`call` without a task to wait in: ``on_answer`` gets the core's answer when
        it comes -- within this call when the core answers at once, else from the event that
        completes it (an append answering a parked Fetch, a tick ending its long poll, the
        end of leadership). It runs inside the driver's action loop, in order with the other
        actions, and must not raise. What a raft peer's Fetch takes on the leader
        (:meth:`kraftnode.server.handlers.NodeHandlers.fast`): its answer is written as the
        action runs, with no task woken and no loop iteration in between."""
        if self._stopped:
            return      # shutting down: the log closes next; the connection goes with the loop
        rid = self._next_request_id
        self._next_request_id += 1
        self._answer_to[rid] = on_answer
        self.node.handle_request(rid, request, now_ms())
        self._after_event()

    def append_nowait(self, records: Sequence[object]) -> tuple[int, Waiter[AppendCompleted]]:
        """Append on the leader; returns (handle, waiter completed at commit or failure)."""
        handle, _base, waiter = self._append(records)
        return handle, waiter

    def append(self, records: Sequence[object]) -> tuple[int, Waiter[AppendCompleted]]:
        """Append on the leader; returns (base offset the log assigned, or -1 if refused;
        waiter completed at commit or failure)."""
        _handle, base, waiter = self._append(records)
        return base, waiter

    def _append(self, records: Sequence[object]) -> tuple[int, int, Waiter[AppendCompleted]]:
        waiter: Waiter[AppendCompleted] = Waiter()
        if self.fatal is not None or self._stopped:
            return -1, -1, waiter       # stopping: never completes; the node's tasks are cancelled
        try:
            if latency_trace.ON:
                latency_trace.mark("append.start", self.log.end_offset)
            if self.metrics is None:
                handle, base = self.node.append_records(records, now_ms())
            else:
                before = self.log.end_offset
                t = now_ms()
                handle, base = self.node.append_records(records, t)
                waiter.appended = (t, self.log.end_offset - before)
        except OSError as e:
            # the metadata log's disk failed (full, read-only, I/O error): stop the node, as
            # Kafka halts a controller whose metadata log dir fails; no traceback, one line
            self.fatal = f"append failed: {os_error_text(e)}"
            log.error("fatal: %s; stopping", self.fatal)
            self._done.set()
            return -1, -1, waiter
        self._appends[handle] = waiter
        if latency_trace.ON:
            latency_trace.mark("append.done", self.log.end_offset)
        self._after_event()
        return handle, base, waiter

    async def read_barrier(self) -> bool:
        """kraftnode.read.linearizable: wait until this leader has confirmed its leadership with
        a majority after the call (read index); then local state reflects every write committed
        before the call. False: not the leader (or leadership lost meanwhile)."""
        waiter: Waiter[ReadIndexCompleted] = Waiter()
        if self.fatal is not None:
            return False
        handle = self.node.read_index(now_ms())
        self._reads[handle] = waiter
        self._after_event()
        await waiter.done.wait()
        value = waiter.value
        return isinstance(value, ReadIndexCompleted) and value.error_code == 0

    async def upgrade_kraft_version(self, version: int, validate_only: bool) -> tuple[int, str | None]:
        """UpdateFeatures kraft.version (Kafka 4.1's upgradeKRaftVersion): (error code, message);
        an upgrade that appends answers once its control batch commits."""
        if self.fatal is not None:
            return errors.NOT_LEADER_OR_FOLLOWER, None
        code, message, handle = self.node.upgrade_kraft_version(version, validate_only, now_ms())
        if handle < 0:
            self._after_event()
            return code, message
        waiter: Waiter[AppendCompleted] = Waiter()
        self._appends[handle] = waiter
        self._after_event()
        await waiter.done.wait()
        value = waiter.value
        return (value.error_code, None) if isinstance(value, AppendCompleted) else (errors.REQUEST_TIMED_OUT, None)

    async def resign(self) -> None:
        self.node.resign(now_ms())
        self._after_event()
        while self._queue and self.fatal is None:
            self.wake()
            await anyio.sleep(0.001)

    # -------------------------------------------------------------- timer
    async def run(self, tg: TaskGroup) -> None:
        """Start the timer and wait until :meth:`stop` (or a fatal error).

        The timer is a loop callback, not a task: ticking the core at its deadlines
        and running flushes left to it needs no cancel scope or event per wake-up."""
        self.start()
        self._tg = tg
        self._loop = asyncio.get_running_loop()
        self._on_timer()
        try:
            await self._done.wait()
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def stop(self) -> None:
        self._stopped = True
        self._done.set()

    def fail(self, reason: str) -> None:
        """Stop the node on a fatal fault found outside the raft core (a committed metadata
        record the controller cannot replay: Kafka's ProcessTerminatingFaultHandler)."""
        if self.fatal is None:
            self.fatal = reason
            log.error("Encountered fatal fault: %s", reason)
        self._done.set()

    def wake(self) -> None:
        """Tick the core and run queued actions soon (from a loop callback)."""
        if self._loop is not None and not self._tick_soon:
            self._tick_soon = True
            self._loop.call_soon(self._on_timer)

    def _on_timer(self) -> None:
        self._tick_soon = False
        if self._stopped or self.fatal is not None:
            self._done.set()
            return
        try:
            if log.isEnabledFor(logging.DEBUG):
                before, deadline, t = self.node.state.name, self.node.next_deadline_ms(), now_ms()
                self.node.tick(t)
                if self.node.state.name != before:
                    log.debug("timer: %s -> %s at %d, deadline %s (late %s ms)", before, self.node.state.name, t,
                              deadline, None if deadline is None else t - deadline)
            else:
                self.node.tick(now_ms())
        except Exception as e:  # noqa: BLE001 - a bug in the core stops the node, loudly
            log.exception("fatal: the raft core failed in tick; stopping")
            self.fatal = f"tick failed: {e}"
            self._done.set()
            return
        self._pump(inline_flush=True)
        self._arm_timer()
        if self.fatal is not None:
            self._done.set()

    def _arm_timer(self) -> None:
        """(Re)arm the timer for the core's next deadline (at least 1 ms away: a deadline
        already in the past must not turn the timer into a busy loop)."""
        assert self._loop is not None
        deadline = self.node.next_deadline_ms()
        now = now_ms()
        delay_ms = 500.0 if deadline is None else max(1.0, deadline - now)
        if self._timer is not None:
            self._timer.cancel()
        self._sleep_until_ms = now + delay_ms
        self._timer = self._loop.call_later(delay_ms / 1000, self._on_timer)

    @property
    def hw_changed(self) -> anyio.Event:
        """Set the next time the high watermark moves (a new event after each move). Made
        when first asked for: a commit nobody waits on (the usual case) makes and sets none."""
        event = self._hw_changed
        if event is None:
            event = self._hw_changed = anyio.Event()
        return event

    def _start_send(self, a: SendRequest) -> None:
        assert self._tg is not None
        self._tg.start_soon(self._send, a)

    def _run_left_over(self) -> None:
        """Loop callback: run what a pump left behind (a flush after woken tasks)."""
        self._left_over_soon = False
        self._pump(inline_flush=True)

    def _after_event(self) -> None:
        """The core took an event: run what it emitted, and wake the timer if a
        deadline moved earlier than the one it sleeps towards (or work was left over:
        then a callback runs it once the tasks just woken have run)."""
        self._pump(inline_flush=False)
        if self._queue:
            if not self._left_over_soon and self._loop is not None:
                self._left_over_soon = True
                self._loop.call_soon(self._run_left_over)
            return
        if self._loop is not None:
            deadline = self.node.next_deadline_ms()
            if deadline is not None and deadline < self._sleep_until_ms:
                self._arm_timer()

    def _pump(self, inline_flush: bool) -> None:
        """Execute queued actions in order, synchronously.  Stops (leaving the rest to
        the timer) before a ``FlushLog`` that follows actions which woke other
        tasks, unless ``inline_flush``."""
        if self._pumping or self.fatal is not None or self._tg is None:
            return  # (before run: the first timer call runs what queued up meanwhile)
        self._pumping = True
        queue = self._queue
        woke = False
        try:
            while True:
                if not queue:
                    actions = self.node.take_actions()
                    if not actions:
                        return
                    queue.extend(actions)
                a = queue[0]
                if isinstance(a, FlushLog):
                    if self.log.log.flushed_offset >= a.end_offset:
                        queue.popleft()
                        continue
                    if woke and not inline_flush:
                        return
                queue.popleft()
                try:
                    woke = self._execute(a) or woke
                except Exception as e:  # noqa: BLE001 - a failed fsync ends this node
                    if isinstance(e, OSError):
                        # the environment, not a bug (a full disk, a directory made read-only):
                        # no traceback; the node's exit line names the problem
                        self.fatal = f"{type(a).__name__} failed: {os_error_text(e)}"
                        log.error("fatal: %s; stopping", self.fatal)
                    else:
                        log.exception("fatal: %s failed; stopping", type(a).__name__)
                        self.fatal = f"{type(a).__name__} failed: {e}"
                    queue.clear()
                    self.node.take_actions()
                    self._done.set()
                    return
        finally:
            self._pumping = False
            self._note_voter_change()

    def _note_voter_change(self) -> None:
        """Log the moment this node joins or leaves the voter set. A voter change moves no
        node to a new epoch state, so without this line an observer added by add-controller
        kept ``became follower ... as an observer`` as its last word on the matter (issue 41).
        Judged on the latest voter set, committed or not, as the core (and Kafka) does."""
        now = self.node.is_voter
        if now == self._was_voter:
            return
        self._was_voter = now
        leader = self.node.leader_id
        log.info("became a voter in epoch %d (leader %s; voters %s)" if now else
                 "is no longer a voter in epoch %d (leader %s; voters %s): it goes on as an observer",
                 self.node.epoch, leader if leader >= 0 else "unknown", sorted(self.node.voters.ids))

    def _flush(self, a: FlushLog) -> None:
        """FlushLog, inline: nothing after it runs until the log is durable up to its offset."""
        if latency_trace.ON:
            latency_trace.mark("flush.start", a.end_offset)
        if self.metrics is None:
            self.log.flush()
        else:
            t0 = time.perf_counter()
            self.log.flush()
            self.metrics.flush_seconds += time.perf_counter() - t0
        if latency_trace.ON:
            latency_trace.mark("flush.end", a.end_offset, self.log.log.flushed_offset)

    def _state_changed(self, a: StateChanged) -> None:
        """StateChanged: logged, counted, and every task waiting on :attr:`state_changed` woken."""
        log.info("became %s in epoch %d (leader %s)%s; log end offset %d, high watermark %d",
                 a.state, a.epoch, a.leader_id if a.leader_id >= 0 else "unknown",
                 "" if a.is_voter else " as an observer", self.log.end_offset,
                 self.high_watermark)
        if self.metrics is not None:
            # a candidate that is already leader won at once (a single voter): Kafka
            # starts no election-latency clock for it
            at_once = a.state == "candidate" and self.node.is_leader and self.node.epoch == a.epoch
            self.metrics.on_state_changed(a.state, a.epoch, at_once, now_ms())
        self.state_changed.set()
        self.state_changed = anyio.Event()

    def _execute(self, a: object) -> bool:
        """Run one action; True when it woke another task."""
        if isinstance(a, SendResponse):
            answer_to = self._answer_to.pop(a.request_id, None)
            if answer_to is not None:
                answer_to(a.response)   # written now: nothing woken, a flush after it stays inline
                return False
            w = self._requests.get(a.request_id)
            if w is not None:
                w.value = a.response
                w.done.set()
                return True
        elif isinstance(a, SendRequest):
            refused = self._pre_vote_refused_locally(a)
            if refused is not None:
                self.node.handle_response(a.destination, a.correlation_id, refused, now_ms())
            elif self._claim_dest == a.destination and self._claimed is None:
                self._claimed = a
            else:
                self._start_send(a)
        elif isinstance(a, FlushLog):
            self._flush(a)
        elif isinstance(a, PersistElectionState):
            # the kraft.version in force now: a static quorum upgraded to 1 writes data version 1
            data = election_to_quorum_state(a.state, self.node.history.kraft_version(),
                                            sorted(self.node.voters.ids))
            self.store.write(data)
        elif isinstance(a, HighWatermarkAdvanced):
            if latency_trace.ON:
                latency_trace.mark("hw", a.high_watermark)
            self.high_watermark = a.high_watermark
            event, self._hw_changed = self._hw_changed, None
            if event is None:
                return False    # nobody waits: no event made, none to set
            event.set()
            return True
        elif isinstance(a, AppendCompleted):
            aw = self._appends.pop(a.handle, None)
            if latency_trace.ON:
                latency_trace.mark("commit", a.last_offset)
            if aw is not None:
                if aw.appended is not None and self.metrics is not None and not a.error_code:
                    self.metrics.on_commit(aw.appended[0], aw.appended[1], now_ms())
                aw.value = a
                self._commits += 1
                if aw.on_done is not None:
                    aw.on_done(a)   # answered now: nothing woken
                    return False
                aw.done.set()
                return True
        elif isinstance(a, ReadIndexCompleted):
            r = self._reads.pop(a.handle, None)
            if r is not None:
                r.value = a
                r.done.set()
                return True
        elif isinstance(a, StateChanged):
            self._state_changed(a)
            return True
        elif isinstance(a, FatalError):
            log.error("fatal: %s (error %d); stopping", a.message, a.error_code)
            self.fatal = a.message
            self._done.set()
        return False
