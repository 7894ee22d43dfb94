"""The sans-IO group coordinator (kraftnode/groups): the classic protocol's rebalances,
timeouts and error codes, offsets, KIP-848 heartbeats, and that a coordinator rebuilt
from the records another one wrote serves the same state (what a new raft leader does)."""

from __future__ import annotations

import uuid
from typing import Any

from kraftnode.groups import GroupConfig, GroupCoordinator, Result
from kraftnode.groups.consumer import ConsumerMember, MemberState, assign, next_assignment
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w

TOPIC = "__cluster_metadata"
TOPIC_ID = uuid.UUID(int=1)
CFG = GroupConfig(initial_rebalance_delay_ms=100, min_session_timeout_ms=100,
                  rebalance_protocols=("classic", "consumer"), consumer_session_timeout_ms=3000,
                  consumer_heartbeat_interval_ms=500)


def _coord(topics: dict[str, tuple[uuid.UUID, int]] | None = None) -> GroupCoordinator:
    return GroupCoordinator(CFG, lambda: topics or {TOPIC: (TOPIC_ID, 1)})


def _subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"   # user data: null


def _join(member: str = "", instance: str | None = None, session: int = 1000, rebalance: int = 2000,
          protocols: tuple[str, ...] = ("range",)) -> w.JoinGroupRequest:
    R = w.JoinGroupRequest
    return R(group_id="g", session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=member,
             group_instance_id=instance, protocol_type="consumer",
             protocols=[R.JoinGroupRequestProtocol(name=p, metadata=_subscription(TOPIC)) for p in protocols],
             reason=None)


def _replies(r: Result) -> dict[Any, Any]:
    return dict(r.replies)


def _sync(member: str, gen: int, assignments: dict[str, bytes] | None = None) -> w.SyncGroupRequest:
    R = w.SyncGroupRequest
    return R(group_id="g", generation_id=gen, member_id=member, group_instance_id=None, protocol_type="consumer",
             protocol_name="range", assignments=[R.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                                 for m, a in (assignments or {}).items()])


def _hb(member: str, gen: int) -> w.HeartbeatRequest:
    return w.HeartbeatRequest(group_id="g", generation_id=gen, member_id=member, group_instance_id=None)


_WRITTEN: list[list[tuple[bytes, bytes | None]]] = []


def _two_member_group(c: GroupCoordinator) -> tuple[str, str, int]:
    """Two members join (KIP-394: MEMBER_ID_REQUIRED first), the initial delay passes, the
    leader syncs: a Stable generation 1."""
    _WRITTEN.clear()
    r = c.join_group("j1", _join(), 9, "c1", "/h", "c1-a", 0)
    assert _replies(r)["j1"].error_code == Errors.MEMBER_ID_REQUIRED and _replies(r)["j1"].member_id == "c1-a"
    assert len(r.records) == 1      # a new group is written at once (empty)
    _WRITTEN.append(r.records)
    r = c.join_group("j1b", _join("c1-a"), 9, "c1", "/h", "unused", 1)
    assert r.replies == [] and r.records == []
    c.join_group("j2", _join(), 9, "c2", "/h", "c2-b", 2)
    r = c.join_group("j2b", _join("c2-b"), 9, "c2", "/h", "unused", 3)
    assert r.replies == []
    assert c.poll(150).replies == []   # group.initial.rebalance.delay.ms: extended, a member joined
    r = c.poll(250)
    got = _replies(r)
    assert set(got) == {"j1b", "j2b"}
    gen = got["j1b"].generation_id
    assert gen == 1 and got["j1b"].leader == "c1-a" and len(got["j1b"].members) == 2 and got["j2b"].members == []
    r = c.sync_group("s2", _sync("c2-b", gen), 5, 260)
    assert r.replies == []          # followers wait for the leader's assignment
    r = c.sync_group("s1", _sync("c1-a", gen, {"c1-a": b"A", "c2-b": b"B"}), 5, 270)
    assert len(r.records) == 1       # the GroupMetadata record with both assignments
    _WRITTEN.append(r.records)
    got = _replies(r)
    assert got["s1"].assignment == b"A" and got["s2"].assignment == b"B" and got["s2"].error_code == 0
    return "c1-a", "c2-b", gen


def test_classic_rebalance_heartbeats_commit_and_session_expiry() -> None:
    c = _coord()
    m1, m2, gen = _two_member_group(c)
    assert c.describe_groups(["g"])[0].group_state == "Stable"
    assert _replies(c.heartbeat("h", _hb(m1, gen), 4, 300))["h"].error_code == 0
    assert _replies(c.heartbeat("h", _hb(m1, gen + 1), 4, 200))["h"].error_code == Errors.ILLEGAL_GENERATION
    assert _replies(c.heartbeat("h", _hb("nobody", gen), 4, 200))["h"].error_code == Errors.UNKNOWN_MEMBER_ID
    C = w.OffsetCommitRequest

    def commit(member: str, g: int, offset: int, version: int = 9) -> Result:
        return c.offset_commit("c", C(group_id="g", generation_id_or_member_epoch=g, member_id=member,
                                      group_instance_id=None, retention_time_ms=-1, topics=[
                                          C.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                              C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                             committed_leader_epoch=-1,
                                                                             committed_metadata="")])]),
                               version, 300)

    ok = commit(m1, gen, 5)
    assert len(ok.records) == 1 and _replies(ok)["c"].topics[0].partitions[0].error_code == 0
    assert _replies(commit(m1, gen - 1, 6))["c"].topics[0].partitions[0].error_code == Errors.ILLEGAL_GENERATION
    assert _replies(commit("", -1, 6))["c"].topics[0].partitions[0].error_code == Errors.UNKNOWN_MEMBER_ID
    assert c.offset_fetch("g", None) == (0, [(TOPIC, [(0, 5, -1, "")])])
    # m2 stops heartbeating; m1 keeps going: m2's session (1 s) expires, the group rebalances
    c.heartbeat("h", _hb(m1, gen), 4, 900)
    r = c.poll(1300)
    assert c.describe_groups(["g"])[0].group_state == "PreparingRebalance"
    assert _replies(c.heartbeat("h", _hb(m1, gen), 4, 1310))["h"].error_code == Errors.REBALANCE_IN_PROGRESS
    r = c.join_group("j", _join(m1), 9, "c1", "/h", "x", 1320)
    got = _replies(r)["j"]
    assert got.error_code == 0 and got.generation_id == gen + 1 and [m.member_id for m in got.members] == [m1]
    # the leader leaves: the group is empty, its generation is written
    r = c.leave_group("l", w.LeaveGroupRequest(group_id="g", members=[
        w.LeaveGroupRequest.MemberIdentity(member_id=m1, group_instance_id=None, reason="bye")]), 5, 1400)
    assert _replies(r)["l"].members[0].error_code == 0
    # nobody left to wait for: the next generation is empty at once, and written
    assert c.describe_groups(["g"])[0].group_state == "Empty" and len(r.records) == 1
    assert c.list_groups([], [])[0].group_state == "Empty"


def test_a_new_coordinator_replays_the_records_and_keeps_the_sessions() -> None:
    c = _coord()
    m1, m2, gen = _two_member_group(c)
    latest: dict[bytes, bytes | None] = {}   # what a follower's state machine keeps: the latest per key
    for r in _WRITTEN:
        latest.update(r)
    new = _coord()
    new.replay_all(latest.items())
    new.on_loaded(10_000)
    d = new.describe_groups(["g"])[0]
    assert d.group_state == "Stable" and [m.member_id for m in d.members] == [m1, m2]
    assert [m.member_assignment for m in d.members] == [b"A", b"B"]
    assert _replies(new.heartbeat("h", _hb(m1, gen), 4, 10_500))["h"].error_code == 0
    # the session timers start at load: m2, silent, expires one session later
    new.heartbeat("h", _hb(m1, gen), 4, 10_900)
    new.poll(11_100)
    assert new.describe_groups(["g"])[0].group_state == "PreparingRebalance"


def test_static_member_rejoin_keeps_its_assignment_and_fences_the_old_id() -> None:
    c = _coord()
    r = c.join_group("j1", _join(instance="i1"), 9, "c1", "/h", "i1-a", 0)
    assert r.replies == []
    got = _replies(c.poll(150))["j1"]
    assert got.error_code == 0 and got.member_id == "i1-a"
    r = c.sync_group("s", _sync("i1-a", got.generation_id, {"i1-a": b"X"}), 5, 200)
    assert _replies(r)["s"].assignment == b"X"
    r = c.join_group("j2", _join(instance="i1"), 9, "c1", "/h", "i1-b", 300)
    got = _replies(r)["j2"]
    assert got.member_id == "i1-b" and got.generation_id == 1 and got.skip_assignment and len(r.records) == 1
    assert _replies(c.heartbeat("h", w.HeartbeatRequest(group_id="g", generation_id=1, member_id="i1-a",
                                                        group_instance_id="i1"), 4, 310))["h"].error_code \
        == Errors.FENCED_INSTANCE_ID


def test_consumer_group_heartbeat_join_assign_and_leave() -> None:
    c = _coord()
    R = w.ConsumerGroupHeartbeatRequest

    def hb(member: str, epoch: int, owned: list[int] | None, now: int) -> Any:
        q = R(group_id="g", member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
              rebalance_timeout_ms=5000 if epoch == 0 else -1,
              subscribed_topic_names=[TOPIC] if epoch == 0 else None, server_assignor=None,
              topic_partitions=None if owned is None else
              [R.TopicPartitions(topic_id=TOPIC_ID, partitions=owned)] if owned else [])
        r = c.consumer_group_heartbeat("t", q, "cli", "/h", f"m{now}", now)
        return r, _replies(r)["t"]

    r, a = hb("", 0, [], 0)
    assert a.error_code == 0 and a.member_epoch == 1 and a.member_id == "m0"
    assert [(t.topic_id, t.partitions) for t in a.assignment.topic_partitions] == [(TOPIC_ID, [0])]
    assert len(r.records) >= 5      # subscription, metadata, epoch, target, current assignment
    r, b = hb("", 0, [], 10)
    assert b.member_epoch == 2 and b.assignment.topic_partitions == []    # the partition is owned
    d = c.consumer_group_describe(["g"], {TOPIC_ID: TOPIC})[0]
    assert d.group_epoch == 2 and d.group_state == "Reconciling"
    # the first member learns it must give the partition up (uniform: sticky, so it keeps it)
    r, a2 = hb("m0", 1, [0], 20)
    assert a2.member_epoch == 2 and a2.error_code == 0
    assert c.consumer_group_describe(["g"], {TOPIC_ID: TOPIC})[0].group_state == "Stable"
    r, bad = hb("m0", 7, [0], 30)
    assert bad.error_code == Errors.FENCED_MEMBER_EPOCH
    # m0 leaves: m10 gets the partition at the next epoch
    r, left = hb("m0", -1, None, 40)
    assert left.error_code == 0 and left.member_epoch == -1
    r, b2 = hb("m10", 2, [], 50)
    assert b2.member_epoch == 3 and [t.partitions for t in b2.assignment.topic_partitions] == [[0]]
    # session expiry fences a silent member
    c.poll(50 + 3001)
    assert c.consumer_group_describe(["g"], {TOPIC_ID: TOPIC})[0].group_state == "Empty"


def test_assignors() -> None:
    t1, t2 = uuid.UUID(int=10), uuid.UUID(int=11)
    topics = {"a": (t1, 3), "b": (t2, 2)}
    got = assign("range", {"m1": ["a", "b"], "m2": ["a"]}, topics, {})
    assert got == {"m1": {t1: {0, 1}, t2: {0, 1}}, "m2": {t1: {2}}}
    got = assign("uniform", {"m1": ["a", "b"], "m2": ["a", "b"]}, topics, {})
    assert sorted(len(ps) for a in got.values() for ps in [set().union(*a.values())]) == [2, 3]
    sticky = assign("uniform", {"m1": ["a", "b"], "m2": ["a", "b"], "m3": ["a", "b"]}, topics, got)
    kept = sum(len(sticky[m].get(t, set()) & got[m].get(t, set())) for m in got for t in (t1, t2))
    assert kept >= 3 and sorted(sum(len(p) for p in a.values()) for a in sticky.values()) == [1, 2, 2]


def test_reconciliation_revokes_before_assigning() -> None:
    m = ConsumerMember("m", member_epoch=1, previous_member_epoch=0,
                       assigned_partitions={TOPIC_ID: {0, 1}})
    n = next_assignment(m, 2, {TOPIC_ID: {1}}, lambda t, p: -1, [(TOPIC_ID, [0, 1])])
    assert n.state == MemberState.UNREVOKED_PARTITIONS and n.partitions_pending_revocation == {TOPIC_ID: {0}}
    assert n.member_epoch == 1
    done = next_assignment(n, 2, {TOPIC_ID: {1}}, lambda t, p: -1, [(TOPIC_ID, [1])])
    assert done.state == MemberState.STABLE and done.member_epoch == 2 and done.assigned_partitions == {TOPIC_ID: {1}}
    # a partition still held by another member is not given out yet
    wait = next_assignment(ConsumerMember("x", member_epoch=1), 2, {TOPIC_ID: {0}}, lambda t, p: 1, [])
    assert wait.state == MemberState.UNRELEASED_PARTITIONS and wait.assigned_partitions == {}


def test_describe_groups_v6_names_a_group_it_does_not_describe() -> None:
    """KIP-1043 (DescribeGroups v6): a group that is not there, or is not a classic group,
    is Dead with GROUP_ID_NOT_FOUND and Kafka's message; before v6 it is Dead without error
    (what a genuine Kafka 4.4 broker answers: tests/interop/test_kafka44_versions.py)."""
    c = _coord()
    R = w.ConsumerGroupHeartbeatRequest
    c.consumer_group_heartbeat("t", R(group_id="kip848", member_id="", member_epoch=0, instance_id=None,
                                      rack_id=None, rebalance_timeout_ms=5000, subscribed_topic_names=[TOPIC],
                                      server_assignor=None, topic_partitions=[]), "cli", "/h", "m0", 0)
    _two_member_group(c)
    old = {d.group_id: d for d in c.describe_groups(["none", "kip848", "g"], 5)}
    new = {d.group_id: d for d in c.describe_groups(["none", "kip848", "g"], 6)}
    for gid in ("none", "kip848"):
        assert (old[gid].error_code, old[gid].error_message, old[gid].group_state) == (0, None, "Dead")
        assert (new[gid].error_code, new[gid].group_state) == (Errors.GROUP_ID_NOT_FOUND, "Dead")
    assert new["none"].error_message == "Group none not found."
    assert new["kip848"].error_message == "Group kip848 is not a classic group."
    assert (new["g"].error_code, new["g"].error_message, new["g"].group_state) == (0, None, "Stable")


def test_offset_commit_answers_by_the_topic_id_it_was_asked_with() -> None:
    """OffsetCommit v10 (KIP-848): the response names each topic by id, as the request did;
    the coordinator stores the offset under the topic's name (the shell resolved it), and an
    unknown id the shell refused is answered as refused, nothing written."""
    c = _coord()
    C = w.OffsetCommitRequest
    unknown = uuid.UUID(int=7)
    q = C(group_id="s", generation_id_or_member_epoch=-1, member_id="", topics=[
        C.OffsetCommitRequestTopic(name=TOPIC, topic_id=TOPIC_ID, partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=11)]),
        C.OffsetCommitRequestTopic(name="", topic_id=unknown, partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=12)])])
    r = c.offset_commit("c", q, 10, 100, {("", 0): int(Errors.UNKNOWN_TOPIC_ID)})
    resp = _replies(r)["c"]
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in resp.topics] == [
        (TOPIC_ID, [0]), (unknown, [Errors.UNKNOWN_TOPIC_ID])]
    assert len(r.records) == 1
    assert c.offset_fetch("s", [(TOPIC, [0])]) == (0, [(TOPIC, [(0, 11, -1, "")])])
