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
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from kraftnode.raft import errors, prevote, reconfig
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
from kraftnode.raft.batches import (
    Batch,
    ControlRecord,
    KRaftVersionControlRecord,
    LeaderChangeRecord,
    VotersControlRecord,
)
from kraftnode.raft.config import RaftConfig
from kraftnode.raft.election import ElectionState
from kraftnode.raft.history import VoterSetHistory
from kraftnode.raft.log import OffsetAndEpoch, RaftLog
from kraftnode.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CurrentLeader,
    DescribeQuorumData,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    NodeEndpoint,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaStateView,
    Request,
    Response,
    SnapshotId,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraftnode.raft.quorum_state import QuorumState
from kraftnode.raft.snapshots import SnapshotStore
from kraftnode.raft.states import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    Voted,
)
from kraftnode.raft.tracker import ReplicaProgress, ReplicaTracker
from kraftnode.raft.transfer import PendingTransfer
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet

#: Base of the binary exponential election backoff (Kafka's RETRY_BACKOFF_BASE_MS).
ELECTION_BACKOFF_BASE_MS = 100


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    deadline: int
    #: For Fetch: the fetch offset sent, so stale answers can be recognised.
    fetch_offset: int = -1
    #: For a BeginQuorumEpoch sent to confirm reads: the read round it confirms.
    read_round: int = -1


@dataclass(slots=True)
class _ParkedFetch:
    request_id: int
    request: FetchRequest
    deadline: int


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
        self._inflight: dict[int, _InFlight] = {}
        self._backoff_until: dict[int, int] = {}
        self._parked: list[_ParkedFetch] = []
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
        self.quorum = QuorumState(self.local_key, election, Unattached(0, None))
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
        return isinstance(self.state, Leader)

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
        if isinstance(st, Unattached | Voted):
            # Only voters run elections (a replica removed from the voter set may still be
            # unattached or voted; as an observer it looks for the leader instead).
            if st.election_deadline is not None and self.is_voter:
                times.append(st.election_deadline)
        elif isinstance(st, Candidate):
            times.append(st.backoff_until if st.backoff_until is not None else st.election_deadline)
        elif isinstance(st, Follower):
            times.append(st.fetch_deadline)
            if (self._should_update_voter() and st.leader_id not in self._inflight
                    and st.leader_id not in self._backoff_until):
                times.append(st.update_voter_deadline)
        elif isinstance(st, Leader):
            if st.tracker.check_quorum_applies():
                times.append(st.tracker.check_quorum_deadline)
            if st.tracker.pending_add is not None:
                times.append(st.tracker.pending_add.deadline)
            if st.tracker.pending_remove is not None:
                times.append(st.tracker.pending_remove.deadline)
            if st.transfer is not None:
                times.append(st.transfer.deadline)
            times.extend(p.deadline for p in self._parked)
            # A resend blocked by an in-flight request or a backoff waits for that instead.
            times.extend(
                t for rid, t in st.tracker.next_begin_quorum_ms.items()
                if rid not in self._inflight and rid not in self._backoff_until
            )
        elif isinstance(st, Resigned | Prospective):
            times.append(st.election_deadline)
        return min(times) if times else None

    def describe_quorum(self, now_ms: int) -> DescribeQuorumData:
        """The leader's DescribeQuorum view (KIP-836 fields); an error elsewhere."""
        st = self.state
        if not isinstance(st, Leader):
            return DescribeQuorumData(errors.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, -1)
        tracker = st.tracker
        tracker.clear_inactive_observers(now_ms)

        def view(key: ReplicaKey, end: int, fetch_ts: int, caught_ts: int) -> ReplicaStateView:
            return ReplicaStateView(key.id, key.directory_id, end, fetch_ts, caught_ts)

        voters = []
        for rid, p in tracker.voters.items():
            if rid == self.local_key.id:
                voters.append(view(p.key, self.log.end_offset, now_ms, now_ms))
            else:
                voters.append(view(p.key, p.end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp))
        observers = [
            view(p.key, p.end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp)
            for p in tracker.observers.values()
        ]
        nodes = {node.key.id: node.endpoints for node in self.voters}
        return DescribeQuorumData(
            errors.NONE, self.local_key.id, st.epoch, self._reported_high_watermark(), tuple(voters),
            tuple(observers), nodes
        )

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
        st = self.state
        if isinstance(st, Unattached | Voted):
            if st.election_deadline is not None and now_ms >= st.election_deadline and self.is_voter:
                self._start_election(now_ms)
        elif isinstance(st, Candidate):
            if st.backoff_until is None and now_ms >= st.election_deadline:
                st.backoff_until = now_ms + self._binary_backoff(st.retries)
            if st.backoff_until is not None and now_ms >= st.backoff_until:
                self._start_election(now_ms)  # a zero backoff starts the next election now
        elif isinstance(st, Prospective):
            if now_ms >= st.election_deadline:
                self._prospective_lost(st, now_ms)
        elif isinstance(st, Follower):
            if now_ms >= st.fetch_deadline:
                if self.is_voter:
                    if st.leader_resigned:
                        # The leader resigned (EndQuorumEpoch): no leader to stick to, so
                        # the election starts at once, as in Kafka 3.9.
                        self._become_candidate(now_ms)
                    else:
                        self._start_election(now_ms)
                else:
                    self._transition(Unattached(st.epoch, None), now_ms)
        elif isinstance(st, Leader):
            st.tracker.clear_inactive_observers(now_ms)
            self._expire_voter_changes(st, now_ms)
            if st.transfer is not None and now_ms >= st.transfer.deadline:
                # The successor did not catch up in one election timeout: give up, keep leading.
                self._respond(st.transfer.request_id, self._eqe_response(errors.NONE, errors.REQUEST_TIMED_OUT))
                st.transfer = None
            if st.tracker.check_quorum_expired(now_ms):
                self._resign(now_ms)
            else:
                due = [p for p in self._parked if p.deadline <= now_ms]
                if due:
                    self._parked = [p for p in self._parked if p.deadline > now_ms]
                    for parked in due:
                        self._answer_fetch(parked.request_id, parked.request, now_ms)
        elif isinstance(st, Resigned):
            if now_ms >= st.election_deadline:
                if self.is_voter:
                    self._become_candidate(now_ms)
                else:
                    # A leader removed from the voter set: as Kafka 3.9's pollResigned, move
                    # to the next epoch so that nobody follows this replica as leader any more.
                    self._become_unattached(st.epoch + 1, now_ms)
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
            if isinstance(st, Leader):
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
        handle = self._next_handle
        self._next_handle += 1
        st = self.state
        if self._failed or not isinstance(st, Leader) or st.transfer is not None or not records:
            code = errors.NOT_LEADER_OR_FOLLOWER if records else errors.INVALID_REQUEST
            self._actions.append(AppendCompleted(handle, -1, code))
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
        handle = self._next_handle
        self._next_handle += 1
        st = self.state
        if self._failed or not isinstance(st, Leader) or st.transfer is not None or not records:
            code = errors.NOT_LEADER_OR_FOLLOWER if records else errors.INVALID_REQUEST
            self._actions.append(AppendCompleted(handle, -1, code))
            return handle
        batch = self.log.append_as_leader(list(records), st.epoch, is_control=True)
        self._pending_appends.append((batch.last_offset, handle))
        if self.history.observe([batch]):
            self._voter_set_changed(now_ms)
        self._flush_leader(st, now_ms)
        self._complete_parked(now_ms)
        self._poll(now_ms)
        return handle

    def read_index(self, now_ms: int) -> int:
        """A read barrier (Raft's read index, section 6.4): returns a handle completed by
        ``ReadIndexCompleted`` once a majority of voters has answered a BeginQuorumEpoch sent
        after this call (so no newer leader existed when it was made) and this leader has
        committed an entry of its epoch; its ``read_index`` (the high watermark then) covers
        every write committed before the call. Not the leader (or leadership lost before
        that): NOT_LEADER_OR_FOLLOWER."""
        handle = self._next_handle
        self._next_handle += 1
        if self._failed or not isinstance(self.state, Leader):
            self._actions.append(ReadIndexCompleted(handle, -1, errors.NOT_LEADER_OR_FOLLOWER))
            return handle
        self._read_round += 1
        self._reads.append((handle, self._read_round))
        self._complete_reads()
        self._poll(now_ms)
        return handle

    def _complete_reads(self) -> None:
        if not self._reads or not isinstance(self.state, Leader) or self._reported_high_watermark() < 0:
            return
        voters = self.voters
        confirmed = sorted((self._read_confirmed.get(v, 0) if v != self.local_key.id else self._read_round)
                           for v in voters.ids)
        # The highest round a majority has confirmed.
        majority_round = self._read_round_confirmed(confirmed[len(confirmed) - voters.majority_size()])
        done = [r for r in self._reads if r[1] <= majority_round]
        if done:
            self._reads = [r for r in self._reads if r[1] > majority_round]
            for handle, _ in done:
                self._actions.append(ReadIndexCompleted(handle, self.high_watermark, errors.NONE))

    def _read_round_confirmed(self, majority_round: int) -> int:
        """Read index rule: a read completes once a majority has confirmed a round at or
        after it (the rounds confirmed by a majority are passed in, the highest first wins)."""
        return majority_round

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown: a leader resigns and asks the most caught-up voter to take over."""
        if isinstance(self.state, Leader):
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
    def _initial_state(self, election: ElectionState, now_ms: int) -> EpochState:
        log_epoch = self.log.last_fetched_epoch
        if election.epoch < log_epoch:
            return Unattached(log_epoch, self._election_deadline_or_none(now_ms))
        epoch = election.epoch
        if election.leader_id == self.local_key.id:
            others = {k.id for k in self.voters.keys() if k.id != self.local_key.id}
            return Resigned(epoch, self.local_key.id, self._election_deadline(now_ms), (), others)
        voted = election.voted_key
        if election.has_leader:
            return Follower(
                epoch, election.leader_id, self.voters.endpoints_of(election.leader_id),
                now_ms + self.config.fetch_timeout_ms,
                update_voter_deadline=now_ms + self._update_voter_period_ms(),
            )
        if voted is not None and voted.matches(self.local_key) and self.is_voter:
            return Candidate(epoch, 1, self._election_deadline(now_ms), {self.local_key.id})
        if voted is not None:
            return Voted(epoch, voted, self._election_deadline(now_ms))
        return Unattached(epoch, self._election_deadline_or_none(now_ms))

    def _transition(self, new_state: EpochState, now_ms: int) -> None:
        old, election = self.quorum.transition(new_state)
        self._inflight.clear()
        self._backoff_until.clear()
        self._persist(election)
        if isinstance(old, Leader) and not isinstance(new_state, Leader):
            # LeaderState.close(): pending voter changes fail with NOT_LEADER_OR_FOLLOWER.
            self._finish_add(old, errors.NOT_LEADER_OR_FOLLOWER, None)
            self._finish_remove(old, errors.NOT_LEADER_OR_FOLLOWER, None)
            for handle, _ in self._reads:
                self._actions.append(ReadIndexCompleted(handle, -1, errors.NOT_LEADER_OR_FOLLOWER))
            self._reads.clear()
            self._read_confirmed.clear()
            if old.transfer is not None:
                self._actions.append(SendResponse(old.transfer.request_id, EndQuorumEpochResponse(
                    errors.NONE, errors.NOT_LEADER_OR_FOLLOWER, new_state.leader_id, new_state.epoch, ())))
            for _, handle in self._pending_appends:
                self._actions.append(AppendCompleted(handle, -1, errors.NOT_LEADER_OR_FOLLOWER))
            self._pending_appends.clear()
            parked, self._parked = self._parked, []
            for p in parked:
                self._actions.append(SendResponse(p.request_id, self._fetch_error(errors.NOT_LEADER_OR_FOLLOWER)))
        self._emit_state_changed()

    def _persist(self, election: ElectionState | None) -> None:
        """Emit the election state the quorum state recorded (None: nothing changed)."""
        if election is not None:
            self._actions.append(PersistElectionState(election))

    def _emit_state_changed(self) -> None:
        st = self.state
        self._actions.append(StateChanged(st.name, st.epoch, st.leader_id, self.is_voter))

    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        """Move to a higher epoch without a leader.

        As Kafka does, a voter that was already waiting for an election
        (unattached, voted, candidate) keeps its running election timer:
        otherwise a lagging voter that keeps starting elections it cannot win
        would reset everybody's timer forever and nobody else could run.
        """
        st = self.state
        deadline: int | None
        if not self.is_voter:
            deadline = None
        elif isinstance(st, Unattached | Voted | Candidate | Prospective) and st.election_deadline is not None:
            deadline = st.election_deadline
        else:
            deadline = self._election_deadline(now_ms)
        self._transition(Unattached(epoch, deadline), now_ms)

    def _become_follower(self, epoch: int, leader_id: int, endpoints: tuple[Endpoint, ...], now_ms: int) -> None:
        if not endpoints:
            endpoints = self.voters.endpoints_of(leader_id)
        # An auto-joining observer asks as soon as it is caught up with this leader (then
        # once per period): waiting a whole period first, an observer that loses its leader
        # now and then (a fetch timeout) would never ask at all.
        first = now_ms if self.config.auto_join and not self.is_voter else now_ms + self._update_voter_period_ms()
        self._transition(Follower(
            epoch, leader_id, endpoints, now_ms + self.config.fetch_timeout_ms, update_voter_deadline=first,
        ), now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        st = self.state
        retries = st.retries + 1 if isinstance(st, Candidate | Prospective) else 1
        cand = Candidate(st.epoch + 1, retries, self._election_deadline(now_ms), {self.local_key.id})
        self._transition(cand, now_ms)
        self._maybe_win(cand, now_ms)

    def _start_election(self, now_ms: int) -> None:
        """An election or fetch timer expired: pre-vote first (KIP-996) or elect at once (3.9)."""
        if not self.config.pre_vote:
            self._become_candidate(now_ms)
            return
        st = self.state
        leader_id, endpoints = -1, cast(tuple[Endpoint, ...], ())
        if isinstance(st, Follower):
            leader_id, endpoints = st.leader_id, st.leader_endpoints
        voted = self.quorum.voted_key
        retries = st.retries if isinstance(st, Candidate) else 0
        pro = Prospective(st.epoch, leader_id, endpoints, voted, self._election_deadline(now_ms), retries,
                          {self.local_key.id})
        self._transition(pro, now_ms)
        self._maybe_win_pre_vote(pro, now_ms)

    def _maybe_win_pre_vote(self, pro: Prospective, now_ms: int) -> None:
        voters = self.voters
        if prevote.prospective_won(pro, voters.ids, voters.majority_size()):
            self._become_candidate(now_ms)

    def _prospective_lost(self, pro: Prospective, now_ms: int) -> None:
        """Kafka 4.0's prospectiveTransitionAfterElectionLoss: back to the leader we knew
        (stickiness), or wait out a fresh election timer, keeping any vote of this epoch."""
        if pro.leader_id >= 0:
            self._become_follower(pro.epoch, pro.leader_id, pro.leader_endpoints, now_ms)
        elif pro.voted_key is not None and not pro.voted_key.matches(self.local_key):
            self._transition(Voted(pro.epoch, pro.voted_key, self._election_deadline(now_ms)), now_ms)
        else:
            self._transition(Unattached(pro.epoch, self._election_deadline(now_ms)), now_ms)

    def _maybe_win(self, cand: Candidate, now_ms: int) -> None:
        voters = self.voters
        if len(cand.granted & voters.ids) >= voters.majority_size():
            self._become_leader(cand, now_ms)

    def _become_leader(self, cand: Candidate, now_ms: int) -> None:
        voters = self.voters
        epoch_start = self.log.end_offset
        tracker = self._replica_tracker(cand.epoch, epoch_start, voters, now_ms)
        st = Leader(cand.epoch, self.local_key.id, tracker)
        self._transition(st, now_ms)
        granting = tuple(n.key for n in voters if n.key.id in cand.granted)
        records: list[ControlRecord] = [LeaderChangeRecord(self.local_key.id, tuple(voters.keys()), granting)]
        kraft_version = self.history.kraft_version()
        local = self._local_voter_node()
        if kraft_version >= 1 and (
            self.history.latest_voters_offset() == -1
            or (self.local_endpoints and reconfig.voter_node_needs_update(voters, local))
        ):
            # Kafka 3.9's LeaderState at the start of an epoch: when the voter set still comes
            # from the bootstrap checkpoint (0-0), which replicas never fetch, or describes this
            # leader with stale endpoints / kraft.version range, write the (updated) set to the
            # log, so observers (voters-to-be) learn kraft.version and the voters.
            updated = reconfig.update_voter(voters, local) or voters
            records += [KRaftVersionControlRecord(kraft_version), VotersControlRecord(updated)]
        elif kraft_version == 0:
            # Kafka 4.1's LeaderState: in a static quorum, the set an upgrade would write
            # starts as the static set with this leader described as it is now.
            if not local.endpoints:
                local = VoterNode(local.key, voters.endpoints_of(local.key.id), *self.local_kraft_versions)
            tracker.volatile_voters = reconfig.update_voter_ignoring_directory_id(voters, local)
        batch = self.log.append_as_leader(records, cand.epoch, is_control=True)
        if self.history.observe([batch]):
            self._voter_set_changed(now_ms)
        self._flush_leader(st, now_ms)

    def _replica_tracker(self, epoch: int, epoch_start: int, voters: VoterSet, now_ms: int) -> ReplicaTracker:
        """The replication bookkeeping of a new leader epoch."""
        return ReplicaTracker(self.local_key, epoch, epoch_start, voters, now_ms, self.config.check_quorum_timeout_ms)

    def _resign(self, now_ms: int, preferred_override: tuple[ReplicaKey, ...] | None = None) -> None:
        st = self.state
        assert isinstance(st, Leader)
        preferred = preferred_override or tuple(st.tracker.voters_by_descending_offset())
        others = {k.id for k in self.voters.keys() if k.id != self.local_key.id}
        self._transition(
            Resigned(st.epoch, self.local_key.id, self._election_deadline(now_ms), preferred, others), now_ms
        )

    def _maybe_handle_leader_info(
        self, leader_id: int, epoch: int, endpoints: tuple[Endpoint, ...], now_ms: int
    ) -> bool:
        """Adopt a higher epoch or a newly learned leader (Kafka's maybeTransition)."""
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.local_key.id:
                self._become_follower(epoch, leader_id, endpoints, now_ms)
            else:
                self._become_unattached(epoch, now_ms)
            return True
        if (
            epoch == self.epoch
            and leader_id >= 0
            and leader_id != self.local_key.id
            and (isinstance(self.state, Unattached | Voted | Candidate)
                 or (isinstance(self.state, Prospective) and self.state.leader_id < 0))
        ):
            self._become_follower(epoch, leader_id, endpoints, now_ms)
            return True
        return False

    # ============================================================== timers
    def _election_deadline(self, now_ms: int) -> int:
        timeout = self.config.election_timeout_ms
        return now_ms + timeout + self.rng.randrange(timeout)

    def _election_deadline_or_none(self, now_ms: int) -> int | None:
        return self._election_deadline(now_ms) if self.is_voter else None

    def _binary_backoff(self, retries: int) -> int:
        bound = 2 << min(20, max(0, retries - 1))
        return min(ELECTION_BACKOFF_BASE_MS * self.rng.randrange(bound), self.config.election_backoff_max_ms)

    def _end_epoch_backoff(self, preferred: Sequence[ReplicaKey]) -> int:
        """Successor-rank backoff, as Kafka's endEpochElectionBackoff and
        strictExponentialElectionBackoffMs: our position in the list (its length when we are
        not in it); position 0 stands at once -- also for an empty list, which a leader
        restarted into Resigned sends; a voter missing from a non-empty list waits
        election.backoff.max.ms; rank p of n waits (max >> (n - 1)) << (p - 1), capped."""
        n = len(preferred)
        position = next((i for i, key in enumerate(preferred) if key.matches(self.local_key)), n)
        most = self.config.election_backoff_max_ms
        if position == 0:
            return 0
        if position >= n:
            return most
        return min(most, (most >> (n - 1)) << (position - 1))

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
        self._inflight[destination] = _InFlight(corr, now_ms + timeout, fetch_offset, read_round)
        st = self.state
        if endpoints is None:
            endpoints = self.voters.endpoints_of(destination)
            if isinstance(st, Follower) and destination == st.leader_id and st.leader_endpoints:
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
        if isinstance(st, Leader) and st.tracker.resign_requested:
            self._resign(now_ms)
            st = self.state
        if isinstance(st, Leader) and st.transfer is not None:
            self._maybe_complete_transfer(st, now_ms)
            st = self.state
        cid = self.config.cluster_id
        if isinstance(st, Candidate):
            if st.backoff_until is not None:
                return
            for node in self.voters:
                rid = node.key.id
                if rid in st.granted or rid in st.rejected or not self._can_send(rid, now_ms):
                    continue
                self._send(rid, VoteRequest(
                    cid, rid, st.epoch, self.local_key.id, self.local_key.directory_id,
                    node.key.directory_id, self.log.last_fetched_epoch, self.log.end_offset,
                ), now_ms)
        elif isinstance(st, Prospective):
            for node in self.voters:
                rid = node.key.id
                if rid in st.granted or rid in st.rejected or not self._can_send(rid, now_ms):
                    continue
                self._send(rid, VoteRequest(
                    cid, rid, st.epoch, self.local_key.id, self.local_key.directory_id,
                    node.key.directory_id, self.log.last_fetched_epoch, self.log.end_offset, pre_vote=True,
                ), now_ms)
        elif isinstance(st, Leader):
            tracker = st.tracker
            for rid in tracker.unacknowledged_voters():
                due = tracker.next_begin_quorum_ms.get(rid, 0)
                if due > now_ms or not self._can_send(rid, now_ms):
                    continue
                tracker.next_begin_quorum_ms[rid] = now_ms + self.config.begin_quorum_resend_ms
                target = self.voters.node(rid)
                vdir = target.key.directory_id if target is not None else None
                self._send(rid, BeginQuorumEpochRequest(
                    cid, rid, vdir, self.local_key.id, st.epoch, self.local_endpoints), now_ms)
            for rid in list(tracker.next_begin_quorum_ms):
                if tracker.voters.get(rid) is None or tracker.voters[rid].acknowledged:
                    del tracker.next_begin_quorum_ms[rid]
            if self._reads:
                # Read index: a BeginQuorumEpoch, which any voter (a Kafka 3.9 one too) answers,
                # sent after the read arrived; its success answer confirms our leadership.
                for node in self.voters:
                    rid = node.key.id
                    if (rid == self.local_key.id or self._read_confirmed.get(rid, 0) >= self._read_round
                            or not self._can_send(rid, now_ms)):
                        continue
                    self._send(rid, BeginQuorumEpochRequest(
                        cid, rid, node.key.directory_id, self.local_key.id, st.epoch, self.local_endpoints),
                        now_ms, read_round=self._read_round)
        elif isinstance(st, Follower):
            if self._can_send(st.leader_id, now_ms):
                if now_ms >= st.update_voter_deadline and not self.is_voter and self._should_auto_join(st):
                    # Kafka 4.x controller.quorum.auto.join.enable: an observer that is caught
                    # up asks to become a voter (removing a stale entry of its id first),
                    # once per update-voter period, in place of a Fetch.
                    st.update_voter_deadline = now_ms + self._update_voter_period_ms()
                    self._send(st.leader_id, self._auto_join_request(), now_ms)
                    return
                if now_ms >= st.update_voter_deadline and self.is_voter:
                    # FollowerState's update-voter period: UpdateRaftVoter takes the place
                    # of the next Fetch when our entry in the voter set is out of date.
                    st.update_voter_deadline = now_ms + self._update_voter_period_ms()
                    if self._should_update_voter():
                        lo, hi = self.local_kraft_versions
                        self._send(st.leader_id, UpdateRaftVoterRequest(
                            cid, st.epoch, self.local_key.id, self.local_key.directory_id,
                            self.local_endpoints, lo, hi), now_ms)
                        return
                if st.snapshot is not None:
                    snap_id, position = st.snapshot
                    self._send(st.leader_id, FetchSnapshotRequest(
                        cid, self.local_key.id, self.local_key.directory_id, st.epoch,
                        SnapshotId(snap_id.offset, snap_id.epoch), position, self.config.fetch_max_bytes,
                    ), now_ms)
                else:
                    self._send_fetch(st.leader_id, st.epoch, now_ms)
        elif isinstance(st, Unattached | Voted):
            # An observer without a leader (also one that voted, e.g. as a removed voter)
            # looks for it through the bootstrap servers.
            if not self.is_voter and not self._inflight:
                servers = self.bootstrap_servers or sorted(self.voters.ids)
                servers = [s for s in servers if s != self.local_key.id]
                if servers:
                    dest = servers[self._bootstrap_index % len(servers)]
                    if self._can_send(dest, now_ms):
                        self._bootstrap_index += 1
                        self._send_fetch(dest, st.epoch, now_ms)
                    elif dest in self._backoff_until:
                        self._bootstrap_index += 1
        elif isinstance(st, Resigned):
            for rid in sorted(st.unacked):
                if self._can_send(rid, now_ms):
                    self._send(rid, EndQuorumEpochRequest(
                        cid, self.local_key.id, st.epoch, st.preferred, self.local_endpoints), now_ms)

    def _send_fetch(self, destination: int, epoch: int, now_ms: int) -> None:
        offset = self.log.end_offset
        self._send(destination, FetchRequest(
            self.config.cluster_id, self.local_key.id, self.local_key.directory_id,
            self.config.fetch_max_wait_ms, epoch, offset, self.log.last_fetched_epoch,
            self.log.start_offset, self.config.fetch_max_bytes,
        ), now_ms, fetch_offset=offset)

    # ============================================================ responses
    def _current_leader(self) -> CurrentLeader:
        return CurrentLeader(self.leader_id, self.epoch)

    def _leader_node_endpoints(self) -> tuple[NodeEndpoint, ...]:
        leader = self.leader_id
        if leader < 0:
            return ()
        st = self.state
        if leader == self.local_key.id:
            eps: tuple[Endpoint, ...] = self.local_endpoints or self.voters.endpoints_of(leader)
        elif isinstance(st, Follower) and st.leader_endpoints:
            eps = st.leader_endpoints
        else:
            eps = self.voters.endpoints_of(leader)
        for ep in eps:
            if ep.name == self.config.listener_name:
                return (NodeEndpoint(leader, ep.host, ep.port),)
        return (NodeEndpoint(leader, eps[0].host, eps[0].port),) if eps else ()

    def _endpoints_from_nodes(self, leader_id: int, nodes: Sequence[NodeEndpoint]) -> tuple[Endpoint, ...]:
        return tuple(Endpoint(self.config.listener_name, n.host, n.port) for n in nodes if n.node_id == leader_id)

    def _respond(self, request_id: int, response: Response) -> None:
        self._actions.append(SendResponse(request_id, response))

    def _cluster_ok(self, cluster_id: str | None) -> bool:
        return cluster_id is None or self.config.cluster_id is None or cluster_id == self.config.cluster_id

    def _valid_voter_key(self, voter_id: int, voter_directory_id: uuid.UUID | None) -> bool:
        """KIP-853: a v1 request naming another replica as its target is refused."""
        if voter_id < 0:
            return True
        if voter_id != self.local_key.id:
            return False
        key = ReplicaKey.of(voter_id, voter_directory_id)
        return key.matches(self.local_key)

    # --- Vote
    def _vote_response(self, error: int, partition_error: int, granted: bool) -> VoteResponse:
        return VoteResponse(error, partition_error, self.leader_id, self.epoch, granted,
                            self._leader_node_endpoints())

    def _on_vote_request(self, request_id: int, req: VoteRequest, now_ms: int) -> None:
        if not self._cluster_ok(req.cluster_id):
            self._respond(request_id, self._vote_response(errors.INCONSISTENT_CLUSTER_ID, errors.NONE, False))
            return
        if req.pre_vote:
            self._on_pre_vote_request(request_id, req)
            return
        # Kafka 3.9's order of checks (KafkaRaftClient.handleVoteRequest): the candidate's
        # last offset and epoch, then validateVoterOnlyRequest (stale epoch, bad id), then
        # the epoch bump, and only then whether the request was meant for this replica.
        if self._refused_vote_request(request_id, req, last_epoch_may_equal=False):
            return
        if req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch, now_ms)
        if not self._valid_voter_key(req.voter_id, req.voter_directory_id):
            self._respond(request_id, self._vote_response(errors.NONE, errors.INVALID_VOTER_KEY, False))
            return
        candidate = ReplicaKey.of(req.candidate_id, req.candidate_directory_id)
        up_to_date = self._candidate_log_up_to_date(req)
        st = self.state
        granted = self._grants_vote(candidate, up_to_date)
        if granted and (isinstance(st, Unattached) or (isinstance(st, Prospective) and st.voted_key is None)):
            self._transition(Voted(st.epoch, candidate, self._election_deadline(now_ms)), now_ms)
        self._respond(request_id, self._vote_response(errors.NONE, errors.NONE, granted))

    def _grants_vote(self, candidate: ReplicaKey, up_to_date: bool) -> bool:
        """Kafka's EpochState.canGrantVote: one vote per epoch, only to an up-to-date log,
        only while no leader is known (the epoch was already bumped to the candidate's)."""
        st = self.state
        if candidate.id == self.local_key.id:
            return False
        if isinstance(st, Unattached):
            return up_to_date
        if isinstance(st, Voted):
            return st.voted_key.matches(candidate)
        if isinstance(st, Prospective) and st.leader_id < 0:
            # Kafka 4.0's ProspectiveState: the vote cast in this epoch, if any, binds.
            return st.voted_key.matches(candidate) if st.voted_key is not None else up_to_date
        return False

    def _on_pre_vote_request(self, request_id: int, req: VoteRequest) -> None:
        """KIP-996: answer a pre-vote. Nothing changes here: no epoch bump, no vote on record."""
        if not self.config.pre_vote:
            # Without pre-vote we do not speak Vote v2 (the driver never lets it through).
            self._respond(request_id, self._vote_response(errors.UNSUPPORTED_VERSION, errors.NONE, False))
            return
        # The prospective sends its current epoch, so its last epoch may equal it.
        if self._refused_vote_request(request_id, req, last_epoch_may_equal=True):
            return
        if not self._valid_voter_key(req.voter_id, req.voter_directory_id):
            self._respond(request_id, self._vote_response(errors.NONE, errors.INVALID_VOTER_KEY, False))
            return
        up_to_date = self._candidate_log_up_to_date(req)
        granted = req.candidate_id != self.local_key.id and self._grants_pre_vote(up_to_date)
        self._respond(request_id, self._vote_response(errors.NONE, errors.NONE, granted))

    def _grants_pre_vote(self, up_to_date: bool) -> bool:
        """KIP-996: a pre-vote needs an up-to-date log and no live leader (stickiness)."""
        return prevote.can_grant_pre_vote(self.state, up_to_date)

    def _refused_vote_request(self, request_id: int, req: VoteRequest, *,
                              last_epoch_may_equal: bool) -> bool:
        """The checks a vote and a pre-vote request share, in Kafka's order (the candidate's
        last offset and epoch, a stale epoch, a bad candidate id); answers and returns True
        when one fails. A pre-vote's last epoch may equal its (current, unbumped) epoch."""
        last_epoch_bad = (req.last_offset_epoch > req.candidate_epoch if last_epoch_may_equal
                          else req.last_offset_epoch >= req.candidate_epoch)
        if req.last_offset < 0 or req.last_offset_epoch < 0 or last_epoch_bad:
            error = errors.INVALID_REQUEST
        elif req.candidate_epoch < self.epoch:
            error = errors.FENCED_LEADER_EPOCH
        elif req.candidate_id < 0:
            error = errors.INVALID_REQUEST
        else:
            return False
        self._respond(request_id, self._vote_response(errors.NONE, error, False))
        return True

    def _candidate_log_up_to_date(self, req: VoteRequest) -> bool:
        """KIP-595: the candidate's (last epoch, end offset) is at least this log's."""
        return OffsetAndEpoch(req.last_offset_epoch, req.last_offset) >= OffsetAndEpoch(
            self.log.last_fetched_epoch, self.log.end_offset)

    def _on_vote_response(self, source: int, resp: VoteResponse, now_ms: int) -> None:
        st = self.state
        if isinstance(st, Prospective) and resp.error_code == errors.UNSUPPORTED_VERSION:
            # A voter without Vote v2 (Kafka 3.9): skip the pre-vote, as Kafka 4.0 does.
            self._become_candidate(now_ms)
            return
        if resp.error_code == errors.INCONSISTENT_CLUSTER_ID:
            if isinstance(st, Candidate):
                st.rejected.add(source)
                self._maybe_lose(st, now_ms)
            elif isinstance(st, Prospective):
                st.rejected.add(source)
                self._maybe_lose_pre_vote(st, now_ms)
            return
        if resp.error_code != errors.NONE:
            self._backoff(source, now_ms)
            return
        # As Kafka's maybeHandleCommonResponse: a rejection (e.g. FENCED_LEADER_EPOCH)
        # still carries the voter's epoch and leader, which a stale candidate must adopt.
        endpoints = self._endpoints_from_nodes(resp.leader_id, resp.node_endpoints)
        if self._maybe_handle_leader_info(resp.leader_id, resp.leader_epoch, endpoints, now_ms):
            return
        if resp.partition_error_code != errors.NONE:
            self._backoff(source, now_ms)
            return
        st = self.state
        if isinstance(st, Prospective) and resp.leader_epoch == st.epoch:
            if resp.vote_granted:
                st.granted.add(source)
                self._maybe_win_pre_vote(st, now_ms)
            else:
                st.rejected.add(source)
                self._maybe_lose_pre_vote(st, now_ms)
            return
        if not isinstance(st, Candidate) or resp.leader_epoch != st.epoch:
            return
        if resp.vote_granted:
            st.granted.add(source)
            self._maybe_win(st, now_ms)
        else:
            st.rejected.add(source)
            self._maybe_lose(st, now_ms)

    def _maybe_lose_pre_vote(self, st: Prospective, now_ms: int) -> None:
        voters = self.voters
        if prevote.prospective_lost(st, voters.ids, voters.majority_size()):
            self._prospective_lost(st, now_ms)

    def _maybe_lose(self, st: Candidate, now_ms: int) -> None:
        """A majority rejected us: stop this election now and back off."""
        voters = self.voters
        if st.backoff_until is None and len(st.rejected & voters.ids) > len(voters) - voters.majority_size():
            st.backoff_until = now_ms + self._binary_backoff(st.retries)

    # --- BeginQuorumEpoch
    def _bqe_response(self, error: int, partition_error: int) -> BeginQuorumEpochResponse:
        return BeginQuorumEpochResponse(error, partition_error, self.leader_id, self.epoch,
                                        self._leader_node_endpoints())

    def _on_begin_quorum_epoch(self, request_id: int, req: BeginQuorumEpochRequest, now_ms: int) -> None:
        if not self._cluster_ok(req.cluster_id):
            self._respond(request_id, self._bqe_response(errors.INCONSISTENT_CLUSTER_ID, errors.NONE))
            return
        # Kafka 3.9's order (KafkaRaftClient.handleBeginQuorumEpochRequest): the stale-epoch
        # and leader-id checks (validateVoterOnlyRequest), then the leader is adopted, and only
        # then is the voter key checked. A leader that names this replica with another
        # directory id is still followed (its answer says INVALID_VOTER_KEY), and a stale
        # leader is fenced with our epoch whatever key it sent, so it learns the newer epoch.
        if req.leader_epoch < self.epoch:
            self._respond(request_id, self._bqe_response(errors.NONE, errors.FENCED_LEADER_EPOCH))
            return
        if req.leader_id < 0 or (req.leader_epoch == self.epoch and req.leader_id == self.local_key.id):
            self._respond(request_id, self._bqe_response(errors.NONE, errors.INVALID_REQUEST))
            return
        if (not self._maybe_handle_leader_info(req.leader_id, req.leader_epoch, req.leader_endpoints, now_ms)
                and isinstance(self.state, Prospective) and req.leader_epoch == self.epoch):
            self._become_follower(req.leader_epoch, req.leader_id, req.leader_endpoints, now_ms)
        if not self._valid_voter_key(req.voter_id, req.voter_directory_id):
            self._respond(request_id, self._bqe_response(errors.NONE, errors.INVALID_VOTER_KEY))
            return
        self._respond(request_id, self._bqe_response(errors.NONE, errors.NONE))

    def _on_begin_quorum_epoch_response(self, source: int, resp: BeginQuorumEpochResponse, now_ms: int,
                                        read_round: int = -1) -> None:
        endpoints = self._endpoints_from_nodes(resp.leader_id, resp.node_endpoints)
        if self._maybe_handle_leader_info(resp.leader_id, resp.leader_epoch, endpoints, now_ms):
            return
        st = self.state
        if resp.error_code == errors.NONE and resp.partition_error_code == errors.NONE and isinstance(st, Leader) \
                and resp.leader_epoch == st.epoch:
            st.tracker.acknowledge(source)
            if read_round > self._read_confirmed.get(source, 0):
                self._read_confirmed[source] = read_round
                self._complete_reads()
        else:
            self._backoff(source, now_ms)

    # --- EndQuorumEpoch
    def _eqe_response(self, error: int, partition_error: int) -> EndQuorumEpochResponse:
        return EndQuorumEpochResponse(error, partition_error, self.leader_id, self.epoch,
                                      self._leader_node_endpoints())

    def _on_end_quorum_epoch(self, request_id: int, req: EndQuorumEpochRequest, now_ms: int) -> None:
        if not self._cluster_ok(req.cluster_id):
            self._respond(request_id, self._eqe_response(errors.INCONSISTENT_CLUSTER_ID, errors.NONE))
            return
        if req.leader_epoch < self.epoch:
            self._respond(request_id, self._eqe_response(errors.NONE, errors.FENCED_LEADER_EPOCH))
            return
        st = self.state
        if isinstance(st, Leader) and req.leader_id == self.local_key.id and req.leader_epoch == st.epoch:
            self._on_transfer_request(request_id, st, req, now_ms)
            return
        if req.leader_id < 0 or req.leader_id == self.local_key.id:
            self._respond(request_id, self._eqe_response(errors.NONE, errors.INVALID_REQUEST))
            return
        self._maybe_handle_leader_info(req.leader_id, req.leader_epoch, req.leader_endpoints, now_ms)
        st = self.state
        if isinstance(st, Follower) and st.leader_id == req.leader_id and st.epoch == req.leader_epoch:
            st.fetch_deadline = now_ms + self._end_epoch_backoff(req.preferred_candidates)
            st.fetched = False  # KIP-996: the leader has gone; pre-votes may be granted
            st.leader_resigned = True
        self._respond(request_id, self._eqe_response(errors.NONE, errors.NONE))

    def _on_transfer_request(self, request_id: int, st: Leader, req: EndQuorumEpochRequest, now_ms: int) -> None:
        """Leadership transfer (see :mod:`kraftnode.raft.transfer`)."""
        if len(req.preferred_candidates) != 1 or st.transfer is not None:
            self._respond(request_id, self._eqe_response(errors.NONE, errors.INVALID_REQUEST))
            return
        wanted = req.preferred_candidates[0]
        node = self.voters.node(wanted.id)
        if wanted.id == self.local_key.id or node is None or not self.voters.is_voter(wanted):
            code = errors.INVALID_REQUEST if wanted.id == self.local_key.id else errors.VOTER_NOT_FOUND
            self._respond(request_id, self._eqe_response(errors.NONE, code))
            return
        progress = st.tracker.voters.get(wanted.id)
        if progress is not None and 0 <= progress.last_fetch_timestamp < now_ms - self.config.fetch_timeout_ms:
            # Fetched before, but not within the fetch timeout: paused, cut off or gone. (One
            # that has not fetched from this new leader yet gets the election timeout to do so.)
            self._respond(request_id, self._eqe_response(errors.NONE, errors.REQUEST_TIMED_OUT))
            return
        st.transfer = PendingTransfer(request_id, node.key, now_ms + self.config.election_timeout_ms)
        self._maybe_complete_transfer(st, now_ms)

    def _maybe_complete_transfer(self, st: Leader, now_ms: int) -> None:
        transfer = st.transfer
        assert transfer is not None
        progress = st.tracker.voters.get(transfer.target.id)
        # N's fetch offset is durable on N: once it reaches our end, N's log is at least as
        # up to date as every voter's, so its election cannot be refused for its log.
        if not self._transfer_target_caught_up(progress):
            return
        st.transfer = None
        self._respond(transfer.request_id, self._eqe_response(errors.NONE, errors.NONE))
        self._resign(now_ms, (transfer.target,))

    def _transfer_target_caught_up(self, progress: ReplicaProgress | None) -> bool:
        """A transfer resigns only once the successor has this leader's whole log."""
        return progress is not None and progress.end_offset >= self.log.end_offset

    def _on_end_quorum_epoch_response(self, source: int, resp: EndQuorumEpochResponse, now_ms: int) -> None:
        endpoints = self._endpoints_from_nodes(resp.leader_id, resp.node_endpoints)
        if self._maybe_handle_leader_info(resp.leader_id, resp.leader_epoch, endpoints, now_ms):
            return
        st = self.state
        if resp.error_code == errors.NONE and resp.partition_error_code == errors.NONE and isinstance(st, Resigned):
            st.unacked.discard(source)
        else:
            self._backoff(source, now_ms)

    # --- Fetch (leader side)
    def _fetch_error(self, code: int, top_level: bool = False) -> FetchResponse:
        # Kafka answers every Fetch error with an unknown (-1) high watermark.
        return FetchResponse(
            code if top_level else errors.NONE, errors.NONE if top_level else code,
            -1, self._current_leader(), self.log.start_offset,
            node_endpoints=self._leader_node_endpoints(),
        )

    def _reported_high_watermark(self) -> int:
        """The high watermark as we tell others. A new leader's is unknown (-1) until an
        entry of its own epoch commits, as Kafka's LeaderState reports it: sending the
        value it held as a follower could be lower than a follower's own, and a Java
        follower treats a high watermark that goes backwards as fatal."""
        st = self.state
        if isinstance(st, Leader) and st.tracker.majority_offset() <= st.tracker.epoch_start_offset:
            return -1
        return self.high_watermark

    def _validate_leader_epoch(self, request_epoch: int) -> int:
        if request_epoch < self.epoch:
            return errors.FENCED_LEADER_EPOCH
        if request_epoch > self.epoch:
            return errors.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, Leader):
            return errors.NOT_LEADER_OR_FOLLOWER
        return errors.NONE

    def _on_fetch_request(self, request_id: int, req: FetchRequest, now_ms: int) -> None:
        if not self._cluster_ok(req.cluster_id):
            self._respond(request_id, self._fetch_error(errors.INCONSISTENT_CLUSTER_ID, top_level=True))
            return
        if (req.max_wait_ms < 0 or req.fetch_offset < 0 or req.last_fetched_epoch < 0
                or req.last_fetched_epoch > req.current_leader_epoch):  # KafkaRaftClient.handleFetchRequest
            self._respond(request_id, self._fetch_error(errors.INVALID_REQUEST))
            return
        error = self._validate_leader_epoch(req.current_leader_epoch)
        if error != errors.NONE:
            self._respond(request_id, self._fetch_error(error))
            return
        st = self.state
        assert isinstance(st, Leader)
        key = ReplicaKey.of(req.replica_id, req.replica_directory_id)
        st.tracker.record_voter_contact(key, now_ms)
        self._learn_directory_id(st, key)
        diverging, snapshot = self._validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch)
        if diverging is None and snapshot is None and req.replica_id >= 0:
            st.tracker.record_fetch(key, req.fetch_offset, self.log.end_offset, now_ms)
            hw_before = self.high_watermark
            self._maybe_advance_high_watermark(st, now_ms)
            if self.high_watermark != hw_before:
                # This fetch moved the HW: answer at once so the fetcher learns it.
                self._answer_fetch(request_id, req, now_ms)
                return
        if (
            diverging is None and snapshot is None and req.max_wait_ms > 0
            and req.fetch_offset >= self.log.end_offset
        ):
            self._parked.append(_ParkedFetch(request_id, req, now_ms + req.max_wait_ms))
            return
        self._answer_fetch(request_id, req, now_ms)

    def _validate_offset_and_epoch(
        self, offset: int, epoch: int
    ) -> tuple[DivergingEpoch | None, SnapshotId | None]:
        """Kafka's validateOffsetAndEpoch: valid, diverging (with the epoch end), or snapshot."""
        log = self.log
        if log.start_offset == 0 and offset == 0:
            return None, None
        snap = log.latest_snapshot_id()
        if snap is not None and (
            offset < log.start_offset or (offset == log.start_offset and epoch != snap.epoch) or epoch < snap.epoch
        ):
            return None, SnapshotId(snap.offset, snap.epoch)
        end = log.end_offset_for_epoch(epoch)
        if end.epoch != epoch or offset > end.offset:
            return DivergingEpoch(end.epoch, end.offset), None
        return None, None

    def _answer_fetch(self, request_id: int, req: FetchRequest, now_ms: int) -> None:
        """Build the Fetch answer now (also used when a parked fetch completes)."""
        error = self._validate_leader_epoch(req.current_leader_epoch)
        if error != errors.NONE:
            self._respond(request_id, self._fetch_error(error))
            return
        diverging, snapshot = self._validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch)
        records: list[Batch] = []
        if diverging is None and snapshot is None and req.fetch_offset < self.log.end_offset:
            records = self.log.read(req.fetch_offset, min(req.max_bytes, self.config.fetch_max_bytes))
        self._respond(request_id, FetchResponse(
            errors.NONE, errors.NONE, self._reported_high_watermark(), self._current_leader(),
            self.log.start_offset, diverging, snapshot, tuple(records), self._leader_node_endpoints(),
        ))

    def _complete_parked(self, now_ms: int) -> None:
        """New data or a new high watermark: answer every parked fetch."""
        if not self._parked:
            return
        parked, self._parked = self._parked, []
        for p in parked:
            self._answer_fetch(p.request_id, p.request, now_ms)

    def _on_fetch_snapshot(self, request_id: int, req: FetchSnapshotRequest, now_ms: int) -> None:
        """Serve a chunk of the leader's snapshot (KIP-630)."""

        def answer(error: int, size: int = -1, position: int = -1, data: bytes = b"") -> None:
            self._respond(request_id, FetchSnapshotResponse(
                errors.NONE, error, req.snapshot_id, self._current_leader(), size, position, data,
                self._leader_node_endpoints(),
            ))

        if not self._cluster_ok(req.cluster_id):
            self._respond(request_id, FetchSnapshotResponse(
                errors.INCONSISTENT_CLUSTER_ID, errors.NONE, req.snapshot_id, self._current_leader()))
            return
        error = self._validate_leader_epoch(req.current_leader_epoch)
        if error != errors.NONE:
            answer(error)
            return
        st = self.state
        assert isinstance(st, Leader)
        st.tracker.record_voter_contact(ReplicaKey.of(req.replica_id, req.replica_directory_id), now_ms)
        snap_id = OffsetAndEpoch(req.snapshot_id.epoch, req.snapshot_id.end_offset)
        chunk = None
        if self.snapshots is not None and req.position >= 0:
            chunk = self.snapshots.read_snapshot_chunk(
                snap_id, req.position, min(max(req.max_bytes, 1), self.config.fetch_max_bytes))
        if chunk is None:
            answer(errors.POSITION_OUT_OF_RANGE if req.position < 0 else errors.SNAPSHOT_NOT_FOUND)
            return
        data, size = chunk
        if req.position >= size:  # Kafka: position must be inside the snapshot
            answer(errors.POSITION_OUT_OF_RANGE)
            return
        answer(errors.NONE, size, req.position, data)

    def _on_fetch_snapshot_response(self, source: int, resp: FetchSnapshotResponse, now_ms: int) -> None:
        leader = resp.current_leader
        endpoints = self._endpoints_from_nodes(leader.leader_id, resp.node_endpoints)
        if self._maybe_handle_leader_info(leader.leader_id, leader.leader_epoch, endpoints, now_ms):
            return
        st = self.state
        if not isinstance(st, Follower) or st.leader_id != source or st.snapshot is None:
            self._backoff(source, now_ms)
            return
        snap_id, position = st.snapshot
        if resp.error_code != errors.NONE or resp.partition_error_code != errors.NONE:
            if resp.partition_error_code in (errors.SNAPSHOT_NOT_FOUND, errors.POSITION_OUT_OF_RANGE):
                st.snapshot = None  # fetch again: the leader will name its current snapshot
            self._backoff(source, now_ms)
            return
        got = resp.snapshot_id
        data = resp.unaligned_records
        if (got.end_offset, got.epoch) != (snap_id.offset, snap_id.epoch) or resp.position != position \
                or resp.size < 0 or position + len(data) > resp.size or (not data and position < resp.size):
            st.snapshot = None
            self._backoff(source, now_ms)
            return
        assert self.snapshots is not None
        st.fetch_deadline = now_ms + self.config.fetch_timeout_ms
        self.snapshots.write_snapshot_chunk(snap_id, position, data)
        position += len(data)
        if position < resp.size:
            st.snapshot = (snap_id, position)
            return
        st.snapshot = None
        self.snapshots.install_snapshot(snap_id)
        self.history = self._load_history(self.history.static_voters)
        self._actions.append(FlushLog(self.log.end_offset))
        # A snapshot holds committed data only.
        self._set_high_watermark(snap_id.offset, now_ms)

    # --- Fetch (follower side)
    def _on_fetch_response(self, source: int, inflight: _InFlight, resp: FetchResponse, now_ms: int) -> None:
        st = self.state
        if resp.error_code != errors.NONE:
            if (resp.error_code == errors.INCONSISTENT_CLUSTER_ID and isinstance(st, Follower)
                    and st.leader_id == source):
                self._failed = True
                self._actions.append(FatalError(resp.error_code, f"leader {source} reports another cluster id"))
                return
            self._backoff(source, now_ms)
            return
        leader = resp.current_leader
        endpoints = self._endpoints_from_nodes(leader.leader_id, resp.node_endpoints)
        if self._maybe_handle_leader_info(leader.leader_id, leader.leader_epoch, endpoints, now_ms):
            return
        st = self.state
        if (
            not isinstance(st, Follower) or st.leader_id != source or leader.leader_epoch != st.epoch
            or resp.partition_error_code != errors.NONE
        ):
            self._backoff(source, now_ms)
            return
        if inflight.fetch_offset != self.log.end_offset:
            return  # an answer to a position we no longer hold
        if not st.leader_resigned:
            # A fetch answered just before the leader's EndQuorumEpoch (another connection, so
            # maybe delivered after it) must not undo the resignation's election timer.
            st.fetch_deadline = now_ms + self.config.fetch_timeout_ms
            st.fetched = True
        if resp.diverging_epoch is not None:
            self._on_diverging_epoch(source, resp, resp.diverging_epoch, now_ms)
            return
        elif resp.snapshot_id is not None:
            if self.snapshots is None:
                self._backoff(source, now_ms)  # no snapshot support: keep retrying slowly
                return
            snap_id = OffsetAndEpoch(resp.snapshot_id.epoch, resp.snapshot_id.end_offset)
            if snap_id.offset < self.high_watermark or snap_id.epoch > st.epoch:
                self._backoff(source, now_ms)
                return
            self.snapshots.begin_snapshot_download(snap_id)
            st.snapshot = (snap_id, 0)
            return
        elif resp.records:
            if not self._append_as_follower(st, resp.records):
                self._backoff(source, now_ms)
                return
        self._set_high_watermark(min(resp.high_watermark, self.log.end_offset), now_ms)

    def _on_diverging_epoch(self, source: int, resp: FetchResponse, diverging: DivergingEpoch, now_ms: int) -> None:
        """KIP-595: the leader's log diverges from ours: truncate (never below the high
        watermark: that is fatal) and fetch again; the HW is only adopted once our log is
        known to match the leader's."""
        if diverging.end_offset < self.high_watermark:
            self._failed = True
            self._actions.append(FatalError(
                errors.INVALID_REQUEST,
                f"leader {source} asked to truncate to {diverging.end_offset}, "
                f"below the high watermark {self.high_watermark}",
            ))
            return
        self._truncate_to_diverging(diverging)

    def _truncate_to_diverging(self, diverging: DivergingEpoch) -> None:
        """Kafka's truncateToEndOffset: cut back to where our log agrees with the leader's."""
        log = self.log
        if diverging.epoch <= 0:
            offset = min(max(diverging.end_offset, 0), log.end_offset)
        else:
            local = log.end_offset_for_epoch(diverging.epoch)
            if local.epoch == diverging.epoch:
                offset = min(local.offset, diverging.end_offset)
            else:
                offset = local.offset
        offset = max(offset, 0)
        log.truncate_to(offset)
        self.history.truncate_new_entries(log.end_offset)  # followers only: no leader state to update

    def _append_as_follower(self, st: Follower, batches: Sequence[Batch]) -> bool:
        expected = self.log.end_offset
        last_epoch = self.log.last_fetched_epoch
        for batch in batches:
            if batch.base_offset != expected or batch.last_offset < batch.base_offset:
                return False
            if batch.epoch > st.epoch or batch.epoch < last_epoch:
                return False
            expected = batch.last_offset + 1
            last_epoch = batch.epoch
        self.log.append_as_follower(batches)
        self.history.observe(batches)
        self._actions.append(FlushLog(self.log.end_offset))
        return True

    def _voter_set_changed(self, now_ms: int) -> None:
        """A VotersRecord was appended or truncated away: the new set applies at once (KIP-853)."""
        st = self.state
        if isinstance(st, Leader):
            st.tracker.update_voter_set(self.voters)
            self._maybe_advance_high_watermark(st, now_ms)

    # ============================================== voter changes (KIP-853)
    def _local_voter_node(self) -> VoterNode:
        lo, hi = self.local_kraft_versions
        return VoterNode(self.local_key, self.local_endpoints, lo, hi)

    def _update_voter_period_ms(self) -> int:
        return self.config.fetch_timeout_ms * reconfig.UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS

    def _should_update_voter(self) -> bool:
        """A voter whose entry in the (dynamic) voter set differs from what it is now; in a
        static quorum (kraft.version 0), a voter that has not yet told this leader its
        directory id, endpoints and kraft.version range (Kafka 4.1, for the upgrade)."""
        if self.local_key.directory_id is None or not self.local_endpoints:
            return False
        if self.history.kraft_version() < 1:
            st = self.state
            return isinstance(st, Follower) and not st.voter_updated and self.is_voter
        return reconfig.voter_node_needs_update(self.voters, self._local_voter_node())

    def _should_auto_join(self, st: Follower) -> bool:
        """An observer that may ask to join: auto-join on, a dynamic quorum, an identity and
        endpoints to offer, and caught up with the leader (fetched, at its high watermark)."""
        if not self.config.auto_join or self.history.kraft_version() < 1:
            return False
        if self.local_key.directory_id is None or not self.local_endpoints:
            return False
        return st.fetched and st.snapshot is None and self.log.end_offset >= self.high_watermark > 0

    def _auto_join_request(self) -> Request:
        """AddRaftVoter for ourselves, or first RemoveRaftVoter for the stale voter that has
        our id under another directory id (Kafka 4.x's auto-join)."""
        cid = self.config.cluster_id
        old = self.voters.node(self.local_key.id)
        if old is not None:
            return RemoveRaftVoterRequest(cid, old.key.id, old.key.directory_id)
        return AddRaftVoterRequest(cid, self.config.request_timeout_ms, self.local_key.id,
                                   self.local_key.directory_id, self.local_endpoints)

    def _learn_directory_id(self, st: Leader, key: ReplicaKey) -> None:
        """Static quorum: a voter's Fetch names its directory id (ReplicaDirectoryId, which
        Kafka 3.9 voters send too); the upgrade's voter set takes it if it has none yet."""
        volatile = st.tracker.volatile_voters
        if volatile is None or key.directory_id is None:
            return
        node = volatile.node(key.id)
        if node is None or node.key.directory_id is not None:
            return
        st.tracker.volatile_voters = reconfig.update_voter_ignoring_directory_id(
            volatile, VoterNode(key, node.endpoints, node.min_kraft_version, node.max_kraft_version))

    def upgrade_kraft_version(self, version: int, validate_only: bool, now_ms: int) -> tuple[int, str | None, int]:
        """KafkaRaftClient.upgradeKRaftVersion (Kafka 4.1): on the leader of a static quorum,
        append one control batch with KRaftVersionRecord(``version``) and the VotersRecord of
        every voter's directory id, endpoints and kraft.version range. Returns (error code,
        message, handle): the handle completes (``AppendCompleted``) when the batch commits;
        -1 when nothing was appended (a refusal, a validation, or a no-op)."""
        st = self.state
        if self._failed or not isinstance(st, Leader) or st.transfer is not None:
            return errors.NOT_LEADER_OR_FOLLOWER, None, -1
        tracker = st.tracker
        persisted = self.history.kraft_version()
        refusal = reconfig.kraft_upgrade_refusal(persisted, version, tracker.upgraded_kraft_version,
                                                 tracker.volatile_voters)
        if refusal is not None:
            return errors.INVALID_UPDATE_VERSION, refusal, -1
        volatile = tracker.volatile_voters
        if validate_only or persisted == version or tracker.upgraded_kraft_version == version or volatile is None:
            return errors.NONE, None, -1
        tracker.volatile_voters = None
        tracker.upgraded_kraft_version = version
        handle = self._next_handle
        self._next_handle += 1
        batch = self.log.append_as_leader(
            [KRaftVersionControlRecord(version), VotersControlRecord(volatile)], st.epoch, is_control=True)
        self._pending_appends.append((batch.last_offset, handle))
        if self.history.observe([batch]):
            self._voter_set_changed(now_ms)
        self._flush_leader(st, now_ms)
        self._complete_parked(now_ms)
        self._poll(now_ms)
        return errors.NONE, None, handle

    def _voter_change_precheck(self, st: Leader, verb: str, now_ms: int) -> tuple[int, str] | None:
        """The checks every voter change starts with, in Kafka's order."""
        tracker = st.tracker
        self._expire_voter_changes(st, now_ms)
        if tracker.pending_add is not None or tracker.pending_remove is not None:
            return errors.REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle previous voter change request"
        if not tracker.high_watermark_known:
            return errors.REQUEST_TIMED_OUT, (
                "Request timed out waiting for leader to establish HWM and fence previous voter changes")
        kraft_version = self.history.kraft_version()
        if kraft_version < 1:
            return errors.UNSUPPORTED_VERSION, (
                f"Cluster doesn't support {verb} voter because the kraft.version feature is {kraft_version}")
        offset = self.history.latest_voters_offset()
        if offset is None or offset >= self.high_watermark:
            return errors.REQUEST_TIMED_OUT, (
                f"Request timed out waiting for voters to commit the latest voter change at {offset} "
                f"with HWM {self.high_watermark}")
        return None

    def _append_voters(self, st: Leader, voters: VoterSet, now_ms: int) -> int:
        """Append a VotersRecord (effective at once); returns its offset. The caller flushes."""
        batch = self.log.append_as_leader([VotersControlRecord(voters)], st.epoch, is_control=True)
        if self.history.observe([batch]):
            self._voter_set_changed(now_ms)
        return batch.last_offset

    def _commit_voters(self, st: Leader, now_ms: int) -> None:
        self._flush_leader(st, now_ms)
        self._complete_parked(now_ms)

    def _finish_add(self, st: Leader, code: int, message: str | None) -> None:
        pending = st.tracker.pending_add
        if pending is not None:
            st.tracker.pending_add = None
            self._respond(pending.request_id, AddRaftVoterResponse(code, message))

    def _finish_remove(self, st: Leader, code: int, message: str | None) -> None:
        pending = st.tracker.pending_remove
        if pending is not None:
            st.tracker.pending_remove = None
            self._respond(pending.request_id, RemoveRaftVoterResponse(code, message))

    def _expire_voter_changes(self, st: Leader, now_ms: int) -> None:
        tracker = st.tracker
        if tracker.pending_add is not None and tracker.pending_add.deadline <= now_ms:
            self._finish_add(st, errors.REQUEST_TIMED_OUT, None)
        if tracker.pending_remove is not None and tracker.pending_remove.deadline <= now_ms:
            self._finish_remove(st, errors.REQUEST_TIMED_OUT, None)

    def _voter_changes_committed(self, st: Leader) -> None:
        """The high watermark moved: answer the change whose VotersRecord it now covers."""
        tracker = st.tracker
        add = tracker.pending_add
        if add is not None and add.last_offset is not None and self.high_watermark > add.last_offset:
            self._finish_add(st, errors.NONE, None)
        remove = tracker.pending_remove
        if remove is not None and self.high_watermark > remove.last_offset:
            self._finish_remove(st, errors.NONE, None)
            if not self.voters.is_voter(self.local_key):
                # RemoveVoterHandler: a leader outside the committed voter set resigns
                # (on the next poll, as Kafka's requestResign).
                tracker.resign_requested = True

    def _on_add_voter(self, request_id: int, req: AddRaftVoterRequest, now_ms: int) -> None:
        def answer(code: int, message: str | None = None) -> None:
            self._respond(request_id, AddRaftVoterResponse(code, message))

        if not self._cluster_ok(req.cluster_id):
            answer(errors.INCONSISTENT_CLUSTER_ID)
            return
        st = self.state
        if not isinstance(st, Leader):
            answer(errors.NOT_LEADER_OR_FOLLOWER)
            return
        key = ReplicaKey.of(req.voter_id, req.voter_directory_id)
        if req.voter_id < 0 or key.directory_id is None:
            answer(errors.INVALID_REQUEST, "Add voter request didn't include a valid voter")
            return
        listener = self.config.listener_name
        if not reconfig.has_listener(req.listeners, listener):
            answer(errors.INVALID_REQUEST, f"Add voter request didn't include the endpoint "
                                           f"({list(req.listeners)}) for the default listener {listener}")
            return
        refused = self._voter_change_precheck(st, "adding", now_ms)
        if refused is not None:
            answer(*refused)
            return
        voters = self.voters
        if key.id in voters.ids:
            answer(errors.DUPLICATE_VOTER, f"The voter id for {reconfig.key_text(key)} is already part of "
                                           f"the set of voters {reconfig.keys_text(voters.keys())}.")
            return
        if not self._can_send(key.id, now_ms):
            answer(errors.REQUEST_TIMED_OUT, f"New voter {reconfig.key_text(key)} is not ready to receive requests")
            return
        st.tracker.pending_add = reconfig.PendingAdd(
            request_id, key, req.listeners, now_ms + self.config.request_timeout_ms)
        # Discover the new voter's supported kraft.version range on its controller listener.
        self._send(key.id, ApiVersionsRequest(), now_ms,
                   endpoints=tuple(e for e in req.listeners if e.name == listener))

    def _on_api_versions_response(self, source: int, resp: ApiVersionsResponse, now_ms: int) -> None:
        st = self.state
        if not isinstance(st, Leader):
            return
        pending = st.tracker.pending_add
        if pending is None or pending.last_offset is not None or pending.key.id != source:
            return  # not the probe we are waiting for (e.g. the add already expired)
        key = pending.key
        shown_key = reconfig.key_text(key)
        if resp.error_code != errors.NONE:
            self._finish_add(st, errors.REQUEST_TIMED_OUT, "Aborted add voter operation for since "
                             f"API_VERSIONS returned an error {errors.name(resp.error_code)}")
            return
        kraft_version = self.history.kraft_version()
        supported = resp.kraft_version_range
        if supported is None or not reconfig.supports(supported, kraft_version):
            shown = f"(min: {supported[0]}, max: {supported[1]}" if supported else "(min: 0, max: 0)"
            self._finish_add(st, errors.INVALID_REQUEST, f"Aborted add voter operation for {shown_key} since the "
                             f"kraft.version range {shown} doesn't support the finalized version {kraft_version}")
            return
        if not st.tracker.is_replica_caught_up(key, now_ms):
            self._finish_add(st, errors.REQUEST_TIMED_OUT,
                             f"Aborted add voter operation for {shown_key} since it is lagging behind")
            return
        voters = reconfig.add_voter(self.voters, VoterNode(key, pending.endpoints, supported[0], supported[1]))
        if voters is None:  # cannot happen while the operation is pending; never append twice
            self._finish_add(st, errors.DUPLICATE_VOTER, f"{shown_key} is already a voter")
            return
        pending.last_offset = self._append_voters(st, voters, now_ms)
        self._commit_voters(st, now_ms)

    def _on_remove_voter(self, request_id: int, req: RemoveRaftVoterRequest, now_ms: int) -> None:
        def answer(code: int, message: str | None = None) -> None:
            self._respond(request_id, RemoveRaftVoterResponse(code, message))

        if not self._cluster_ok(req.cluster_id):
            answer(errors.INCONSISTENT_CLUSTER_ID)
            return
        st = self.state
        if not isinstance(st, Leader):
            answer(errors.NOT_LEADER_OR_FOLLOWER)
            return
        key = ReplicaKey.of(req.voter_id, req.voter_directory_id)
        if req.voter_id < 0 or key.directory_id is None:
            answer(errors.INVALID_REQUEST, "Remove voter request didn't include a valid voter")
            return
        refused = self._voter_change_precheck(st, "removing", now_ms)
        if refused is not None:
            answer(*refused)
            return
        voters = reconfig.remove_voter(self.voters, key)
        if voters is None:
            answer(errors.VOTER_NOT_FOUND, f"Cannot remove voter {reconfig.key_text(key)} from the set of "
                                           f"voters {reconfig.keys_text(self.voters.keys())}")
            return
        offset = self._append_voters(st, voters, now_ms)
        st.tracker.pending_remove = reconfig.PendingRemove(
            request_id, key, offset, now_ms + self.config.request_timeout_ms)
        self._commit_voters(st, now_ms)

    def _on_update_voter(self, request_id: int, req: UpdateRaftVoterRequest, now_ms: int) -> None:
        def answer(code: int) -> None:
            eps = self._leader_node_endpoints()
            self._respond(request_id, UpdateRaftVoterResponse(code, self._current_leader(), eps[0] if eps else None))

        if not self._cluster_ok(req.cluster_id):
            self._respond(request_id, UpdateRaftVoterResponse(errors.INCONSISTENT_CLUSTER_ID, CurrentLeader(-1, -1)))
            return
        error = self._validate_leader_epoch(req.current_leader_epoch)
        if error != errors.NONE:
            answer(error)
            return
        st = self.state
        assert isinstance(st, Leader)
        key = ReplicaKey.of(req.voter_id, req.voter_directory_id)
        lo, hi = req.min_supported_version, req.max_supported_version
        if (req.voter_id < 0 or key.directory_id is None
                or not reconfig.has_listener(req.listeners, self.config.listener_name)
                or lo < 0 or hi < 0 or hi < lo):
            answer(errors.INVALID_REQUEST)
            return
        volatile = st.tracker.volatile_voters
        if self.history.kraft_version() < 1 and volatile is not None:
            # Kafka 4.1: a static quorum keeps the update in memory, for an upgrade to write.
            if not st.tracker.high_watermark_known:
                answer(errors.REQUEST_TIMED_OUT)
                return
            if not reconfig.supports((lo, hi), 0):
                answer(errors.INVALID_REQUEST)
                return
            updated = reconfig.update_voter_ignoring_directory_id(volatile, VoterNode(key, req.listeners, lo, hi))
            if updated is None:
                answer(errors.VOTER_NOT_FOUND)
                return
            st.tracker.volatile_voters = updated
            st.tracker.record_voter_contact(key, now_ms)
            answer(errors.NONE)
            return
        refused = self._voter_change_precheck(st, "updating", now_ms)
        if refused is not None:
            answer(refused[0])
            return
        if not reconfig.supports((lo, hi), self.history.kraft_version()):
            answer(errors.INVALID_REQUEST)
            return
        voters = reconfig.update_voter(self.voters, VoterNode(key, req.listeners, lo, hi))
        if voters is None:
            answer(errors.VOTER_NOT_FOUND)
            return
        # UpdateVoterHandler appends and answers at once, without waiting for the commit.
        self._append_voters(st, voters, now_ms)
        self._commit_voters(st, now_ms)
        answer(errors.NONE)

    def _on_update_voter_response(self, source: int, resp: UpdateRaftVoterResponse, now_ms: int) -> None:
        st = self.state
        if (isinstance(st, Follower) and st.leader_id == source
                and resp.error_code in (errors.NONE, errors.UNSUPPORTED_VERSION)):
            # Static quorum: told once per leader (a Kafka 3.9 leader answers
            # UNSUPPORTED_VERSION: it keeps no in-memory voters, so do not ask again).
            st.voter_updated = True
        if resp.error_code in (errors.NONE, errors.UNSUPPORTED_VERSION, errors.INVALID_REQUEST,
                               errors.REQUEST_TIMED_OUT):
            return  # the leader was reached; the next period retries if still needed
        leader = resp.current_leader
        nodes = (resp.leader_endpoint,) if resp.leader_endpoint is not None else ()
        endpoints = self._endpoints_from_nodes(leader.leader_id, nodes)
        if self._maybe_handle_leader_info(leader.leader_id, leader.leader_epoch, endpoints, now_ms):
            return
        self._backoff(source, now_ms)

    # ======================================================== high watermark
    def _flush_leader(self, st: Leader, now_ms: int) -> None:
        if self._actions and isinstance(self._actions[-1], FlushLog):
            self._actions[-1] = FlushLog(self.log.end_offset)
        else:
            self._actions.append(FlushLog(self.log.end_offset))
        st.tracker.update_local(self.log.end_offset, now_ms)
        self._maybe_advance_high_watermark(st, now_ms)

    def _maybe_advance_high_watermark(self, st: Leader, now_ms: int) -> None:
        new_hw = st.tracker.candidate_high_watermark(self.high_watermark)
        if new_hw is not None:
            st.tracker.high_watermark_known = True
            self._set_high_watermark(new_hw, now_ms)

    def _set_high_watermark(self, hw: int, now_ms: int) -> None:
        self._set_high_watermark_inner(hw, now_ms)
        self._complete_reads()

    def _set_high_watermark_inner(self, hw: int, now_ms: int) -> None:
        if hw <= self.high_watermark:
            return
        self.high_watermark = hw
        self._actions.append(HighWatermarkAdvanced(hw))
        if self._pending_appends:
            done = [(o, h) for o, h in self._pending_appends if o < hw]
            if done:
                self._pending_appends = [(o, h) for o, h in self._pending_appends if o >= hw]
                for offset, handle in done:
                    self._actions.append(AppendCompleted(handle, offset, errors.NONE))
        if isinstance(self.state, Leader):
            self._voter_changes_committed(self.state)
            self._complete_parked(now_ms)
