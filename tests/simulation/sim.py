"""The discrete-event simulator and its invariant checks.

One run = one seed: N voters plus observers, a network that delays, loses,
duplicates and reorders messages and can be partitioned (also in one direction
only), crashes that keep flushed state only (optionally in the middle of a node's
action list, e.g. after a reply but before the fsync it depended on), restarts,
random client appends and graceful resignations. After the fault phase the
network heals and every node restarts; the cluster must then converge.

Safety invariants are checked after every event; see :meth:`Simulation.check`.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kraftnode.raft import errors, quorum_state
from kraftnode.raft.actions import (
    Action,
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
from kraftnode.raft.batches import KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.election import ElectionState
from kraftnode.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet
from tests.simulation import plants
from tests.simulation.model import FaultProfile, SimLog, describe
from tests.simulation.state_layer import PLANTS as STATE_PLANTS
from tests.simulation.state_layer import StateLayer, StateSimLog

FAULT_PHASE_MS = 12_000
LIVENESS_BOUND_MS = 30_000


class Violation(Exception):
    """An invariant failed; the message says which and where."""


@dataclass
class SimNode:
    node_id: int
    is_voter: bool
    directory_id: uuid.UUID
    log: SimLog = field(default_factory=StateSimLog)
    persisted: ElectionState = field(default_factory=lambda: ElectionState(0))
    core: RaftNode | None = None
    incarnation: int = 0
    last_hw: int = 0
    verified: int = 0  # committed offsets already compared with the global record
    leader_checked_epoch: int = -1
    tick_at: int | None = None
    handles: dict[int, tuple[object, ...]] = field(default_factory=dict)
    #: KIP-996: this node runs pre-vote (and speaks Vote v2); off models a Kafka 3.9 voter.
    pre_vote: bool = False
    #: Since when (sim ms) this node has been leader.
    leader_since: int = -1
    #: Pending read barriers: handle -> committed offsets known (globally) when called.
    reads: dict[int, int] = field(default_factory=dict)
    #: The (state, epoch) of the last StateChanged of this incarnation (None: not started).
    last_state: tuple[str, int] | None = None


@dataclass
class Result:
    seed: int
    ok: bool
    message: str
    events: int
    sim_ms: int
    committed: int
    elections: int


class Simulation:
    #: A subclass that needs a dynamic quorum in every seed (tests/simulation/grow_sim.py).
    always_dynamic = False

    def __init__(self, seed: int, voters: int = 3, observers: int = 1, plant: str | None = None,
                 profile: FaultProfile | None = None, pre_vote_mode: str | None = None,
                 calm: bool | None = None) -> None:
        self.seed = seed
        self.trace: Callable[[str], None] | None = None
        self._matched: dict[tuple[int, int], tuple[int, int]] = {}
        self.rng = random.Random(f"kraftnode-sim-{seed}-{voters}-{observers}")
        drawn = FaultProfile.draw(self.rng)
        self.profile = profile if profile is not None else drawn
        # plants of the core (tests/simulation/plants.py) vs of the state layer
        self.plants = frozenset([plant]) if plant and plant not in STATE_PLANTS else frozenset()
        #: the real state machine on every node, real snapshots (tests/simulation/state_layer.py)
        self.state = StateLayer(self, plant if plant in STATE_PLANTS else None)
        self.state_rng = random.Random(f"kraftnode-sim-state-{seed}")
        self.now = 0
        self.events = 0
        self._queue: list[tuple[int, int, str, tuple[object, ...]]] = []
        self._seq = 0
        self.nodes: dict[int, SimNode] = {}
        for i in range(1, voters + observers + 1):
            self.nodes[i] = SimNode(i, i <= voters, uuid.UUID(int=self.rng.getrandbits(128)))
        # Half the seeds run a static quorum (kraft.version 0: controller.quorum.voters, no
        # directory ids); the other half a dynamic one (kraft.version 1: the voter set,
        # with directory ids, comes from a bootstrap control batch at the start of the log).
        self.dynamic = self.rng.random() < 0.5 or self.always_dynamic
        # Dynamic seeds also change the voter set (KIP-853): an admin client adds
        # observers and removes voters (the leader too) through the leader, and some
        # voters start with a stale endpoint in the bootstrap VotersRecord, which they
        # correct with UpdateRaftVoter (or rewrite as a new leader). Its own rng keeps
        # the other faults of a seed as they were.
        self.reconfig_rng = random.Random(f"kraftnode-sim-reconfig-{seed}")
        stale = {n.node_id for n in self.nodes.values() if self.dynamic and self.reconfig_rng.random() < 0.3}
        voters_set = VoterSet.of(
            VoterNode(ReplicaKey(n.node_id, n.directory_id if self.dynamic else None),
                      (Endpoint("CONTROLLER", f"{'stale-' if n.node_id in stale else ''}n{n.node_id}", 9093),),
                      0, 1 if self.dynamic else 0)
            for n in self.nodes.values() if n.is_voter
        )
        if self.dynamic:
            self.voter_set = VoterSet()
            for n in self.nodes.values():
                n.log.append_as_leader(
                    [KRaftVersionControlRecord(1), VotersControlRecord(voters_set)], 0, is_control=True)
                n.log.flush()
        else:
            self.voter_set = voters_set
        self.expected_voters = voters_set
        self.reconfig_interval_ms = self.reconfig_rng.choice([None, 1000, 400]) if self.dynamic else None
        self._admin: dict[int, tuple[int, Request]] = {}  # rid -> (leader asked, request)
        self.committed_voters: dict[int, VoterSet] = {}  # offset of a committed VotersRecord -> set
        self.voter_changes = 0
        # KIP-996 pre-vote (own rng): off (Kafka 3.9), on for every node, or mixed (some
        # voters are "3.9" peers without Vote v2). A third of the all-on seeds run a calm
        # profile (no crash, loss, long delay, resignation or voter change) with
        # partitions, where leader stickiness is checked as an invariant.
        self.prevote_rng = random.Random(f"kraftnode-sim-prevote-{seed}")
        self.pre_vote_mode = self.prevote_rng.choice(["off", "on", "on", "mixed"])
        if plant == plants.PRE_VOTE_IGNORES_LEADER:
            self.pre_vote_mode = "on"
        if pre_vote_mode is not None:
            self.pre_vote_mode = pre_vote_mode
        calm_draw = self.prevote_rng.random() < (0.8 if plant == plants.PRE_VOTE_IGNORES_LEADER else 0.35)
        if (self.pre_vote_mode == "on" and calm_draw) if calm is None else calm:
            self.profile = dataclasses.replace(
                self.profile, crash_interval_ms=None, mid_action_crash_p=0.0, loss=0.0, long_delay_p=0.0,
                resign_interval_ms=None, partition_interval_ms=self.prevote_rng.choice([3000, 1500]))
            self.reconfig_interval_ms = None
        for n in self.nodes.values():
            n.pre_vote = self.pre_vote_mode == "on" or (
                self.pre_vote_mode == "mixed" and self.prevote_rng.random() < 0.5)
        p = self.profile
        #: The stickiness invariant applies: every node pre-votes and nothing but partitions
        #: and delays (bounded) disturbs the quorum.
        self.sticky_applies = (
            self.pre_vote_mode in ("on", "off-checked") and p.crash_interval_ms is None and p.loss == 0.0
            and p.long_delay_p == 0.0 and p.resign_interval_ms is None and self.reconfig_interval_ms is None)
        self.config = RaftConfig(
            cluster_id="sim-cluster", request_timeout_ms=p.request_timeout_ms, fetch_max_bytes=p.fetch_max_bytes,
            election_timeout_ms=p.election_timeout_ms, fetch_timeout_ms=p.fetch_timeout_ms,
            fetch_max_wait_ms=min(500, p.fetch_timeout_ms // 4),
        )
        self.blocked: set[tuple[int, int]] = set()
        self._requests: dict[int, tuple[int, int, int, int]] = {}  # rid -> (src, src inc, corr, dst)
        self._next_rid = 1
        self._next_record = 1
        self.faults_on = True
        # Global history.
        self.committed: list[tuple[int, object]] = []
        self.commit_epoch: list[int] = []
        self.leaders: dict[int, int] = {}
        self.acked: dict[int, object] = {}
        self.elections = 0
        self.reads_done = 0
        # Leadership transfers (own rng): an admin asks the leader to hand over to a voter.
        self.transfer_rng = random.Random(f"kraftnode-sim-transfer-{seed}")
        self.transfer_interval_ms = self.transfer_rng.choice([None, 1500, 600])
        if plant == plants.TRANSFER_WITHOUT_CATCH_UP:
            self.transfer_interval_ms = 300
        if plant == plants.PRE_VOTE_IGNORES_LEADER:
            self.transfer_interval_ms = None  # transfers would only hide disruptions from the check
        self._transfers: dict[int, int] = {}  # rid -> target id
        self.transfers_done = 0
        self._link_up_since: dict[tuple[int, int], int] = {}
        self._update_reach()
        for node in self.nodes.values():
            self._start(node)

    # ------------------------------------------------------------ plumbing
    def _schedule(self, at: int, kind: str, data: tuple[object, ...]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, data))

    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        node.last_hw = 0
        node.verified = 0
        node.leader_checked_epoch = -1
        node.handles = {}
        node.reads = {}
        node.last_state = None
        rng = random.Random(f"{self.seed}-{node.node_id}-{node.incarnation}")
        self.state.on_start(node)
        node.log.on_truncate = lambda offset, n=node: self._on_truncate(n, offset)
        # A planted core is a subclass of RaftNode (tests/simulation/plants.py).
        core_class = plants.node_class(self.plants) if self.plants else RaftNode
        node.core = core_class(
            node.node_id, node.directory_id, dataclasses.replace(self.config, pre_vote=node.pre_vote), node.log, node.persisted, self.voter_set, rng,
            # Dynamic seeds: every node is a bootstrap server (controller.quorum.bootstrap.servers
            # lists all controllers), so replicas removed from the voter set still find the leader.
            self.now, bootstrap_servers=sorted(self.nodes if self.dynamic else self.expected_voters.ids),
            snapshots=node.log, local_endpoints=(Endpoint("CONTROLLER", f"n{node.node_id}", 9093),),
        )
        node.core.tick(self.now)
        self._drain(node)

    def _check_transition(self, node: SimNode, changed: StateChanged) -> None:
        """Every state change the core makes is an edge of the quorum state's table."""
        if node.last_state is not None:
            old, old_epoch = node.last_state
            if not quorum_state.allowed(old, old_epoch, changed.state, changed.epoch):
                raise Violation(f"node {node.node_id}: illegal transition {old} (epoch {old_epoch}) -> "
                                f"{changed.state} (epoch {changed.epoch})")
        node.last_state = (changed.state, changed.epoch)

    def _on_truncate(self, node: SimNode, offset: int) -> None:
        if node.core is not None and offset < node.core.high_watermark:
            raise Violation(f"node {node.node_id} truncates to {offset} below its high watermark "
                            f"{node.core.high_watermark}")

    def _crash(self, node: SimNode) -> None:
        if node.core is None:
            return
        node.core = None
        node.tick_at = None
        unflushed = sum(1 for b in node.log.batches if b.base_offset >= node.log.flushed_offset)
        node.log.on_truncate = None
        node.log.crash(self.rng.randint(0, unflushed) if unflushed and self.rng.random() < 0.5 else 0)
        self._schedule(self.now + self.rng.randint(20, self.profile.restart_delay_max_ms), "restart",
                       (node.node_id,))

    def _delay(self) -> int:
        p = self.profile
        d = p.delay_min_ms + self.rng.randrange(p.delay_jitter_ms + 1)
        if p.long_delay_p and self.rng.random() < p.long_delay_p:
            d += self.rng.randint(200, 1200)
        return d

    def _transmit(self, src: int, dst: int, kind: str, data: tuple[object, ...]) -> None:
        if (src, dst) in self.blocked:
            return
        p = self.profile
        if self.faults_on and p.loss and self.rng.random() < p.loss:
            return
        self._schedule(self.now + self._delay(), kind, data)
        if self.faults_on and p.duplicate and self.rng.random() < p.duplicate:
            self._schedule(self.now + self._delay(), kind, data)

    def _observe_actions(self, node: SimNode, core: RaftNode, actions: Sequence[Action]) -> None:
        """For subclasses: the actions a drain took from ``core``, before any is executed."""

    def _drain(self, node: SimNode) -> None:
        """Execute the node's actions in order, maybe crashing part-way (before an fsync)."""
        core = node.core
        assert core is not None
        actions = core.take_actions()
        self._observe_actions(node, core, actions)
        for action in actions:
            if isinstance(action, StateChanged):
                self._check_transition(node, action)
            # Leadership counts from the core's decision, even if the node crashes
            # before the driver executes the rest of the list.
            if isinstance(action, StateChanged) and action.state == "leader":
                owner = self.leaders.setdefault(action.epoch, node.node_id)
                if owner != node.node_id:
                    raise Violation(f"two leaders in epoch {action.epoch}: nodes {owner} and {node.node_id}")
                node.leader_since = self.now
            elif isinstance(action, StateChanged) and action.state == "candidate":
                self._check_sticky(node, action.epoch)
        cut = len(actions)
        if (self.faults_on and self.profile.mid_action_crash_p and actions
                and any(isinstance(a, PersistElectionState | FlushLog) for a in actions)
                and self.rng.random() < self.profile.mid_action_crash_p):
            cut = self.rng.randrange(len(actions))
        for action in actions[:cut]:
            if (isinstance(action, SendRequest) and isinstance(action.request, VoteRequest)
                    and action.request.pre_vote and not self.nodes[action.destination].pre_vote):
                # The driver's version negotiation: the peer does not advertise Vote v2, so
                # the pre-vote cannot be sent and fails locally with UNSUPPORTED_VERSION.
                self._schedule(self.now + 1, "response", (
                    node.node_id, node.incarnation, action.destination, action.correlation_id,
                    VoteResponse(errors.UNSUPPORTED_VERSION, errors.NONE, -1, -1, False)))
            elif isinstance(action, SendRequest):
                rid = self._next_rid
                self._next_rid += 1
                dst = action.destination
                entry = (node.node_id, node.incarnation, action.correlation_id, dst)
                self._requests[rid] = entry
                if (node.node_id, dst) in self.blocked:
                    continue
                if self.faults_on and self.profile.loss and self.rng.random() < self.profile.loss:
                    continue
                self._schedule(self.now + self._delay(), "request", (dst, rid, action.request))
                if self.faults_on and self.profile.duplicate and self.rng.random() < self.profile.duplicate:
                    # A duplicate is a second inbound request with its own id.
                    dup = self._next_rid
                    self._next_rid += 1
                    self._requests[dup] = entry
                    self._schedule(self.now + self._delay(), "request", (dst, dup, action.request))
            elif isinstance(action, SendResponse) and action.request_id in self._admin:
                self._admin_answered(node, action.request_id, action.response)
            elif isinstance(action, SendResponse):
                pending = self._requests.pop(action.request_id, None)
                if pending is None:
                    raise Violation(f"node {node.node_id} answered unknown/duplicate request {action.request_id}")
                src, inc, corr, _ = pending
                self._transmit(node.node_id, src, "response", (src, inc, node.node_id, corr, action.response))
            elif isinstance(action, PersistElectionState):
                node.persisted = action.state
            elif isinstance(action, FlushLog):
                node.log.flush()
            elif isinstance(action, AppendCompleted):
                records = node.handles.pop(action.handle, ())
                if action.error_code == errors.NONE:
                    first = action.last_offset - len(records) + 1
                    for i, rec in enumerate(records):
                        self.acked[first + i] = rec
                        self._check_acked(first + i)
            elif isinstance(action, StateChanged):
                if action.state == "candidate":
                    self.elections += 1
            elif isinstance(action, ReadIndexCompleted):
                required = node.reads.pop(action.handle, None)
                if action.error_code == errors.NONE:
                    self.reads_done += 1
                if required is not None and action.error_code == errors.NONE and action.read_index < required:
                    raise Violation(f"stale read: node {node.node_id} answered a read barrier with read index "
                                    f"{action.read_index}, but {required} offsets were committed before it was asked")
            elif isinstance(action, FatalError):
                raise Violation(f"node {node.node_id} fatal: {action.message}")
            elif isinstance(action, HighWatermarkAdvanced):
                pass
        if cut < len(actions):
            self._crash(node)
            return
        self._reschedule_tick(node)

    def _reschedule_tick(self, node: SimNode) -> None:
        core = node.core
        if core is None:
            return
        deadline = core.next_deadline_ms()
        if deadline is None:
            node.tick_at = None
            return
        deadline = max(deadline, self.now)
        if node.tick_at is None or deadline != node.tick_at:
            node.tick_at = deadline
            self._schedule(deadline, "tick", (node.node_id, deadline))

    # --------------------------------------------------------------- faults
    def _schedule_faults(self) -> None:
        p = self.profile
        t = 0
        while True:
            t += self.rng.randint(p.append_interval_ms // 2, p.append_interval_ms * 3 // 2)
            if t >= FAULT_PHASE_MS:
                break
            self._schedule(t, "append", ())
        for interval, kind in ((p.crash_interval_ms, "crash"), (p.partition_interval_ms, "partition"),
                               (p.resign_interval_ms, "resign"), (p.snapshot_interval_ms, "snapshot"),
                               (self.reconfig_interval_ms, "reconfig")):
            if interval is None:
                continue
            t = 0
            while True:
                t += self.rng.randint(interval // 2, interval * 3 // 2)
                if t >= FAULT_PHASE_MS:
                    break
                self._schedule(t, kind, ())
        if self.transfer_interval_ms is not None:
            for t in range(self.transfer_interval_ms, FAULT_PHASE_MS, self.transfer_interval_ms):
                self._schedule(t, "transfer", ())
        # Linearizable reads (read index): every node that believes it leads is asked for a
        # read barrier at fixed times (no rng drawn, so the other faults stay as they were).
        for t in range(250, FAULT_PHASE_MS, 250):
            self._schedule(t, "read", ())
        self._schedule(FAULT_PHASE_MS, "heal", ())

    def _partition(self) -> None:
        ids = sorted(self.nodes)
        kind = self.rng.randrange(3)
        self.blocked = set()
        if kind == 0:  # isolate one node
            victim = self.rng.choice(ids)
            for o in ids:
                if o != victim:
                    self.blocked.update({(victim, o), (o, victim)})
        elif kind == 1:  # split in two groups
            group = set(self.rng.sample(ids, self.rng.randint(1, len(ids) // 2)))
            for a in ids:
                for b in ids:
                    if (a in group) != (b in group):
                        self.blocked.add((a, b))
        else:  # asymmetric: some one-way links
            for _ in range(self.rng.randint(1, len(ids))):
                a, b = self.rng.sample(ids, 2)
                self.blocked.add((a, b))
        self._schedule(self.now + self.rng.randint(300, 3000), "unpartition", ())

    # ---------------------------------------------------------------- run
    def run(self) -> Result:
        self._schedule_faults()
        end = FAULT_PHASE_MS + LIVENESS_BOUND_MS
        try:
            while self._queue:
                at, _, kind, data = heapq.heappop(self._queue)
                if at > end:
                    break
                self.now = at
                if self._step(kind, data):
                    self.events += 1
                    if self.trace is not None:
                        self.trace(f"{self.now:>7} {kind:<10} {_describe(kind, data)[:160]}\n"
                                   f"{'':>18}{self.status()}")
                    self.check()
                if not self.faults_on and self.converged():
                    return Result(self.seed, True, "ok", self.events, self.now, len(self.committed), self.elections)
            raise Violation(f"liveness: no convergence within {LIVENESS_BOUND_MS} ms after faults stopped "
                            f"({self.status()})")
        except Violation as exc:
            return Result(self.seed, False, f"t={self.now}ms: {exc}", self.events, self.now,
                          len(self.committed), self.elections)
        finally:
            self.state.close()

    def _step(self, kind: str, data: tuple[object, ...]) -> bool:
        if kind == "tick":
            nid, at = data
            node = self.nodes[nid]  # type: ignore[index]
            if node.core is None or node.tick_at != at:
                return False
            node.tick_at = None
            node.core.tick(self.now)
            after = node.core.next_deadline_ms()
            if after is not None and after <= self.now:
                raise Violation(f"node {node.node_id} ({node.core.state_name}) still has a deadline at "
                                f"{after} after ticking at {self.now}: a driver would spin")
            self._drain(node)
        elif kind == "request":
            dst, rid, request = data
            node = self.nodes.get(dst)  # type: ignore[call-overload]
            if node is None or rid not in self._requests:
                return False
            if node.core is None:
                # Connection refused: the sender learns quickly (unless the link is down).
                src, inc, corr, _ = self._requests.pop(rid)
                if (dst, src) not in self.blocked:
                    self._schedule(self.now + self._delay(), "refused", (src, inc, dst, corr))
                return False
            src = self._requests[rid][0]
            if (src, dst) in self.blocked:
                return False
            assert isinstance(request, Request.__args__)  # type: ignore[attr-defined]
            node.core.handle_request(rid, request, self.now)
            self._drain(node)
        elif kind == "response":
            to, to_inc, sender, r_corr, response = data
            node = self.nodes[to]  # type: ignore[index]
            if node.core is None or node.incarnation != to_inc or (sender, to) in self.blocked:
                return False
            self._check_reported_high_watermark(node, sender, r_corr, response)
            node.core.handle_response(sender, r_corr, response, self.now)  # type: ignore[arg-type]
            self._drain(node)
        elif kind == "refused":
            origin, o_inc, target, f_corr = data
            node = self.nodes[origin]  # type: ignore[index]
            if node.core is None or node.incarnation != o_inc:
                return False
            node.core.request_failed(target, f_corr, self.now)  # type: ignore[arg-type]
            self._drain(node)
        elif kind == "append":
            self._client_append()
        elif kind == "transfer":
            self._transfer()
        elif kind == "read":
            for node in self.nodes.values():
                if node.core is not None and node.core.is_leader:
                    handle = node.core.read_index(self.now)
                    node.reads[handle] = len(self.committed)
                    self._drain(node)
        elif kind == "crash":
            alive = [n for n in self.nodes.values() if n.core is not None]
            if alive:
                self._crash(self.rng.choice(alive))
        elif kind == "restart":
            node = self.nodes[data[0]]  # type: ignore[index]
            if node.core is None:
                self._start(node)
        elif kind == "partition":
            self._partition()
            self._update_reach()
        elif kind == "unpartition":
            if self.faults_on:
                self.blocked = set()
                self._update_reach()
        elif kind == "resign":
            for node in self.nodes.values():
                if node.core is not None and node.core.is_leader:
                    node.core.resign(self.now)
                    self._drain(node)
        elif kind == "snapshot":
            self._snapshot()
        elif kind == "reconfig":
            self._reconfigure()
        elif kind == "heal":
            self.faults_on = False
            self.blocked = set()
            self._update_reach()
            for node in self.nodes.values():
                if node.core is None:
                    self._start(node)
        return True

    def _update_reach(self) -> None:
        """Record since when each pair of nodes has been connected both ways."""
        for a in self.nodes:
            for b in self.nodes:
                up = (a, b) not in self.blocked and (b, a) not in self.blocked
                if not up:
                    self._link_up_since.pop((a, b), None)
                else:
                    self._link_up_since.setdefault((a, b), self.now)

    def _check_sticky(self, node: SimNode, epoch: int) -> None:
        """KIP-996 invariant: the epoch does not rise while a leader is reachable by a majority.

        Checked when ``node`` starts an election for ``epoch``: if a live leader of
        ``epoch - 1`` (the newest epoch anywhere else) has had a majority of voters reachable
        both ways for three fetch timeouts (time for every follower in it to have fetched,
        and for any pre-vote round begun before to end), the election is a disruption.
        """
        if not self.sticky_applies or not self.faults_on:
            return
        for other in self.nodes.values():
            core = other.core
            if other is node or core is None:
                continue
            if core.epoch >= epoch:
                return
        window = 3 * self.profile.fetch_timeout_ms
        voter_ids = self.expected_voters.ids
        for other in self.nodes.values():
            core = other.core
            if other is node or core is None or not core.is_leader or core.epoch != epoch - 1:
                continue
            if self.now - other.leader_since < window:
                continue
            steady = {v for v in voter_ids if v != other.node_id
                      and self.now - self._link_up_since.get((other.node_id, v), self.now) >= window}
            if len(steady) + 1 >= len(voter_ids) // 2 + 1:
                raise Violation(
                    f"node {node.node_id} started an election for epoch {epoch} while leader {other.node_id} "
                    f"of epoch {epoch - 1} was reachable by a majority ({sorted(steady)} for {window} ms)")

    def _snapshot(self) -> None:
        """A node snapshots the state it has applied (the real state machine, a real snapshot
        file, maybe crashing in the middle of writing it), then cleans its log below it
        (StateLayer.snapshot)."""
        alive = [n for n in self.nodes.values() if n.core is not None]
        if not alive:
            return
        node = self.rng.choice(alive)
        assert node.core is not None
        self.state.snapshot(node)

    def _reconfigure(self) -> None:
        """An admin client asks the leader to add a non-voter or remove a voter (keeping 2)."""
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if not leaders:
            return
        node = leaders[0]
        core = node.core
        assert core is not None
        voters = core.voters
        rr = self.reconfig_rng
        outside = [n for n in self.nodes.values() if n.node_id not in voters.ids]
        request: Request
        if outside and (len(voters) <= 2 or rr.random() < 0.5):
            new = rr.choice(outside)
            request = AddRaftVoterRequest(self.config.cluster_id, 30_000, new.node_id, new.directory_id,
                                          (Endpoint("CONTROLLER", f"n{new.node_id}", 9093),))
        elif len(voters) > 2:
            old = voters.node(rr.choice(sorted(voters.ids)))
            assert old is not None
            request = RemoveRaftVoterRequest(self.config.cluster_id, old.key.id, old.key.directory_id)
        else:
            return
        rid = self._next_rid
        self._next_rid += 1
        self._admin[rid] = (node.node_id, request)
        core.handle_request(rid, request, self.now)
        self._drain(node)

    def _transfer(self) -> None:
        """An admin asks the leader to transfer leadership to another voter (EndQuorumEpoch
        to the leader naming itself, one preferred candidate)."""
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if not leaders:
            return
        node = leaders[0]
        core = node.core
        assert core is not None
        others = [v for v in sorted(core.voters.ids) if v != node.node_id]
        if not others:
            return
        target = core.voters.node(self.transfer_rng.choice(others))
        assert target is not None
        rid = self._next_rid
        self._next_rid += 1
        request = EndQuorumEpochRequest(self.config.cluster_id, node.node_id, core.epoch, (target.key,))
        self._admin[rid] = (node.node_id, request)
        self._transfers[rid] = target.key.id
        core.handle_request(rid, request, self.now)
        self._drain(node)

    def _transfer_answered(self, node: SimNode, rid: int, response: object) -> None:
        """An accepted transfer: the leader resigned, and the successor's log holds every
        entry of the leader's (so it can win, and nothing the leader had is lost)."""
        target = self._transfers.pop(rid)
        if not (isinstance(response, EndQuorumEpochResponse) and response.error_code == 0
                and response.partition_error_code == 0):
            return
        successor = self.nodes[target].log
        mine = node.log
        if successor.end_offset < mine.end_offset or (
                mine.end_offset > 0 and successor.entry(mine.end_offset - 1) != mine.entry(mine.end_offset - 1)):
            raise Violation(f"node {node.node_id} handed leadership to {target}, whose log ends at "
                            f"{successor.end_offset}, short of the leader's {mine.end_offset}")
        self.transfers_done += 1

    def _admin_answered(self, node: SimNode, rid: int, response: object) -> None:
        """An acknowledged voter change must be committed and in force on the leader."""
        if rid in self._transfers:
            self._admin.pop(rid)
            self._transfer_answered(node, rid, response)
            return
        asked, request = self._admin.pop(rid)
        if asked != node.node_id:
            raise Violation(f"node {node.node_id} answered a voter change sent to node {asked}")
        ok = isinstance(response, AddRaftVoterResponse | RemoveRaftVoterResponse) and response.error_code == 0
        if not ok:
            return
        core = node.core
        assert core is not None
        offset = core.history.latest_voters_offset()
        if offset is None or offset >= core.high_watermark:
            raise Violation(f"node {node.node_id} acknowledged {request!r} before its VotersRecord committed")
        voter_id = request.voter_id  # type: ignore[union-attr]
        if isinstance(request, AddRaftVoterRequest) != (voter_id in core.voters.ids):
            raise Violation(f"node {node.node_id} acknowledged {request!r} but its voters are {core.voters}")
        self.voter_changes += 1

    def _check_voters_records(self, node: SimNode, core: RaftNode) -> None:
        """KIP-853: the voter set is never empty; a leader holds at most one uncommitted
        membership change (one add or remove at a time); committed VotersRecords agree everywhere."""
        if not core.voters.ids:
            raise Violation(f"node {node.node_id} has an empty voter set")
        uncommitted = 0
        # A new leader's own high watermark may still be stale: count against the global commit point.
        committed = max(len(self.committed), core.high_watermark)
        for batch in node.log.batches:
            if not batch.is_control or batch.last_offset < node.verified:
                continue
            for i, record in enumerate(batch.control_records()):
                offset = batch.base_offset + i
                if not isinstance(record, VotersControlRecord):
                    continue
                if offset < core.high_watermark:
                    seen = self.committed_voters.setdefault(offset, record.voters)
                    if seen != record.voters:
                        raise Violation(f"node {node.node_id} has voters {record.voters} committed at {offset}, "
                                        f"others {seen}")
                elif offset >= committed and record.voters.ids != core.history.voters_at(offset - 1).ids:
                    uncommitted += 1  # a membership change (an update of endpoints keeps majorities)
        if core.is_leader and uncommitted > 1:
            raise Violation(f"leader {node.node_id} has {uncommitted} uncommitted VotersRecords")

    def _client_append(self) -> None:
        alive = [n for n in self.nodes.values() if n.core is not None]
        if not alive:
            return
        leaders = [n for n in alive if n.core is not None and n.core.is_leader]
        node = self.rng.choice(leaders) if leaders and self.rng.random() < 0.9 else self.rng.choice(alive)
        records = []
        for _ in range(self.profile.records_per_append):
            records.append(self._next_record)
            self._next_record += 1
        assert node.core is not None
        handle = node.core.append(records, self.now)
        node.handles[handle] = tuple(records)
        self._drain(node)

    # ----------------------------------------------------------- invariants
    def _check_acked(self, offset: int) -> None:
        if offset < len(self.committed) and offset in self.acked:
            if self.committed[offset][1] != self.acked[offset]:
                raise Violation(f"acknowledged record {self.acked[offset]!r} at offset {offset} was lost: "
                                f"committed entry is {self.committed[offset]!r}")

    def check(self) -> None:
        """Safety invariants, after every event."""
        for node in self.nodes.values():
            core = node.core
            if core is None:
                continue
            hw = core.high_watermark
            log = node.log
            if hw > log.end_offset:
                raise Violation(f"node {node.node_id}: high watermark {hw} > log end {log.end_offset}")
            if hw < node.last_hw:
                raise Violation(f"node {node.node_id}: high watermark went back {node.last_hw} -> {hw}")
            node.last_hw = hw
            if not self.dynamic and core.voters != self.expected_voters:
                raise Violation(f"node {node.node_id} lost the voter set: {core.voters}")
            if self.dynamic:
                self._check_voters_records(node, core)
            # Committed prefix: compare with (or extend) the global committed record.
            for offset in range(node.verified, hw):
                entry = log.entry(offset)
                assert entry is not None
                if offset < len(self.committed):
                    if self.committed[offset] != entry:
                        raise Violation(
                            f"node {node.node_id} (epoch {core.epoch}) has {entry!r} at committed offset "
                            f"{offset}, but {self.committed[offset]!r} was committed (epoch "
                            f"{self.commit_epoch[offset]})")
                else:
                    self.committed.append(entry)
                    self.commit_epoch.append(core.epoch)
                    self._check_new_commit_on_leaders(offset)
                    self._check_acked(offset)
            node.verified = max(node.verified, hw)
            if core.is_leader:
                owner = self.leaders.setdefault(core.epoch, node.node_id)
                if owner != node.node_id:
                    raise Violation(f"two leaders in epoch {core.epoch}: nodes {owner} and {node.node_id}")
                if node.leader_checked_epoch != core.epoch:
                    node.leader_checked_epoch = core.epoch
                    self._check_leader_complete(node)
        self._check_log_matching()
        self.state.check()

    def _check_reported_high_watermark(
        self, node: SimNode, sender: object, correlation_id: object, response: object
    ) -> None:
        """Interop: a Kafka follower treats a high watermark lower than its own as fatal.

        So the leader a follower fetches from must never report a known HW below
        the follower's (a new leader reports -1 until its own epoch commits).
        """
        core = node.core
        if (
            core is None or not isinstance(response, FetchResponse) or response.error_code
            or response.partition_error_code or response.diverging_epoch is not None
            or response.snapshot_id is not None or response.high_watermark < 0
        ):
            return
        if not core.awaits_answer(sender, correlation_id):  # type: ignore[arg-type]
            return  # a stale answer the follower ignores anyway
        if (core.state_name == "follower" and core.leader_id == sender
                and response.current_leader.leader_epoch == core.epoch
                and response.high_watermark < core.high_watermark):
            raise Violation(f"leader {sender} told follower {node.node_id} high watermark "
                            f"{response.high_watermark}, below the follower's {core.high_watermark} "
                            f"(fatal for a Kafka follower)")

    def _check_leader_complete(self, node: SimNode) -> None:
        assert node.core is not None
        epoch = node.core.epoch
        for offset, entry in enumerate(self.committed):
            if self.commit_epoch[offset] <= epoch and node.log.entry(offset) != entry:
                raise Violation(f"leader {node.node_id} of epoch {epoch} lacks committed offset {offset} "
                                f"{entry!r} (has {node.log.entry(offset)!r})")

    def _check_new_commit_on_leaders(self, offset: int) -> None:
        entry = self.committed[offset]
        for node in self.nodes.values():
            core = node.core
            if core is not None and core.is_leader and core.epoch >= self.commit_epoch[offset]:
                if node.log.entry(offset) != entry:
                    raise Violation(f"leader {node.node_id} of epoch {core.epoch} lacks committed offset "
                                    f"{offset} {entry!r}")

    def _check_log_matching(self) -> None:
        logs = [n for n in self.nodes.values()]
        for i, a in enumerate(logs):
            for b in logs[i + 1:]:
                key = (a.log.version, b.log.version)
                cache = self._matched.get((a.node_id, b.node_id))
                if cache == key:
                    continue
                self._matched[(a.node_id, b.node_id)] = key
                la, lb = a.log, b.log
                short, other = (la, lb) if la.end_offset <= lb.end_offset else (lb, la)
                for idx in range(len(short.batches) - 1, -1, -1):
                    batch = short.batches[idx]
                    j = other.index_of_base(batch.base_offset)
                    if j is None or other.batches[j].epoch != batch.epoch:
                        continue
                    if other.hashes[j] != short.hashes[idx]:
                        raise Violation(f"log matching: nodes {a.node_id} and {b.node_id} both have epoch "
                                        f"{batch.epoch} at offset {batch.base_offset} but different prefixes")
                    break

    # ------------------------------------------------------------ liveness
    def converged(self) -> bool:
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if len(leaders) != 1:
            return False
        leader = leaders[0]
        assert leader.core is not None
        epoch, hw = leader.core.epoch, leader.core.high_watermark
        if hw != leader.log.end_offset:
            return False
        for node in self.nodes.values():
            core = node.core
            if core is None or core.epoch != epoch or core.leader_id != leader.node_id:
                return False
            if core.high_watermark != hw or node.log.end_offset != hw:
                return False
        # Every voter's entry names its real endpoint (stale ones were updated).
        return all(not v.endpoints[0].host.startswith("stale-") for v in leader.core.voters)

    def status(self) -> str:
        parts = []
        for node in self.nodes.values():
            core = node.core
            if core is None:
                parts.append(f"{node.node_id}:down")
            else:
                parts.append(f"{node.node_id}:{core.state_name}/e{core.epoch}/L{core.leader_id}/"
                             f"hw{core.high_watermark}/end{node.log.end_offset}")
        return " ".join(parts)


def _describe(kind: str, data: tuple[object, ...]) -> str:
    if kind == "request":
        return f"to {data[0]}: {data[2]!r}"
    if kind == "response":
        return f"{data[2]} -> {data[0]}: {data[4]!r}"
    return " ".join(map(str, data))


def run_seed(seed: int, voters: int = 3, observers: int = 1, plant: str | None = None,
             trace: Callable[[str], None] | None = None) -> Result:
    sim = Simulation(seed, voters, observers, plant)
    sim.trace = trace
    return sim.run()


def profile_of(seed: int, voters: int = 3, observers: int = 1) -> str:
    sim = Simulation(seed, voters, observers)
    sim.state.close()
    return describe(sim.profile)
