"""The Raft core: KIP-595 with KIP-853's voter model, as a deterministic state machine.

Events in (``tick``, ``handle_request``, ``handle_response``, ``request_failed``,
``append``, ``resign``), actions out (:mod:`kraftnode.raft.actions`), in the style
of etcd's Step/Ready. The core never reads a clock, opens a socket or file, or
draws randomness of its own: time comes with every event and the ``random.Random``
is injected, so a seed replays a run exactly.

Ordering contract: a transition that changes the durable election state emits
``PersistElectionState`` *before* any send that depends on it (a vote, a
BeginQuorumEpoch answer); a follower emits ``FlushLog`` after appending and before
its next Fetch (the fetch offset acknowledges durable data); a leader emits
``FlushLog`` before counting its own log towards the high watermark, and commit
notifications come after it.

Floor plan: this module is the public event API and the few primitives the rules act
through. Messages are routed by type (as Kafka's KafkaRaftClient.handleRequest/
handleResponse switch on the API key) to the rules in :mod:`kraftnode.raft.rules`, plain
functions of the node typed against :class:`~kraftnode.raft.rules.port.RaftCore` (which
this class implements); what depends on the current state (timers, requests owed,
deadlines) is looked up per state in :mod:`kraftnode.raft.rules.per_state`; every state
change goes through :class:`~kraftnode.raft.quorum_state.QuorumState`'s transition
table; what only a leader owes lives in :class:`~kraftnode.raft.states.LeaderState`,
which fails it when leadership ends (``close``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

from kraftnode.raft import errors, reconfig
from kraftnode.raft.actions import (
    Action,
    AppendCompleted,
    FatalError,
    FlushLog,
    PersistElectionState,
    ReadIndexCompleted,
    SendRequest,
    SendResponse,
    StateChanged,
)
from kraftnode.raft.batches import ControlRecord
from kraftnode.raft.election import ElectionState
from kraftnode.raft.history import VoterSetHistory
from kraftnode.raft.inflight import InFlight
from kraftnode.raft.log import RaftLog
from kraftnode.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumData,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    Request,
    Response,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.quorum_state import QuorumState
from kraftnode.raft.rules import (
    elections,
    epochs,
    leadership,
    per_state,
    replication,
    snapshot_transfer,
    voter_changes,
)
from kraftnode.raft.snapshots import SnapshotStore
from kraftnode.raft.states import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    UnattachedState,
)
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterSet


class RaftNode:
    """One replica's consensus state machine (voter or observer)."""

    def __init__(
        self,
        local_id: int,
        local_directory_id: uuid.UUID | None,
        config: RaftConfig,
        log: RaftLog,
        election: ElectionState,
        static_voters: VoterSet,
        rng: random.Random,
        now_ms: int,
        *,
        local_endpoints: tuple[Endpoint, ...] = (),
        bootstrap_servers: Sequence[int] = (),
        snapshots: SnapshotStore | None = None,
        local_kraft_versions: tuple[int, int] = reconfig.SUPPORTED_KRAFT_VERSIONS,
    ) -> None:
        self.local_key = ReplicaKey.of(local_id, local_directory_id)
        self.config = config
        self.log = log
        self.rng = rng
        self.local_endpoints = local_endpoints
        #: The kraft.version range this replica supports (ApiVersions, UpdateRaftVoter).
        self.local_kraft_versions = local_kraft_versions
        self.bootstrap_servers = list(bootstrap_servers)
        self.snapshots = snapshots
        self.history = VoterSetHistory.load(static_voters, log)
        #: Exclusive: every offset below is committed. Never decreases.
        self.high_watermark = 0
        #: An observer without a leader: how many bootstrap servers it has tried.
        self.bootstrap_index = 0
        self._actions: list[Action] = []
        #: The one request in flight per destination, and the retry backoffs.
        self._inflight: dict[int, InFlight] = {}
        self._backoff_until: dict[int, int] = {}
        self._next_correlation = 1
        self._next_handle = 1
        self._failed = False
        self.quorum = QuorumState(self.local_key, election, UnattachedState(0, None))
        self.quorum.state = epochs.initial_state(self, election, now_ms)
        self._persist(self.quorum.record(self.quorum.election_of(self.state)))
        self._emit_state_changed()
        # Kafka's initialize: a candidate whose own vote is a majority wins at once
        # (onBecomeCandidate), and a lone voter in any other state stands at once
        # (isOnlyVoter && !isCandidate) rather than waiting out an election timeout.
        st = self.state
        if isinstance(st, CandidateState):
            elections.maybe_win(self, st, now_ms)
        elif len(self.voters) == 1 and self.voters.is_voter(self.local_key):
            elections.become_candidate(self, now_ms)

    # ================================================================ queries
    @property
    def state(self) -> EpochState:
        """The current epoch state (Kafka's EpochState), kept by :attr:`quorum`."""
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def state_name(self) -> str:
        return self.state.name

    @property
    def voters(self) -> VoterSet:
        """The latest voter set (including uncommitted VotersRecords)."""
        return self.history.latest()

    @property
    def is_voter(self) -> bool:
        return self.voters.is_voter(self.local_key)

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    @property
    def election_state(self) -> ElectionState:
        return self.quorum.election

    @property
    def voted_key(self) -> ReplicaKey | None:
        """The vote on record for the current epoch (ours as a candidate)."""
        return self.quorum.voted_key

    @property
    def failed(self) -> bool:
        return self._failed

    def any_in_flight(self) -> bool:
        """A request to some destination awaits its answer."""
        return bool(self._inflight)

    def is_busy(self, destination: int) -> bool:
        """A request to ``destination`` awaits its answer or its retry backoff is pending."""
        return destination in self._inflight or destination in self._backoff_until

    def awaits_answer(self, source_id: int, correlation_id: int) -> bool:
        """Whether :meth:`handle_response` would take this answer (it answers the request in
        flight to ``source_id``; anything else is stale and ignored)."""
        inflight = self._inflight.get(source_id)
        return inflight is not None and inflight.correlation_id == correlation_id

    def take_actions(self) -> list[Action]:
        """Hand the accumulated actions to the driver (it must execute them in order)."""
        out = self._actions
        self._actions = []
        return out

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` must next be called (None: only on the next event)."""
        times: list[int] = [f.deadline for f in self._inflight.values()]
        times.extend(self._backoff_until.values())
        per_state.DEADLINES[self.state.name](self, times)
        return min(times) if times else None

    def describe_quorum(self, now_ms: int) -> DescribeQuorumData:
        """The leader's DescribeQuorum view (KIP-836 fields); an error elsewhere."""
        return replication.describe_quorum(self, now_ms)

    # ---- typed queries for the server (issue 13): what handlers may ask the core
    def leader_and_epoch(self) -> tuple[int, int]:
        """(leader id or -1, epoch): what a NOT_LEADER answer's CurrentLeader carries."""
        return self.leader_id, self.epoch

    def epoch_start_offset(self) -> int | None:
        """The offset at which this leader's epoch began (its log end when elected);
        None when not the leader. KIP-207: LATEST is not offered below it."""
        st = self.state
        return st.tracker.epoch_start_offset if isinstance(st, LeaderState) else None

    def append_records(self, records: Sequence[object], now_ms: int) -> tuple[int, int]:
        """:meth:`append`, also returning the base offset the log assigned to the batch
        (-1 when refused): (handle, base offset). ``append`` keeps returning the handle
        alone; the offset is read here, in the core that owns the log, not guessed by callers."""
        base = self.log.end_offset if isinstance(self.state, LeaderState) else -1
        handle = self.append(records, now_ms)
        return handle, base if self.log.end_offset > base >= 0 else -1

    # ================================================================ events
    def tick(self, now_ms: int) -> None:
        """Time has advanced to ``now_ms``: fire due timers, send due requests."""
        if self._failed:
            return
        for dest, inflight in list(self._inflight.items()):
            if inflight.deadline <= now_ms:
                del self._inflight[dest]
                self._backoff_until[dest] = now_ms + self.config.retry_backoff_ms
        for dest, until in list(self._backoff_until.items()):
            if until <= now_ms:
                del self._backoff_until[dest]
        per_state.TICK[self.state.name](self, now_ms)
        self._poll(now_ms)

    def handle_request(self, request_id: int, request: Request, now_ms: int) -> None:
        """An inbound request; the answer is a ``SendResponse(request_id, ...)`` (maybe later)."""
        if self._failed:
            return
        if isinstance(request, VoteRequest):
            self.on_vote_request(request_id, request, now_ms)
        elif isinstance(request, FetchRequest):
            replication.on_fetch_request(self, request_id, request, now_ms)
        elif isinstance(request, BeginQuorumEpochRequest):
            leadership.on_begin_quorum_epoch(self, request_id, request, now_ms)
        elif isinstance(request, EndQuorumEpochRequest):
            leadership.on_end_quorum_epoch(self, request_id, request, now_ms)
        elif isinstance(request, FetchSnapshotRequest):
            snapshot_transfer.on_fetch_snapshot(self, request_id, request, now_ms)
        elif isinstance(request, AddRaftVoterRequest):
            voter_changes.on_add_voter(self, request_id, request, now_ms)
        elif isinstance(request, RemoveRaftVoterRequest):
            voter_changes.on_remove_voter(self, request_id, request, now_ms)
        elif isinstance(request, UpdateRaftVoterRequest):
            voter_changes.on_update_voter(self, request_id, request, now_ms)
        elif isinstance(request, ApiVersionsRequest):
            # The server answers ApiVersions itself; this serves the simulator's probes.
            self.respond(request_id, ApiVersionsResponse(errors.NONE, self.local_kraft_versions))
        else:  # pragma: no cover - typing guards this
            raise TypeError(f"unsupported request {type(request).__name__}")
        self._poll(now_ms)

    def handle_response(self, source_id: int, correlation_id: int, response: Response, now_ms: int) -> None:
        """The answer to a ``SendRequest`` we emitted. Unknown correlation ids are ignored."""
        if self._failed or not self.awaits_answer(source_id, correlation_id):
            return
        inflight = self._inflight.pop(source_id)
        if isinstance(response, VoteResponse):
            elections.on_vote_response(self, source_id, response, now_ms)
        elif isinstance(response, FetchResponse):
            replication.on_fetch_response(self, source_id, inflight, response, now_ms)
        elif isinstance(response, BeginQuorumEpochResponse):
            leadership.on_begin_quorum_epoch_response(self, source_id, response, now_ms, inflight.read_round)
        elif isinstance(response, EndQuorumEpochResponse):
            leadership.on_end_quorum_epoch_response(self, source_id, response, now_ms)
        elif isinstance(response, FetchSnapshotResponse):
            snapshot_transfer.on_fetch_snapshot_response(self, source_id, response, now_ms)
        elif isinstance(response, ApiVersionsResponse):
            voter_changes.on_api_versions_response(self, source_id, response, now_ms)
        elif isinstance(response, UpdateRaftVoterResponse):
            voter_changes.on_update_voter_response(self, source_id, response, now_ms)
        elif isinstance(response, AddRaftVoterResponse | RemoveRaftVoterResponse):
            pass  # auto-join: a refusal is retried after the next update-voter period
        else:
            self.backoff(source_id, now_ms)
        self._poll(now_ms)

    def request_failed(self, destination: int, correlation_id: int, now_ms: int) -> None:
        """The driver could not deliver the request or lost its connection."""
        if self.awaits_answer(destination, correlation_id):
            del self._inflight[destination]
            self.backoff(destination, now_ms)
            st = self.state
            if isinstance(st, LeaderState):
                pending = st.tracker.pending_add
                if pending is not None and pending.last_offset is None and pending.key.id == destination:
                    # Kafka turns a failed ApiVersions into an error response, which aborts the add.
                    self.emit(*st.finish_add(errors.REQUEST_TIMED_OUT,
                                             "Aborted add voter operation since API_VERSIONS could not be sent"))
        self._poll(now_ms)

    def append(self, records: Sequence[object], now_ms: int) -> int:
        """Append application records; returns a handle later completed by ``AppendCompleted``.

        Not the leader: the handle completes at once with NOT_LEADER_OR_FOLLOWER.
        Leadership lost before commit: completes with NOT_LEADER_OR_FOLLOWER
        (the records may or may not end up committed by a later leader).
        """
        handle, st = self._appending_leader(bool(records))
        if st is None:
            return handle
        batch = self.log.append_as_leader(records, st.epoch)
        st.pending_appends.append((batch.last_offset, handle))
        # Answer waiting followers before the FlushLog barrier, so they replicate while
        # the leader fsyncs (its own offset still counts only after its flush).
        replication.complete_parked(self, st, now_ms)
        replication.flush_leader(self, st, now_ms)
        self._poll(now_ms)
        return handle

    def append_control(self, records: Sequence[ControlRecord], now_ms: int) -> int:
        """Leader only: append a control batch (e.g. a VotersRecord); effective immediately.

        Returns a handle completed like :meth:`append`. Used by voter-change RPCs.
        """
        handle, st = self._appending_leader(bool(records))
        if st is None:
            return handle
        batch = self.log.append_as_leader(list(records), st.epoch, is_control=True)
        st.pending_appends.append((batch.last_offset, handle))
        if self.history.observe([batch]):
            voter_changes.voter_set_changed(self, now_ms)
        replication.flush_leader(self, st, now_ms)
        replication.complete_parked(self, st, now_ms)
        self._poll(now_ms)
        return handle

    def upgrade_kraft_version(self, version: int, validate_only: bool, now_ms: int) -> tuple[int, str | None, int]:
        """KafkaRaftClient.upgradeKRaftVersion (Kafka 4.1), on the leader of a static quorum
        (see :func:`kraftnode.raft.rules.voter_changes.kraft_version_upgrade`). Returns (error
        code, message, handle): the handle completes (``AppendCompleted``) when the upgrade's
        control batch commits; -1 when nothing was appended (a refusal, a validation, a no-op)."""
        code, message, records = voter_changes.kraft_version_upgrade(self, version, validate_only)
        return code, message, self.append_control(records, now_ms) if records else -1

    def read_index(self, now_ms: int) -> int:
        """A read barrier (Raft's read index, section 6.4): returns a handle completed by
        ``ReadIndexCompleted`` once a majority of voters has answered a BeginQuorumEpoch sent
        after this call (so no newer leader existed when it was made) and this leader has
        committed an entry of its epoch; its ``read_index`` (the high watermark then) covers
        every write committed before the call. Not the leader (or leadership lost before
        that): NOT_LEADER_OR_FOLLOWER."""
        handle = self._new_handle()
        st = self.state
        if self._failed or not isinstance(st, LeaderState):
            self.emit(ReadIndexCompleted(handle, -1, errors.NOT_LEADER_OR_FOLLOWER))
            return handle
        st.read_round += 1
        st.reads.append((handle, st.read_round))
        replication.complete_reads(self)
        self._poll(now_ms)
        return handle

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown: a leader resigns and asks the most caught-up voter to take over."""
        if isinstance(self.state, LeaderState):
            leadership.resign(self, now_ms)
            self._poll(now_ms)

    # ================================================= primitives (rules.port)
    def respond(self, request_id: int, response: Response) -> None:
        self._actions.append(SendResponse(request_id, response))

    def send(self, destination: int, request: Request, now_ms: int, *, fetch_offset: int = -1,
             endpoints: tuple[Endpoint, ...] | None = None, read_round: int = -1) -> None:
        corr = self._next_correlation
        self._next_correlation += 1
        timeout = self.config.request_timeout_ms
        if isinstance(request, FetchRequest):
            timeout += request.max_wait_ms  # a long-poll may legitimately be held that long
        self._inflight[destination] = InFlight(corr, now_ms + timeout, fetch_offset, read_round)
        st = self.state
        if endpoints is None:
            endpoints = self.voters.endpoints_of(destination)
            if isinstance(st, FollowerState) and destination == st.leader_id and st.leader_endpoints:
                endpoints = st.leader_endpoints
        self._actions.append(SendRequest(destination, corr, request, endpoints))

    def can_send(self, destination: int, now_ms: int) -> bool:
        if destination == self.local_key.id or destination in self._inflight:
            return False
        until = self._backoff_until.get(destination)
        return until is None or until <= now_ms

    def backoff(self, destination: int, now_ms: int) -> None:
        self._backoff_until[destination] = now_ms + self.config.retry_backoff_ms

    def transition(self, new_state: EpochState) -> None:
        old, election = self.quorum.transition(new_state)
        self._inflight.clear()
        self._backoff_until.clear()
        self._persist(election)
        if isinstance(old, LeaderState) and not isinstance(new_state, LeaderState):
            self.emit(*old.close(new_state, replication.fetch_error(self, errors.NOT_LEADER_OR_FOLLOWER)))
        self._emit_state_changed()

    def emit(self, *actions: Action) -> None:
        self._actions.extend(actions)

    def flush(self, end_offset: int) -> None:
        if self._actions and isinstance(self._actions[-1], FlushLog):
            self._actions[-1] = FlushLog(end_offset)
        else:
            self._actions.append(FlushLog(end_offset))

    def fail(self, error_code: int, message: str) -> None:
        self._failed = True
        self._actions.append(FatalError(error_code, message))

    # ===================================== the rules a test may replace
    # The rules that other rules (or the dispatch above) call through the node instead of
    # as plain functions, so that a test subclassing RaftNode replaces them everywhere: the
    # simulation's planted bugs (tests/simulation/plants.py and upgrade_sim.py) and the
    # real-process plant (tests/support/plant_site). Only what a test replaces is here.
    replica_tracker = leadership.replica_tracker
    on_vote_request = elections.on_vote_request
    grants_vote = elections.grants_vote
    grants_pre_vote = elections.grants_pre_vote
    on_diverging_epoch = replication.on_diverging_epoch
    read_round_confirmed = replication.read_round_confirmed
    transfer_target_caught_up = leadership.transfer_target_caught_up
    learn_directory_id = voter_changes.learn_directory_id
    voter_change_precheck = voter_changes.voter_change_precheck

    # ============================================================ internals
    def _new_handle(self) -> int:
        handle = self._next_handle
        self._next_handle += 1
        return handle

    def _appending_leader(self, has_records: bool) -> tuple[int, LeaderState | None]:
        """A new append handle, and the leader state if this node may append now (else the
        handle already completed: NOT_LEADER_OR_FOLLOWER, or INVALID_REQUEST when empty)."""
        handle = self._new_handle()
        st = self.state
        if self._failed or not isinstance(st, LeaderState) or st.transfer is not None or not has_records:
            code = errors.NOT_LEADER_OR_FOLLOWER if has_records else errors.INVALID_REQUEST
            self.emit(AppendCompleted(handle, -1, code))
            return handle, None
        return handle, st

    def _poll(self, now_ms: int) -> None:
        """Send whatever the current state owes its peers."""
        if self._failed:
            return
        st = self.state
        if isinstance(st, LeaderState) and st.tracker.resign_requested:
            leadership.resign(self, now_ms)
            st = self.state
        if isinstance(st, LeaderState) and st.transfer is not None:
            leadership.maybe_complete_transfer(self, st, now_ms)
            st = self.state
        per_state.POLL[st.name](self, now_ms)

    def _persist(self, election: ElectionState | None) -> None:
        """Emit the election state the quorum state recorded (None: nothing changed)."""
        if election is not None:
            self.emit(PersistElectionState(election))

    def _emit_state_changed(self) -> None:
        st = self.state
        self.emit(StateChanged(st.name, st.epoch, st.leader_id, self.is_voter))
