"""What a rule may use of the node: the core's internal API, declared.

Every rule in :mod:`kraftnode.raft.rules` is a function taking the node as
``node: RaftCore``. :class:`~kraftnode.raft.raft_node.RaftNode` implements this
protocol; the rules never import it, nor touch anything private of it (a test
fails when this package reaches for a private attribute of the node). It offers:

* **what the node is** (read-only): identity, configuration, log, injected ``rng``;
* **queries** of the current state (the epoch state, the voter set, ...);
* **primitives**, the only ways a rule acts: ``respond``, ``send``, ``can_send``,
  ``backoff``, ``transition``, ``emit``, ``flush``, ``fail``;
* **the rules a test may replace**: the few rules other rules call through the node,
  so that a planted bug (``tests/simulation/plants.py``) subclassing ``RaftNode`` takes
  effect. Every other rule calls the next one as a plain function.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from kraftnode.raft.actions import Action
from kraftnode.raft.history import VoterSetHistory
from kraftnode.raft.log import RaftLog
from kraftnode.raft.messages import DivergingEpoch, FetchResponse, Request, Response
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.snapshots import SnapshotStore
from kraftnode.raft.states import EpochState, LeaderState
from kraftnode.raft.tracker import ReplicaProgress, ReplicaTracker
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterSet


class RaftCore(Protocol):
    """The node as its rules see it."""

    # ---- what the node is
    @property
    def local_key(self) -> ReplicaKey: ...
    @property
    def config(self) -> RaftConfig: ...
    @property
    def log(self) -> RaftLog: ...
    @property
    def rng(self) -> random.Random:
        """The injected randomness (election timer and backoff draws)."""
        ...
    @property
    def local_endpoints(self) -> tuple[Endpoint, ...]: ...
    @property
    def local_kraft_versions(self) -> tuple[int, int]: ...
    @property
    def bootstrap_servers(self) -> Sequence[int]: ...
    @property
    def snapshots(self) -> SnapshotStore | None: ...

    # ---- what the rules keep on the node
    #: Voter sets and kraft.version by offset (replaced when a snapshot is installed).
    history: VoterSetHistory
    #: Exclusive: every offset below is committed. Never decreases.
    high_watermark: int
    #: An observer without a leader: how many bootstrap servers it has tried (round robin).
    bootstrap_index: int

    # ---- queries
    @property
    def state(self) -> EpochState: ...
    @property
    def epoch(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def voters(self) -> VoterSet:
        """The latest voter set (uncommitted VotersRecords included)."""
        ...
    @property
    def is_voter(self) -> bool: ...
    @property
    def failed(self) -> bool: ...
    @property
    def voted_key(self) -> ReplicaKey | None:
        """The vote on record for the current epoch (ours as a candidate)."""
        ...
    def any_in_flight(self) -> bool:
        """A request to some destination awaits its answer."""
        ...
    def is_busy(self, destination: int) -> bool:
        """A request to ``destination`` awaits its answer or its retry backoff is pending
        (sending there waits for that, so no timer of its own is needed)."""
        ...

    # ---- primitives
    def respond(self, request_id: int, response: Response) -> None:
        """Answer the inbound request ``request_id``."""
        ...
    def send(self, destination: int, request: Request, now_ms: int, *, fetch_offset: int = -1,
             endpoints: tuple[Endpoint, ...] | None = None, read_round: int = -1) -> None:
        """Send ``request`` (the one request in flight to ``destination``; check
        :meth:`can_send` first). ``fetch_offset``/``read_round`` are remembered for the answer."""
        ...
    def can_send(self, destination: int, now_ms: int) -> bool: ...
    def backoff(self, destination: int, now_ms: int) -> None:
        """Wait ``retry_backoff_ms`` before sending to ``destination`` again."""
        ...
    def transition(self, new_state: EpochState) -> None:
        """Move to ``new_state`` through the quorum state's table: persists the election
        state first, forgets requests in flight, closes a leader state, reports the change."""
        ...
    def emit(self, *actions: Action) -> None:
        """Hand ``actions`` to the driver, in order."""
        ...
    def flush(self, end_offset: int) -> None:
        """A ``FlushLog`` barrier up to ``end_offset``; it replaces a ``FlushLog`` emitted
        right before it (appends between two drains are fsynced once)."""
        ...
    def fail(self, error_code: int, message: str) -> None:
        """Stop the node for good (``FatalError``): it ignores every later event."""
        ...

    # ---- the rules a test may replace (see kraftnode.raft.raft_node)
    def replica_tracker(self, epoch: int, epoch_start: int, voters: VoterSet, now_ms: int) -> ReplicaTracker: ...
    def grants_vote(self, candidate: ReplicaKey, up_to_date: bool) -> bool: ...
    def grants_pre_vote(self, up_to_date: bool) -> bool: ...
    def on_diverging_epoch(self, source: int, resp: FetchResponse, diverging: DivergingEpoch,
                           now_ms: int) -> None: ...
    def read_round_confirmed(self, st: LeaderState, majority_round: int) -> int: ...
    def transfer_target_caught_up(self, progress: ReplicaProgress | None) -> bool: ...
    def learn_directory_id(self, st: LeaderState, key: ReplicaKey) -> None: ...
    def voter_change_precheck(self, st: LeaderState, verb: str, now_ms: int) -> tuple[int, str] | None: ...
