"""The genuine Java ``Admin`` (Kafka 3.9 kafka-clients) against a real dynamic kraftnode quorum,
plus ``kafka-features.sh describe`` and ``kafka-cluster.sh cluster-id``.

One JVM (``tests/interop/java/admin/AdminDriver.java``) serves every Admin call of the
module: describeMetadataQuorum, describeCluster (``bootstrap.controllers`` and
``bootstrap.servers``), describeFeatures, describeConfigs, addRaftVoter, removeRaftVoter.
Answers are compared with the quorum's true state: the nodes' logs (leader, epoch),
DescribeQuorum through our own client, the formatted directory ids and ports.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import CLUSTER_ID, serving, wait_for_hw
from tests.support.java_admin import JavaAdmin
from tests.support.kafka import KafkaHome
from tests.support.quorums import DynamicCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def dyn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DynamicCluster]:
    cl = DynamicCluster(tmp_path_factory.mktemp("java-admin"), 3, observers=1)
    yield from serving(cl)


@pytest.fixture(scope="module")
def admin(kafka_home: KafkaHome) -> Iterator[JavaAdmin]:
    a = JavaAdmin(kafka_home)
    yield a
    a.close()


def leader_from_logs(cl: DynamicCluster) -> tuple[int, int]:
    best = (-1, -1)
    for i in cl.ids:
        for m in re.finditer(r"became leader in epoch (\d+)", cl.log(i)):
            best = max(best, (int(m.group(1)), i))
    return best[1], best[0]


def until(what: str, check: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.parametrize("mode", ["controllers", "servers"])
def test_describe_metadata_quorum_and_cluster(dyn: DynamicCluster, admin: JavaAdmin, mode: str) -> None:
    servers = f"127.0.0.1:{dyn.port(1)}" if mode == "controllers" else dyn.bootstrap()
    assert admin("open", mode, servers) == {"ok": True}

    # describeCluster: every registered controller, the active one named. Node 4 (an observer)
    # registers too, as a Kafka controller does before it is added.
    def described() -> Any:
        c = admin("cluster")
        return c if len(c.get("nodes", [])) == 4 else None

    c = until("node 4 registered", described)

    # then an idle quorum (every registration written): the Admin's answer and our own
    # DescribeQuorum agree, and every replica is at the log end
    def idle() -> Any:
        q = admin("quorum")
        truth = wait_for_hw(dyn, 1)
        ends = {r["logEndOffset"] for r in q["voters"] + q["observers"]}
        return q if ends == {q["highWatermark"]} and q["highWatermark"] == truth.high_watermark \
            and len(q["observers"]) == 1 else None

    q = until("an idle quorum", idle)
    assert (q["leaderId"], q["leaderEpoch"]) == leader_from_logs(dyn)
    assert [(v["id"], v["directoryId"]) for v in q["voters"]] == [(i, dyn.directory_id(i)) for i in (1, 2, 3)]
    assert [(o["id"], o["directoryId"]) for o in q["observers"]] == [(4, dyn.directory_id(4))]
    now = int(time.time() * 1000)
    for r in q["voters"] + q["observers"]:
        assert r["logEndOffset"] == q["highWatermark"]
        assert now - 30_000 < r["lastFetchTimestamp"] <= now + 1000
        assert now - 30_000 < r["lastCaughtUpTimestamp"] <= now + 1000
    # Nodes: the voters' endpoints (an observer has none in DescribeQuorum)
    assert q["nodes"] == {str(i): [f"CONTROLLER://127.0.0.1:{dyn.port(i)}"] for i in (1, 2, 3)}

    assert c["clusterId"] == CLUSTER_ID
    assert c["controller"] == q["leaderId"]
    assert c["nodes"] == [{"id": i, "host": "127.0.0.1", "port": dyn.port(i), "rack": None} for i in dyn.ids]


def test_describe_features_and_configs(dyn: DynamicCluster, admin: JavaAdmin) -> None:
    """As a Kafka 4.4 controller answers: metadata.version 3.9-IV0 finalized (the suite formats
    at 3.9-IV0), every 4.4 feature supported at 4.4's ranges, kraft.version finalized at the
    raft client's level, 1 in this dynamic quorum
    (KAFKA-18979; a 3.9 controller left it out: it has no FeatureLevelRecord), the epoch the
    offset at which the features last changed; the topic has no overridden configs, the node
    lists every config (ConfigHelper: its own id)."""
    admin("open", "controllers", f"127.0.0.1:{dyn.port(2)}")
    f = admin("features")
    assert f["finalized"] == {"metadata.version": [21, 21], "kraft.version": [1, 1]}
    assert f["supported"] == {"metadata.version": [7, 33], "kraft.version": [0, 1], "group.version": [0, 1],
                              "transaction.version": [0, 2], "share.version": [0, 2], "streams.version": [0, 1],
                              "eligible.leader.replicas.version": [0, 1]}
    assert 0 < f["epoch"] < wait_for_hw(dyn, 1).high_watermark
    assert admin("features")["epoch"] == f["epoch"]  # stable: no feature changed since
    assert admin("configs", "topic", "__cluster_metadata") == {"configs": {}}
    broker = admin("configs", "broker", "2")["configs"]
    assert broker["node.id"] == "2" and broker["message.max.bytes"] == "1048588" and len(broker) > 50
    missing = admin("configs", "topic", "other")
    assert missing["error"] == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


@pytest.mark.parametrize("mode", ["controllers", "servers"])
def test_authorized_operations(dyn: DynamicCluster, admin: JavaAdmin, mode: str) -> None:
    """Asked for, they are what a Kafka 3.9 node without an authorizer allows: every operation
    Kafka's AclEntry.supportedOperations lists (DescribeCluster; Metadata for topics)."""
    admin("open", mode, f"127.0.0.1:{dyn.port(1)}" if mode == "controllers" else dyn.bootstrap())
    assert admin("clusterops")["ops"] == admin("supportedops", "cluster")["ops"]
    if mode == "servers":  # the Admin describes topics through brokers only
        assert admin("topicops", "__cluster_metadata")["ops"] == admin("supportedops", "topic")["ops"]


def test_kafka_features_and_cluster_tools(dyn: DynamicCluster, kafka_home: KafkaHome, admin: JavaAdmin) -> None:
    admin("open", "controllers", f"127.0.0.1:{dyn.port(1)}")
    epoch = admin("features")["epoch"]
    r = kafka_home.tool("kafka-features", "--bootstrap-controller", f"127.0.0.1:{dyn.port(1)}", "describe")
    assert r.returncode == 0, r.stderr
    # every feature a Kafka 4.4 controller supports, the ones not finalized at level 0
    assert r.stdout == "".join(
        f"Feature: {name}\tSupportedMinVersion: {lo}\tSupportedMaxVersion: {hi}\tFinalizedVersionLevel: {fin}\t"
        f"Epoch: {epoch}\n" for name, lo, hi, fin in (
            ("eligible.leader.replicas.version", 0, 1, 0), ("group.version", 0, 1, 0), ("kraft.version", 0, 1, 1),
            # (Kafka 3.9's tool has no name for 4.4-IV2)
            ("metadata.version", "3.3-IV3", "UNKNOWN 33", "3.9-IV0"), ("share.version", 0, 2, 0),
            ("streams.version", 0, 1, 0), ("transaction.version", 0, 2, 0)))
    for flag, servers in (("--bootstrap-controller", f"127.0.0.1:{dyn.port(3)}"),
                          ("--bootstrap-server", dyn.bootstrap())):
        r = kafka_home.tool("kafka-cluster", "cluster-id", flag, servers)
        assert (r.returncode, r.stdout) == (0, f"Cluster ID: {CLUSTER_ID}\n"), r.stderr


def test_add_and_remove_raft_voter(dyn: DynamicCluster, admin: JavaAdmin) -> None:
    admin("open", "controllers", dyn.bootstrap())
    d4 = dyn.directory_id(4)
    assert admin("add", 4, d4, "CONTROLLER", "127.0.0.1", dyn.port(4)) == {"ok": True}
    q = admin("quorum")
    assert [v["id"] for v in q["voters"]] == [1, 2, 3, 4] and q["observers"] == []
    dup = admin("add", 4, d4, "CONTROLLER", "127.0.0.1", dyn.port(4))
    assert dup["error"] == "org.apache.kafka.common.errors.DuplicateVoterException"
    keys = admin("voterkeys", ",".join(f"{i}:{dyn.directory_id(i)}" for i in (1, 2, 3, 4)))["text"]
    assert dup["message"] == (f"The voter id for ReplicaKey(id=4, directoryId=Optional[{d4}]) is already "
                              f"part of the set of voters {keys}.")
    # through bootstrap.servers the Admin sends it to any node (LeastLoadedBrokerOrActiveKController)
    admin("open", "servers", dyn.bootstrap())
    assert admin("remove", 4, d4) == {"ok": True}
    q = admin("quorum")
    assert [v["id"] for v in q["voters"]] == [1, 2, 3]
    until("node 4 observing again", lambda: [o["id"] for o in admin("quorum")["observers"]] == [4])
    wrong = admin("remove", 4, d4)
    assert wrong["error"] == "org.apache.kafka.common.errors.VoterNotFoundException"
