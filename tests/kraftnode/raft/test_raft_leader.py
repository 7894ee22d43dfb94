"""Leader rules: high watermark, fetch validation, long-poll, KIP-836, check-quorum."""

from __future__ import annotations

from dataclasses import replace

from kraftnode.raft import errors
from kraftnode.raft.actions import AppendCompleted, HighWatermarkAdvanced
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog
from kraftnode.raft.messages import (
    NO_REPLICA_HIGH_WATERMARK,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
)
from kraftnode.raft.tracker import ReplicaTracker
from kraftnode.raft.voters import ReplicaKey
from tests.kraftnode.raft.rafttest_helpers import (
    CONFIG,
    elect,
    fetch_request,
    fetch_responses,
    make_node,
    of_type,
    requests_to,
    sent,
    voters,
)
from tests.simulation import plants


def _leader_with_old_entries(plant: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
    """Node 1 leads epoch 3 over a log holding 4 uncommitted entries of epoch 1."""
    log = MemoryRaftLog()
    for rec in "abcd":
        log.append_as_leader([rec], 1)
    node = make_node(1, log=log, election=ElectionState(2), plant=plant)
    now = elect(node, 0)
    node.take_actions()
    assert node.epoch == 3 and log.end_offset == 5  # offset 4 = LeaderChange
    return node, now


def test_hw_needs_an_entry_of_the_current_epoch() -> None:
    node, now = _leader_with_old_entries()
    # Voter 2 has the old entries (fetches at offset 4, epoch 1): a majority has 0..3.
    node.handle_request(1, fetch_request(2, 3, 4, 1), now)
    assert node.high_watermark == 0
    # Once it also has the LeaderChange (offset 4) the HW moves past everything.
    node.handle_request(2, fetch_request(2, 3, 5, 3), now + 1)
    assert node.high_watermark == 5
    assert HighWatermarkAdvanced(5) in node.take_actions()


def test_planted_bug_commits_old_epoch_entries() -> None:
    node, now = _leader_with_old_entries(frozenset({plants.HW_WITHOUT_CURRENT_EPOCH}))
    node.handle_request(1, fetch_request(2, 3, 4, 1), now)
    assert node.high_watermark == 4


def test_hw_never_goes_back_when_the_voter_set_changes() -> None:
    me = ReplicaKey(1)
    state = ReplicaTracker(me, 2, 0, voters(1, 2, 3), 0, 3000)
    state.update_local(10, 0)
    state.record_fetch(ReplicaKey(2), 10, 10, 0)
    hw = state.candidate_high_watermark(0)
    assert hw == 10
    # New set where the majority is behind: the computed value is lower, so no update.
    state.update_voter_set(voters(1, 4, 5))
    assert state.majority_offset() < 10
    assert state.candidate_high_watermark(10) is None
    # The replica that left keeps its progress, now as an observer.
    assert state.observers[ReplicaKey(2)].end_offset == 10


def test_fetch_validation_and_diverging_epoch() -> None:
    log = MemoryRaftLog()
    log.append_as_leader(["a", "b"], 1)  # 0-1 epoch 1
    node = make_node(1, log=log, election=ElectionState(2))
    now = elect(node, 0)  # epoch 3, LeaderChange at 2
    node.take_actions()
    # Follower wrote offsets 2..5 in epoch 2, which this leader never saw.
    node.handle_request(1, fetch_request(2, 3, 6, 2), now)
    (resp,) = fetch_responses(node.take_actions())
    assert resp.diverging_epoch is not None
    assert (resp.diverging_epoch.epoch, resp.diverging_epoch.end_offset) == (1, 2)
    assert not resp.records
    # Stale and future epochs.
    node.handle_request(2, fetch_request(2, 2, 0, 0), now)
    node.handle_request(3, fetch_request(2, 4, 0, 0), now)
    fenced, unknown = fetch_responses(node.take_actions())
    assert fenced.partition_error_code == errors.FENCED_LEADER_EPOCH
    assert unknown.partition_error_code == errors.UNKNOWN_LEADER_EPOCH
    assert fenced.current_leader.leader_id == 1 and fenced.current_leader.leader_epoch == 3
    # Nonsense positions.
    node.handle_request(4, fetch_request(2, 3, -1, 0), now)
    (bad,) = fetch_responses(node.take_actions())
    assert bad.partition_error_code == errors.INVALID_REQUEST
    # A negative MaxWaitMs too (KafkaRaftClient.handleFetchRequest), answered at once.
    node.handle_request(5, fetch_request(2, 3, node.log.end_offset, 3, max_wait=-1), now)
    (bad,) = fetch_responses(node.take_actions())
    assert bad.partition_error_code == errors.INVALID_REQUEST and bad.high_watermark == -1


def test_long_poll_waits_for_data_or_timeout() -> None:
    node = make_node(1)
    now = elect(node, 0)
    node.take_actions()
    end = node.log.end_offset
    # The first fetch at the end commits the LeaderChange: the HW moves, and the fetch is
    # parked like any caught-up fetch (Kafka 3.9 answers no fetch for the HW alone).
    node.handle_request(6, fetch_request(2, 1, end, 1, max_wait=500), now)
    actions = node.take_actions()
    assert HighWatermarkAdvanced(end) in actions and not fetch_responses(actions)
    node.handle_request(8, fetch_request(3, 1, end, 1, max_wait=500), now)
    assert not fetch_responses(node.take_actions())  # parked
    assert node.next_deadline_ms() == now + 500 or node.next_deadline_ms() <= now + 500  # type: ignore[operator]
    node.append(["x"], now + 10)
    answers = fetch_responses(node.take_actions())
    # the records, and the HW the first fetch moved
    assert len(answers) == 2 and all(r.records and r.records[0].records == ("x",) for r in answers)
    assert all(r.high_watermark == end for r in answers)
    # Timeout: an empty answer after MaxWaitMs, with the HW.
    end = node.log.end_offset
    node.handle_request(10, fetch_request(2, 1, end, 1, max_wait=500), now + 20)  # commits "x"
    assert HighWatermarkAdvanced(end) in node.take_actions()
    node.handle_request(9, fetch_request(3, 1, end, 1, max_wait=500), now + 20)
    node.tick(now + 519)
    assert not fetch_responses(node.take_actions())
    node.tick(now + 520)
    late = fetch_responses(node.take_actions())
    assert len(late) == 2 and all(not r.records and r.high_watermark == end for r in late)


def test_fetch_v18_high_watermark_behind_is_answered_at_once() -> None:
    """KIP-1166 (Fetch v18, Kafka 4.4's isHighWatermarkUpdated): a caught-up replica whose
    high watermark is behind the leader's gets the answer at once instead of being parked;
    one that knows it (or does not say: Long.MAX_VALUE, older versions) is parked."""
    node = make_node(1)
    now = elect(node, 0)
    node.take_actions()
    end = node.log.end_offset
    node.handle_request(6, fetch_request(2, 1, end, 1, max_wait=500), now)  # commits: HW = end
    assert not fetch_responses(node.take_actions())
    assert node.high_watermark == end
    behind = replace(fetch_request(3, 1, end, 1, max_wait=500), high_watermark=end - 1)
    node.handle_request(7, behind, now + 1)
    (answer,) = fetch_responses(node.take_actions())
    assert answer.high_watermark == end and not answer.records
    node.handle_request(8, replace(fetch_request(3, 1, end, 1, max_wait=500), high_watermark=end), now + 2)
    assert not fetch_responses(node.take_actions())  # knows the HW: parked
    assert fetch_request(3, 1, end, 1).high_watermark == NO_REPLICA_HIGH_WATERMARK
    node.handle_request(9, fetch_request(2, 1, end, 1, max_wait=500), now + 3)
    assert not fetch_responses(node.take_actions())  # did not say: parked, as before v18


def test_appends_complete_on_commit_and_fail_on_leadership_loss() -> None:
    node = make_node(1)
    now = elect(node, 0)
    node.take_actions()
    h1 = node.append(["a"], now)
    node.handle_request(1, fetch_request(2, 1, node.log.end_offset, 1), now + 1)
    done = of_type(node.take_actions(), AppendCompleted)
    assert done == [AppendCompleted(h1, 1, errors.NONE)]
    h2 = node.append(["b"], now + 2)
    node.resign(now + 3)
    actions = node.take_actions()
    assert AppendCompleted(h2, -1, errors.NOT_LEADER_OR_FOLLOWER) in actions
    assert node.state_name == "resigned"
    # Not the leader: refused immediately.
    h3 = node.append(["c"], now + 4)
    assert AppendCompleted(h3, -1, errors.NOT_LEADER_OR_FOLLOWER) in node.take_actions()


def test_replica_timestamps_follow_kip_836() -> None:
    node = make_node(1)
    now = elect(node, 0)
    node.take_actions()
    for i in range(3):
        node.append([f"r{i}"], now)
    end = node.log.end_offset  # 4
    node.handle_request(1, fetch_request(2, 1, 1, 1), 100)  # behind: fetched, not caught up
    view = {v.replica_id: v for v in node.describe_quorum(100).current_voters}
    assert view[2].last_fetch_timestamp == 100 and view[2].last_caught_up_timestamp == -1
    assert view[2].log_end_offset == 1
    # Next fetch reaches the end offset the leader had at the previous fetch:
    # caught up as of that previous fetch.
    node.handle_request(2, fetch_request(2, 1, end, 1), 200)
    node.append(["more"], 250)
    view = {v.replica_id: v for v in node.describe_quorum(300).current_voters}
    assert view[2].last_caught_up_timestamp == 200  # fetch_offset >= leader end at 200
    node.handle_request(3, fetch_request(2, 1, end, 1), 400)  # behind "more" but >= end at 200's fetch
    view = {v.replica_id: v for v in node.describe_quorum(400).current_voters}
    assert view[2].last_caught_up_timestamp == 200 and view[2].last_fetch_timestamp == 400
    assert view[1].log_end_offset == node.log.end_offset and view[3].last_fetch_timestamp == -1
    # Observers are tracked too.
    node.handle_request(4, fetch_request(9, 1, 0, 0), 500)
    assert [o.replica_id for o in node.describe_quorum(500).observers] == [9]
    assert node.describe_quorum(500).high_watermark == node.high_watermark


def test_check_quorum_resigns_a_leader_cut_off_from_the_majority() -> None:
    node = make_node(1, voter_set=voters(1, 2, 3, 4, 5))
    now = node.next_deadline_ms()
    assert now is not None
    node.tick(now)
    from kraftnode.raft.messages import VoteRequest, VoteResponse

    for a in sent(node.take_actions(), VoteRequest):
        node.handle_response(a.destination, a.correlation_id, VoteResponse(0, 0, -1, 1, True), now)
    assert node.is_leader
    node.take_actions()
    limit = now + CONFIG.check_quorum_timeout_ms
    # Only voter 2 keeps fetching (2 of 5 with the leader): not a majority.
    t = now
    while t + 500 < limit - 100:
        t += 500
        node.handle_request(t, fetch_request(2, 1, node.log.end_offset, 1), t)
        node.tick(t)
        assert node.is_leader
    node.handle_request(1, fetch_request(3, 1, 0, 0), limit - 50)  # 3 fetches: majority (1,2,3)
    node.tick(limit)
    assert node.is_leader  # timer was reset by the majority
    node.tick(limit - 50 + CONFIG.check_quorum_timeout_ms)
    assert node.state_name == "resigned"
    reqs = requests_to(node.take_actions(), EndQuorumEpochRequest)
    assert set(reqs) == {2, 3, 4, 5}
    # Preferred candidates: most replicated first.
    assert [k.id for k in reqs[2].preferred_candidates][:2] == [2, 3]


def test_begin_quorum_epoch_is_resent_until_endorsed() -> None:
    node = make_node(1)
    now = elect(node, 0)
    first = sent(node.take_actions(), BeginQuorumEpochRequest)
    assert {a.destination for a in first} == {2, 3}
    for a in first:
        if a.destination == 2:
            node.handle_response(2, a.correlation_id, BeginQuorumEpochResponse(0, 0, 1, 1), now + 1)
    # Voter 3 never answers: after the request times out it is asked again.
    t = now + CONFIG.request_timeout_ms + CONFIG.begin_quorum_resend_ms + 1
    node.handle_request(5, fetch_request(2, 1, 0, 0), t - 10)  # keeps check-quorum happy
    node.tick(t)
    node.tick(t + CONFIG.retry_backoff_ms)
    again = requests_to(node.take_actions(), BeginQuorumEpochRequest)
    assert set(again) == {3}
    # A fetch also counts as endorsement.
    node.handle_request(1, fetch_request(3, 1, 0, 0), t + 50)
    node.take_actions()
    node.tick(t + CONFIG.fetch_timeout_ms)
    assert node.is_leader
    assert not requests_to(node.take_actions(), BeginQuorumEpochRequest)


def test_a_voters_record_takes_effect_on_the_leader_at_once() -> None:
    from kraftnode.raft.batches import VotersControlRecord

    node = make_node(1)
    now = elect(node, 0)
    node.take_actions()
    end = node.log.end_offset
    node.handle_request(1, fetch_request(2, 1, end, 1), now)
    assert node.high_watermark == end
    node.append_control([VotersControlRecord(voters(1, 2, 3, 4))], now + 1)
    assert node.voters.ids == {1, 2, 3, 4}
    actions = node.take_actions()
    assert 4 in requests_to(actions, BeginQuorumEpochRequest)  # the new voter is told who leads
    end = node.log.end_offset
    node.handle_request(2, fetch_request(2, 1, end, 1), now + 2)
    assert node.high_watermark < end  # 2 of 4 is not a majority any more
    node.handle_request(3, fetch_request(3, 1, end, 1), now + 3)
    assert node.high_watermark == end


def test_silent_observers_leave_describe_quorum_after_five_minutes() -> None:
    node = make_node(1)
    now = elect(node, 0)
    node.handle_request(1, fetch_request(9, 1, 0, 0), now)
    assert [o.replica_id for o in node.describe_quorum(now + 299_000).observers] == [9]
    assert node.describe_quorum(now + 300_001).observers == ()
    # Voters never expire.
    assert {v.replica_id for v in node.describe_quorum(now + 300_001).current_voters} == {1, 2, 3}
