"""KIP-853 voter changes against real ``kraftnode`` processes over TCP.

A dynamic quorum is formatted as Kafka 3.9 does it: node 1 ``--standalone``, node 2
``--no-initial-controllers`` with ``controller.quorum.bootstrap.servers``. Node 2
starts as an observer; a genuine AddRaftVoterRequest (kraftnode's generated classes
and framing, as ``kafka-metadata-quorum.sh add-controller`` sends it) makes it a voter,
RemoveRaftVoterRequest takes it out again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.log.meta_properties import read_meta_properties
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, free_ports
from tests.support.node import call, running_node

pytestmark = pytest.mark.timeout(180)

LISTENER = "CONTROLLER"


class DynamicPair:
    """Node 1 formatted --standalone, node 2 --no-initial-controllers."""

    def __init__(self, root: Path, extra: str = "") -> None:
        self.root = root
        self.ports = free_ports(2)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        # Every controller is a bootstrap server (as Kafka recommends), so a replica removed
        # from the voter set finds the leader whoever it is.
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        for i, flag in ((1, "--standalone"), (2, "--no-initial-controllers")):
            d = root / f"node{i}"
            d.mkdir(parents=True)
            (d / "server.properties").write_text(
                f"node.id={i}\nprocess.roles=controller\nkraftnode.application.records.enable=true\n"
                f"listeners={LISTENER}://127.0.0.1:{self.port(i)}\ncontroller.listener.names={LISTENER}\n"
                f"controller.quorum.bootstrap.servers={bootstrap}\nlog.dirs={d / 'metadata'}\n{extra}")
            subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(d / "server.properties"),
                            "--cluster-id", CLUSTER_ID, flag], check=True, capture_output=True)

    def port(self, i: int) -> int:
        return self.ports[i - 1]

    def directory_id(self, i: int) -> uuid.UUID:
        meta = read_meta_properties(self.root / f"node{i}" / "metadata")
        assert meta is not None and meta.directory_id is not None
        return meta.directory_id  # type: ignore[no-any-return]

    def start(self, i: int) -> None:
        d = self.root / f"node{i}"
        with (d / "node.log").open("ab") as logf:
            self.procs[i] = subprocess.Popen(
                [sys.executable, "-m", "kraftnode", "start", str(d / "server.properties")],
                stdout=logf, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def logs(self) -> str:
        return "\n".join((self.root / f"node{i}" / "node.log").read_text(errors="replace")[-3000:]
                         for i in (1, 2))

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def dump_voters_records(self, i: int) -> list[list[int]]:
        """The voter ids of every VotersRecord in node i's log segments (kraftnode dump-log)."""
        return [sorted(v["voterId"] for v in r["voters"]) for r in self.dump_voters_json(i)]

    def dump_voters_json(self, i: int) -> list[dict]:  # type: ignore[type-arg]
        """Every VotersRecord in node i's log segments, as ``kraftnode dump-log`` prints it."""
        part = self.root / f"node{i}" / "metadata" / "__cluster_metadata-0"
        segments = sorted(str(p) for p in part.glob("*.log"))
        out = subprocess.run([sys.executable, "-m", "kraftnode", "dump-log", *segments],
                             check=True, capture_output=True, text=True).stdout
        found = []
        for line in out.splitlines():
            if " KRaftVoters " in line:
                found.append(json.loads(line.split(" KRaftVoters ", 1)[1]))
        return found


def describe_quorum(port: int) -> w.DescribeQuorumResponse.PartitionData:
    _, resp = call(port, 55, 2, w.DescribeQuorumRequest(topics=[w.DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[w.DescribeQuorumRequest.PartitionData(partition_index=0)])]))
    assert isinstance(resp, w.DescribeQuorumResponse)
    return resp.topics[0].partitions[0]


def describe_cluster(port: int) -> w.DescribeClusterResponse:
    """DescribeCluster v1 as the Java Admin sends it with bootstrap.controllers (KIP-919)."""
    _, resp = call(port, 60, 1, w.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                         endpoint_type=2))
    assert isinstance(resp, w.DescribeClusterResponse)
    return resp


def wait_until(what: str, check, timeout: float = 30, logs=lambda: "") -> object:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


def add_voter(port: int, voter_id: int, directory_id: uuid.UUID, voter_port: int) -> w.AddRaftVoterResponse:
    _, resp = call(port, ADD_RAFT_VOTER, 0, w.AddRaftVoterRequest(
        cluster_id=CLUSTER_ID, timeout_ms=30_000, voter_id=voter_id, voter_directory_id=directory_id,
        listeners=[w.AddRaftVoterRequest.Listener(name=LISTENER, host="127.0.0.1", port=voter_port)]))
    assert isinstance(resp, w.AddRaftVoterResponse)
    return resp


def remove_voter(port: int, voter_id: int, directory_id: uuid.UUID) -> w.RemoveRaftVoterResponse:
    _, resp = call(port, REMOVE_RAFT_VOTER, 0, w.RemoveRaftVoterRequest(
        cluster_id=CLUSTER_ID, voter_id=voter_id, voter_directory_id=directory_id))
    assert isinstance(resp, w.RemoveRaftVoterResponse)
    return resp


def retry_while_timed_out(send, timeout: float = 30, also: tuple[int, ...] = ()):  # type: ignore[no-untyped-def]
    """REQUEST_TIMED_OUT means "not yet" (HWM unknown, observer not caught up, previous change
    uncommitted): retry, as an operator would."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            resp = send()
        except ConnectionRefusedError:  # not listening yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        if resp.error_code not in (Errors.REQUEST_TIMED_OUT, *also) or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[DynamicPair]:
    p = DynamicPair(tmp_path)
    try:
        yield p
    finally:
        p.close()


def test_add_then_remove_a_controller(pair: DynamicPair) -> None:
    pair.start(1)
    pair.start(2)
    p1 = pair.port(1)
    dir2 = pair.directory_id(2)

    def node2_observing() -> bool:
        try:
            q = describe_quorum(p1)
        except (OSError, AssertionError):
            return False
        return q.leader_id == 1 and q.high_watermark > 0 and any(
            o.replica_id == 2 and o.replica_directory_id == dir2 for o in q.observers)

    wait_until("node 2 fetching as an observer", node2_observing, logs=pair.logs)
    assert [v.replica_id for v in describe_quorum(p1).current_voters] == [1]

    # Node 2 registers itself (ControllerRegistration) while an observer, and DescribeCluster
    # lists every registered controller, as Kafka's controllers do: the Admin sees it before
    # it is added (and after it is removed).
    def cluster_nodes() -> dict[int, tuple[str, int]] | None:
        d = describe_cluster(p1)
        nodes = {b.broker_id: (b.host, b.port) for b in d.brokers}
        return nodes if len(nodes) == 2 and d.controller_id == 1 else None

    assert wait_until("node 2 in DescribeCluster", cluster_nodes, logs=pair.logs) == {
        1: ("127.0.0.1", p1), 2: ("127.0.0.1", pair.port(2))}

    resp = retry_while_timed_out(lambda: add_voter(p1, 2, dir2, pair.port(2)))
    assert (resp.error_code, resp.error_message) == (Errors.NONE, None), pair.logs()
    q = describe_quorum(p1)
    assert sorted(v.replica_id for v in q.current_voters) == [1, 2]
    assert {v.replica_directory_id for v in q.current_voters if v.replica_id == 2} == {dir2}
    assert not [o for o in q.observers if o.replica_id == 2]

    # The VotersRecord is in both logs (node 2 replicated it).
    wait_until("the VotersRecord on node 2", lambda: [1, 2] in pair.dump_voters_records(2), logs=pair.logs)
    assert [1, 2] in pair.dump_voters_records(1)

    # Error cases: the same voter again; a voter that does not exist.
    dup = add_voter(p1, 2, dir2, pair.port(2))
    assert dup.error_code == Errors.DUPLICATE_VOTER and dup.error_message
    missing = retry_while_timed_out(lambda: remove_voter(p1, 3, uuid.uuid4()))
    assert missing.error_code == Errors.VOTER_NOT_FOUND
    wrong_dir = remove_voter(p1, 2, uuid.uuid4())
    assert wrong_dir.error_code == Errors.VOTER_NOT_FOUND

    # Node 2 is a follower now: it forwards voter changes to the leader, as a Kafka broker
    # forwards them to the active controller (the Java Admin with bootstrap.servers sends
    # them to any node). The leader's own answers come back: DUPLICATE_VOTER, then the
    # removal of node 2 itself, asked of node 2.
    dup_via_2 = add_voter(pair.port(2), 2, dir2, pair.port(2))
    assert dup_via_2.error_code == Errors.DUPLICATE_VOTER and dup_via_2.error_message, dup_via_2
    assert dup_via_2.error_message == dup.error_message

    removed = retry_while_timed_out(lambda: remove_voter(pair.port(2), 2, dir2))
    assert removed.error_code == Errors.NONE, (removed, pair.logs())
    q = describe_quorum(p1)
    assert [v.replica_id for v in q.current_voters] == [1]
    wait_until("the second VotersRecord on node 2",
               lambda: pair.dump_voters_records(2)[-1:] == [[1]], logs=pair.logs)
    # Node 2 keeps replicating as an observer, and stays listed as a controller.
    wait_until("node 2 observing again", node2_observing, logs=pair.logs)
    assert sorted(b.broker_id for b in describe_cluster(p1).brokers) == [1, 2]
    # An observer forwards too: node 2 asks for its own return.
    back = retry_while_timed_out(lambda: add_voter(pair.port(2), 2, dir2, pair.port(2)))
    assert back.error_code == Errors.NONE, (back, pair.logs())
    assert sorted(v.replica_id for v in describe_quorum(p1).current_voters) == [1, 2]


def test_a_voter_whose_entry_is_stale_sends_update_raft_voter(tmp_path: Path) -> None:
    """Node 2 is added under the name "localhost"; it listens on 127.0.0.1, so once it is
    a voter it sends UpdateRaftVoter (after a fetch timeout) and the leader appends a
    VotersRecord with its real endpoint."""
    pair = DynamicPair(tmp_path, "controller.quorum.fetch.timeout.ms=1000\n")
    try:
        pair.start(1)
        pair.start(2)
        p1, p2 = pair.port(1), pair.port(2)
        dir2 = pair.directory_id(2)

        def send() -> w.AddRaftVoterResponse:
            _, resp = call(p1, ADD_RAFT_VOTER, 0, w.AddRaftVoterRequest(
                cluster_id=CLUSTER_ID, timeout_ms=30_000, voter_id=2, voter_directory_id=dir2,
                listeners=[w.AddRaftVoterRequest.Listener(name=LISTENER, host="localhost", port=p2)]))
            assert isinstance(resp, w.AddRaftVoterResponse)
            return resp

        resp = retry_while_timed_out(send, also=(Errors.NOT_LEADER_OR_FOLLOWER,))
        assert resp.error_code == Errors.NONE, (resp, pair.logs())

        def hosts_of_2() -> list[str]:
            return [ep["host"] for r in pair.dump_voters_json(1) for v in r["voters"] if v["voterId"] == 2
                    for ep in v["endpoints"]]

        # the VotersRecords in order: the one adding node 2 as "localhost", then its update (one
        # update-voter period, a fetch timeout, after it follows as a voter)
        wait_until("the VotersRecord written for node 2's UpdateRaftVoter",
                   lambda: hosts_of_2() == ["localhost", "127.0.0.1"], timeout=30, logs=pair.logs)
        q = describe_quorum(p1)
        assert sorted(v.replica_id for v in q.current_voters) == [1, 2]
        time.sleep(4)  # one more update period: nothing left to update, no further record
        assert hosts_of_2() == ["localhost", "127.0.0.1"]
    finally:
        pair.close()


def test_update_raft_voter_from_a_voter_with_the_same_endpoints_is_accepted(pair: DynamicPair) -> None:
    """UpdateRaftVoter on the leader (answered at once, with CurrentLeader)."""
    pair.start(1)
    p1 = pair.port(1)
    dir1 = pair.directory_id(1)

    def send(epoch: int) -> w.UpdateRaftVoterResponse:
        _, resp = call(p1, UPDATE_RAFT_VOTER, 0, w.UpdateRaftVoterRequest(
            cluster_id=CLUSTER_ID, current_leader_epoch=epoch, voter_id=1, voter_directory_id=dir1,
            listeners=[w.UpdateRaftVoterRequest.Listener(name=LISTENER, host="127.0.0.1", port=p1)],
            kraft_version_feature=w.UpdateRaftVoterRequest.KRaftVersionFeature(
                min_supported_version=0, max_supported_version=1)))
        assert isinstance(resp, w.UpdateRaftVoterResponse)
        return resp

    def leading() -> w.DescribeQuorumResponse.PartitionData | None:
        try:
            d = describe_quorum(p1)
        except OSError:
            return None
        return d if d.leader_id == 1 else None

    q = wait_until("a leader", leading, logs=pair.logs)
    epoch = q.leader_epoch  # type: ignore[attr-defined]
    fenced = send(epoch - 1)
    assert fenced.error_code == Errors.FENCED_LEADER_EPOCH
    assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (1, epoch)
    assert (fenced.current_leader.host, fenced.current_leader.port) == ("127.0.0.1", p1)
    ok = retry_while_timed_out(lambda: send(epoch))
    assert ok.error_code == Errors.NONE


def test_static_quorum_refuses_voter_changes(tmp_path: Path) -> None:
    """kraft.version 0 (controller.quorum.voters): UNSUPPORTED_VERSION with a message (until
    kafka-features.sh upgrades it: tests/interop/test_kraft_upgrade.py)."""
    with running_node(tmp_path) as node:
        resp = retry_while_timed_out(lambda: add_voter(node.port, 2, uuid.uuid4(), 1),
                                     also=(Errors.NOT_LEADER_OR_FOLLOWER,))  # until elected
        assert resp.error_code == Errors.UNSUPPORTED_VERSION, node.log()
        assert resp.error_message and "kraft.version" in resp.error_message
        removed = remove_voter(node.port, 1, uuid.uuid4())
        assert removed.error_code == Errors.UNSUPPORTED_VERSION


def test_the_leader_removes_itself_and_hands_over(pair: DynamicPair) -> None:
    """Remove the leader (node 1) once node 2 is a voter: answered when committed, then node 1
    resigns and node 2, the only voter left, leads; node 1 follows it as an observer."""
    pair.start(1)
    pair.start(2)
    p1, p2 = pair.port(1), pair.port(2)
    dir1, dir2 = pair.directory_id(1), pair.directory_id(2)
    added = retry_while_timed_out(lambda: add_voter(p1, 2, dir2, p2), also=(Errors.NOT_LEADER_OR_FOLLOWER,))
    assert added.error_code == Errors.NONE, pair.logs()
    removed = retry_while_timed_out(lambda: remove_voter(p1, 1, dir1))
    assert removed.error_code == Errors.NONE, pair.logs()

    def led_by_2() -> w.DescribeQuorumResponse.PartitionData | None:
        try:
            q = describe_quorum(p2)
        except OSError:
            return None
        return q if q.leader_id == 2 and q.high_watermark > 0 else None

    q = wait_until("node 2 leading", led_by_2, logs=pair.logs)
    assert [v.replica_id for v in q.current_voters] == [2]  # type: ignore[attr-defined]
    wait_until("node 1 observing node 2", lambda: any(
        o.replica_id == 1 for o in (led_by_2() or q).observers), logs=pair.logs)  # type: ignore[union-attr]

    # Node 1 back: the voter set is now (2, 1) in log order, but Kafka's leader lists its
    # voters as its HashMap<Integer, ReplicaState> iterates, 1 before 2, and
    # kafka-metadata-quorum.sh prints them in that order.
    back = retry_while_timed_out(lambda: add_voter(p2, 1, dir1, p1))
    assert back.error_code == Errors.NONE, pair.logs()
    assert [v.replica_id for v in describe_quorum(p2).current_voters] == [1, 2]


def quorum_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftnode", "quorum", *args],
                          capture_output=True, text=True, timeout=120)


def test_add_and_remove_controller_with_the_cli(pair: DynamicPair) -> None:
    """`kraftnode quorum add-controller/remove-controller`, as kafka-metadata-quorum.sh 3.9."""
    from recordbatch.wire import uuid_to_base64

    pair.start(1)
    pair.start(2)
    p1, p2 = pair.port(1), pair.port(2)
    dir2 = pair.directory_id(2)
    boot = f"127.0.0.1:{p1}"
    conf2 = str(pair.root / "node2" / "server.properties")
    def observing() -> bool:
        try:
            return any(o.replica_id == 2 for o in describe_quorum(p1).observers)
        except (OSError, AssertionError):
            return False

    wait_until("node 2 fetching as an observer", observing, logs=pair.logs)

    dry = quorum_cli("--bootstrap-controller", boot, "--command-config", conf2, "add-controller", "--dry-run")
    assert dry.returncode == 0 and dry.stdout == (
        f"DRY RUN of adding controller 2 with directory id {uuid_to_base64(dir2)} and endpoints: "
        f"CONTROLLER://127.0.0.1:{p2}\n")
    assert [v.replica_id for v in describe_quorum(p1).current_voters] == [1]

    added = quorum_cli("--bootstrap-controller", boot, "--command-config", conf2, "add-controller")
    assert added.returncode == 0, added.stderr + pair.logs()
    assert added.stdout.startswith("Added controller 2 with directory id ")
    assert sorted(v.replica_id for v in describe_quorum(p1).current_voters) == [1, 2]

    again = quorum_cli("--bootstrap-controller", boot, "--command-config", conf2, "add-controller")
    assert again.returncode == 2 and "DUPLICATE_VOTER" in again.stderr and "Traceback" not in again.stderr

    removed = quorum_cli("--bootstrap-controller", boot, "remove-controller", "--controller-id", "2",
                         f"--controller-directory-id={uuid_to_base64(dir2)}")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == f"Removed  KRaft controller 2 with directory id {uuid_to_base64(dir2)}\n"
    assert [v.replica_id for v in describe_quorum(p1).current_voters] == [1]
    missing = quorum_cli("--bootstrap-controller", boot, "remove-controller", "-i", "2",
                         "-d", uuid_to_base64(dir2))
    assert missing.returncode == 2 and "VOTER_NOT_FOUND" in missing.stderr


def test_describe_quorum_lists_replicas_in_java_hashmap_order() -> None:
    """The order Kafka's LeaderState HashMaps iterate in (see java_hashmap_order).

    Integer keys hash to themselves, so 17 and 1 share bucket 1 (insertion order) before 2.
    ReplicaKey(id, no directory) hashes to 31 * (31 + id): 1023 for id 2 (bucket 15) and
    1054 for id 3 (bucket 14), so observer 3 comes first. Thirteen keys need 32 buckets.
    """
    from kraftnode.server.handlers import java_hashmap_order, replica_key_hash

    assert java_hashmap_order([17, 2, 1], lambda i: i) == [17, 1, 2]
    assert [replica_key_hash(i, None) for i in (2, 3)] == [1023, 1054]
    assert java_hashmap_order([(2, None), (3, None)], lambda k: replica_key_hash(*k)) == [(3, None), (2, None)]
    assert java_hashmap_order(list(range(20, 7, -1)), lambda i: i) == [*range(8, 21)]
    # Uuid.hashCode: (msb ^ lsb) folded to 32 bits; msb 1, lsb 2 -> 3; 31 * 32 + 3 = 995
    assert replica_key_hash(1, uuid.UUID(int=(1 << 64) | 2)) == 995


def test_every_controller_listener_is_in_the_voter_entry(tmp_path: Path) -> None:
    """Kafka 3.9 describes a voter by all its controller listeners (KafkaConfig.
    effectiveAdvertisedControllerListeners; add-controller sends them all too). A standalone
    node with two controller listeners writes both into the VotersRecord of its first epoch,
    and, finding its entry current, never rewrites it with UpdateRaftVoter."""
    p1, p2 = free_ports(2)
    d = tmp_path / "node1"
    d.mkdir()
    props = d / "server.properties"
    props.write_text(
        f"node.id=1\nprocess.roles=controller\nkraftnode.application.records.enable=true\n"
        f"listeners={LISTENER}://127.0.0.1:{p1},SECOND://127.0.0.1:{p2}\n"
        f"controller.listener.names={LISTENER},SECOND\n"
        f"controller.quorum.bootstrap.servers=127.0.0.1:{p1}\nlog.dirs={d / 'metadata'}\n"
        "controller.quorum.fetch.timeout.ms=500\n")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(props),
                    "--cluster-id", CLUSTER_ID, "--standalone"], check=True, capture_output=True)
    pair = DynamicPair.__new__(DynamicPair)  # reuse the helpers for this one node
    pair.root, pair.ports, pair.procs = tmp_path, [p1], {}
    try:
        pair.start(1)

        def entries() -> list[list[tuple[str, int]]]:
            if not list((d / "metadata" / "__cluster_metadata-0").glob("*.log")):
                return []  # no log segment yet
            return [[(ep["name"], ep["port"]) for ep in v["endpoints"]]
                    for r in pair.dump_voters_json(1) for v in r["voters"]]

        want = [(LISTENER, p1), ("SECOND", p2)]
        wait_until("the first epoch's VotersRecord", lambda: entries(),
                   logs=lambda: (d / "node.log").read_text(errors="replace"))
        assert entries() == [want]
        time.sleep(2)  # > an update-voter period: nothing to update, so no further VotersRecord
        assert entries() == [want]
    finally:
        pair.close()
