"""KIP-853's standalone flow inside the raft simulation: a quorum formatted ``--standalone``
(one voter) grows by AddRaftVoter, at a person's pace, and never holds an election for it.

Node 1 bootstraps alone (the bootstrap VotersRecord names only it); nodes 2..N start as
observers (``--no-initial-controllers``) and fetch from the leader. An operator then adds
2, 3, ..., N one at a time, removes one of them that is not the leader and adds it back,
each step more than one check-quorum timeout (1.5 x the fetch timeout) after the last, as a
person types. The network delays and duplicates messages but neither loses nor partitions
them, and nothing crashes or resigns: nothing gives a voter a reason to start an election.

Invariants, on top of :class:`Simulation`'s:

* no election: once the first leader is elected, no node becomes prospective or
  candidate and no node's epoch rises (leader and epoch stay as they are throughout);
* every step succeeds (the AddRaftVoter / RemoveRaftVoter answer is NONE), or is answered
  REQUEST_TIMED_OUT when the simulated network is slow against the request timeout, and is
  then run again;
* liveness: the whole script is done and the quorum converged once the faults stop.

The planted bug ``check_quorum_ignores_observers`` is the rule this file was written for:
a leader alone in its voter set that does not renew its check-quorum deadline on observers'
fetches (Kafka renews it on every fetch while no other voter is needed,
LeaderState.updateCheckQuorumForFollowingVoter) resigns right after its first AddRaftVoter.
"""

from __future__ import annotations

import dataclasses
import random
from unittest import mock

from kraftnode.raft import errors
from kraftnode.raft.actions import StateChanged
from kraftnode.raft.messages import AddRaftVoterRequest, RemoveRaftVoterRequest, Request
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.tracker import ReplicaTracker
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterSet
from tests.simulation.sim import SimNode, Simulation, Violation


class _ObserverBlindTracker(ReplicaTracker):
    """The rule before the fix: only voters' fetches count, so a lone leader's deadline
    is never renewed."""

    def record_voter_contact(self, key: ReplicaKey, now_ms: int) -> None:
        if key.id == self.local_key.id or not self.voter_set.is_voter(key):
            return
        super().record_voter_contact(key, now_ms)


class _CheckQuorumIgnoresObservers(RaftNode):
    def replica_tracker(self, epoch: int, epoch_start: int, voters: VoterSet, now_ms: int) -> ReplicaTracker:
        return _ObserverBlindTracker(self.local_key, epoch, epoch_start, voters, now_ms,
                                     self.config.check_quorum_timeout_ms)


PLANTS: dict[str, type[RaftNode]] = {
    "check_quorum_ignores_observers": _CheckQuorumIgnoresObservers,
}


class GrowSimulation(Simulation):
    """``voters`` is the size the quorum grows to; ``observers`` stay observers."""

    always_dynamic = True

    def __init__(self, seed: int, voters: int = 3, observers: int = 1, plant: str | None = None) -> None:
        self.node_class: type[RaftNode] = PLANTS[plant] if plant else RaftNode
        self._starting: int | None = None  # the node being started (its first StateChanged)
        self.final_voters = voters
        self.first_leader: tuple[int, int] | None = None  # (node id, epoch)
        super().__init__(seed, 1, voters - 1 + observers)
        self.grow_rng = random.Random(f"kraftnode-sim-grow-{seed}")
        self._calm()
        self.reconfig_interval_ms = None
        self.transfer_interval_ms = None
        self.sticky_applies = False  # the stronger invariant below replaces it
        self.check_quorum_ms = self.config.check_quorum_timeout_ms
        self.steps: list[tuple[str, int]] = [("add", i) for i in range(2, voters + 1)]
        self.steps_done: list[str] = []
        self._tries: dict[tuple[str, int], int] = {}
        self.retries = 0  # steps answered REQUEST_TIMED_OUT (a slow simulated network) and run again
        self._step_pending: int | None = None  # admin rid of the step in flight

    def _calm(self) -> None:
        """Calm: delays and duplicates only. Snapshots and client appends go on."""
        self.profile = dataclasses.replace(
            self.profile, crash_interval_ms=None, mid_action_crash_p=0.0, loss=0.0, long_delay_p=0.0,
            resign_interval_ms=None, partition_interval_ms=None)

    def _start(self, node: SimNode) -> None:
        # Calm from the first node's start: the lone voter leads (and flushes) as it starts,
        # inside Simulation.__init__, where a mid-action crash must not strike either.
        self._calm()
        # A node's first state, announced as it starts, is no election: the lone voter leads
        # from its start (Kafka's initialize), before the other replicas even exist.
        self._starting = node.node_id
        try:
            with mock.patch("tests.simulation.sim.RaftNode", getattr(self, "node_class", RaftNode)):
                super()._start(node)
        finally:
            self._starting = None

    def _pace(self) -> int:
        """A person's pause: longer than a check-quorum timeout (up to 1.5 of them, so that
        the 5-voter script of 6 steps ends within the run's bound)."""
        return self.grow_rng.randint(self.check_quorum_ms + 1, 3 * self.check_quorum_ms // 2)

    def _schedule_faults(self) -> None:
        super()._schedule_faults()
        self._schedule(2 * self.profile.election_timeout_ms + self._pace(), "grow", ())

    def _check_transition(self, node: SimNode, changed: StateChanged) -> None:
        super()._check_transition(node, changed)
        if changed.state == "leader" and self.first_leader is None:
            self.first_leader = (node.node_id, changed.epoch)
            return
        if self.first_leader is None:
            return
        if getattr(self, "_starting", None) == node.node_id and changed.state == "unattached":
            return
        if changed.state in ("resigned", "prospective", "candidate") or changed.epoch != self.first_leader[1]:
            raise Violation(
                f"node {node.node_id} became {changed.state} in epoch {changed.epoch}: an election "
                f"nobody asked for (leader {self.first_leader[0]} of epoch {self.first_leader[1]}; no "
                f"crash, loss or partition; steps done: {', '.join(self.steps_done) or 'none'})")

    def _step(self, kind: str, data: tuple[object, ...]) -> bool:
        if kind == "grow":
            self._grow()
            return True
        return super()._step(kind, data)

    def _grow(self) -> None:
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if len(leaders) != 1:
            raise Violation(f"no single leader to take step {self.steps[0]} ({self.status()})")
        node = leaders[0]
        core = node.core
        assert core is not None
        if not self.steps and len(self.steps_done) == self.final_voters - 1:
            # Remove one voter that is not the leader, then add it back.
            victim = self.grow_rng.choice(sorted(v for v in core.voters.ids if v != node.node_id))
            self.steps = [("remove", victim), ("add", victim)]
        verb, target = self.steps.pop(0)
        self._tries[(verb, target)] = self._tries.get((verb, target), 0) + 1
        new = self.nodes[target]
        request: Request
        if verb == "add":
            request = AddRaftVoterRequest(self.config.cluster_id, 30_000, target, new.directory_id,
                                          (Endpoint("CONTROLLER", f"n{target}", 9093),))
        else:
            request = RemoveRaftVoterRequest(self.config.cluster_id, target, new.directory_id)
        rid = self._next_rid
        self._next_rid += 1
        self._admin[rid] = (node.node_id, request)
        self._step_pending = rid
        core.handle_request(rid, request, self.now)
        self._drain(node)

    def _admin_answered(self, node: SimNode, rid: int, response: object) -> None:
        request = self._admin[rid][1]
        super()._admin_answered(node, rid, response)
        if rid != self._step_pending:
            return
        self._step_pending = None
        code = getattr(response, "error_code", None)
        verb = "add" if isinstance(request, AddRaftVoterRequest) else "remove"
        voter_id = request.voter_id  # type: ignore[union-attr]
        if code == errors.REQUEST_TIMED_OUT:
            # The change did not complete within controller.quorum.request.timeout.ms (as low
            # as 300 ms here, with up to 155 ms per message): "not yet", as the Admin client
            # reads it. The operator runs the same step again.
            self.retries += 1
            self.steps.insert(0, (verb, voter_id))
            self._schedule(self.now + self.check_quorum_ms // 4, "grow", ())
            return
        retried = self._tries.get((verb, voter_id), 0) > 1
        already = voter_id in node.core.voters.ids if node.core is not None else False
        if retried and ((code == errors.DUPLICATE_VOTER and already)
                        or (code == errors.VOTER_NOT_FOUND and not already)):
            # The timed-out try went through after all (its VotersRecord committed later):
            # the operator sees the change made, as `kraftnode quorum` reports it.
            code = errors.NONE
        if code != errors.NONE:
            raise Violation(f"{verb} voter {voter_id} failed: {errors.name(code)} "
                            f"(steps done: {', '.join(self.steps_done) or 'none'})")
        self.steps_done.append(f"{verb} {voter_id}")
        if not self.script_done:
            self._schedule(self.now + self._pace(), "grow", ())

    @property
    def script_done(self) -> bool:
        """Adds of 2..N, then a remove and an add back: N + 1 steps."""
        return len(self.steps_done) == self.final_voters + 1

    def converged(self) -> bool:
        return self.script_done and super().converged()
