"""The controller's rules in the simulation (issue 25, must-show 3): simulated brokers on the real
sans-IO controller (``kraftnode.controller``), through controller failovers.

One run = one seed, discrete events, no wall clock. The metadata log is modelled at the level
the controller sees it: a committed list of batches, and the active controller's uncommitted
tail. The active controller is the real :class:`~kraftnode.controller.QuorumController` over a
real :class:`~kraftnode.controller.ControllerView`; each operation's records are appended to the
tail at the offsets they will have and replayed into the view at once, as the I/O shell does,
and the answer is sent only when the last batch commits (the tail commits in order, after random
delays). A **controller failover** commits a random prefix of the tail (the new raft leader had
it) and drops the rest; every pending answer fails (NOT_CONTROLLER), and after an election gap a
new controller builds its view from the committed state.

**Brokers** are simulated observers: each replays the committed log with its own lag, registers
(a new incarnation after every restart), heartbeats (its replayed offset, wanting to shut down
when asked to), and, for the partitions its replayed metadata says it leads, sends AlterPartition
to shrink the ISR (a replica that is down) or expand it (a replica that is up and caught up).
Requests and answers are delayed and sometimes lost; brokers crash and restart, shut down in a
controlled way, and partitions are added to a topic now and then. The controller's own duties
(session expiry, leader balancing) run on its timer.

Invariants, on the committed metadata after every committed batch:

1. a fenced broker leads no partition (fenced by a fence record -- a fresh registration of a
   restarted broker is fenced too, and Kafka 3.9 does not move leaderships for it: it will lead
   them again once it has caught up -- and no unregistered broker leads);
2. every partition's leader is in its ISR;
3. partition epochs and leader epochs only grow;
4. an acknowledged AlterPartition is never lost: at every failover and at the end, each
   acknowledged (partition epoch, ISR) of a partition is a state the committed log went through;
5. with eligible leader replicas on (``elr=True``: metadata.version 4.4, KIP-966 finalized,
   topics with min.insync.replicas=2): ISR and ELR never share a replica, ISR, ELR and
   last-known ELR are replicas of the partition, and an ISR of at least min ISR has no ELR;
6. the indexes the controller keeps on replay (:mod:`kraftnode.controller.indexes`: brokers to
   ISR partitions, leaderless and imbalanced partitions, leaderships, topic names) agree with a
   recomputation over the image, in the active controller's view and in the committed one;
6. every record the controller generates survives its bytes: encoded at its version and decoded,
   it equals the object (the I/O shell replays its own records as generated, not read back from
   the log, while standbys and brokers decode them);
7. the committed view is a standby's, kept as the I/O shell keeps it: each committed batch is
   written as a real record batch and replayed by a committed :class:`MetadataState` -- from the
   records the controller generated for every other batch (the active controller's own appends,
   known by base offset and epoch), decoded from the bytes for the rest -- which hands the view
   the records it replayed (``ControllerView.replay_decoded``); the view's image equals the
   committed state's, and its indexes (6) are checked after every batch.

Plants (:data:`PLANTS`), each caught by one invariant: a fencing that keeps the broker's
leaderships, an election that may pick a leader outside the ISR, an off-by-one partition id in
CreatePartitions (it rewrites the last existing partition), answering AlterPartition as soon
as its records are appended instead of after commit, and an ISR index that forgets to drop a
partition from a broker's entry when the broker leaves its ISR.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraftnode.controller import (
    ApiError,
    ControllerConfig,
    ControllerResult,
    ControllerView,
    QuorumController,
)
from kraftnode.controller.indexes import PartitionIndexes
from kraftnode.controller.partition_change import PartitionChangeBuilder
from kraftnode.controller.replication import ReplicationControl
from kraftnode.controller.result import Record
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata.state import MetadataState
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from recordbatch import Record as RecordOut
from recordbatch import build_batch, iter_batches

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
RUN_MS = 20_000
FAULT_END_MS = 15_000
SESSION_TIMEOUT_MS = 1500
HEARTBEAT_MS = 150
REQUEST_TIMEOUT_MS = 600
TOPICS = {"a": 6, "b": 4}

FENCE_KEEPS_LEADERS = "fence_keeps_leaders"
ELECT_OUTSIDE_ISR = "elect_outside_isr"
PARTITION_ID_OFF_BY_ONE = "partition_id_off_by_one"
ACK_BEFORE_COMMIT = "ack_before_commit"
STALE_ISR_INDEX = "stale_isr_index"
PLANTS = {
    FENCE_KEEPS_LEADERS: "fencing a broker writes the fence record but leaves its leaderships (invariant 1)",
    ELECT_OUTSIDE_ISR: "an election accepts a live replica outside the ISR as leader (invariant 2)",
    PARTITION_ID_OFF_BY_ONE: "CreatePartitions numbers new partitions from one too low (invariant 3)",
    ACK_BEFORE_COMMIT: "the controller answers when its records are appended, not when committed (invariant 4)",
    STALE_ISR_INDEX: "the ISR index keeps a partition under a broker that left its ISR (invariant 5)",
}


class Violation(Exception):
    pass


# ---------------------------------------------------------------------- plants
class _KeepLeaders(ReplicationControl):
    def broker_fenced(self, broker_id: int, records: list[Record]) -> None:
        reg = self.view.broker(broker_id)
        assert reg is not None
        records.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=reg.broker_epoch, fenced=1), 0))


class _AnyLiveLeader(PartitionChangeBuilder):
    def _valid_new_leader(self, replica: int) -> bool:
        return replica in self.target_replicas and self.is_acceptable_leader(replica)


class _ElectOutsideIsr(ReplicationControl):
    def _builder(self, part: PartitionRecord, topic_id: uuid.UUID, pid: int,
                 acceptable: Callable[[int], bool] | None = None) -> PartitionChangeBuilder:
        b = _AnyLiveLeader(part, topic_id, pid, self._acceptor(part, acceptable), self.view.mv)
        b.set_default_dir_provider(self.view.default_dir)
        return b


class _OffByOne(ReplicationControl):
    def partition_record(self, topic_id: uuid.UUID, pid: int, replicas: list[int], isr: list[int]) -> Record:
        existing = self.view.partitions(topic_id)
        return super().partition_record(topic_id, pid - 1 if pid - 1 in existing and pid not in existing else pid,
                                        replicas, isr)


class _StaleIsrIndex(PartitionIndexes):
    def remove(self, tid: uuid.UUID, pid: int, p: PartitionRecord) -> None:
        keep = {b: set(keys) for b, keys in self.isr_members.items()}
        super().remove(tid, pid, p)
        self.isr_members = keep


def _controller(plant: str | None, config: ControllerConfig, view: ControllerView, now: int,
                rng: random.Random) -> QuorumController:
    if plant == STALE_ISR_INDEX:
        view.indexes.__class__ = _StaleIsrIndex
    ctl = QuorumController(config, view, now, rng, None, lambda _m: None)
    replacement = {FENCE_KEEPS_LEADERS: _KeepLeaders, ELECT_OUTSIDE_ISR: _ElectOutsideIsr,
                   PARTITION_ID_OFF_BY_ONE: _OffByOne}.get(plant or "")
    if replacement is not None:
        ctl.use_replication(replacement(ctl, ctl.configs))
    return ctl


# ---------------------------------------------------------------------- model
@dataclass
class Batch:
    offset: int
    records: list[Record]
    callbacks: list[Callable[[int], None]] = field(default_factory=list)


@dataclass
class SimBroker:
    id: int
    dir: uuid.UUID
    alive: bool = True
    incarnation: int = 0
    epoch: int = -1
    registered: bool = False
    fenced: bool = True
    shutting_down: bool = False
    view: ControllerView = field(default_factory=ControllerView)
    applied: int = 0            # committed batches replayed
    inflight: dict[str, int] = field(default_factory=dict)  # request kind -> its deadline

    @property
    def metadata_offset(self) -> int:
        return self.view.next_offset - 1


@dataclass
class Result:
    seed: int
    ok: bool
    message: str
    committed_records: int
    failovers: int
    acked_alter_partitions: int


class ControllerSim:
    def __init__(self, seed: int, brokers: int = 5, plant: str | None = None, elr: bool = False) -> None:
        if plant is not None and plant not in PLANTS:
            raise ValueError(f"unknown plant {plant}")
        self.elr = elr
        self.mv = 33 if elr else 21  # Kafka 4.4's metadata.version with ELR, else 3.9-IV0
        self.seed = seed
        self.plant = plant
        self.rng = random.Random(f"controller-sim-{seed}")
        self.now = 0
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self.committed: list[Batch] = []
        self.committed_end = 0
        self.tail: list[Batch] = []
        self.ref = ControllerView()
        # the committed state, replaying real batches; it feeds the standby view ``ref`` (7)
        self.state = MetadataState()
        self.state.on_replayed = self._standby_replay
        self.ctl: QuorumController | None = None
        self.epoch = 0
        self.config = ControllerConfig(cluster_id=CLUSTER, node_id=1, session_timeout_ms=SESSION_TIMEOUT_MS,
                                       leader_imbalance_check_interval_ms=1000, max_idle_interval_ms=0)
        self.brokers = {b: SimBroker(b, uuid.UUID(int=(b << 64) | 7)) for b in range(101, 101 + brokers)}
        self.fenced_by_record: dict[int, bool] = {}
        self.epochs: dict[tuple[uuid.UUID, int], tuple[int, int]] = {}
        self.history: dict[tuple[uuid.UUID, int], set[tuple[int, tuple[int, ...]]]] = {}
        self.acked: list[tuple[uuid.UUID, int, int, tuple[int, ...]]] = []
        self.failovers = 0
        self.topics_created = False
        # the log starts with metadata.version, as bootstrapped
        boot = [(FeatureLevelRecord(name="metadata.version", feature_level=self.mv), 0)]
        if elr:
            boot.append((FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0))
        self._commit_batch(Batch(0, boot))

    # ------------------------------------------------------------------ events
    def _schedule(self, at: int, kind: str, *data: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, data))

    def run(self) -> Result:
        try:
            self._schedule(0, "elect")
            for b in self.brokers.values():
                self._schedule(self.rng.randint(0, 300), "broker_tick", b.id)
                self._schedule(self.rng.randint(0, 100), "catch_up", b.id)
            t = self.rng.randint(1500, 4000)
            while t < FAULT_END_MS:
                self._schedule(t, self.rng.choice(["failover", "crash", "shutdown", "add_partition", "failover"]))
                t += self.rng.randint(400, 2500)
            self._schedule(1000, "create_topics")
            while self._queue:
                at, _s, kind, data = heapq.heappop(self._queue)
                if at > RUN_MS:
                    break
                self.now = at
                getattr(self, f"_on_{kind}")(*data)
            self._check_acked()
            return Result(self.seed, True, "ok", self.committed_end, self.failovers, len(self.acked))
        except Violation as e:
            return Result(self.seed, False, f"t={self.now}ms: {e}", self.committed_end, self.failovers,
                          len(self.acked))

    # ------------------------------------------------------------------ the log
    def _commit_batch(self, batch: Batch) -> None:
        self.committed.append(batch)
        data = build_batch([RecordOut(None, encode_metadata_record(m, v)) for m, v in batch.records],
                           base_offset=batch.offset, partition_leader_epoch=self.epoch)
        if len(self.committed) % 2:   # the active controller's own append: its objects are known
            self.state.replay_known(batch.offset, self.epoch, list(batch.records))
        end = batch.offset + len(batch.records)
        self.state.replay_batches(iter_batches(data), end)
        if self.ref.next_offset != end or self.ref.image != self.state.image:
            raise Violation(f"the standby view (at {self.ref.next_offset}) is not the committed state's image "
                            f"after the batch at {batch.offset}")
        for m, _v in batch.records:
            self._track(m)
        self.committed_end = end
        self.check()

    def _standby_replay(self, b: Any, start: int, end: int, decoded: list[tuple[int, Any, int]] | None) -> None:
        if self.ref.next_offset == start:
            self.ref.replay_decoded(b, end, decoded)

    def _on_commit(self, epoch: int) -> None:
        if epoch != self.epoch or not self.tail:
            return
        batch = self.tail.pop(0)
        self._commit_batch(batch)
        for cb in batch.callbacks:
            cb(Errors.NONE)

    def _append(self, result: ControllerResult[Any], answer: Callable[[int], None]) -> None:
        """The shell: append the result's batches, replay them into the controller's view, answer
        after commit (or, planted, at once)."""
        assert self.ctl is not None
        view = self.ctl.view
        offset = self.committed_end + sum(len(b.records) for b in self.tail)
        last: Batch | None = None
        for records in result.batches():
            last = Batch(offset, records)
            for i, (m, v) in enumerate(records):
                got = decode_metadata_record(encode_metadata_record(m, v))
                if got != (m, v):
                    raise Violation(f"a generated record does not survive its bytes: {m!r} v{v} "
                                    f"decodes as {got!r}")
                view.replay(m, v, offset + i)
            offset += len(records)
            self.tail.append(last)
            self._schedule(self.now + self.rng.randint(2, 80), "commit", self.epoch)
        if result.on_offset is not None:
            result.on_offset(offset - 1)
        self.ctl.after_write(self.now)
        if last is None:
            last = self.tail[-1] if self.tail else None
        if last is None or self.plant == ACK_BEFORE_COMMIT and result.records:
            answer(Errors.NONE)
        else:
            last.callbacks.append(answer)

    def _on_failover(self) -> None:
        if self.ctl is None:
            return
        self.failovers += 1
        keep = self.rng.randint(0, len(self.tail))
        kept, dropped = self.tail[:keep], self.tail[keep:]
        self.tail = []
        for batch in kept:
            self._commit_batch(batch)
        for batch in kept + dropped:
            for cb in batch.callbacks:
                cb(Errors.NOT_CONTROLLER)
        self.ctl = None
        self.epoch += 1
        self._check_acked()
        self._schedule(self.now + self.rng.randint(50, 600), "elect")

    def _on_elect(self) -> None:
        view = ControllerView.of(self.ref)
        self.ctl = _controller(self.plant, self.config, view, self.now, random.Random(f"ctl-{self.seed}-{self.epoch}"))
        self._schedule(self.now, "duty", self.epoch)

    def _on_duty(self, epoch: int) -> None:
        if self.ctl is None or epoch != self.epoch:
            return
        for _ in range(20):
            result = self.ctl.run_due(self.now, noop_allowed=False)
            if result is None:
                break
            if result.records:
                self._append(result, lambda _code: None)
        deadline = self.ctl.next_deadline_ms()
        self._schedule(max(self.now + 5, deadline if deadline is not None else self.now + 200), "duty", epoch)

    # ------------------------------------------------------------------ requests
    def _request(self, op: Callable[[QuorumController], ControllerResult[Any]],
                 answer: Callable[[int, Any], None]) -> None:
        """A request over the network: delayed or lost both ways; answered after its commit."""
        if self.rng.random() < 0.03:
            return  # lost: the client times out

        def arrive() -> None:
            if self.ctl is None:
                self._deliver(lambda: answer(Errors.NOT_CONTROLLER, None))
                return
            try:
                result = op(self.ctl)
            except ApiError as e:
                code = e.code
                self._deliver(lambda: answer(code, None))
                return
            self._append(result, lambda code: self._deliver(
                lambda: answer(code, result.response if code == Errors.NONE else None)))
        self._schedule(self.now + self.rng.randint(1, 30), "call", arrive)

    def _deliver(self, fn: Callable[[], None]) -> None:
        if self.rng.random() < 0.03:
            return
        self._schedule(self.now + self.rng.randint(1, 30), "call", fn)

    def _on_call(self, fn: Callable[[], None]) -> None:
        fn()

    # ------------------------------------------------------------------ brokers
    def _on_catch_up(self, bid: int) -> None:
        b = self.brokers[bid]
        while b.applied < len(self.committed):
            batch = self.committed[b.applied]
            for i, (m, v) in enumerate(batch.records):
                b.view.replay(m, v, batch.offset + i)
            b.applied += 1
        self._schedule(self.now + self.rng.randint(10, 120), "catch_up", bid)

    def _on_broker_tick(self, bid: int) -> None:
        b = self.brokers[bid]
        self._schedule(self.now + HEARTBEAT_MS + self.rng.randint(-30, 30), "broker_tick", bid)
        if not b.alive:
            return
        for kind, deadline in list(b.inflight.items()):
            if deadline <= self.now:
                del b.inflight[kind]
        if not b.registered:
            if "register" not in b.inflight:
                self._register(b)
            return
        if "heartbeat" not in b.inflight:
            self._heartbeat(b)
        if not b.fenced and "alter" not in b.inflight and self.rng.random() < 0.5:
            self._alter_partition(b)

    def _register(self, b: SimBroker) -> None:
        R = w.BrokerRegistrationRequest
        q = R(broker_id=b.id, cluster_id=CLUSTER, incarnation_id=uuid.UUID(int=(b.id << 64) | b.incarnation + 1),
              listeners=[R.Listener(name="PLAINTEXT", host="h", port=b.id, security_protocol=0)],
              features=[R.Feature(name="metadata.version", min_supported_version=1, max_supported_version=self.mv)]
              + ([R.Feature(name="eligible.leader.replicas.version", min_supported_version=0, max_supported_version=1)]
                 if self.elr else []),
              rack=None, is_migrating_zk_broker=False, log_dirs=[b.dir], previous_broker_epoch=-1)
        b.inflight["register"] = self.now + REQUEST_TIMEOUT_MS
        incarnation = b.incarnation

        def op(ctl: QuorumController) -> ControllerResult[Any]:
            return ctl.register_broker(q, self.committed_end + sum(len(x.records) for x in self.tail), 0, self.now)

        def answer(code: int, epoch: Any) -> None:
            b.inflight.pop("register", None)
            if code == Errors.NONE and b.alive and b.incarnation == incarnation:
                b.registered, b.epoch, b.fenced = True, int(epoch), True
        self._request(op, answer)

    def _heartbeat(self, b: SimBroker) -> None:
        q = w.BrokerHeartbeatRequest(broker_id=b.id, broker_epoch=b.epoch, current_metadata_offset=b.metadata_offset,
                                     want_fence=False, want_shut_down=b.shutting_down, offline_log_dirs=[])
        b.inflight["heartbeat"] = self.now + REQUEST_TIMEOUT_MS
        incarnation = b.incarnation

        def answer(code: int, reply: Any) -> None:
            b.inflight.pop("heartbeat", None)
            if not b.alive or b.incarnation != incarnation:
                return
            if code == Errors.STALE_BROKER_EPOCH:
                b.registered = False
            elif code == Errors.NONE:
                b.fenced = reply.is_fenced
                if reply.should_shut_down:
                    self._stop(b)
        self._request(lambda ctl: ctl.broker_heartbeat(q, self.now), answer)

    def _alter_partition(self, b: SimBroker) -> None:
        """Shrink the ISR of a partition this broker leads (a replica is down) or expand it (a
        replica is up, unfenced and caught up), as its replayed metadata shows the partition."""
        led = [(tid, pid, p) for tid, pid, p in b.view.all_partitions() if p.leader == b.id]
        if not led:
            return
        tid, pid, part = self.rng.choice(led)
        up = {x.id for x in self.brokers.values() if x.alive and x.registered and not x.fenced
              and x.metadata_offset >= b.metadata_offset - 20}
        isr = list(part.isr)
        down = [r for r in isr if r != b.id and r not in up]
        missing = [r for r in part.replicas if r not in isr and r in up]
        if down:
            isr.remove(self.rng.choice(down))
        elif missing:
            isr.append(self.rng.choice(missing))
        else:
            return
        A = w.AlterPartitionRequest
        epochs = {x: (reg.broker_epoch if (reg := b.view.broker(x)) is not None else -1) for x in isr}
        q = A(broker_id=b.id, broker_epoch=b.epoch, topics=[A.TopicData(topic_id=tid, partitions=[
            A.PartitionData(partition_index=pid, leader_epoch=part.leader_epoch, new_isr=isr,
                            new_isr_with_epochs=[A.BrokerState(broker_id=x, broker_epoch=epochs[x]) for x in isr],
                            leader_recovery_state=0, partition_epoch=part.partition_epoch)])])
        b.inflight["alter"] = self.now + REQUEST_TIMEOUT_MS

        def answer(code: int, resp: Any) -> None:
            b.inflight.pop("alter", None)
            if code != Errors.NONE:
                return
            p = resp.topics[0].partitions[0]
            if p.error_code == Errors.NONE:
                self.acked.append((tid, pid, p.partition_epoch, tuple(p.isr)))
        self._request(lambda ctl: ctl.alter_partition(q, 3, self.now), answer)

    def _stop(self, b: SimBroker) -> None:
        b.alive = False
        b.registered = False
        b.inflight.clear()
        self._schedule(self.now + self.rng.randint(300, 2500), "restart", b.id)

    def _on_restart(self, bid: int) -> None:
        b = self.brokers[bid]
        b.alive, b.shutting_down, b.fenced, b.incarnation = True, False, True, b.incarnation + 1

    def _on_crash(self) -> None:
        b = self.rng.choice([x for x in self.brokers.values()])
        if b.alive:
            self._stop(b)

    def _on_shutdown(self) -> None:
        alive = [x for x in self.brokers.values() if x.alive and x.registered]
        if alive:
            self.rng.choice(alive).shutting_down = True

    # ------------------------------------------------------------------ admin
    def _on_create_topics(self) -> None:
        if self.topics_created:
            return
        C = w.CreateTopicsRequest
        configs = [C.CreatableTopicConfig(name="min.insync.replicas", value="2")] if self.elr else []
        q = C(topics=[C.CreatableTopic(name=n, num_partitions=p, replication_factor=3, assignments=[],
                                       configs=list(configs)) for n, p in TOPICS.items()],
              timeout_ms=1000, validate_only=False)

        def answer(code: int, resp: Any) -> None:
            if code == Errors.NONE and all(t.error_code in (0, Errors.TOPIC_ALREADY_EXISTS) for t in resp.topics):
                self.topics_created = True
        self._request(lambda ctl: ctl.create_topics(q, set(TOPICS), self.now), answer)
        self._schedule(self.now + 700, "create_topics")

    def _on_add_partition(self) -> None:
        tid = self.ref.topic_id("a")
        if tid is None:
            return
        P = w.CreatePartitionsRequest
        count = len(self.ref.partitions(tid)) + 1
        topics = [P.CreatePartitionsTopic(name="a", count=count, assignments=None)]
        self._request(lambda ctl: ctl.create_partitions(topics, False, self.now), lambda _c, _r: None)

    # ------------------------------------------------------------------ invariants
    def _track(self, m: Any) -> None:
        if isinstance(m, BrokerRegistrationChangeRecord):
            if m.fenced == 1:
                self.fenced_by_record[m.broker_id] = True
            elif m.fenced == -1:
                self.fenced_by_record[m.broker_id] = False
        elif isinstance(m, FenceBrokerRecord):
            self.fenced_by_record[m.id] = True
        elif isinstance(m, (UnfenceBrokerRecord, RegisterBrokerRecord)):
            self.fenced_by_record[m.id if isinstance(m, UnfenceBrokerRecord) else m.broker_id] = False
        elif isinstance(m, UnregisterBrokerRecord):
            self.fenced_by_record.pop(m.broker_id, None)

    def check(self) -> None:
        ref = self.ref
        for name, view in (("committed", ref), ("active controller's", self.ctl.view if self.ctl else None)):
            wrong = view.index_differences() if view is not None else []
            if wrong:
                raise Violation(f"the {name} view's indexes disagree with its image: {wrong[0]}")
        for tid, pid, p in ref.all_partitions():
            key = (tid, pid)
            if p.leader >= 0:
                if ref.broker(p.leader) is None:
                    raise Violation(f"partition {pid} of {tid} is led by unregistered broker {p.leader}")
                if self.fenced_by_record.get(p.leader):
                    raise Violation(f"fenced broker {p.leader} leads partition {pid} of {tid}")
                if p.leader not in p.isr:
                    raise Violation(f"leader {p.leader} of partition {pid} of {tid} is not in its ISR {p.isr}")
            before = self.epochs.get(key)
            now = (p.leader_epoch, p.partition_epoch)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                raise Violation(f"partition {pid} of {tid}: (leader epoch, partition epoch) went from {before} to {now}")
            self.epochs[key] = now
            self.history.setdefault(key, set()).add((p.partition_epoch, tuple(p.isr)))
            if self.elr:
                self._check_elr(tid, pid, p)

    def _check_elr(self, tid: uuid.UUID, pid: int, p: Any) -> None:
        elr, lkelr = list(p.eligible_leader_replicas or []), list(p.last_known_elr or [])
        if set(elr) & set(p.isr):
            raise Violation(f"partition {pid} of {tid}: ISR {p.isr} and ELR {elr} overlap")
        if not set(elr) | set(lkelr) | set(p.isr) <= set(p.replicas):
            raise Violation(f"partition {pid} of {tid}: ISR {p.isr} / ELR {elr} / last-known ELR {lkelr} "
                            f"outside its replicas {p.replicas}")
        if len(p.isr) >= min(2, len(p.replicas)) and elr:
            raise Violation(f"partition {pid} of {tid}: ISR {p.isr} is at min ISR but the ELR is {elr}")

    def _check_acked(self) -> None:
        for tid, pid, epoch, isr in self.acked:
            if (epoch, isr) not in self.history.get((tid, pid), set()):
                raise Violation(f"acknowledged AlterPartition of partition {pid} of {tid} (partition epoch {epoch}, "
                                f"ISR {list(isr)}) was lost")


def run_seed(seed: int, plant: str | None = None, elr: bool = False) -> Result:
    return ControllerSim(seed, plant=plant, elr=elr).run()
