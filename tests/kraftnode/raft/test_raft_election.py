"""Elections: timeout with jitter, candidate rules, backoff, leader start-up, observers."""

from __future__ import annotations

from kraftnode.raft import errors
from kraftnode.raft.actions import FlushLog, PersistElectionState, SendRequest, StateChanged
from kraftnode.raft.batches import LeaderChangeRecord
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog
from kraftnode.raft.messages import (
    BeginQuorumEpochRequest,
    CurrentLeader,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from kraftnode.raft.states import CandidateState
from kraftnode.raft.voters import ReplicaKey
from tests.kraftnode.raft.rafttest_helpers import (
    CONFIG,
    elect,
    make_node,
    of_type,
    requests_to,
    sent,
    voters,
)


def test_election_timeout_is_jittered_within_one_to_two_timeouts() -> None:
    deadlines = {make_node(1, seed=s).next_deadline_ms() for s in range(30)}
    timeout = CONFIG.election_timeout_ms
    assert all(d is not None and timeout <= d < 2 * timeout for d in deadlines)
    assert len(deadlines) > 10  # really random, not a constant


def test_timeout_makes_a_candidate_that_votes_for_itself_before_asking() -> None:
    node = make_node(1)
    deadline = node.next_deadline_ms()
    assert deadline is not None
    node.take_actions()
    node.tick(deadline - 1)
    assert node.state_name == "unattached"
    node.tick(deadline)
    actions = node.take_actions()
    assert node.state_name == "candidate" and node.epoch == 1
    persist = of_type(actions, PersistElectionState)
    assert persist and persist[0].state == ElectionState(1, -1, node.local_key)
    first_send = next(i for i, a in enumerate(actions) if isinstance(a, SendRequest))
    assert actions.index(persist[0]) < first_send
    reqs = requests_to(actions, VoteRequest)
    assert set(reqs) == {2, 3}
    assert all(r.candidate_epoch == 1 and r.candidate_id == 1 and r.voter_id in (2, 3) for r in reqs.values())


def test_majority_of_grants_makes_a_leader_that_writes_leader_change() -> None:
    node = make_node(1)
    now = elect(node, 0)
    actions = node.take_actions()
    assert node.is_leader and node.epoch == 1
    assert of_type(actions, PersistElectionState)[-1].state == ElectionState(1, 1, node.local_key)
    batch = node.log.read(0, 1 << 20)[0]  # type: ignore[attr-defined]
    assert batch.is_control and batch.epoch == 1
    (record,) = batch.records
    assert isinstance(record, LeaderChangeRecord) and record.leader_id == 1
    assert {k.id for k in record.voters} == {1, 2, 3} and 1 in {k.id for k in record.granting_voters}
    assert of_type(actions, FlushLog)
    # BeginQuorumEpoch goes to every other voter.
    assert set(requests_to(actions, BeginQuorumEpochRequest)) == {2, 3}
    assert now >= CONFIG.election_timeout_ms


def test_majority_rejection_stops_the_election_at_once_and_backs_off() -> None:
    node = make_node(1, voter_set=voters(1, 2, 3, 4, 5))
    now = node.next_deadline_ms()
    assert now is not None
    node.tick(now)
    votes = sent(node.take_actions(), VoteRequest)
    for a in votes[:3]:
        node.handle_response(a.destination, a.correlation_id, VoteResponse(0, 0, -1, 1, False), now + 1)
    st = node.state
    assert isinstance(st, CandidateState) and st.backoff_until is not None
    assert st.backoff_until <= now + 1 + CONFIG.election_backoff_max_ms
    assert st.backoff_until < st.election_deadline
    # Kafka's binaryExponentialElectionBackoffMs: RETRY_BACKOFF_BASE_MS (100) * random(2 << (retries-1))
    assert (st.backoff_until - (now + 1)) % 100 == 0
    node.take_actions()
    node.tick(st.backoff_until)
    assert node.state_name == "candidate" and node.epoch == 2


def test_election_backoff_is_kafkas_binary_exponential_backoff() -> None:
    """100 ms * random.nextInt(2 << min(20, retries - 1)), capped at election.backoff.max.ms
    (KafkaRaftClient.binaryExponentialElectionBackoffMs, RETRY_BACKOFF_BASE_MS = 100)."""
    seen = set()
    for seed in range(40):
        node = make_node(1, voter_set=voters(1, 2, 3), seed=seed)
        now = node.next_deadline_ms()
        assert now is not None
        node.tick(now)
        votes = sent(node.take_actions(), VoteRequest)
        for a in votes[:2]:
            node.handle_response(a.destination, a.correlation_id, VoteResponse(0, 0, -1, 1, False), now + 1)
        st = node.state
        assert isinstance(st, CandidateState) and st.backoff_until is not None
        seen.add(st.backoff_until - (now + 1))
    assert seen == {0, 100}  # retries = 1: nextInt(2)


def test_single_voter_leads_and_commits_alone() -> None:
    """A lone voter stands as it starts, without an election timeout (Kafka's initialize:
    isOnlyVoter && !isCandidate -> transitionToCandidate), and leads alone."""
    node = make_node(1, voter_set=voters(1))
    now = 0
    assert node.is_leader and node.epoch == 1
    assert node.high_watermark == 1  # its LeaderChange record is committed
    node.append(["x"], now + 1)
    assert node.high_watermark == 2


def test_higher_epoch_request_keeps_a_waiting_voters_timer() -> None:
    node = make_node(1)
    deadline = node.next_deadline_ms()
    from tests.kraftnode.raft.rafttest_helpers import vote_request

    log = MemoryRaftLog()
    log.append_as_leader(["a"], 3)
    node = make_node(1, log=log, election=ElectionState(3))
    deadline = node.next_deadline_ms()
    node.handle_request(1, vote_request(2, epoch=9, last_epoch=0, last_offset=0), 10)  # stale log: rejected
    assert node.epoch == 9 and node.state_name == "unattached"
    assert node.next_deadline_ms() == deadline


def test_observer_fetches_from_bootstrap_and_learns_the_leader() -> None:
    node = make_node(4)  # not in voters 1..3
    assert not node.is_voter and node.next_deadline_ms() is None
    node.tick(0)
    (req,) = sent(node.take_actions(), FetchRequest)
    assert req.destination in (1, 2, 3)
    resp = FetchResponse(0, errors.NOT_LEADER_OR_FOLLOWER, 0, CurrentLeader(2, 5))
    node.handle_response(req.destination, req.correlation_id, resp, 3)
    actions = node.take_actions()
    assert node.state_name == "follower" and node.leader_id == 2 and node.epoch == 5
    assert set(requests_to(actions, FetchRequest)) == {2}
    assert of_type(actions, StateChanged)[-1].is_voter is False
    # Observers never start elections, even when the leader goes silent.
    node.tick(10**6)
    assert node.state_name == "unattached" and node.epoch == 5


def test_restarted_leader_comes_back_resigned_and_candidate_resumes() -> None:
    node = make_node(1, election=ElectionState(4, 1, ReplicaKey(1, None)))
    assert node.state_name == "resigned" and node.epoch == 4
    cand = make_node(1, election=ElectionState(4, -1, ReplicaKey(1, None)))
    assert cand.state_name == "candidate" and cand.epoch == 4
    # A log written in a later epoch than the quorum-state wins.
    log = MemoryRaftLog()
    log.append_as_leader(["a"], 7)
    late = make_node(1, log=log, election=ElectionState(4, 2, None))
    assert late.state_name == "unattached" and late.epoch == 7


def test_observer_that_voted_still_looks_for_the_leader() -> None:
    node = make_node(4, election=ElectionState(3, -1, ReplicaKey(2, None)))
    assert not node.is_voter and node.state_name == "voted"
    node.tick(0)
    (req,) = sent(node.take_actions(), FetchRequest)
    node.handle_response(req.destination, req.correlation_id,
                         FetchResponse(0, errors.NOT_LEADER_OR_FOLLOWER, -1, CurrentLeader(2, 3)), 5)
    assert node.state_name == "follower" and node.leader_id == 2
    # The vote cast in epoch 3 stays on record.
    assert node.election_state == ElectionState(3, 2, ReplicaKey(2, None))


def test_single_voter_leader_has_no_past_deadline() -> None:
    node = make_node(1, voter_set=voters(1))  # leads as it starts
    now = 0
    later = now + 10 * CONFIG.fetch_timeout_ms
    node.tick(later)
    assert node.is_leader
    deadline = node.next_deadline_ms()
    assert deadline is None or deadline > later  # a past deadline would make drivers spin
