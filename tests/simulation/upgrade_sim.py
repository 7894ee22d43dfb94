"""The static-to-dynamic upgrade (kraft.version 0 -> 1, Kafka 4.1) and controller auto-join
(Kafka 4.x) inside the raft simulation, with every fault of a seed.

A run starts as a static quorum (``controller.quorum.voters``: the seeds whose draw is
static) whose observers have ``auto_join`` on. An operator asks whoever leads to upgrade
kraft.version to 1 every 300 ms until an upgrade commits (before that the leader refuses:
not every voter has told it its directory id and kraft.version range yet). Once the
dynamic voter set is committed, the observers add themselves as voters, and -- in seeds
that draw it -- a voter loses its disk: it restarts with an empty log, no election state
and a new directory id, and must remove its old entry and add itself back (KIP-856 by
auto-join) while its old entry may still count in majorities.

Invariants, on top of :class:`Simulation`'s (at most one leader per epoch, committed
entries never change, acknowledged writes are never lost, log matching, at most one
uncommitted membership change on a leader, committed VotersRecords agree everywhere):

* the upgrade keeps the membership: the first VotersRecord of any log names exactly the
  static voters, each with its real directory id;
* the voter set changes one voter at a time: consecutive VotersRecords of a log differ by
  at most one (id, directory id);
* no replica votes or counts under a directory id it does not have: a voter entry with a
  node's id names that node's current or a previous (lost) directory id;
* liveness: after the faults stop, the upgrade has committed and every node -- the
  observers and the re-formatted voter -- is a voter under its current directory id.

Planted bugs (``PLANTS``) are injected here in the tests, by subclassing the core: one
leader learns observers into the upgrade's voter set; one leader admits a voter change
while another is uncommitted (which concurrent auto-joins then expose).
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import uuid
from collections.abc import Sequence
from unittest import mock

from kraftnode.raft import errors
from kraftnode.raft.actions import Action, AppendCompleted
from kraftnode.raft.batches import KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.states import LeaderState
from kraftnode.raft.voters import ReplicaKey, VoterNode, VoterSet
from tests.simulation.sim import Result, SimNode, Simulation, Violation
from tests.simulation.state_layer import StateSimLog

UPGRADE_EVERY_MS = 300


class _UpgradeLearnsObservers(RaftNode):
    """Planted: the leader takes any fetcher with a directory id into the set the upgrade
    will write -- observers become voters all at once."""

    def learn_directory_id(self, st: LeaderState, key: ReplicaKey) -> None:
        volatile = st.tracker.volatile_voters
        if volatile is not None and key.directory_id is not None and key.id not in volatile.ids:
            st.tracker.volatile_voters = VoterSet.of([*volatile, VoterNode(key, (), 0, 1)])
        super().learn_directory_id(st, key)


class _ConcurrentVoterChanges(RaftNode):
    """Planted: the leader admits an add or remove while another is pending or its
    VotersRecord is uncommitted (only the high watermark must be known)."""

    def voter_change_precheck(self, st: LeaderState, verb: str, now_ms: int) -> tuple[int, str] | None:
        if not st.tracker.high_watermark_known or self.history.kraft_version() < 1:
            return super().voter_change_precheck(st, verb, now_ms)
        return None


PLANTS: dict[str, type[RaftNode]] = {
    "upgrade_learns_observers": _UpgradeLearnsObservers,
    "concurrent_voter_changes": _ConcurrentVoterChanges,
}


def static_seeds(start: int, count: int, voters: int = 3, observers: int = 1) -> list[int]:
    """Seeds whose draw is a static quorum (the upgrade starts from kraft.version 0)."""
    out: list[int] = []
    seed = start
    while len(out) < count:
        sim = Simulation(seed, voters, observers)
        sim.state.close()   # only its draw is wanted: remove the state directory it made
        if not sim.dynamic:
            out.append(seed)
        seed += 1
    return out


class UpgradeSimulation(Simulation):
    def __init__(self, seed: int, voters: int = 3, observers: int = 1, plant: str | None = None) -> None:
        self.node_class: type[RaftNode] = PLANTS[plant] if plant else RaftNode
        super().__init__(seed, voters, observers)
        if self.dynamic:
            raise ValueError(f"seed {seed} draws a dynamic quorum: use static_seeds()")
        self.static_voters = self.expected_voters
        # After the upgrade the voter set is dynamic: Simulation's dynamic checks apply
        # (committed VotersRecords agree, one uncommitted membership change on a leader).
        self.dynamic = True
        # The stickiness invariant counts majorities of the fixed static set; here the set
        # changes (auto-join), so it is checked in Simulation's own seeds only.
        self.sticky_applies = False
        self.upgrade_rng = random.Random(f"kraftnode-sim-upgrade-{seed}")
        self.upgrade_handles: dict[tuple[int, int], int] = {}  # (node, handle) -> epoch
        self.upgraded = False  # an upgrade's control batch is committed
        self.lose_disk = self.upgrade_rng.random() < 0.5
        self.disk_lost: int | None = None
        self.reformatted: set[int] = set()
        self.upgrade_offset = -1  # the upgrade's control batch (last offset), once committed
        #: every directory id each node has had (a lost disk leaves an old one behind)
        self.past_dirs: dict[int, set[uuid.UUID]] = {n.node_id: {n.directory_id} for n in self.nodes.values()}

    # ------------------------------------------------------------ plumbing
    def _start(self, node: SimNode) -> None:
        cls = getattr(self, "node_class", RaftNode)
        saved, saved_voters = self.config, self.voter_set
        self.config = dataclasses.replace(saved, auto_join=True)
        if node.node_id in getattr(self, "reformatted", ()):
            # Re-formatted with --no-initial-controllers and started with
            # controller.quorum.bootstrap.servers: no static voter set of its own.
            self.voter_set = VoterSet()
        try:
            with mock.patch("tests.simulation.sim.RaftNode", cls):
                super()._start(node)
        finally:
            self.config, self.voter_set = saved, saved_voters

    def _schedule_faults(self) -> None:
        super()._schedule_faults()
        for t in range(UPGRADE_EVERY_MS, 3 * 60_000, UPGRADE_EVERY_MS):
            self._schedule(t, "upgrade", ())
        if self.lose_disk:
            self._schedule(self.upgrade_rng.randint(4000, 10_000), "lose_disk", ())

    def _step(self, kind: str, data: tuple[object, ...]) -> bool:
        if kind == "upgrade":
            if self.upgraded:
                return False
            for node in self.nodes.values():
                core = node.core
                if core is not None and core.is_leader:
                    code, message, handle = core.upgrade_kraft_version(1, False, self.now)
                    if code == errors.NONE and handle > 0:
                        self.upgrade_handles[(node.node_id, handle)] = core.epoch
                    elif code == errors.NONE and core.history.kraft_version() == 1:
                        # Already upgraded (an earlier leader's batch, whose answer was lost
                        # with that leadership): done once it is committed.
                        at = core.history._version_offsets[-1]
                        if at < core.high_watermark:
                            self.upgraded, self.upgrade_offset = True, at + 1
                    elif code not in (errors.NONE, errors.INVALID_UPDATE_VERSION, errors.NOT_LEADER_OR_FOLLOWER):
                        raise Violation(f"upgrade on leader {node.node_id}: error {code} {message}")
                    self._drain(node)
            return True
        if kind == "lose_disk":
            if not self.upgraded:
                self._schedule(self.now + 500, "lose_disk", ())
                return False
            self._lose_disk()
            return True
        return super()._step(kind, data)

    def _lose_disk(self) -> None:
        """A voter's log directory is lost while it is down; it comes back re-formatted
        (``--no-initial-controllers``): empty log, no election state, new directory id."""
        leader = next((n for n in self.nodes.values() if n.core is not None and n.core.is_leader), None)
        # The runbook's precondition: every replica has the upgrade durably (a voter that
        # still runs the static set could otherwise win a vote from the re-formatted one,
        # whose static view has no directory id to refuse it by: docs/operations.md).
        if leader is None or leader.core is None or any(
                n.core is None or n.log.flushed_offset <= self.upgrade_offset for n in self.nodes.values()):
            self._schedule(self.now + 500, "lose_disk", ())
            return
        voters = [v for v in sorted(leader.core.voters.ids) if v != leader.node_id]
        if not voters:
            return
        victim = self.nodes[self.upgrade_rng.choice(voters)]
        self._crash(victim)
        victim.log = StateSimLog()
        # The disk holds the snapshot files too: they go with it.
        lost = self.state.nodes.pop(victim.node_id, None)
        if lost is not None:
            shutil.rmtree(lost.dir, ignore_errors=True)
        victim.persisted = type(victim.persisted)(0)
        victim.directory_id = uuid.UUID(int=self.upgrade_rng.getrandbits(128))
        self.past_dirs[victim.node_id].add(victim.directory_id)
        self.disk_lost = victim.node_id
        self.reformatted.add(victim.node_id)
        # Its committed entries must come back from the others: forget what was verified.
        victim.verified = 0
        self._matched = {k: v for k, v in self._matched.items() if victim.node_id not in k}

    def _observe_actions(self, node: SimNode, core: RaftNode, actions: Sequence[Action]) -> None:
        for a in actions:
            if isinstance(a, AppendCompleted) and (node.node_id, a.handle) in self.upgrade_handles:
                self.upgrade_handles.pop((node.node_id, a.handle))
                if a.error_code == errors.NONE:
                    if core.history.kraft_version() != 1:
                        raise Violation(f"node {node.node_id} acknowledged the upgrade at kraft.version "
                                        f"{core.history.kraft_version()}")
                    self.upgraded = True
                    self.upgrade_offset = a.last_offset

    # ----------------------------------------------------------- invariants
    def _check_voters_records(self, node: SimNode, core: RaftNode) -> None:
        if node.node_id in self.reformatted and not core.voters.ids:
            return  # re-formatted, it knows no voters until it has fetched the log
        super()._check_voters_records(node, core)

    def check(self) -> None:
        super().check()
        for node in self.nodes.values():
            if node.core is None:
                continue
            previous: VoterSet | None = None
            for batch in node.log.batches:
                if not batch.is_control:
                    continue
                for record in batch.control_records():
                    if not isinstance(record, VotersControlRecord):
                        continue
                    vs = record.voters
                    if any(isinstance(r, KRaftVersionControlRecord) for r in batch.control_records()):
                        self._check_upgrade_record(node, vs)  # the upgrade's batch
                    elif previous is not None:
                        changed = set(previous.keys()) ^ set(vs.keys())
                        if len(changed) > 1:
                            raise Violation(f"node {node.node_id}: voter set changed by more than one voter: "
                                            f"{sorted(previous.ids)} -> {sorted(vs.ids)}")
                    for v in vs:
                        if v.key.directory_id not in self.past_dirs[v.key.id]:
                            raise Violation(f"node {node.node_id}: voter {v.key} under a directory id "
                                            f"node {v.key.id} never had")
                    previous = vs

    def _check_upgrade_record(self, node: SimNode, vs: VoterSet) -> None:
        if vs.ids != self.static_voters.ids:
            raise Violation(f"node {node.node_id}: the upgrade's voter set {sorted(vs.ids)} is not the static "
                            f"set {sorted(self.static_voters.ids)}")
        for v in vs:
            if v.key.directory_id is None:
                raise Violation(f"node {node.node_id}: the upgrade wrote voter {v.key.id} without a directory id")

    def converged(self) -> bool:
        if not self.upgraded or not super().converged():
            return False
        leader = next(n for n in self.nodes.values() if n.core is not None and n.core.is_leader)
        assert leader.core is not None
        want = {n.node_id: n.directory_id for n in self.nodes.values()}
        return {v.key.id: v.key.directory_id for v in leader.core.voters} == want


def run_upgrade_seed(seed: int, voters: int = 3, observers: int = 1, plant: str | None = None) -> Result:
    return UpgradeSimulation(seed, voters, observers, plant).run()
