"""KIP-853 voter changes in the core, as Kafka 3.9's Add/Remove/UpdateVoterHandler do them.

A dynamic quorum here is a log that starts with the bootstrap control batch
(KRaftVersion 1 and a VotersRecord with directory ids), as the simulator builds it.
"""

from __future__ import annotations

import random

from rafttest_helpers import (
    CLUSTER,
    CONFIG,
    dir_id,
    elect,
    fetch_request,
    make_node,
    of_type,
    responses,
    sent,
    voters,
)

from kraftnode.raft import errors
from kraftnode.raft.actions import Action, SendRequest
from kraftnode.raft.batches import KRaftVersionControlRecord, VotersControlRecord
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog, OffsetAndEpoch
from kraftnode.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CurrentLeader,
    FetchResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
)
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet


def ep(i: int, host: str | None = None) -> tuple[Endpoint, ...]:
    return (Endpoint("CONTROLLER", host or f"h{i}", 9000 + i),)


def dynamic_log(*ids: int) -> MemoryRaftLog:
    log = MemoryRaftLog()
    vs = VoterSet.of(VoterNode(n.key, n.endpoints, 0, 1) for n in voters(*ids, directory_ids=True))
    log.append_as_leader([KRaftVersionControlRecord(1), VotersControlRecord(vs)], 0, is_control=True)
    log.flush()
    return log


def dynamic_leader(*ids: int) -> tuple[RaftNode, int]:
    """Node 1 leading a dynamic quorum, its LeaderChange committed (the HW is known)."""
    node = make_node(1, VoterSet(), dynamic_log(*ids))
    now = elect(node, 0)
    node.take_actions()
    end = node.log.end_offset
    for rid in sorted(set(ids) - {1})[: len(ids) // 2]:
        node.handle_request(100 + rid, fetch_request(rid, node.epoch, end, node.epoch), now)
    assert node.high_watermark == end
    node.take_actions()
    return node, now


def add_request(i: int, directory: int | None = None, listeners: tuple[Endpoint, ...] | None = None,
                cluster: str | None = CLUSTER) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(cluster, 30_000, i, dir_id(directory if directory is not None else i),
                               ep(i) if listeners is None else listeners)


def remove_request(i: int, directory: int | None = None) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(CLUSTER, i, dir_id(directory if directory is not None else i))


def answers(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [r for r in responses(actions) if isinstance(r, kind)]


def catch_up_observer(node: RaftNode, i: int, now: int) -> None:
    node.handle_request(200 + i, fetch_request(i, node.epoch, node.log.end_offset, node.epoch), now)
    node.take_actions()


def start_add(node: RaftNode, i: int, now: int) -> SendRequest:
    node.handle_request(7, add_request(i), now)
    actions = node.take_actions()
    assert not answers(actions, AddRaftVoterResponse), answers(actions, AddRaftVoterResponse)
    (probe,) = sent(actions, ApiVersionsRequest)
    return probe


# ------------------------------------------------------------------ add
def test_add_voter_probes_the_new_voter_then_answers_when_the_voters_record_commits() -> None:
    node, now = dynamic_leader(1, 2, 3)
    catch_up_observer(node, 4, now)
    probe = start_add(node, 4, now + 1)
    assert probe.destination == 4 and probe.endpoints == ep(4)
    node.handle_response(4, probe.correlation_id, ApiVersionsResponse(0, (0, 1)), now + 2)
    actions = node.take_actions()
    assert not answers(actions, AddRaftVoterResponse)  # not committed yet
    assert node.voters.ids == {1, 2, 3, 4}  # effective on append
    assert node.voters.node(4).key == ReplicaKey(4, dir_id(4))  # type: ignore[union-attr]
    assert (node.voters.node(4).min_kraft_version, node.voters.node(4).max_kraft_version) == (0, 1)  # type: ignore[union-attr]
    end = node.log.end_offset
    # The new set {1,2,3,4} needs 3: the leader and voter 2 are not enough.
    node.handle_request(8, fetch_request(2, node.epoch, end, node.epoch), now + 3)
    assert not answers(node.take_actions(), AddRaftVoterResponse)
    node.handle_request(9, fetch_request(4, node.epoch, end, node.epoch), now + 4)
    assert answers(node.take_actions(), AddRaftVoterResponse) == [AddRaftVoterResponse(errors.NONE)]
    assert node.high_watermark == end


def test_add_voter_refusals_before_the_probe() -> None:
    node, now = dynamic_leader(1, 2, 3)
    node.handle_request(1, add_request(2), now)  # id 2 is a voter (even with another directory)
    node.handle_request(2, add_request(2, directory=9), now)
    node.handle_request(3, add_request(4, cluster="other"), now)
    node.handle_request(4, add_request(4, listeners=(Endpoint("OTHER", "h4", 1),)), now)
    node.handle_request(5, AddRaftVoterRequest(CLUSTER, 1, 4, None, ep(4)), now)
    got = [(r.error_code, r.error_message is not None) for r in answers(node.take_actions(), AddRaftVoterResponse)]
    assert got == [(errors.DUPLICATE_VOTER, True), (errors.DUPLICATE_VOTER, True),
                   (errors.INCONSISTENT_CLUSTER_ID, False), (errors.INVALID_REQUEST, True),
                   (errors.INVALID_REQUEST, True)]


def test_add_voter_waits_for_the_leaders_high_watermark() -> None:
    node = make_node(1, VoterSet(), dynamic_log(1, 2, 3))
    now = elect(node, 0)
    node.take_actions()
    node.handle_request(1, add_request(4), now)
    (resp,) = answers(node.take_actions(), AddRaftVoterResponse)
    assert resp.error_code == errors.REQUEST_TIMED_OUT and "HWM" in (resp.error_message or "")


def test_static_quorum_add_and_remove_are_unsupported_version() -> None:
    """Add/Remove need kraft.version 1; an UpdateRaftVoter is kept in memory for the upgrade
    (Kafka 4.1; Kafka 3.9 answered it UNSUPPORTED_VERSION too)."""
    node = make_node(1)  # controller.quorum.voters: kraft.version 0
    now = elect(node, 0)
    node.take_actions()
    node.handle_request(1, fetch_request(2, node.epoch, node.log.end_offset, node.epoch), now)
    node.take_actions()
    node.handle_request(2, add_request(4), now)
    node.handle_request(3, remove_request(3), now)
    node.handle_request(4, UpdateRaftVoterRequest(CLUSTER, node.epoch, 2, dir_id(2), ep(2), 0, 1), now)
    rs = responses(node.take_actions())
    assert [r.error_code for r in rs] == [errors.UNSUPPORTED_VERSION] * 2 + [errors.NONE]  # type: ignore[attr-defined]
    assert "kraft.version feature is 0" in (rs[0].error_message or "")  # type: ignore[attr-defined]


def test_only_the_leader_changes_voters() -> None:
    node = make_node(2, VoterSet(), dynamic_log(1, 2, 3))
    node.handle_request(1, add_request(4), 0)
    node.handle_request(2, remove_request(3), 0)
    node.handle_request(3, UpdateRaftVoterRequest(CLUSTER, 0, 3, dir_id(3), ep(3), 0, 1), 0)
    add, remove, update = responses(node.take_actions())
    assert add == AddRaftVoterResponse(errors.NOT_LEADER_OR_FOLLOWER)
    assert remove == RemoveRaftVoterResponse(errors.NOT_LEADER_OR_FOLLOWER)
    assert isinstance(update, UpdateRaftVoterResponse)
    assert update.error_code == errors.NOT_LEADER_OR_FOLLOWER and update.current_leader == CurrentLeader(-1, 0)


def test_one_change_at_a_time() -> None:
    node, now = dynamic_leader(1, 2, 3)
    catch_up_observer(node, 4, now)
    catch_up_observer(node, 5, now)
    probe = start_add(node, 4, now)
    node.handle_request(1, add_request(5), now + 1)  # probe in flight
    node.handle_request(2, remove_request(3), now + 1)
    rs = responses(node.take_actions())
    assert [r.error_code for r in rs] == [errors.REQUEST_TIMED_OUT] * 2  # type: ignore[attr-defined]
    node.handle_response(4, probe.correlation_id, ApiVersionsResponse(0, (0, 1)), now + 2)
    node.take_actions()
    node.handle_request(3, remove_request(3), now + 3)  # VotersRecord appended, not committed
    assert [r.error_code for r in responses(node.take_actions())] == [errors.REQUEST_TIMED_OUT]  # type: ignore[attr-defined]


def test_uncommitted_voters_record_blocks_changes_even_after_the_add_expired() -> None:
    node, now = dynamic_leader(1, 2, 3)
    catch_up_observer(node, 4, now)
    probe = start_add(node, 4, now)
    node.handle_response(4, probe.correlation_id, ApiVersionsResponse(0, (0, 1)), now + 1)
    node.take_actions()
    later = now + CONFIG.request_timeout_ms
    assert node.next_deadline_ms() is not None and node.next_deadline_ms() <= later  # type: ignore[operator]
    node.tick(later)
    assert answers(node.take_actions(), AddRaftVoterResponse) == [AddRaftVoterResponse(errors.REQUEST_TIMED_OUT)]
    node.handle_request(1, remove_request(3), later + 1)
    (resp,) = answers(node.take_actions(), RemoveRaftVoterResponse)
    assert resp.error_code == errors.REQUEST_TIMED_OUT and "latest voter change" in (resp.error_message or "")


def test_add_voter_aborts_after_the_probe() -> None:
    node, now = dynamic_leader(1, 2, 3)
    # Never fetched: not caught up.
    probe = start_add(node, 4, now)
    node.handle_response(4, probe.correlation_id, ApiVersionsResponse(0, (0, 1)), now + 1)
    (r,) = answers(node.take_actions(), AddRaftVoterResponse)
    assert r.error_code == errors.REQUEST_TIMED_OUT and "lagging" in (r.error_message or "")
    # kraft.version range without 1.
    catch_up_observer(node, 5, now + 100)
    probe = start_add(node, 5, now + 100)
    node.handle_response(5, probe.correlation_id, ApiVersionsResponse(0, (0, 0)), now + 101)
    (r,) = answers(node.take_actions(), AddRaftVoterResponse)
    assert r.error_code == errors.INVALID_REQUEST
    # No kraft.version feature at all.
    probe = start_add(node, 5, now + 200)
    node.handle_response(5, probe.correlation_id, ApiVersionsResponse(0, None), now + 201)
    assert answers(node.take_actions(), AddRaftVoterResponse)[0].error_code == errors.INVALID_REQUEST
    # ApiVersions answered with an error, or the connection failed.
    probe = start_add(node, 5, now + 300)
    node.handle_response(5, probe.correlation_id, ApiVersionsResponse(errors.BROKER_NOT_AVAILABLE), now + 301)
    assert answers(node.take_actions(), AddRaftVoterResponse)[0].error_code == errors.REQUEST_TIMED_OUT
    probe = start_add(node, 5, now + 400)
    node.request_failed(5, probe.correlation_id, now + 401)
    assert answers(node.take_actions(), AddRaftVoterResponse)[0].error_code == errors.REQUEST_TIMED_OUT
    assert node.voters.ids == {1, 2, 3}


def test_losing_leadership_fails_the_pending_change() -> None:
    node, now = dynamic_leader(1, 2, 3)
    catch_up_observer(node, 4, now)
    start_add(node, 4, now)
    node.handle_request(1, fetch_request(2, node.epoch + 1, 0, 0), now + 1)  # nothing; a higher epoch:
    node.take_actions()
    from kraftnode.raft.messages import BeginQuorumEpochRequest

    node.handle_request(2, BeginQuorumEpochRequest(CLUSTER, 1, dir_id(1), 2, node.epoch + 1), now + 2)
    assert AddRaftVoterResponse(errors.NOT_LEADER_OR_FOLLOWER) in responses(node.take_actions())


# ------------------------------------------------------------------ remove
def test_remove_voter() -> None:
    node, now = dynamic_leader(1, 2, 3)
    node.handle_request(1, remove_request(4), now)
    node.handle_request(2, remove_request(3, directory=9), now)  # wrong directory id
    rs = answers(node.take_actions(), RemoveRaftVoterResponse)
    assert [r.error_code for r in rs] == [errors.VOTER_NOT_FOUND] * 2
    node.handle_request(3, remove_request(3), now + 1)
    assert not answers(node.take_actions(), RemoveRaftVoterResponse)
    assert node.voters.ids == {1, 2}
    node.handle_request(4, fetch_request(2, node.epoch, node.log.end_offset, node.epoch), now + 2)
    assert answers(node.take_actions(), RemoveRaftVoterResponse) == [RemoveRaftVoterResponse(errors.NONE)]
    assert node.is_leader


def test_the_last_voter_cannot_be_removed() -> None:
    node = make_node(1, VoterSet(), dynamic_log(1))
    node.tick(node.next_deadline_ms() or 0)
    assert node.is_leader
    node.take_actions()
    node.handle_request(1, remove_request(1), 5000)
    (r,) = answers(node.take_actions(), RemoveRaftVoterResponse)
    assert r.error_code == errors.VOTER_NOT_FOUND


def test_a_leader_that_removes_itself_resigns_after_the_commit() -> None:
    node, now = dynamic_leader(1, 2, 3)
    epoch = node.epoch
    node.handle_request(1, remove_request(1), now)
    node.take_actions()
    assert node.is_leader and not node.is_voter
    end = node.log.end_offset
    node.handle_request(2, fetch_request(2, epoch, end, epoch), now + 1)
    assert node.is_leader  # {2,3} needs both
    node.handle_request(3, fetch_request(3, epoch, end, epoch), now + 2)
    actions = node.take_actions()
    assert RemoveRaftVoterResponse(errors.NONE) in responses(actions)
    assert node.state_name == "resigned"
    deadline = node.next_deadline_ms()
    assert deadline is not None
    node.tick(deadline)
    assert node.state_name == "unattached" and node.epoch == epoch + 1
    after = node.next_deadline_ms()
    assert after is None or after > deadline


# ------------------------------------------------------------------ update
def test_update_voter_appends_and_answers_at_once() -> None:
    node, now = dynamic_leader(1, 2, 3)
    node.handle_request(1, UpdateRaftVoterRequest(CLUSTER, node.epoch, 2, dir_id(2), ep(2, "new-host"), 0, 1), now)
    (r,) = answers(node.take_actions(), UpdateRaftVoterResponse)
    assert r.error_code == errors.NONE and r.current_leader == CurrentLeader(1, node.epoch)
    assert node.voters.endpoints_of(2) == ep(2, "new-host")


def test_update_voter_refusals() -> None:
    node, now = dynamic_leader(1, 2, 3)
    e = node.epoch
    cases = [
        UpdateRaftVoterRequest(CLUSTER, e - 1, 2, dir_id(2), ep(2), 0, 1),  # fenced
        UpdateRaftVoterRequest(CLUSTER, e + 1, 2, dir_id(2), ep(2), 0, 1),  # unknown epoch
        UpdateRaftVoterRequest(CLUSTER, e, 2, None, ep(2), 0, 1),  # no directory id
        UpdateRaftVoterRequest(CLUSTER, e, 2, dir_id(2), (Endpoint("X", "h", 1),), 0, 1),  # no listener
        UpdateRaftVoterRequest(CLUSTER, e, 2, dir_id(2), ep(2), 1, 0),  # bad range
        UpdateRaftVoterRequest(CLUSTER, e, 2, dir_id(2), ep(2), 0, 0),  # does not support kraft.version 1
        UpdateRaftVoterRequest(CLUSTER, e, 2, dir_id(9), ep(2), 0, 1),  # other directory
        UpdateRaftVoterRequest(CLUSTER, e, 7, dir_id(7), ep(7), 0, 1),  # not a voter
    ]
    for i, req in enumerate(cases):
        node.handle_request(i, req, now)
    got = [r.error_code for r in answers(node.take_actions(), UpdateRaftVoterResponse)]
    assert got == [errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH, errors.INVALID_REQUEST,
                   errors.INVALID_REQUEST, errors.INVALID_REQUEST, errors.INVALID_REQUEST,
                   errors.VOTER_NOT_FOUND, errors.VOTER_NOT_FOUND]
    assert node.log.end_offset == node.high_watermark  # nothing appended


def follower(local_endpoints: tuple[Endpoint, ...]) -> RaftNode:
    return RaftNode(2, dir_id(2), CONFIG, dynamic_log(1, 2, 3), ElectionState(1, 1, None), VoterSet(),
                    random.Random(1), 0, local_endpoints=local_endpoints)


def run_follower(node: RaftNode, until: int, step: int = 400) -> list[tuple[int, SendRequest]]:
    """Tick every ``step`` ms, answer Fetches and UpdateRaftVoters as a quiet leader would;
    returns the UpdateRaftVoter requests with their send times."""
    updates: list[tuple[int, SendRequest]] = []
    outstanding: list[SendRequest] = []
    for t in range(0, until, step):
        node.tick(t)
        outstanding += of_type(node.take_actions(), SendRequest)
        answering, outstanding = outstanding, []
        for a in answering:  # the leader answers each request within the step
            if isinstance(a.request, UpdateRaftVoterRequest):
                updates.append((t, a))
                node.handle_response(1, a.correlation_id, UpdateRaftVoterResponse(0, CurrentLeader(1, 1)), t)
            else:
                node.handle_response(1, a.correlation_id, FetchResponse(
                    0, 0, node.log.end_offset, CurrentLeader(1, 1), 0), t)
            outstanding += of_type(node.take_actions(), SendRequest)
        assert node.state_name == "follower"
    return updates


def test_a_follower_sends_update_raft_voter_when_its_entry_is_stale() -> None:
    # Voter 2's VotersRecord entry says h2:9002; it now listens on moved:9002.
    node = follower(ep(2, "moved"))
    period = CONFIG.fetch_timeout_ms  # Kafka 4.4's update-voter period: one fetch timeout
    updates = run_follower(node, 2 * period + period // 2)
    # Once per update-voter period, in place of a Fetch.
    assert [t // period for t, _ in updates] == [1, 2]
    req = updates[0][1].request
    assert isinstance(req, UpdateRaftVoterRequest)
    assert (req.voter_id, req.voter_directory_id, req.listeners, req.current_leader_epoch) == (
        2, dir_id(2), ep(2, "moved"), 1)
    assert (req.min_supported_version, req.max_supported_version) == (0, 1)


def test_a_follower_whose_entry_is_current_never_sends_update_raft_voter() -> None:
    node = follower(ep(2))
    assert run_follower(node, 12 * CONFIG.fetch_timeout_ms) == []


# ------------------------------------------------------------------ bootstrap
def test_first_leader_writes_the_bootstrap_voters_to_the_log() -> None:
    """Voters from the 0-0 bootstrap checkpoint are rewritten into the first leader's
    LeaderChange batch, so that observers fetching from offset 0 learn them."""
    checkpoint = MemoryRaftLog()
    checkpoint.append_as_leader([KRaftVersionControlRecord(1), VotersControlRecord(voters(1, directory_ids=True))],
                                0, is_control=True)
    log = MemoryRaftLog()
    log.snapshot_batches = list(checkpoint.batches)
    log.snapshot_id = OffsetAndEpoch(0, 0)  # 0-0.checkpoint: the voters are "at offset -1"
    node = make_node(1, VoterSet(), log)
    assert node.is_leader  # a lone voter stands as it starts (Kafka's initialize)
    (batch,) = log.batches
    kinds = [type(r).__name__ for r in batch.control_records()]
    assert kinds == ["LeaderChangeRecord", "KRaftVersionControlRecord", "VotersControlRecord"]
    assert node.history.latest_voters_offset() == 2


def test_a_new_leader_with_a_stale_entry_rewrites_it_at_the_start_of_its_epoch() -> None:
    node = RaftNode(1, dir_id(1), CONFIG, dynamic_log(1), ElectionState(0), VoterSet(), random.Random(3), 0,
                    local_endpoints=ep(1, "moved"))
    node.tick(node.next_deadline_ms() or 0)
    assert node.is_leader
    kinds = [type(r).__name__ for r in node.log.batches[-1].control_records()]
    assert kinds == ["LeaderChangeRecord", "KRaftVersionControlRecord", "VotersControlRecord"]
    assert node.voters.endpoints_of(1) == ep(1, "moved")
    # Up to date: a later epoch writes only its LeaderChange.
    node.resign(10)
    node.tick(node.next_deadline_ms() or 0)
    assert node.is_leader
    assert [type(r).__name__ for r in node.log.batches[-1].control_records()] == ["LeaderChangeRecord"]


def test_the_cores_error_codes_are_kafkas() -> None:
    from kraftnode.protocol import Errors

    for code in (errors.UNSUPPORTED_VERSION, errors.DUPLICATE_VOTER, errors.VOTER_NOT_FOUND,
                 errors.REQUEST_TIMED_OUT, errors.INVALID_REQUEST, errors.NOT_LEADER_OR_FOLLOWER):
        assert Errors(code).name == errors.name(code)


def test_voter_sets_in_messages_are_printed_in_kafkas_hashset_order() -> None:
    """Kafka's DUPLICATE_VOTER / VOTER_NOT_FOUND messages print VoterSet.voterKeys(), a
    HashSet<ReplicaKey>: the genuine Java code (tests/interop/java/admin, "voterkeys") prints
    this set as ids 3, 4, 1, 2, not in id order."""
    from kraftnode.raft.reconfig import keys_text
    from kraftnode.raft.voters import ReplicaKey
    from recordbatch.wire import uuid_from_base64

    dirs = {1: "ILzLwC_lR2uHrwP2ovtmWg", 2: "AcBqLRtWTcCWsnguOfwv5w", 3: "uudIqVRiR3KWeO6v93KFpQ",
            4: "oS6zhsViT1SzEwmfO-x-Yw"}
    keys = [ReplicaKey(i, uuid_from_base64(d)) for i, d in dirs.items()]
    assert keys_text(keys) == "[" + ", ".join(
        f"ReplicaKey(id={i}, directoryId=Optional[{dirs[i]}])" for i in (3, 4, 1, 2)) + "]"


def test_add_voter_v1_without_ack_when_committed_answers_at_the_append() -> None:
    """AddRaftVoter v1, AckWhenCommitted false (Kafka 4.4's AddVoterHandler): answered once the
    VotersRecord is appended; the change stays pending until it commits, so another voter
    change is still refused, and the commit answers nothing more."""
    node, now = dynamic_leader(1, 2, 3)
    catch_up_observer(node, 4, now)
    node.handle_request(7, AddRaftVoterRequest(CLUSTER, 30_000, 4, dir_id(4), ep(4), ack_when_committed=False), now)
    (probe,) = sent(node.take_actions(), ApiVersionsRequest)
    node.handle_response(4, probe.correlation_id, ApiVersionsResponse(0, (0, 1)), now + 1)
    assert answers(node.take_actions(), AddRaftVoterResponse) == [AddRaftVoterResponse(errors.NONE)]
    assert node.voters.ids == {1, 2, 3, 4} and node.high_watermark < node.log.end_offset
    node.handle_request(8, remove_request(3), now + 2)  # the add is still pending
    (refused,) = answers(node.take_actions(), RemoveRaftVoterResponse)
    assert refused.error_code == errors.REQUEST_TIMED_OUT
    end = node.log.end_offset
    node.handle_request(9, fetch_request(2, node.epoch, end, node.epoch), now + 3)
    node.handle_request(10, fetch_request(4, node.epoch, end, node.epoch), now + 4)
    assert not answers(node.take_actions(), AddRaftVoterResponse)  # answered once, at the append
    assert node.high_watermark == end


def test_add_voter_v0_default_still_answers_at_the_commit() -> None:
    """A request without the field (v0) means AckWhenCommitted true: the test above fails the
    other way round if the default were false."""
    assert add_request(4).ack_when_committed is True
