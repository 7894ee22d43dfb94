"""Mixed quorums: a genuine Kafka 3.9 ``KafkaRaftClient`` (the ``raftnode`` harness,
tests/interop/java/raftnode/, wrapped by tests/support/java_raft.py) votes beside kraftnode
voters, all real processes on 127.0.0.1.

One static quorum (kraftnode 1 and 2, Java 3) serves the first tests in order: kraftnode
leads and Java follows and commits every record; kill -9 rounds of kraftnode leaders with
elections across implementations; Java leads and kraftnode follows and commits; divergent
tails truncated in both directions; the genuine kafka-metadata-quorum.sh describes it;
ApiVersions agrees with a Kafka controller's. Then a quorum whose kraftnode logs start at a
snapshot (the Java voter installs it with FetchSnapshot) and a dynamic quorum: the Java
node is added as a voter with the genuine tool's add-controller, leads, adds and removes a
kraftnode, and is removed. docs/interop.md describes the suite and the harness.

Test writes are framed NoOpRecords (docs/server.md, "Produce in a mixed quorum")."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftnode.features import supported_features
from kraftnode.log.meta_properties import (
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from kraftnode.log.metadata_log import MetadataLog
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.log.snapshot import SnapshotId, write_snapshot
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import NoOpRecord
from kraftnode.protocol.registry import API_VERSIONS, DESCRIBE_QUORUM, LIST_OFFSETS, PRODUCE
from recordbatch import Record, build_batch
from recordbatch.wire import uuid_from_base64, uuid_to_base64
from tests.support.api_ranges import differences_from_3_9
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, Cluster, free_ports
from tests.support.java_raft import JavaRaftNode
from tests.support.kafka import KafkaHome
from tests.support.node import call

pytestmark = pytest.mark.timeout(180)

JAVA = 3
# As tests/kraftnode/server/test_quorum_processes.py: fetch timeout + election timeout + 1 s
# (defaults 2 s and 1 s, on both implementations).
FAILOVER_BOUND_S = 2.0 + 1.0 + 1.0


def wait_until(what: str, check: Callable[[], Any], timeout: float = 20,
               logs: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


def noops(n: int) -> bytes:
    return build_batch([Record(None, encode_metadata_record(NoOpRecord(), 0)) for _ in range(n)])


def produce(port: int, n: int) -> w.ProduceResponse.PartitionProduceResponse:
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="__cluster_metadata", partition_data=[P.PartitionProduceData(index=0, records=noops(n))])])
    _, resp = call(port, PRODUCE, 9, req)
    return resp.responses[0].partition_responses[0]  # type: ignore[attr-defined, no-any-return]


def high_watermark_of(port: int) -> int:
    """The node's own high watermark: ListOffsets LATEST (what a consumer may read there);
    -1 while it is not listening."""
    L = w.ListOffsetsRequest
    try:
        _, resp = call(port, LIST_OFFSETS, 7, L(replica_id=-1, isolation_level=0, topics=[
            L.ListOffsetsTopic(name="__cluster_metadata", partitions=[L.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    except OSError:
        return -1
    p = resp.topics[0].partitions[0]  # type: ignore[attr-defined]
    return int(p.offset) if p.error_code == 0 else -1


# raft port -> kraftnode.metrics.listener port, for every kraftnode these tests start
METRICS_PORTS: dict[int, int] = {}


def metrics_listeners(raft_ports: dict[int, int]) -> dict[int, str]:
    """Config lines giving each node (id -> raft port) a metrics listener on a free port."""
    extra = {}
    for (i, raft), m in zip(raft_ports.items(), free_ports(len(raft_ports)), strict=True):
        METRICS_PORTS[raft] = m
        extra[i] = f"kraftnode.metrics.listener=127.0.0.1:{m}"
    return extra


def applied_end_of(port: int) -> int:
    """A kraftnode follower's committed end offset: its own high watermark, from the
    ``kafka_server_raft_metrics_high_watermark`` gauge (followers answer ListOffsets with
    NOT_LEADER_OR_FOLLOWER). -1 while not listening."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORTS[port]}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return -1
    m = re.search(r"^kafka_server_raft_metrics_high_watermark(?:\{[^}]*\})? (\S+)$", text, re.M)
    return int(float(m.group(1))) if m else -1


def describe_quorum(port: int) -> w.DescribeQuorumResponse:
    Q = w.DescribeQuorumRequest
    _, resp = call(port, DESCRIBE_QUORUM, 2, Q(topics=[Q.TopicData(
        topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
    assert isinstance(resp, w.DescribeQuorumResponse)
    return resp


def committed_ranges_contiguous(node: JavaRaftNode, upto: int) -> bool:
    """Every offset below ``upto`` was delivered to the Java listener's handleCommit,
    in order, exactly once."""
    nxt = 0
    for ev in list(node.events):
        if ev["event"] == "snapshot":
            nxt = max(nxt, ev["offset"])
        if ev["event"] != "commit":
            continue
        if ev["base_offset"] != nxt:
            return False
        nxt = ev["last_offset"] + 1
    return nxt >= upto


def kraft_batches(node_dir: Path, upto: int) -> list[tuple[int, int, int]]:
    """(base offset, last offset, leader epoch) of every batch below ``upto`` in a kraftnode
    node's log segments, as ``kraftnode dump-log`` prints them."""
    part = node_dir / "metadata" / "__cluster_metadata-0"
    out = subprocess.run([sys.executable, "-m", "kraftnode", "dump-log",
                          *sorted(str(p) for p in part.glob("*.log"))],
                         capture_output=True, text=True, check=True).stdout
    found = []
    for m in re.finditer(r"^baseOffset: (\d+) lastOffset: (\d+) .*? partitionLeaderEpoch: (\d+)", out, re.M):
        base, last, epoch = map(int, m.groups())
        if base < upto:
            found.append((base, last, epoch))
    return found


def java_batches(node: JavaRaftNode, upto: int) -> list[tuple[int, int, int]]:
    """The same, for the batches the Java voter's listener was given as committed."""
    return [(e["base_offset"], e["last_offset"], e["epoch"]) for e in list(node.events)
            if e["event"] == "commit" and e["base_offset"] < upto]


class Mixed:
    """kraftnode voters 1..n-1 and the Java voter n=3 of one static quorum."""

    def __init__(self, kafka: KafkaHome, root: Path) -> None:
        # node 3's kraftnode directory is formatted but never started
        self.cl = Cluster(root, 3)
        self.cl.node_extra = metrics_listeners({i: self.cl.port(i) for i in self.cl.ids})
        self.cl.write_properties()
        voters = ",".join(f"{i}@127.0.0.1:{self.cl.port(i)}" for i in self.cl.ids)
        self.cl.start(1)
        self.cl.start(2)
        # Java's fetch timeout is shorter than kraftnode's (1 s, Kafka's default is 2 s), so
        # it is the first to notice a dead leader and stands after every kill -9: each
        # election is then won across implementations.
        self.java = JavaRaftNode(kafka, root / "java3", node_id=JAVA, port=self.cl.port(JAVA),
                                 cluster_id=CLUSTER_ID, voters=voters,
                                 extra={"controller.quorum.fetch.timeout.ms": "1000"})

    def kraft(self) -> list[int]:
        return self.cl.running()

    def leader(self) -> tuple[int, int]:
        st = self.java.status()
        return st["leader"], st["epoch"]

    def logs(self) -> str:
        return "\n".join(f"--- node {i}\n" + self.cl.log(i)[-2500:] for i in (1, 2)) + \
            "\n--- java\n" + self.java.stderr()[-2500:]

    def wait_leader(self, pred: Callable[[int, int], bool], timeout: float, what: str) -> tuple[int, int]:
        """Leader and epoch once Java sees a leader satisfying pred and a kraftnode agrees."""
        def check() -> tuple[int, int] | None:
            lead, epoch = self.leader()
            if lead < 0 or not pred(lead, epoch):
                return None
            for i in self.kraft():
                q = self.cl.quorum([i])
                if q is not None and (q.leader_id, q.leader_epoch) == (lead, epoch):
                    return lead, epoch
            return None
        return wait_until(what, check, timeout, self.logs)  # type: ignore[no-any-return]

    def kraftnode_leader(self) -> tuple[int, int]:
        """A kraftnode leader: if the Java voter leads, it resigns (EndQuorumEpoch with
        preferred successors) once every running kraftnode has caught up with it (a voter
        still catching up cannot win), and a kraftnode candidate wins with its vote."""
        for _attempt in range(3):
            lead, epoch = self.wait_leader(lambda lead, _: True, 20, "a leader")
            if lead != JAVA:
                return lead, epoch

            def caught_up() -> bool:
                d = describe_quorum(self.java.port).topics[0].partitions[0]
                leo = {v.replica_id: v.log_end_offset for v in d.current_voters}
                return d.leader_id == JAVA and all(leo[i] >= leo[JAVA] for i in self.kraft())
            wait_until("the kraftnode voters to catch up with the Java leader", caught_up, 20, self.logs)
            t0 = time.monotonic()
            assert "error" not in self.java.resign()
            lead, epoch = self.wait_leader(lambda ld, e, ep=epoch: e > ep, FAILOVER_BOUND_S,
                                           "a leader after the Java leader resigned")
            print(f"Java resigned: {lead} elected in {time.monotonic() - t0:.2f}s")
            if lead != JAVA:
                return lead, epoch
        raise AssertionError("the Java voter kept winning after resigning:\n" + self.logs())

    def close(self) -> None:
        self.java.close()
        self.cl.close()


@pytest.fixture(scope="module")
def mixed(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mixed]:
    m = Mixed(kafka_home, tmp_path_factory.mktemp("mixed"))
    try:
        yield m
    finally:
        m.close()
        assert not m.java.faults(), m.java.faults()


def test_kraftnode_leads_and_the_java_voter_commits_every_record(mixed: Mixed) -> None:
    lead, _epoch = mixed.kraftnode_leader()
    # a new kraftnode leader's own writes (its LeaderChange, the controllers registering with
    # it) land within a moment of its election; let them, so that what follows counts only
    # this test's records (a registration landing after the high watermark below was read
    # failed the equality at the end under load)
    stable, last = 0, -1
    deadline = time.monotonic() + 20
    while stable < 3 and time.monotonic() < deadline:
        info = mixed.cl.quorum([lead])
        hw_now = info.high_watermark if info is not None else -1
        stable, last = (stable + 1, last) if hw_now == last else (0, hw_now)
        time.sleep(0.5)
    total = 0
    for n in (1, 5, 20):
        r = produce(mixed.cl.port(lead), n)
        assert r.error_code == Errors.NONE, r
        total += n
    info = mixed.cl.quorum([lead])
    assert info is not None and info.leader_id == lead
    hw = info.high_watermark
    st = mixed.java.wait_status(lambda s: s["committed_offset"] + 1 >= hw, 10,
                                "the Java voter to commit up to the leader's high watermark")
    assert st["committed_offset"] + 1 == hw == st["high_watermark"]
    assert st["noop_records"] == total
    assert committed_ranges_contiguous(mixed.java, hw)
    # the Java voter decoded everything kraftnode wrote as metadata records
    kinds = {k for e in mixed.java.events if e["event"] == "commit" for k in e["records"]}
    assert {"FeatureLevelRecord", "RegisterControllerRecord", "NoOpRecord"} <= kinds, kinds
    # and the leader sees the Java voter caught up
    voters = {v.replica_id: v for v in info.voters}
    assert set(voters) == {1, 2, 3}


def test_kill_rounds_of_kraftnode_leaders_elect_across_implementations(mixed: Mixed) -> None:
    winners = []
    for _round in range(3):
        lead, epoch = mixed.kraftnode_leader()
        r = produce(mixed.cl.port(lead), 3)
        assert r.error_code == Errors.NONE, r
        hw = high_watermark_of(mixed.cl.port(lead))
        t0 = time.monotonic()
        mixed.cl.kill(lead)
        new, new_epoch = mixed.wait_leader(lambda ld, e, old=lead, ep=epoch: ld != old and e > ep,
                                           FAILOVER_BOUND_S + 1, f"a new leader after kill -9 of {lead}")
        took = time.monotonic() - t0
        print(f"kill -9 {lead}: {new} elected in epoch {new_epoch} after {took:.2f}s")
        assert took < FAILOVER_BOUND_S
        winners.append(new)
        # nothing committed is lost: the Java voter has it
        st = mixed.java.wait_status(lambda s, hw=hw: s["committed_offset"] + 1 >= hw, 10,
                                    "the Java voter to hold everything committed")
        assert st["committed_offset"] + 1 >= hw
        mixed.cl.start(lead)
    assert JAVA in winners  # at least one election won by the Java voter after kill -9
    assert committed_ranges_contiguous(mixed.java, mixed.java.status()["committed_offset"] + 1)


def test_the_java_voter_leads_and_kraftnode_voters_commit(mixed: Mixed) -> None:
    lead, epoch = mixed.wait_leader(lambda lead, _: True, 20, "a leader")
    if lead != JAVA:
        mixed.cl.kill(lead)
        lead, epoch = mixed.wait_leader(lambda ld, e, ep=epoch: ld == JAVA and e > ep, 10,
                                        "the Java voter to lead")
    # restart whichever kraftnode is down, so both follow
    for i in (1, 2):
        if i not in mixed.kraft():
            mixed.cl.start(i)
    appended = [mixed.java.append(n) for n in (1, 10, 7)]
    assert all("error" not in a for a in appended), appended
    last = appended[-1]["last_offset"]
    st = mixed.java.wait_status(lambda s: s["high_watermark"] > last, 10, "the Java leader to commit")
    hw = st["high_watermark"]
    for i in (1, 2):
        wait_until(f"kraftnode {i} to commit up to the Java leader's high watermark {hw}",
                   lambda i=i: applied_end_of(mixed.cl.port(i)) >= hw, 20, mixed.logs)
    # their logs hold the Java leader's batches: same offsets, same epochs
    mixed.java.wait_status(lambda s: s["committed_offset"] + 1 >= hw, 10, "the Java listener")
    for i in (1, 2):
        assert kraft_batches(mixed.cl.root / f"node{i}", hw) == java_batches(mixed.java, hw)
    # the Java leader's own view: both kraftnode voters replicated everything
    d = describe_quorum(mixed.java.port).topics[0].partitions[0]
    assert d.leader_id == JAVA and d.high_watermark >= hw
    assert {v.replica_id: v.log_end_offset >= hw for v in d.current_voters} == {1: True, 2: True, 3: True}


def produce_acks1(port: int, n: int) -> w.ProduceResponse.PartitionProduceResponse:
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="__cluster_metadata", partition_data=[P.PartitionProduceData(index=0, records=noops(n))])])
    _, resp = call(port, PRODUCE, 9, req)
    return resp.responses[0].partition_responses[0]  # type: ignore[attr-defined, no-any-return]


def all_caught_up(mixed: Mixed) -> int:
    """Wait until every voter has applied everything the leader committed; the high watermark."""
    lead, _ = mixed.wait_leader(lambda lead, _: True, 20, "a leader")
    for i in (1, 2):
        if i not in mixed.kraft():
            mixed.cl.start(i)
    d = describe_quorum(mixed.cl.port(lead) if lead != JAVA else mixed.java.port).topics[0].partitions[0]
    hw = d.high_watermark
    mixed.java.wait_status(lambda s: s["committed_offset"] + 1 >= hw, 10, "the Java voter to catch up")
    for i in (1, 2):
        wait_until(f"kraftnode {i} to catch up", lambda i=i: applied_end_of(mixed.cl.port(i)) >= hw, 20,
                   mixed.logs)
    return hw


def test_kraftnode_truncates_a_tail_the_java_leader_never_had(mixed: Mixed) -> None:
    """A kraftnode leader appends records nobody else gets and is killed -9; the Java voter
    is elected and the restarted kraftnode truncates to the Java leader's log (Fetch with
    DivergingEpoch from the genuine client)."""
    for attempt in range(4):
        all_caught_up(mixed)
        lead, epoch = mixed.kraftnode_leader()
        other = 3 - lead
        procs = [mixed.java.proc, mixed.cl.procs[other]]
        for p in procs:
            p.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        # a Fetch already parked at the leader (long poll, 500 ms) would still carry the tail
        # to a paused follower's socket: let those expire first
        time.sleep(0.7)
        try:
            tail = produce_acks1(mixed.cl.port(lead), 5)
            assert tail.error_code == Errors.NONE, tail
            time.sleep(0.3)
            mixed.cl.kill(lead)
        finally:
            # the Java voter resumes first: it alone sees the dead leader at once and stands
            mixed.java.proc.send_signal(signal.SIGCONT)
            time.sleep(0.3)
            procs[1].send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        new, new_epoch = mixed.wait_leader(lambda ld, e, ep=epoch, old=lead: ld != old and e > ep, 10,
                                           "a leader after the kill")
        mixed.cl.start(lead)
        if new == JAVA:
            break
        print(f"attempt {attempt}: kraftnode {new} won; again")
    else:
        pytest.fail("the Java voter never won the election after the kill")
    r = mixed.java.append(3)
    assert "error" not in r, r
    assert r["last_offset"] >= tail.base_offset  # the Java leader's records take the tail's offsets
    mixed.java.wait_status(lambda s: s["high_watermark"] > r["last_offset"], 10, "the append to commit")
    hw = all_caught_up(mixed)
    assert hw > r["last_offset"]
    # the killed leader's log is the Java leader's: same batches, same epochs; its tail is gone
    kb = kraft_batches(mixed.cl.root / f"node{lead}", hw)
    assert kb == java_batches(mixed.java, hw)
    assert all(not (b <= tail.base_offset <= last and e == epoch) for b, last, e in kb)
    assert kb[-1][1] + 1 == hw


def test_the_java_voter_truncates_a_tail_the_kraftnode_leader_never_had(mixed: Mixed) -> None:
    """The Java leader appends records no kraftnode gets and is paused; the kraftnode voters
    elect one of themselves; the Java node resumes, follows, and truncates (DivergingEpoch
    from kraftnode's leader)."""
    all_caught_up(mixed)
    lead, epoch = mixed.wait_leader(lambda lead, _: True, 20, "a leader")
    if lead != JAVA:
        mixed.cl.kill(lead)
        lead, epoch = mixed.wait_leader(lambda ld, e, ep=epoch: ld == JAVA and e > ep, 10,
                                        "the Java voter to lead")
    all_caught_up(mixed)
    before = mixed.java.status()
    kprocs = [mixed.cl.procs[1], mixed.cl.procs[2]]
    for p in kprocs:
        p.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    time.sleep(0.7)  # parked Fetches expire (see above)
    try:
        tail = mixed.java.append(5)
        assert "error" not in tail, tail
        st = mixed.java.wait_status(lambda s: s["log_end_offset"] > tail["last_offset"], 5, "the tail")
        assert st["high_watermark"] <= tail["last_offset"] - 4
    finally:
        mixed.java.proc.send_signal(signal.SIGSTOP)
        for p in kprocs:
            p.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    try:
        def kraft_leader() -> tuple[int, int] | None:
            for i in (1, 2):
                q = mixed.cl.quorum([i])
                if q is not None and q.leader_id in (1, 2) and q.leader_epoch > epoch:
                    return q.leader_id, q.leader_epoch
            return None
        new, new_epoch = wait_until("a kraftnode leader while Java is paused", kraft_leader, 15, mixed.logs)
        r = produce(mixed.cl.port(new), 3)
        assert r.error_code == Errors.NONE, r
    finally:
        mixed.java.proc.send_signal(signal.SIGCONT)
    hw = high_watermark_of(mixed.cl.port(new))
    st = mixed.java.wait_status(lambda s: s["leader"] == new and s["committed_offset"] + 1 >= hw, 15,
                                "the Java voter to follow the kraftnode leader and commit")
    hw = all_caught_up(mixed)
    st = mixed.java.status()
    # the five appended in the Java leader's epoch never committed: dropped, never delivered
    assert st["noop_records"] == before["noop_records"] + 3
    assert committed_ranges_contiguous(mixed.java, hw)
    assert kraft_batches(mixed.cl.root / f"node{new}", hw) == java_batches(mixed.java, hw)
    assert not mixed.java.faults()


def parse_status(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines()) if v}


def describe_with_tool(kafka: KafkaHome, boot: int) -> tuple[dict[str, str], dict[int, list[str]]]:
    """``kafka-metadata-quorum.sh --bootstrap-controller`` describe --status and
    --replication, parsed: (status fields, replication rows by node id)."""
    r = kafka.tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{boot}",
                   "describe", "--status", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    status = parse_status(r.stdout)
    r = kafka.tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{boot}",
                   "describe", "--replication", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip()]
    assert lines[0][:3] == ["NodeId", "DirectoryId", "LogEndOffset"], r.stdout
    return status, {int(row[0]): row for row in lines[1:]}


def admin_describes(node: JavaRaftNode) -> int:
    """DescribeQuorum requests the Java node served to the Java Admin."""
    return sum(1 for e in list(node.events) if e["event"] == "request" and e["api"] == "DescribeQuorum"
               and e["client_id"].startswith("adminclient"))


def test_kafka_metadata_quorum_describes_the_mixed_quorum(mixed: Mixed, kafka_home: KafkaHome) -> None:
    """With a kraftnode leader and with the Java leader (whose DescribeQuorum answer then
    comes from KafkaRaftClient: the Admin sends it to the active controller), bootstrapping
    through a kraftnode and through the Java node (which registered itself with a kraftnode
    leader as Kafka's ControllerRegistrationManager does, so its DescribeCluster lists it)."""
    all_caught_up(mixed)
    try:
        # a new kraftnode leader answers NOT_CONTROLLER until its activation records commit,
        # and the harness backs off up to 5 s between attempts (as Kafka's manager does)
        mixed.java.wait_for(lambda e: e["event"] == "registration" and e["error"] == "NONE", 60,
                            "the Java node to register with a kraftnode active controller")
    except AssertionError as e:
        tried = [ev for ev in mixed.java.events if ev.get("event") == "registration"]
        raise AssertionError(f"{e}\nregistration attempts: {tried[-10:]}\n{mixed.logs()}") from None
    for want_java in (False, True):
        if want_java:
            lead, epoch = mixed.wait_leader(lambda lead, _: True, 20, "a leader")
            if lead != JAVA:
                mixed.cl.kill(lead)
                mixed.wait_leader(lambda ld, e, ep=epoch: ld == JAVA and e > ep, 10, "the Java voter to lead")
        else:
            mixed.kraftnode_leader()
        hw = all_caught_up(mixed)
        lead, epoch = mixed.wait_leader(lambda lead, _: True, 20, "a leader")
        for boot in (mixed.cl.port(1), mixed.java.port):
            asked_java = admin_describes(mixed.java)
            status, rows = describe_with_tool(kafka_home, boot)
            assert int(status["LeaderId"]) == lead and int(status["LeaderEpoch"]) == epoch, status
            assert int(status["HighWatermark"]) >= hw
            assert status["ClusterId"] == CLUSTER_ID
            voters = re.findall(r'"id": (\d+), "directoryId": null, "endpoints": \["CONTROLLER://127.0.0.1:(\d+)"\]',
                                status["CurrentVoters"])
            assert sorted((int(i), int(p)) for i, p in voters) == [(i, mixed.cl.port(i)) for i in (1, 2, 3)], status
            assert status["CurrentObservers"] == "[]"
            assert sorted(rows) == [1, 2, 3]
            assert rows[lead][-1] == "Leader" and all(rows[i][-1] == "Follower" for i in rows if i != lead), rows
            assert all(int(row[2]) >= hw for row in rows.values()), rows
            if want_java:
                assert admin_describes(mixed.java) == asked_java + 2  # answered by the Java leader
        print(f"kafka-metadata-quorum.sh: leader {lead} epoch {epoch}, voters {sorted(rows)}")


def test_api_versions_agree_with_a_kafka_controllers(mixed: Mixed) -> None:
    """kraftnode's ApiVersions answer against the one the Java node builds with Kafka's own
    classes for a controller (collectApis(apisForListener(CONTROLLER)), BrokerFeatures'
    supported features, KIP-1022's filtering below v4): same features at every version,
    same version ranges for every API both serve except where kraftnode advertises Kafka 4.4's
    (issue 36, tests/support/api_ranges.py: Fetch 4-18, Vote 0-2 with pre-vote on, ...), and
    the same finalized features but kraft.version, which Kafka 4.x lists (KAFKA-18979)."""
    all_caught_up(mixed)
    for v in (0, 1, 2, 3, 4):
        body = w.ApiVersionsRequest(client_software_name="kraftnode-tests", client_software_version="1") \
            if v >= 3 else w.ApiVersionsRequest()
        answers = [call(port, API_VERSIONS, v, body)[1] for port in (mixed.cl.port(1), mixed.java.port)]
        k, j = answers
        assert k.error_code == j.error_code == 0  # type: ignore[attr-defined]
        ranges = [{a.api_key: (a.min_version, a.max_version) for a in x.api_keys} for x in answers]  # type: ignore[attr-defined]
        common = set(ranges[0]) & set(ranges[1])
        assert {52, 53, 54, 55, 59, 60, 70, 80, 81, 82} <= common
        got, want = differences_from_3_9(ranges[0], ranges[1])
        assert got == want
        # Vote: pre-vote (KIP-996) is on by default, as in Kafka 4.x: v2 beside 3.9's 0-1
        assert (ranges[0][52], ranges[1][52]) == ((0, 2), (0, 1))
        if v >= 3:
            sup = [sorted((f.name, f.min_version, f.max_version) for f in x.supported_features)  # type: ignore[attr-defined]
                   for x in answers]
            # kraftnode supports what a Kafka 4.4 controller supports (issue 37), the 3.9 node 3.9's
            want = sorted((n, lo, hi) for n, (lo, hi) in supported_features().items() if v >= 4 or lo != 0)
            assert sup[0] == want, sup
            assert sup[1] == [x for x in [("kraft.version", 0, 1), ("metadata.version", 1, 21)]
                              if v >= 4 or x[1] != 0], sup
            fin = [sorted((f.name, f.min_version_level, f.max_version_level) for f in x.finalized_features  # type: ignore[attr-defined]
                          if f.name != "kraft.version") for x in answers]
            assert fin[0] == fin[1], fin
            # a static quorum: kraft.version 0, which Kafka 4.x leaves out too (setFinalizedLevel)
            assert not [f for f in k.finalized_features if f.name == "kraft.version"]  # type: ignore[attr-defined]


def test_groups_are_refused_while_a_kafka_node_votes(mixed: Mixed) -> None:
    """Metadata-only mode (docs/server.md): while the genuine Kafka raft node votes, no group
    record may enter the log, so a group consumer fails at once -- FindCoordinator answers
    INVALID_REQUEST with the reason, on the leader and on a follower (which asks the leader)
    -- and nothing was written; reads are still answered."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    from kraftnode.protocol.registry import FIND_COORDINATOR, OFFSET_FETCH

    lead, _epoch = mixed.kraftnode_leader()
    all_caught_up(mixed)
    follower = next(i for i in mixed.kraft() if i != lead)
    for node in (lead, follower):
        _, fc = call(mixed.cl.port(node), FIND_COORDINATOR, 4,
                     w.FindCoordinatorRequest(key_type=0, coordinator_keys=["g-mixed"]))
        c = fc.coordinators[0]  # type: ignore[attr-defined]
        assert c.error_code == Errors.INVALID_REQUEST and "metadata-only mode" in c.error_message, (node, c)
    end = high_watermark_of(mixed.cl.port(lead))
    consumer = KafkaConsumer("__cluster_metadata", bootstrap_servers=f"127.0.0.1:{mixed.cl.port(lead)}",
                             group_id="g-mixed", consumer_timeout_ms=10_000)
    t0 = time.monotonic()
    try:
        with pytest.raises(KafkaError):
            for _ in consumer:
                pass
    finally:
        consumer.close()
    assert time.monotonic() - t0 < 10
    def fetched() -> Any:
        _, f = call(mixed.cl.port(lead), OFFSET_FETCH, 7, w.OffsetFetchRequest(group_id="g-mixed", topics=None))
        # COORDINATOR_LOAD_IN_PROGRESS (retriable) while a new leader replays the log
        return f if f.error_code != Errors.COORDINATOR_LOAD_IN_PROGRESS else None  # type: ignore[attr-defined]
    f = wait_until("OffsetFetch on the leader", fetched, 20, mixed.logs)
    assert f.error_code == 0 and f.topics == [], f
    # nothing but metadata records was written: the Java voter still replays every one
    assert high_watermark_of(mixed.cl.port(lead)) >= end
    assert not mixed.java.faults(), mixed.java.faults()


def test_the_java_voter_installs_a_kraftnode_snapshot(kafka_home: KafkaHome, tmp_path: Path) -> None:
    """A Java voter with an empty log joins a quorum whose kraftnode log starts after a
    snapshot: it gets a Fetch answer with SnapshotId, fetches the snapshot with
    FetchSnapshot, hands it to its listener (handleLoadSnapshot, records decoded with
    Kafka's MetadataRecordSerde) and continues with Fetch."""
    cl = Cluster(tmp_path, 3)   # kraftnode 1 and 2; node 3 is the Java voter
    cl.node_extra = metrics_listeners({i: cl.port(i) for i in cl.ids})
    cl.write_properties()
    java = None
    try:
        cl.start(1)
        cl.start(2)
        lead = wait_until("a kraftnode leader", lambda: (q := cl.quorum([1, 2])) and q.leader_id, 30)
        for n in (4, 6, 8, 10):
            r = produce(cl.port(lead), n)
            assert r.error_code == Errors.NONE, r
        hw = high_watermark_of(cl.port(lead))
        for i in (1, 2):
            wait_until(f"kraftnode {i} to commit", lambda i=i: applied_end_of(cl.port(i)) >= hw, 20)
            cl.stop(i)
        # both kraftnodes take a snapshot at a committed batch boundary and drop the log below
        snap_offset = snap_epoch = snap_records = snap_noops = -1
        for i in (1, 2):
            log = MetadataLog(tmp_path / f"node{i}" / "metadata")
            try:
                views = [v for v in log.batches(0) if v.base_offset < hw]
                cut = len(views) - 2
                snap_offset, snap_epoch = views[cut].base_offset, views[cut - 1].partition_leader_epoch
                kept = [r.value for v in views[:cut] if not v.is_control for r in v.records()]
                snap_records = len(kept)
                snap_noops = sum(1 for x in kept if isinstance(decode_metadata_record(x)[0], NoOpRecord))
                write_snapshot(log.dir, SnapshotId(snap_offset, snap_epoch),
                               [bytes(v.buffer) for v in views[:cut] if not v.is_control],
                               last_contained_log_timestamp=0, now_ms=int(time.time() * 1000))
                log.advance_start_offset(snap_offset)
            finally:
                log.close()
        cl.start(1)
        cl.start(2)
        voters = ",".join(f"{i}@127.0.0.1:{cl.port(i)}" for i in cl.ids)
        java = JavaRaftNode(kafka_home, tmp_path / "java3", node_id=JAVA, port=cl.port(JAVA),
                            cluster_id=CLUSTER_ID, voters=voters)
        snap = java.wait_for(lambda e: e["event"] == "snapshot", 30, "the Java voter to load a snapshot")
        assert (snap["offset"], snap["epoch"]) == (snap_offset, snap_epoch)
        # the snapshot's records: everything committed below it, decoded by Kafka's serde
        assert snap["records"] == snap_records and snap["noop_records"] == snap_noops > 0
        lead = wait_until("a leader", lambda: (q := cl.quorum([1, 2])) and q.leader_id in (1, 2) and q.leader_id, 30)
        r = produce(cl.port(lead), 3)
        assert r.error_code == Errors.NONE, r
        hw = high_watermark_of(cl.port(lead))
        st = java.wait_status(lambda s: s["committed_offset"] + 1 >= hw, 20, "the Java voter to catch up")
        assert st["log_end_offset"] >= hw
        commits = [e for e in list(java.events) if e["event"] == "commit"]
        assert commits and commits[0]["base_offset"] == snap_offset  # Fetch resumed at the snapshot's end
        assert committed_ranges_contiguous(java, hw)
        committed_below_hw = java_batches(java, hw)  # later commits (base >= hw) may arrive meanwhile
        assert kraft_batches(tmp_path / f"node{lead}", hw)[-len(committed_below_hw):] == committed_below_hw
        assert not java.faults(), java.faults()
    finally:
        if java is not None:
            java.close()
        cl.close()


# --------------------------------------------------------------------------- dynamic quorum


class Dynamic:
    """A dynamic quorum (kraft.version 1): kraftnode 1 formatted --standalone, kraftnode 2
    --no-initial-controllers, and the Java node 3 started with only bootstrap servers."""

    def __init__(self, kafka: KafkaHome, root: Path) -> None:
        self.kafka = kafka
        self.root = root
        self.ports = dict(zip((1, 2, JAVA), free_ports(3), strict=True))
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports.values())
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        metrics = metrics_listeners({i: self.ports[i] for i in (1, 2)})
        for i, flag in ((1, "--standalone"), (2, "--no-initial-controllers")):
            d = root / f"node{i}"
            d.mkdir(parents=True)
            self.props(i).write_text(
                f"node.id={i}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{self.ports[i]}\n"
                f"controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers={self.bootstrap}\n"
                f"log.dirs={d / 'metadata'}\n{metrics[i]}\n")
            subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(self.props(i)),
                            "--cluster-id", CLUSTER_ID, flag], check=True, capture_output=True)
        self.start(1)
        # the Java node knows only the bootstrap servers; its directory holds the
        # meta.properties `kafka-storage.sh format --no-initial-controllers` would write,
        # which kafka-metadata-quorum.sh add-controller reads the directory id from
        d3 = root / "java3"
        # a longer fetch timeout: as leader of two voters, Kafka's client resigns when it has
        # not heard from the other for 1.5 fetch timeouts (check quorum), and a kraftnode
        # restart takes about that long on a loaded machine
        self.java = JavaRaftNode(kafka, d3, node_id=JAVA, port=self.ports[JAVA], cluster_id=CLUSTER_ID,
                                 bootstrap_servers=self.bootstrap,
                                 extra={"controller.quorum.fetch.timeout.ms": "5000"})
        write_meta_properties(d3 / "metadata", MetaProperties(
            cluster_id=CLUSTER_ID, node_id=JAVA, directory_id=uuid_from_base64(self.java.directory_id)))
        self.props(JAVA).write_text(
            f"node.id={JAVA}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{self.ports[JAVA]}\n"
            f"controller.listener.names=CONTROLLER\nmetadata.log.dir={d3 / 'metadata'}\n")

    def props(self, i: int) -> Path:
        return self.root / (f"node{i}" if i != JAVA else "java3") / (
            "server.properties" if i != JAVA else "controller.properties")

    def directory_id(self, i: int) -> str:
        meta = read_meta_properties(self.props(i).parent / "metadata")
        assert meta is not None and meta.directory_id is not None
        return uuid_to_base64(meta.directory_id)

    def start(self, i: int) -> None:
        with (self.root / f"node{i}" / "node.log").open("ab") as logf:
            self.procs[i] = subprocess.Popen([sys.executable, "-m", "kraftnode", "start", str(self.props(i))],
                                             stdout=logf, stderr=subprocess.STDOUT)

    def logs(self) -> str:
        return "".join(f"--- node {i}\n" + (self.root / f"node{i}" / "node.log").read_text(errors="replace")[-2500:]
                       for i in self.procs) + "--- java\n" + self.java.stderr()[-2500:]

    def quorum(self) -> w.DescribeQuorumResponse.PartitionData | None:
        """The leader's DescribeQuorum (a kraftnode forwards it to a Java leader)."""
        try:
            d = describe_quorum(self.ports[1]).topics[0].partitions[0]
        except OSError:
            return None
        return d if d.error_code == 0 else None

    def voters(self) -> set[int] | None:
        q = self.quorum()
        return None if q is None else {v.replica_id for v in q.current_voters}

    def observing(self, i: int) -> bool:
        q = self.quorum()
        return q is not None and any(o.replica_id == i and o.log_end_offset >= q.high_watermark > 0
                                     for o in q.observers)

    def tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.kafka.tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{self.ports[1]}",
                               *args, timeout=60)

    def add(self, i: int) -> None:
        r = self.tool("--command-config", str(self.props(i)), "add-controller")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"Added controller {i} with directory id {self.directory_id(i)}" in r.stdout, r.stdout

    def remove(self, i: int) -> None:
        r = self.tool("remove-controller", "--controller-id", str(i),
                      f"--controller-directory-id={self.directory_id(i)}")
        assert r.returncode == 0, r.stdout + r.stderr
        # (the tool's own text, double space included)
        assert f"Removed  KRaft controller {i} with directory id {self.directory_id(i)}" in r.stdout, r.stdout

    def close(self) -> None:
        self.java.close()
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def test_dynamic_quorum_voter_changes_across_implementations(kafka_home: KafkaHome, tmp_path: Path) -> None:
    """The genuine kafka-metadata-quorum.sh add-controller / remove-controller:
    the Java node starts as an observer and a kraftnode leader adds it; the Java node then
    leads and adds and removes a kraftnode observer (its AddVoterHandler probes kraftnode's
    ApiVersions for kraft.version); finally the Java voter is removed."""
    dq = Dynamic(kafka_home, tmp_path)
    try:
        java = dq.java
        wait_until("the Java node to fetch as an observer", lambda: dq.observing(JAVA), 30, dq.logs)
        st = java.status()
        assert st["leader"] == 1 and st["kraft_version"] == 1

        dq.add(JAVA)
        wait_until("the Java node to be a voter", lambda: dq.voters() == {1, JAVA}, 20, dq.logs)
        # two voters: a write commits only with the Java voter's fetch
        r = produce(dq.ports[1], 4)
        assert r.error_code == Errors.NONE, r
        hw = high_watermark_of(dq.ports[1])
        java.wait_status(lambda s: s["committed_offset"] + 1 >= hw, 10, "the Java voter to commit")
        described = dq.tool("describe", "--status")
        assert re.findall(r'"id": (\d+)', parse_status(described.stdout)["CurrentVoters"]) == ["1", "3"], \
            described.stdout

        # the Java voter takes over: kraftnode 1 shuts down gracefully (EndQuorumEpoch) and
        # comes back as its follower
        for _ in range(3):
            epoch = java.status()["epoch"]
            dq.procs[1].terminate()
            dq.procs[1].wait(10)
            dq.start(1)
            q = wait_until("kraftnode 1 back, with a leader",
                           lambda ep=epoch: (q := dq.quorum()) is not None and q.leader_epoch > ep and q, 20, dq.logs)
            if q.leader_id == JAVA:
                break
        else:
            pytest.fail("the Java voter never took over")
        # a kraftnode observer, added and removed by the Java leader
        dq.start(2)
        wait_until("kraftnode 2 to fetch from the Java leader as an observer", lambda: dq.observing(2), 30, dq.logs)
        dq.add(2)
        wait_until("kraftnode 2 to be a voter", lambda: dq.voters() == {1, 2, JAVA}, 20, dq.logs)
        a = java.append(3)
        assert "error" not in a, a
        java.wait_status(lambda s: s["high_watermark"] > a["last_offset"], 10, "the append to commit")
        hw = java.status()["high_watermark"]
        for i in (1, 2):
            wait_until(f"kraftnode {i} to commit", lambda i=i: applied_end_of(dq.ports[i]) >= hw, 20, dq.logs)
        dq.remove(2)
        wait_until("kraftnode 2 to be removed", lambda: dq.voters() == {1, JAVA}, 20, dq.logs)

        # the Java voter is removed (by itself, as leader: it resigns once the change commits)
        dq.remove(JAVA)
        wait_until("the Java node to be removed and kraftnode 1 to lead",
                   lambda: dq.voters() == {1} and (q := dq.quorum()) is not None and q.leader_id == 1,
                   20, dq.logs)
        r = produce(dq.ports[1], 2)   # one voter again: commits without the Java node
        assert r.error_code == Errors.NONE, r
        assert not java.faults(), java.faults()
    finally:
        dq.close()
