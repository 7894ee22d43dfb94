"""Rebalances of a classic group of genuine Java consumers (``kafka-verifiable-consumer.sh``)
on a real 3-node quorum: one member killed with kill -9 and one leaving gracefully, the
partition moves within the session timeout and no committed offset goes backwards; then
kill -9 of the raft leader while the group rebalances: the group settles on the new leader
and nothing is consumed twice but at-least-once redelivery from the last commit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster, serving, wait_for_hw
from tests.support.kafka import KafkaHome, java_env
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
TOPIC = "__cluster_metadata"
SESSION_MS = 6000
GROUP_CONFIG = "group.initial.rebalance.delay.ms=100\ngroup.min.session.timeout.ms=1000\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from serving(StaticCluster(tmp_path_factory.mktemp("rebalances"), 3, extra=GROUP_CONFIG))


def produce(cluster: Cluster, n: int, tag: str) -> int:
    """Write n records (acks=all); the offset after the last."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", retries=10)
    try:
        return 1 + max(p.send(TOPIC, f"{tag}-{i}".encode()).get(timeout=30).offset for i in range(n))
    finally:
        p.close()


class Member:
    """One kafka-verifiable-consumer.sh process and its events."""

    def __init__(self, kafka: KafkaHome, bootstrap: str, group: str, out: Path) -> None:
        self.out = out
        with out.open("w") as f:
            self.proc = subprocess.Popen(
                [str(kafka.script("kafka-verifiable-consumer")), "--bootstrap-server", bootstrap, "--topic", TOPIC,
                 "--group-id", group, "--reset-policy", "earliest", "--session-timeout", str(SESSION_MS)],
                stdout=f, stderr=subprocess.DEVNULL, env=java_env(), start_new_session=True)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.out.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def owns(self) -> bool:
        """Its latest assignment holds the partition."""
        owned = False
        for e in self.events():
            if e["name"] == "partitions_assigned":
                owned = any(p["partition"] == 0 for p in e["partitions"])
            elif e["name"] == "partitions_revoked":
                owned = owned and not any(p["partition"] == 0 for p in e["partitions"])
        return owned

    def assigned_at(self) -> list[int]:
        return [e["timestamp"] for e in self.events()
                if e["name"] == "partitions_assigned" and any(p["partition"] == 0 for p in e["partitions"])]

    def kill(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def wait_until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def committed(members: list[Member]) -> list[tuple[int, int]]:
    """(timestamp, offset) of every successful commit, in time order."""
    out = [(e["timestamp"], o["offset"]) for m in members for e in m.events()
           if e["name"] == "offsets_committed" and e.get("success") for o in e["offsets"]]
    return sorted(out)


def consumed(members: list[Member]) -> list[tuple[int, int, int]]:
    """(timestamp, min offset, max offset) of every batch consumed, in time order."""
    return sorted((e["timestamp"], p["minOffset"], p["maxOffset"]) for m in members for e in m.events()
                  if e["name"] == "records_consumed" for p in e["partitions"])


def check_at_least_once(members: list[Member]) -> None:
    """Committed offsets never go backwards, and a record is consumed twice only when a
    new owner starts over from the last committed offset (at-least-once)."""
    commits = committed(members)
    offsets = [o for _, o in commits]
    assert offsets == sorted(offsets), offsets
    seen_max = -1
    for ts, lo, hi in consumed(members):
        if lo <= seen_max:
            last = [o for t, o in commits if t <= ts]
            assert last and lo >= last[-1] - 0, (ts, lo, hi, last[-1:] if last else None)
            assert lo in {o for _, o in commits}, (lo, offsets)
        seen_max = max(seen_max, hi)


def test_kill_9_and_graceful_leave_then_leader_kill_during_a_rebalance(cluster: Cluster, kafka_home: KafkaHome,
                                                                        tmp_path: Path) -> None:
    produce(cluster, 20, "before")
    members = [Member(kafka_home, cluster.bootstrap(), "g-rebalance", tmp_path / f"m{i}.jsonl") for i in range(3)]
    try:
        def settled() -> Member | None:
            """The owner, once every member started and was assigned after the last start."""
            starts = [e["timestamp"] for m in members for e in m.events() if e["name"] == "startup_complete"]
            if len(starts) < len(members):
                return None
            if not all(any(e["name"] == "partitions_assigned" and e["timestamp"] >= max(starts)
                           for e in m.events()) for m in members):
                return None
            return next((m for m in members if m.owns()), None)
        owner = wait_until("all three members to join and one to own the partition", settled, 60)
        after = produce(cluster, 5, "owned")
        wait_until("the owner to consume and commit", lambda: committed([owner])
                   and committed([owner])[-1][1] >= after, 30)

        # kill -9 of the owner: its session expires, the partition moves to another member
        t_kill = time.time() * 1000
        owner.kill(signal.SIGKILL)
        produce(cluster, 10, "after-kill")
        rest = [m for m in members if m is not owner]
        second = wait_until("another member to own the partition",
                            lambda: next((m for m in rest if m.owns() and m.assigned_at()[-1] > t_kill), None), 30)
        moved_ms = second.assigned_at()[-1] - t_kill
        assert moved_ms < SESSION_MS + 4000, moved_ms   # the session timeout, plus a rejoin

        # a graceful leave (LeaveGroup): the last member gets it at once, no session wait
        # (it commits as it catches up from the owner's last commit: wait for it to get there)
        wait_until("the second owner to commit past the killed owner's last commit",
                   lambda: committed([second]) and committed([second])[-1][1] >= committed([owner])[-1][1], 60)
        third = next(m for m in rest if m is not second)
        t_leave = time.time() * 1000
        second.kill(signal.SIGTERM)
        wait_until("the third member to own the partition",
                   lambda: third.owns() and third.assigned_at()[-1] > t_leave, 30)
        assert third.assigned_at()[-1] - t_leave < SESSION_MS, "a leave must not wait for the session timeout"
        after = produce(cluster, 10, "after-leave")
        wait_until("the third member to commit past the new records",
                   lambda: committed([third]) and committed([third])[-1][1] >= after, 30)

        # kill -9 of the raft leader while the group rebalances (a new member joins)
        fourth = Member(kafka_home, cluster.bootstrap(), "g-rebalance", tmp_path / "m3.jsonl")
        members.append(fourth)
        wait_until("the new member to start", lambda: any(e["name"] == "startup_complete" for e in fourth.events()), 30)
        old = cluster.wait_for_leader().leader_id
        t_leader_kill = time.time() * 1000
        cluster.kill(old)
        try:
            cluster.wait_for_leader(30, exclude=old)
            after = produce(cluster, 10, "after-leader-kill")
            # the group settles on the new leader: the new member assigned (the rebalance it
            # started completed), the partition consumed and committed past the new records
            wait_until("the group to settle and commit everything on the new leader",
                       lambda: any(e["name"] == "partitions_assigned" and e["timestamp"] > t_leader_kill
                                   for e in fourth.events())
                       and committed([third, fourth]) and committed([third, fourth])[-1][1] >= after, 60)
            check_at_least_once(members)
        finally:
            cluster.start(old)
            wait_for_hw(cluster, 1, 30)
    finally:
        for m in members:
            m.kill(signal.SIGKILL)


def test_a_member_keeps_its_generation_across_a_leader_kill(cluster: Cluster) -> None:
    """A member's session survives a leader change within its session timeout: after kill -9
    of the raft leader, the member finds the new coordinator and heartbeats in the same
    generation (no rebalance), and its offset commit is accepted there."""
    import socket as sk

    from kraftnode.protocol import generated as w
    from kraftnode.protocol.registry import JOIN_GROUP, SYNC_GROUP
    from tests.support.node import frame_call

    def ask(node: int, api: int, version: int, body: Any) -> Any:
        with sk.create_connection(("127.0.0.1", cluster.port(node)), timeout=15) as s:
            return frame_call(s, api, version, body, 1, client_id="survivor")

    lead = cluster.wait_for_leader().leader_id
    J = w.JoinGroupRequest
    member = ""
    for _ in range(2):
        j = ask(lead, JOIN_GROUP, 9, J(group_id="g-survive", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=10_000,
                                       member_id=member, group_instance_id=None, protocol_type="consumer",
                                       reason=None, protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))
        member = j.member_id
    assert j.error_code == 0, j
    S = w.SyncGroupRequest
    s = ask(lead, SYNC_GROUP, 5, S(group_id="g-survive", generation_id=j.generation_id, member_id=member,
                                   group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                   assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"a")]))
    assert s.error_code == 0, s
    cluster.kill(lead)
    try:
        _survive(cluster, ask, lead, member, j.generation_id)
    finally:
        cluster.start(lead)
        wait_for_hw(cluster, 1, 30)


def _survive(cluster: Cluster, ask: Any, lead: int, member: str, generation: int) -> None:
    from kraftnode.protocol import generated as w
    from kraftnode.protocol.registry import FIND_COORDINATOR, HEARTBEAT, OFFSET_COMMIT

    t0 = time.monotonic()
    new = cluster.wait_for_leader(30, exclude=lead).leader_id
    other = next(i for i in cluster.running() if i != new)

    def heartbeat() -> Any:
        fc = ask(other, FIND_COORDINATOR, 4, w.FindCoordinatorRequest(key_type=0, coordinator_keys=["g-survive"]))
        coordinator = fc.coordinators[0].node_id
        if fc.coordinators[0].error_code or coordinator not in cluster.running():
            return None
        hb = ask(coordinator, HEARTBEAT, 4, w.HeartbeatRequest(group_id="g-survive", generation_id=generation,
                                                             member_id=member, group_instance_id=None))
        return hb if hb.error_code == 0 else None
    wait_until("a heartbeat in the same generation on the new leader", heartbeat, SESSION_MS / 1000)
    assert time.monotonic() - t0 < SESSION_MS / 1000
    C = w.OffsetCommitRequest
    ok = ask(new, OFFSET_COMMIT, 9, C(group_id="g-survive", generation_id_or_member_epoch=generation,
                                      member_id=member, group_instance_id=None, topics=[
                                          C.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                              C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                             committed_leader_epoch=-1,
                                                                             committed_metadata="")])]))
    assert ok.topics[0].partitions[0].error_code == 0, ok
