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

Floor plan: this module is the public event API only. Messages are routed by type
(as Kafka's KafkaRaftClient.handleRequest/handleResponse switch on the API key) to
the rules in :mod:`kraftnode.raft.rules` (elections, leadership, replication,
snapshot_transfer, voter_changes), which are bound below as methods of the same
name, so a test can replace one rule by subclassing; what depends on the current
state (timers, requests owed, deadlines) is looked up per state in
:mod:`kraftnode.raft.rules.per_state`; every state change goes through
:class:`~kraftnode.raft.quorum_state.QuorumState`'s transition table.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

from kraftnode.raft import errors, reconfig
from kraftnode.raft.actions import (
    Action,
    AppendCompleted,
    PersistElectionState,
    ReadIndexCompleted,
    SendRequest,
    SendResponse,
    StateChanged,
)
from kraftnode.raft.batches import ControlRecord
from kraftnode.raft.election import ElectionState
from kraftnode.raft.history import VoterSetHistory
from kraftnode.raft.inflight import InFlight, ParkedFetch
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
    leadership,
    per_state,
    replication,
    snapshot_transfer,
    validation,
    voter_changes,
)
from kraftnode.raft.snapshots import SnapshotStore
from kraftnode.raft.states import (
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
        self.history = self._load_history(static_voters)
        #: Exclusive: every offset below is committed. Never decreases.
        self.high_watermark = 0
        self._actions: list[Action] = []
        self._inflight: dict[int, InFlight] = {}
        self._backoff_until: dict[int, int] = {}
        self._parked: list[ParkedFetch] = []
        self._pending_appends: list[tuple[int, int]] = []  # (last offset, handle)
        self._next_correlation = 1
        self._next_handle = 1
        self._bootstrap_index = 0
        self._failed = False
        # Read index (linearizable reads): pending (handle, round), the latest round asked
        # for, and per voter the latest round it confirmed (answered our BeginQuorumEpoch).
        self._reads: list[tuple[int, int]] = []
        self._read_round = 0
        self._read_confirmed: dict[int, int] = {}
        self.quorum = QuorumState(self.local_key, election, UnattachedState(0, None))
        self.quorum.state = self._initial_state(election, now_ms)
        self._persist(self.quorum.record(self.quorum.election_of(self.state)))
        self._emit_state_changed()

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
    def failed(self) -> bool:
        return self._failed

    def take_actions(self) -> list[Action]:
        """Hand the accumulated actions to the driver (it must execute them in order)."""
        out = self._actions
        self._actions = []
        return out

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` must next be called (None: only on the next event)."""
        st = self.state
        times: list[int] = [f.deadline for f in self._inflight.values()]
        times.extend(self._backoff_until.values())
        per_state.DEADLINES[st.name](self, times)
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
            self._on_vote_request(request_id, request, now_ms)
        elif isinstance(request, FetchRequest):
            self._on_fetch_request(request_id, request, now_ms)
        elif isinstance(request, BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(request_id, request, now_ms)
        elif isinstance(request, EndQuorumEpochRequest):
            self._on_end_quorum_epoch(request_id, request, now_ms)
        elif isinstance(request, FetchSnapshotRequest):
            self._on_fetch_snapshot(request_id, request, now_ms)
        elif isinstance(request, AddRaftVoterRequest):
            self._on_add_voter(request_id, request, now_ms)
        elif isinstance(request, RemoveRaftVoterRequest):
            self._on_remove_voter(request_id, request, now_ms)
        elif isinstance(request, UpdateRaftVoterRequest):
            self._on_update_voter(request_id, request, now_ms)
        elif isinstance(request, ApiVersionsRequest):
            # The server answers ApiVersions itself; this serves the simulator's probes.
            self._respond(request_id, ApiVersionsResponse(errors.NONE, self.local_kraft_versions))
        else:  # pragma: no cover - typing guards this
            raise TypeError(f"unsupported request {type(request).__name__}")
        self._poll(now_ms)

    def handle_response(self, source_id: int, correlation_id: int, response: Response, now_ms: int) -> None:
        """The answer to a ``SendRequest`` we emitted. Unknown correlation ids are ignored."""
        if self._failed:
            return
        inflight = self._inflight.get(source_id)
        if inflight is None or inflight.correlation_id != correlation_id:
            return
        del self._inflight[source_id]
        if isinstance(response, VoteResponse):
            self._on_vote_response(source_id, response, now_ms)
        elif isinstance(response, FetchResponse):
            self._on_fetch_response(source_id, inflight, response, now_ms)
        elif isinstance(response, BeginQuorumEpochResponse):
            self._on_begin_quorum_epoch_response(source_id, response, now_ms, inflight.read_round)
        elif isinstance(response, EndQuorumEpochResponse):
            self._on_end_quorum_epoch_response(source_id, response, now_ms)
        elif isinstance(response, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(source_id, response, now_ms)
        elif isinstance(response, ApiVersionsResponse):
            self._on_api_versions_response(source_id, response, now_ms)
        elif isinstance(response, UpdateRaftVoterResponse):
            self._on_update_voter_response(source_id, response, now_ms)
        elif isinstance(response, AddRaftVoterResponse | RemoveRaftVoterResponse):
            pass  # auto-join: a refusal is retried after the next update-voter period
        else:
            self._backoff(source_id, now_ms)
        self._poll(now_ms)

    def request_failed(self, destination: int, correlation_id: int, now_ms: int) -> None:
        """The driver could not deliver the request or lost its connection."""
        inflight = self._inflight.get(destination)
        if inflight is not None and inflight.correlation_id == correlation_id:
            del self._inflight[destination]
            self._backoff(destination, now_ms)
            st = self.state
            if isinstance(st, LeaderState):
                pending = st.tracker.pending_add
                if pending is not None and pending.last_offset is None and pending.key.id == destination:
                    # Kafka turns a failed ApiVersions into an error response, which aborts the add.
                    self._finish_add(st, errors.REQUEST_TIMED_OUT,
                                     "Aborted add voter operation since API_VERSIONS could not be sent")
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
        self._pending_appends.append((batch.last_offset, handle))
        # Answer waiting followers before the FlushLog barrier, so they replicate while
        # the leader fsyncs (its own offset still counts only after its flush).
        self._complete_parked(now_ms)
        self._flush_leader(st, now_ms)
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
        self._pending_appends.append((batch.last_offset, handle))
        if self.history.observe([batch]):
            self._voter_set_changed(now_ms)
        self._flush_leader(st, now_ms)
        self._complete_parked(now_ms)
        self._poll(now_ms)
        return handle

    def _appending_leader(self, has_records: bool) -> tuple[int, LeaderState | None]:
        """A new append handle, and the leader state if this node may append now (else the
        handle already completed: NOT_LEADER_OR_FOLLOWER, or INVALID_REQUEST when empty)."""
        handle = self._next_handle
        self._next_handle += 1
        st = self.state
        if self._failed or not isinstance(st, LeaderState) or st.transfer is not None or not has_records:
            code = errors.NOT_LEADER_OR_FOLLOWER if has_records else errors.INVALID_REQUEST
            self._actions.append(AppendCompleted(handle, -1, code))
            return handle, None
        return handle, st

    def read_index(self, now_ms: int) -> int:
        """A read barrier (Raft's read index, section 6.4): returns a handle completed by
        ``ReadIndexCompleted`` once a majority of voters has answered a BeginQuorumEpoch sent
        after this call (so no newer leader existed when it was made) and this leader has
        committed an entry of its epoch; its ``read_index`` (the high watermark then) covers
        every write committed before the call. Not the leader (or leadership lost before
        that): NOT_LEADER_OR_FOLLOWER."""
        handle = self._next_handle
        self._next_handle += 1
        if self._failed or not isinstance(self.state, LeaderState):
            self._actions.append(ReadIndexCompleted(handle, -1, errors.NOT_LEADER_OR_FOLLOWER))
            return handle
        self._read_round += 1
        self._reads.append((handle, self._read_round))
        self._complete_reads()
        self._poll(now_ms)
        return handle

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown: a leader resigns and asks the most caught-up voter to take over."""
        if isinstance(self.state, LeaderState):
            self._resign(now_ms)
            self._poll(now_ms)

    def _load_history(self, static_voters: VoterSet) -> VoterSetHistory:
        """Voter set history from the latest snapshot and the control batches of the log."""
        history = VoterSetHistory(static_voters)
        snap = self.log.latest_snapshot_id()
        if snap is not None:
            history.load_snapshot(self.log.latest_snapshot_control_records(), snap.offset)
        history.observe(self.log.control_batches(self.log.start_offset))
        return history

    # ============================================================ transitions

    def _transition(self, new_state: EpochState, now_ms: int) -> None:
        old, election = self.quorum.transition(new_state)
        self._inflight.clear()
        self._backoff_until.clear()
        self._persist(election)
        if isinstance(old, LeaderState) and not isinstance(new_state, LeaderState):
            self._close_leader_state(old, new_state)
        self._emit_state_changed()

    def _persist(self, election: ElectionState | None) -> None:
        """Emit the election state the quorum state recorded (None: nothing changed)."""
        if election is not None:
            self._actions.append(PersistElectionState(election))

    def _emit_state_changed(self) -> None:
        st = self.state
        self._actions.append(StateChanged(st.name, st.epoch, st.leader_id, self.is_voter))

    # ============================================================== timers

    def _backoff(self, destination: int, now_ms: int) -> None:
        self._backoff_until[destination] = now_ms + self.config.retry_backoff_ms

    # ============================================================== sending
    def _send(self, destination: int, request: Request, now_ms: int, fetch_offset: int = -1,
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

    def _can_send(self, destination: int, now_ms: int) -> bool:
        if destination == self.local_key.id or destination in self._inflight:
            return False
        until = self._backoff_until.get(destination)
        return until is None or until <= now_ms

    def _poll(self, now_ms: int) -> None:
        """Send whatever the current state owes its peers."""
        if self._failed:
            return
        st = self.state
        if isinstance(st, LeaderState) and st.tracker.resign_requested:
            self._resign(now_ms)
            st = self.state
        if isinstance(st, LeaderState) and st.transfer is not None:
            self._maybe_complete_transfer(st, now_ms)
            st = self.state
        per_state.POLL[st.name](self, now_ms)

    # ============================================================ responses

    def _respond(self, request_id: int, response: Response) -> None:
        self._actions.append(SendResponse(request_id, response))

    # --- Vote

    # --- BeginQuorumEpoch

    # --- EndQuorumEpoch

    # --- Fetch (leader side)

    # --- Fetch (follower side)

    # ============================================== voter changes (KIP-853)

    # ======================================================== high watermark

    # ===================================================== rules, by topic
    # Bound from kraftnode/raft/rules/*: each rule is a method, so a test can subclass one.
    # elections
    _initial_state = elections.initial_state
    _become_unattached = elections.become_unattached
    _become_follower = elections.become_follower
    _become_candidate = elections.become_candidate
    _start_election = elections.start_election
    _maybe_win_pre_vote = elections.maybe_win_pre_vote
    _prospective_lost = elections.prospective_lost
    _maybe_win = elections.maybe_win
    _maybe_handle_leader_info = elections.maybe_handle_leader_info
    _election_deadline = elections.election_deadline
    _election_deadline_or_none = elections.election_deadline_or_none
    _binary_backoff = elections.binary_backoff
    _end_epoch_backoff = elections.end_epoch_backoff
    _vote_response = elections.vote_response
    _on_vote_request = elections.on_vote_request
    _grants_vote = elections.grants_vote
    _on_pre_vote_request = elections.on_pre_vote_request
    _grants_pre_vote = elections.grants_pre_vote
    _refused_vote_request = elections.refused_vote_request
    _candidate_log_up_to_date = elections.candidate_log_up_to_date
    _on_vote_response = elections.on_vote_response
    _maybe_lose_pre_vote = elections.maybe_lose_pre_vote
    _maybe_lose = elections.maybe_lose
    # leadership
    _become_leader = leadership.become_leader
    _replica_tracker = leadership.replica_tracker
    _close_leader_state = leadership.close_leader_state
    _resign = leadership.resign
    _bqe_response = leadership.bqe_response
    _on_begin_quorum_epoch = leadership.on_begin_quorum_epoch
    _on_begin_quorum_epoch_response = leadership.on_begin_quorum_epoch_response
    _eqe_response = leadership.eqe_response
    _on_end_quorum_epoch = leadership.on_end_quorum_epoch
    _on_transfer_request = leadership.on_transfer_request
    _maybe_complete_transfer = leadership.maybe_complete_transfer
    _transfer_target_caught_up = leadership.transfer_target_caught_up
    _on_end_quorum_epoch_response = leadership.on_end_quorum_epoch_response
    # replication
    _fetch_error = replication.fetch_error
    _reported_high_watermark = replication.reported_high_watermark
    _validate_leader_epoch = replication.validate_leader_epoch
    _on_fetch_request = replication.on_fetch_request
    _validate_offset_and_epoch = replication.validate_offset_and_epoch
    _answer_fetch = replication.answer_fetch
    _complete_parked = replication.complete_parked
    _on_fetch_response = replication.on_fetch_response
    _on_diverging_epoch = replication.on_diverging_epoch
    _truncate_to_diverging = replication.truncate_to_diverging
    _append_as_follower = replication.append_as_follower
    _send_fetch = replication.send_fetch
    _flush_leader = replication.flush_leader
    _maybe_advance_high_watermark = replication.maybe_advance_high_watermark
    _set_high_watermark = replication.set_high_watermark
    _set_high_watermark_inner = replication.set_high_watermark_inner
    _complete_reads = replication.complete_reads
    _read_round_confirmed = replication.read_round_confirmed
    # snapshot_transfer
    _on_fetch_snapshot = snapshot_transfer.on_fetch_snapshot
    _on_fetch_snapshot_response = snapshot_transfer.on_fetch_snapshot_response
    # validation
    _current_leader = validation.current_leader
    _leader_node_endpoints = validation.leader_node_endpoints
    _endpoints_from_nodes = validation.endpoints_from_nodes
    _cluster_ok = validation.cluster_ok
    _valid_voter_key = validation.valid_voter_key
    # voter_changes
    _voter_set_changed = voter_changes.voter_set_changed
    _local_voter_node = voter_changes.local_voter_node
    _update_voter_period_ms = voter_changes.update_voter_period_ms
    _should_update_voter = voter_changes.should_update_voter
    _should_auto_join = voter_changes.should_auto_join
    _auto_join_request = voter_changes.auto_join_request
    _learn_directory_id = voter_changes.learn_directory_id
    upgrade_kraft_version = voter_changes.upgrade_kraft_version
    _voter_change_precheck = voter_changes.voter_change_precheck
    _append_voters = voter_changes.append_voters
    _commit_voters = voter_changes.commit_voters
    _finish_add = voter_changes.finish_add
    _finish_remove = voter_changes.finish_remove
    _expire_voter_changes = voter_changes.expire_voter_changes
    _voter_changes_committed = voter_changes.voter_changes_committed
    _on_add_voter = voter_changes.on_add_voter
    _on_api_versions_response = voter_changes.on_api_versions_response
    _on_remove_voter = voter_changes.on_remove_voter
    _on_update_voter = voter_changes.on_update_voter
    _on_update_voter_response = voter_changes.on_update_voter_response
