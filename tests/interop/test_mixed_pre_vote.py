"""Pre-vote (KIP-996) in a mixed quorum: kraftnode voters 1 and 2 run
``kraftnode.raft.pre.vote.enable=true`` beside a genuine Kafka 3.9 ``KafkaRaftClient`` voter
(the raftnode harness), which speaks Vote v0-v1 only.

kraftnode sends a pre-vote (Vote v2, PreVote=true) only to peers whose ApiVersions advertise
Vote v2: the Java voter never receives one (a v2 Vote would not even parse there), and a
kraftnode prospective that meets the 3.9 peer stands as a candidate at once, so elections
complete as 3.9's: kill -9 of kraftnode leaders (the Java voter voting for, or winning
against, the surviving kraftnode), the Java leader paused (SIGSTOP) and then killed."""

from __future__ import annotations

import re
import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import API_VERSIONS, VOTE
from tests.interop.test_mixed_quorum import (
    JAVA,
    METRICS_PORTS,
    Mixed,
    applied_end_of,
    metrics_listeners,
    produce,
    wait_until,
)
from tests.support.cluster import CLUSTER_ID, Cluster
from tests.support.java_raft import JavaRaftNode
from tests.support.kafka import KafkaHome
from tests.support.node import call

pytestmark = pytest.mark.timeout(300)

# fetch timeout 2 s, then up to two split votes (both survivors' fetch timers start at the same
# moment, so they often stand together, as in a 3.9-only quorum): 2 x (election timeout 1-2 s
# + backoff), and slack for a loaded host
ELECTION_BOUND_S = 9.0


class PreVoteMixed(Mixed):
    """As test_mixed_quorum.Mixed, with pre-vote on the kraftnode voters and Kafka's default
    timeouts on the Java voter (so either implementation may stand first)."""

    def __init__(self, kafka: KafkaHome, root: Path) -> None:  # noqa: D107 - as Mixed, other settings
        self.cl = Cluster(root, 3, extra="kraftnode.raft.pre.vote.enable=true\n")
        self.cl.node_extra = metrics_listeners({i: self.cl.port(i) for i in self.cl.ids})
        self.cl.write_properties()
        voters = ",".join(f"{i}@127.0.0.1:{self.cl.port(i)}" for i in self.cl.ids)
        self.cl.start(1)
        self.cl.start(2)
        self.java = JavaRaftNode(kafka, root / "java3", node_id=JAVA, port=self.cl.port(JAVA),
                                 cluster_id=CLUSTER_ID, voters=voters)

    def kraft_view(self, i: int) -> tuple[int, int]:
        """kraftnode i's (leader, epoch) from its own raft gauges (no request that could
        wait on a paused peer); (-1, -1) while it is down."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORTS[self.cl.port(i)]}/metrics",
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return -1, -1
        got = [re.search(rf"^kafka_server_raft_metrics_{g}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
               for g in ("current_leader", "current_epoch")]
        return (int(float(got[0].group(1))), int(float(got[1].group(1)))) if got[0] and got[1] else (-1, -1)

    def vote_versions(self) -> list[int]:
        return [e["version"] for e in list(self.java.events) if e["event"] == "vote_request"]


@pytest.fixture(scope="module")
def pv(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PreVoteMixed]:
    m = PreVoteMixed(kafka_home, tmp_path_factory.mktemp("prevote-mixed"))
    try:
        yield m
    finally:
        m.close()
        assert not m.java.faults(), m.java.faults()


def max_vote_version(port: int) -> int:
    _, resp = call(port, API_VERSIONS, 3, w.ApiVersionsRequest(client_software_name="t",
                                                               client_software_version="1"))
    return next(k.max_version for k in resp.api_keys if k.api_key == VOTE)  # type: ignore[attr-defined]


def test_vote_v2_is_advertised_by_kraftnode_and_not_by_the_3_9_voter(pv: PreVoteMixed) -> None:
    pv.wait_leader(lambda ld, e: True, 30, "a first leader")
    assert max_vote_version(pv.cl.port(1)) == 2  # pre-vote on: Vote 0-2, Kafka 4.0's range
    assert max_vote_version(pv.java.port) == 1   # Kafka 3.9's controller


def test_kill_rounds_of_kraftnode_leaders_elect_with_the_3_9_voter(pv: PreVoteMixed) -> None:
    """kill -9 of the kraftnode leader, several rounds: the surviving kraftnode can only win
    with the Java voter's vote, and the Java voter can win with the kraftnode's."""
    winners: list[int] = []
    for _round in range(8):
        lead, epoch = pv.wait_leader(lambda ld, e: True, 20, "a leader")
        if lead == JAVA:
            lead, epoch = pv.kraftnode_leader()
        r = produce(pv.cl.port(lead), 2)
        assert r.error_code == 0, r
        t0 = time.monotonic()
        pv.cl.kill(lead)
        new, new_epoch = pv.wait_leader(lambda ld, e, old=lead, ep=epoch: ld != old and e > ep,
                                        ELECTION_BOUND_S + 2, f"a new leader after kill -9 of {lead}")
        took = time.monotonic() - t0
        print(f"kill -9 {lead}: {new} elected in epoch {new_epoch} after {took:.2f}s")
        assert took < ELECTION_BOUND_S, (took, pv.logs())
        assert new_epoch > epoch
        winners.append(new)
        st = pv.java.wait_status(lambda s, r=r: s["committed_offset"] >= r.base_offset + 1, 10,
                                 "nothing committed lost")
        assert st["committed_offset"] >= r.base_offset + 1
        pv.cl.start(lead)
        if _round >= 3 and JAVA in winners and set(winners) - {JAVA}:
            break
    print("winners:", winners)
    assert JAVA in winners, winners                 # the Java voter won with a kraftnode's vote
    assert set(winners) - {JAVA}, winners           # a kraftnode won with the Java voter's vote
    # the kraftnode voters did stand through pre-vote first, and every pre-vote met the 3.9
    # voter's missing Vote v2 and went straight to a real election: no prospective ever fell
    # back to following (a pre-vote lost, which 3.9's elections have no notion of)
    stood = 0
    for i in (1, 2):
        steps = transitions(pv.cl.log(i))
        pros = [k for k, (state, _) in enumerate(steps) if state == "prospective"]
        stood += len(pros)
        for k in pros:
            assert k + 1 == len(steps) or steps[k + 1][0] in ("candidate", "unattached", "voted") \
                or steps[k + 1][1] > steps[k][1], (i, steps[k:k + 2])
    assert stood, "no kraftnode voter ever stood"
    # ... but the 3.9 voter only ever received Vote v0/v1 (real votes), never a v2 pre-vote
    versions = pv.vote_versions()
    assert versions and max(versions) <= 1, versions
    assert not [e for e in pv.java.events if e["event"] == "connection_error"]


def test_the_java_leader_paused_then_killed(pv: PreVoteMixed) -> None:
    """The Java voter leads; SIGSTOP: the kraftnode voters elect one of themselves, the Java
    voter resumes and follows it and commits; then Java leads again and is killed -9."""
    lead, epoch = pv.wait_leader(lambda ld, e: True, 20, "a leader")
    for _ in range(6):
        if lead == JAVA:
            break
        pv.cl.kill(lead)
        lead, epoch = pv.wait_leader(lambda ld, e, ep=epoch: e > ep, ELECTION_BOUND_S + 2, "a leader")
        for i in (1, 2):
            if i not in pv.kraft():
                pv.cl.start(i)
    assert lead == JAVA, "the Java voter never won:\n" + pv.logs()
    for i in (1, 2):
        if i not in pv.kraft():
            pv.cl.start(i)
    a = pv.java.append(4)
    assert "error" not in a, a
    for i in (1, 2):
        wait_until(f"kraftnode {i} to commit the Java leader's records",
                   lambda i=i: applied_end_of(pv.cl.port(i)) > a["last_offset"], 20, pv.logs)

    t0 = time.monotonic()
    pv.java.proc.send_signal(signal.SIGSTOP)
    try:
        new, new_epoch = wait_until("a kraftnode leader while the Java leader is paused", kraft_leader_after(pv, epoch),
                                    ELECTION_BOUND_S + 2, pv.logs)
        took = time.monotonic() - t0
        print(f"Java leader paused: kraftnode {new} elected in epoch {new_epoch} after {took:.2f}s")
        assert took < ELECTION_BOUND_S
        r = produce(pv.cl.port(new), 3)
        assert r.error_code == 0, r
    finally:
        pv.java.proc.send_signal(signal.SIGCONT)
    st = pv.java.wait_status(lambda s: s["leader"] == new and s["committed_offset"] >= r.base_offset + 2, 20,
                             "the resumed Java voter to follow and commit")
    assert st["epoch"] >= new_epoch

    # the Java voter leads again, and is killed -9 (for good: its log is in memory)
    lead, epoch = new, new_epoch
    for _ in range(6):
        if lead == JAVA:
            break
        pv.cl.kill(lead)
        lead, epoch = pv.wait_leader(lambda ld, e, ep=epoch: e > ep, ELECTION_BOUND_S + 2, "a leader")
        for i in (1, 2):
            if i not in pv.kraft():
                pv.cl.start(i)
    assert lead == JAVA, "the Java voter never won again:\n" + pv.logs()
    for i in (1, 2):
        if i not in pv.kraft():
            pv.cl.start(i)
        wait_until(f"kraftnode {i} to follow the Java leader", lambda i=i: pv.kraft_view(i) == (JAVA, epoch),
                   20, pv.logs)
    mark = {i: len(pv.cl.log(i)) for i in (1, 2)}
    t0 = time.monotonic()
    pv.java.proc.kill()
    pv.java.proc.wait()
    new, new_epoch = wait_until("a kraftnode leader after kill -9 of the Java leader", kraft_leader_after(pv, epoch),
                                ELECTION_BOUND_S + 2, pv.logs)
    took = time.monotonic() - t0
    print(f"Java leader killed: kraftnode {new} elected in epoch {new_epoch} after {took:.2f}s")
    assert took < ELECTION_BOUND_S
    r = produce(pv.cl.port(new), 3)
    assert r.error_code == 0, r
    # 3.9's election although the 3.9 voter is dead: the first kraftnode to stand after the
    # kill went from prospective straight to candidate (the dead peer's last ApiVersions lacked
    # Vote v2), instead of waiting on a pre-vote the dead peer could never answer
    after = sorted((t, i, st, e) for i in (1, 2)
                   for t, st, e in timed_transitions(pv.cl.log(i)[mark[i]:]))
    first = next(k for k, step in enumerate(after) if step[2] == "prospective")
    i = after[first][1]
    nxt = next(step for step in after[first + 1:] if step[1] == i)
    assert (nxt[2], nxt[3]) == ("candidate", after[first][3] + 1), after
    versions = pv.vote_versions()
    assert max(versions) <= 1, versions
    for i in (1, 2):
        assert not re.search(r"Traceback", pv.cl.log(i)), pv.cl.log(i)[-3000:]


def kraft_leader_after(pv: PreVoteMixed, epoch: int) -> Callable[[], tuple[int, int] | None]:
    def check() -> tuple[int, int] | None:
        for i in (1, 2):
            ld, e = pv.kraft_view(i)
            if ld in (1, 2) and e > epoch and pv.kraft_view(3 - i) == (ld, e):
                return ld, e
        return None
    return check


def transitions(log: str) -> list[tuple[str, int]]:
    """(state, epoch) of every 'became X in epoch N' line of a kraftnode log, in order."""
    return [(m.group(1), int(m.group(2))) for m in re.finditer(r"became (\w+) in epoch (\d+)", log)]


def timed_transitions(log: str) -> list[tuple[str, str, int]]:
    """(time, state, epoch) of every 'became X in epoch N' line."""
    return [(m.group(1), m.group(2), int(m.group(3))) for m in re.finditer(
        r"^(\S+ \S+) INFO \[kraftnode.raft\] became (\w+) in epoch (\d+)", log, re.M)]
