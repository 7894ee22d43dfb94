"""What each epoch state does on its own, as etcd's per-state tick/step: its timers
(``tick``), the requests it owes its peers (``poll``) and when it next needs a tick
(``deadlines``). :class:`~kraftnode.raft.raft_node.RaftNode` looks the current state's
function up in :data:`TICK`, :data:`POLL` and :data:`DEADLINES` (keyed by the state's
name) instead of testing the state's class in one long ladder per event.
"""

from __future__ import annotations

from collections.abc import Callable

from kraftnode.raft import errors
from kraftnode.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchSnapshotRequest,
    SnapshotId,
    UpdateRaftVoterRequest,
    VoteRequest,
)
from kraftnode.raft.rules import elections, epochs, leadership, replication, timers, voter_changes
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import (
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
    VotedState,
)


# ================================================================== tick
def tick_waiting(node: RaftCore, now_ms: int) -> None:
    """Unattached or voted: a voter's election timer starts an election."""
    st = node.state
    assert isinstance(st, UnattachedState | VotedState)
    if st.election_deadline is not None and now_ms >= st.election_deadline and node.is_voter:
        elections.start_election(node, now_ms)


def tick_candidate(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, CandidateState)
    if st.backoff_until is None and now_ms >= st.election_deadline:
        st.backoff_until = now_ms + timers.binary_backoff(node, st.retries)
    if st.backoff_until is not None and now_ms >= st.backoff_until:
        elections.start_election(node, now_ms)  # a zero backoff starts the next election now


def tick_prospective(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, ProspectiveState)
    if now_ms >= st.election_deadline:
        elections.prospective_lost(node, st, now_ms)


def tick_follower(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, FollowerState)
    if now_ms < st.fetch_deadline:
        return
    if not node.is_voter:
        node.transition(UnattachedState(st.epoch, None))
    elif st.leader_resigned:
        # The leader resigned (EndQuorumEpoch): no leader to stick to, so the election
        # starts at once, as in Kafka 3.9.
        elections.become_candidate(node, now_ms)
    else:
        elections.start_election(node, now_ms)


def tick_leader(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, LeaderState)
    st.tracker.clear_inactive_observers(now_ms)
    voter_changes.expire_voter_changes(node, st, now_ms)
    if st.transfer is not None and now_ms >= st.transfer.deadline:
        # The successor did not catch up in one election timeout: give up, keep leading.
        node.respond(st.transfer.request_id, leadership.eqe_response(node, errors.NONE, errors.REQUEST_TIMED_OUT))
        st.transfer = None
    if st.tracker.check_quorum_expired(now_ms):
        leadership.resign(node, now_ms)
        return
    due = [p for p in st.parked if p.deadline <= now_ms]
    if due:
        st.parked = [p for p in st.parked if p.deadline > now_ms]
        for parked in due:
            replication.answer_fetch(node, parked.request_id, parked.request, now_ms)


def tick_resigned(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, ResignedState)
    if now_ms < st.election_deadline:
        return
    if node.is_voter:
        elections.become_candidate(node, now_ms)
    else:
        # A leader removed from the voter set: as Kafka 3.9's pollResigned, move to the
        # next epoch so that nobody follows this replica as leader any more.
        epochs.become_unattached(node, st.epoch + 1, now_ms)


# ================================================================== poll
def poll_waiting(node: RaftCore, now_ms: int) -> None:
    """An observer without a leader (also one that voted, e.g. as a removed voter) looks
    for it through the bootstrap servers."""
    st = node.state
    assert isinstance(st, UnattachedState | VotedState)
    if node.is_voter or node.any_in_flight():
        return
    servers = node.bootstrap_servers or sorted(node.voters.ids)
    servers = [s for s in servers if s != node.local_key.id]
    if servers:
        # Round robin: past a server that is backing off too (nothing is in flight, so
        # that is why one of these could not be sent to).
        dest = servers[node.bootstrap_index % len(servers)]
        node.bootstrap_index += 1
        if node.can_send(dest, now_ms):
            replication.send_fetch(node, dest, st.epoch, now_ms)


def _ask_for_votes(node: RaftCore, st: CandidateState | ProspectiveState, now_ms: int, pre_vote: bool) -> None:
    for voter in node.voters:
        rid = voter.key.id
        if rid in st.granted or rid in st.rejected or not node.can_send(rid, now_ms):
            continue
        node.send(rid, VoteRequest(
            node.config.cluster_id, rid, st.epoch, node.local_key.id, node.local_key.directory_id,
            voter.key.directory_id, node.log.last_fetched_epoch, node.log.end_offset, pre_vote=pre_vote,
        ), now_ms)


def poll_candidate(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, CandidateState)
    if st.backoff_until is None:
        _ask_for_votes(node, st, now_ms, pre_vote=False)


def poll_prospective(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, ProspectiveState)
    _ask_for_votes(node, st, now_ms, pre_vote=True)


def poll_follower(node: RaftCore, now_ms: int) -> None:
    """One request at a time to the leader: auto-join or UpdateRaftVoter when due, else
    the snapshot download or the next Fetch."""
    st = node.state
    assert isinstance(st, FollowerState)
    if not node.can_send(st.leader_id, now_ms):
        return
    cid = node.config.cluster_id
    if now_ms >= st.update_voter_deadline and not node.is_voter and voter_changes.should_auto_join(node, st):
        # Kafka 4.x controller.quorum.auto.join.enable: an observer that is caught up asks
        # to become a voter (removing a stale entry of its id first), once per
        # update-voter period, in place of a Fetch.
        st.update_voter_deadline = now_ms + timers.update_voter_period_ms(node)
        node.send(st.leader_id, voter_changes.auto_join_request(node), now_ms)
        return
    if now_ms >= st.update_voter_deadline and node.is_voter:
        # FollowerState's update-voter period: UpdateRaftVoter takes the place of the next
        # Fetch when our entry in the voter set is out of date.
        st.update_voter_deadline = now_ms + timers.update_voter_period_ms(node)
        if voter_changes.should_update_voter(node):
            lo, hi = node.local_kraft_versions
            node.send(st.leader_id, UpdateRaftVoterRequest(
                cid, st.epoch, node.local_key.id, node.local_key.directory_id,
                node.local_endpoints, lo, hi), now_ms)
            return
    if st.snapshot is not None:
        snap_id, position = st.snapshot
        node.send(st.leader_id, FetchSnapshotRequest(
            cid, node.local_key.id, node.local_key.directory_id, st.epoch,
            SnapshotId(snap_id.offset, snap_id.epoch), position, node.config.fetch_max_bytes,
        ), now_ms)
    else:
        replication.send_fetch(node, st.leader_id, st.epoch, now_ms)


def poll_leader(node: RaftCore, now_ms: int) -> None:
    """BeginQuorumEpoch to the voters that have not endorsed this epoch (resent), and to
    every voter for a pending read barrier."""
    st = node.state
    assert isinstance(st, LeaderState)
    cid = node.config.cluster_id
    tracker = st.tracker
    for rid in tracker.unacknowledged_voters():
        due = tracker.next_begin_quorum_ms.get(rid, 0)
        if due > now_ms or not node.can_send(rid, now_ms):
            continue
        tracker.next_begin_quorum_ms[rid] = now_ms + node.config.begin_quorum_resend_ms
        target = node.voters.node(rid)
        vdir = target.key.directory_id if target is not None else None
        node.send(rid, BeginQuorumEpochRequest(
            cid, rid, vdir, node.local_key.id, st.epoch, node.local_endpoints), now_ms)
    for rid in list(tracker.next_begin_quorum_ms):
        if tracker.voters.get(rid) is None or tracker.voters[rid].acknowledged:
            del tracker.next_begin_quorum_ms[rid]
    if st.reads:
        # Read index: a BeginQuorumEpoch, which any voter (a Kafka 3.9 one too) answers,
        # sent after the read arrived; its success answer confirms our leadership.
        for voter in node.voters:
            rid = voter.key.id
            if (rid == node.local_key.id or st.read_confirmed.get(rid, 0) >= st.read_round
                    or not node.can_send(rid, now_ms)):
                continue
            node.send(rid, BeginQuorumEpochRequest(
                cid, rid, voter.key.directory_id, node.local_key.id, st.epoch, node.local_endpoints),
                now_ms, read_round=st.read_round)


def poll_resigned(node: RaftCore, now_ms: int) -> None:
    st = node.state
    assert isinstance(st, ResignedState)
    for rid in sorted(st.unacked):
        if node.can_send(rid, now_ms):
            node.send(rid, EndQuorumEpochRequest(
                node.config.cluster_id, node.local_key.id, st.epoch, st.preferred, node.local_endpoints), now_ms)


# ============================================================= deadlines
def deadlines_waiting(node: RaftCore, times: list[int]) -> None:
    """Only voters run elections (a replica removed from the voter set may still be
    unattached or voted; as an observer it looks for the leader instead)."""
    st = node.state
    assert isinstance(st, UnattachedState | VotedState)
    if st.election_deadline is not None and node.is_voter:
        times.append(st.election_deadline)


def deadlines_candidate(node: RaftCore, times: list[int]) -> None:
    st = node.state
    assert isinstance(st, CandidateState)
    times.append(st.backoff_until if st.backoff_until is not None else st.election_deadline)


def deadlines_election(node: RaftCore, times: list[int]) -> None:
    """Prospective or resigned: the election timer."""
    st = node.state
    assert isinstance(st, ProspectiveState | ResignedState)
    times.append(st.election_deadline)


def deadlines_follower(node: RaftCore, times: list[int]) -> None:
    st = node.state
    assert isinstance(st, FollowerState)
    times.append(st.fetch_deadline)
    if voter_changes.should_update_voter(node) and not node.is_busy(st.leader_id):
        times.append(st.update_voter_deadline)


def deadlines_leader(node: RaftCore, times: list[int]) -> None:
    st = node.state
    assert isinstance(st, LeaderState)
    if st.tracker.check_quorum_applies():
        times.append(st.tracker.check_quorum_deadline)
    if st.tracker.pending_add is not None:
        times.append(st.tracker.pending_add.deadline)
    if st.tracker.pending_remove is not None:
        times.append(st.tracker.pending_remove.deadline)
    if st.transfer is not None:
        times.append(st.transfer.deadline)
    times.extend(p.deadline for p in st.parked)
    # A resend blocked by an in-flight request or a backoff waits for that instead.
    times.extend(
        t for rid, t in st.tracker.next_begin_quorum_ms.items()
        if not node.is_busy(rid)
    )


Step = Callable[[RaftCore, int], None]
Deadlines = Callable[[RaftCore, list[int]], None]

#: state name -> what it does when time advances.
TICK: dict[str, Step] = {
    "unattached": tick_waiting, "voted": tick_waiting, "candidate": tick_candidate,
    "prospective": tick_prospective, "follower": tick_follower, "leader": tick_leader,
    "resigned": tick_resigned,
}
#: state name -> the requests it owes its peers.
POLL: dict[str, Step] = {
    "unattached": poll_waiting, "voted": poll_waiting, "candidate": poll_candidate,
    "prospective": poll_prospective, "follower": poll_follower, "leader": poll_leader,
    "resigned": poll_resigned,
}
#: state name -> its own timers, for next_deadline_ms.
DEADLINES: dict[str, Deadlines] = {
    "unattached": deadlines_waiting, "voted": deadlines_waiting, "candidate": deadlines_candidate,
    "prospective": deadlines_election, "follower": deadlines_follower, "leader": deadlines_leader,
    "resigned": deadlines_election,
}
