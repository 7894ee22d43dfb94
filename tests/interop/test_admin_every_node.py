"""The admin calls of every client the project tests with, against every node of a kraftnode
quorum -- the leader and each follower -- each compared with what a genuine Kafka 3.9 server
answers to the same call (issue 43).

The group APIs are a broker's, so they are compared with a Kafka 3.9 broker (a combined
broker + controller, tests/support/kafka_server.py) holding the same simple group ``g43`` (one
committed offset, no members). ListGroups is the one group API an Admin sends to *every*
broker and merges: a Kafka broker that coordinates no group answers NONE with an empty list
(GroupCoordinator.handleListGroups), so the followers of a kraftnode quorum, which coordinate
nothing, do the same; before issue 43 they answered NOT_COORDINATOR and aiokafka's
``list_consumer_groups()`` and the Java Admin's ``listConsumerGroups().all()`` failed.
DescribeGroups, a per-group API sent to the coordinator, stays NOT_COORDINATOR off the leader,
as Kafka's ``handleDescribeGroup`` answers for a group it does not coordinate.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import (
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    LIST_GROUPS,
    OFFSET_COMMIT,
)
from tests.support.cluster import CLUSTER_ID, Cluster, serving
from tests.support.java_admin import JavaAdmin
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import KafkaServer, combined_server
from tests.support.node import frame_call
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
GROUP = "g43"


def _call(host_port: str, api: int, version: int, body: Any) -> Any:
    host, port = host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        return frame_call(s, api, version, body, 1, client_id="admin-every-node")


def _commit(host_port: str, topic: str, timeout: float = 60) -> None:
    """A simple group's offset commit (generation -1), as a client makes it: FindCoordinator
    first (which makes a Kafka broker create ``__consumer_offsets``), retried while the
    coordinator loads."""
    R = w.OffsetCommitRequest
    q = R(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[
        R.OffsetCommitRequestTopic(name=topic, partitions=[
            R.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
    deadline = time.monotonic() + timeout
    while True:
        _call(host_port, FIND_COORDINATOR, 3, w.FindCoordinatorRequest(key=GROUP, key_type=0))
        code = _call(host_port, OFFSET_COMMIT, 8, q).topics[0].partitions[0].error_code
        if code == 0:
            return
        assert time.monotonic() < deadline, f"OffsetCommit to {host_port}: error {code}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    for cl in serving(StaticCluster(tmp_path_factory.mktemp("admin-every-node"), 3)):
        info = cl.quorum()
        assert info is not None
        _commit(f"127.0.0.1:{cl.port(info.leader_id)}", "__cluster_metadata")
        yield cl


@pytest.fixture(scope="module")
def kafka(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """A Kafka 3.9 broker with the same group (on its own topic: kraftnode's only topic,
    ``__cluster_metadata``, is Kafka's internal one)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    k = combined_server(kafka_home, tmp_path_factory.mktemp("kafka-admin"))
    try:
        k.wait_started()
        admin = AdminClient({"bootstrap.servers": k.bootstrap})
        admin.create_topics([NewTopic("t43", 1, 1)])["t43"].result(30)
        _commit(k.bootstrap, "t43")
        yield k
    finally:
        k.close()


def _nodes(cl: Cluster) -> list[tuple[str, int, str]]:
    """(role, node id, host:port) of every node, the leader first."""
    info = cl.quorum()
    assert info is not None
    ids = sorted(cl.running(), key=lambda i: i != info.leader_id)
    return [("leader" if i == info.leader_id else "follower", i, f"127.0.0.1:{cl.port(i)}") for i in ids]


def _groups_raw(host_port: str) -> tuple[int, list[str], int]:
    """ListGroups v4 (error, groups) and DescribeGroups v5's error for the group."""
    listed = _call(host_port, LIST_GROUPS, 4, w.ListGroupsRequest(states_filter=[]))
    described = _call(host_port, DESCRIBE_GROUPS, 5, w.DescribeGroupsRequest(groups=[GROUP]))
    return listed.error_code, [g.group_id for g in listed.groups], described.groups[0].error_code


def test_list_groups_on_every_node_is_kafkas_answer(cluster: Cluster, kafka: KafkaServer) -> None:
    assert _groups_raw(kafka.bootstrap) == (0, [GROUP], 0)
    for role, node_id, hp in _nodes(cluster):
        got = _groups_raw(hp)
        if role == "leader":
            assert got == (0, [GROUP], 0), (node_id, got)
        else:  # coordinates nothing: no groups, no error; the group's coordinator is elsewhere
            assert got == (0, [], Errors.NOT_COORDINATOR), (node_id, got)


def _confluent(bootstrap: str, node_id: int) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    a = AdminClient({"bootstrap.servers": bootstrap})
    md = a.list_topics(timeout=10)
    cl = a.describe_cluster(request_timeout=10).result(15)
    groups = a.list_consumer_groups(request_timeout=10).result(15)
    res = ConfigResource("BROKER", str(node_id))
    configs = a.describe_configs([res])[res].result(15)
    d = a.describe_consumer_groups([GROUP])[GROUP].result(15)
    return {
        "brokers": sorted(md.brokers), "cluster": (cl.cluster_id, cl.controller.id if cl.controller else -1,
                                                   sorted(n.id for n in cl.nodes)),
        "groups": sorted((g.group_id, g.is_simple_consumer_group, str(g.state)) for g in groups.valid),
        "group_errors": [str(e) for e in groups.errors],
        "node.id": configs["node.id"].value,
        "group": (d.group_id, str(d.state), d.is_simple_consumer_group, d.members),
    }


#: the oldest confluent-kafka pyproject.toml accepts; installed apart (pip --target) and run in a
#: subprocess, since one interpreter holds one librdkafka
OLDEST_CONFLUENT = "2.5.3"


def _oldest_confluent(bootstrap: str, node_id: int) -> dict[str, Any]:
    """``_confluent`` with confluent-kafka (librdkafka) 2.5.3 (``tools/test.sh`` installs it
    into ``.cache/pypi/``; installed here on first use otherwise)."""
    import inspect
    import json
    import subprocess
    import sys
    from pathlib import Path

    target = Path(__file__).resolve().parents[2] / ".cache" / "pypi" / f"confluent-kafka-{OLDEST_CONFLUENT}"
    if not (target / "confluent_kafka").is_dir():
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--target", str(target), f"confluent-kafka=={OLDEST_CONFLUENT}"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            pytest.fail(f"cannot install confluent-kafka {OLDEST_CONFLUENT}: {r.stderr[-2000:]}")
    source = inspect.getsource(_confluent)
    script = (f"import json, confluent_kafka\nfrom typing import Any\nGROUP = {GROUP!r}\n{source}\n"
              f"assert confluent_kafka.version()[0] == {OLDEST_CONFLUENT!r}, confluent_kafka.version()\n"
              f"print(json.dumps(_confluent({bootstrap!r}, {node_id})))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    return {k: (tuple(v) if k in ("cluster", "group") else v) for k, v in out.items()} | {
        "cluster": (out["cluster"][0], out["cluster"][1], out["cluster"][2]),
        "groups": [tuple(g) for g in out["groups"]]}


def _kafka_python(bootstrap: str, node_id: int) -> dict[str, Any]:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        topics = a.list_topics()
        cl = a.describe_cluster()
        groups = a.list_groups()
        configs = a.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node_id))])
        d = a.describe_groups([GROUP])[GROUP]
    finally:
        a.close()
    return {
        "topics": sorted(topics), "cluster": (cl["cluster_id"], cl["controller_id"],
                                              sorted(b["broker_id"] for b in cl["brokers"])),
        "groups": sorted((g["group_id"], g["protocol_type"], g["group_state"]) for g in groups),
        "configs": configs,
        "group": (d["group_id"], d["group_state"], d["protocol_type"], d["members"], d["error"]),
    }


def _aiokafka(bootstrap: str, node_id: int) -> dict[str, Any]:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def run() -> dict[str, Any]:
        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        await a.start()
        try:
            topics = await a.list_topics()
            cl = await a.describe_cluster()
            groups = await a.list_consumer_groups()
            (configs,) = await a.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node_id))])
            (described,) = await a.describe_consumer_groups([GROUP])
        finally:
            await a.close()
        (res,) = configs.resources
        (g,) = described.groups
        return {
            "topics": sorted(topics), "cluster": (cl["cluster_id"], cl["controller_id"],
                                                  sorted(b["node_id"] for b in cl["brokers"])),
            "groups": sorted(groups),
            "configs": (res[0], res[2], res[3], {e[0]: e[1] for e in res[4]}["node.id"]),
            "group": tuple(g),
        }

    return asyncio.run(run())


@pytest.mark.parametrize("client", [_confluent, _oldest_confluent, _kafka_python, _aiokafka],
                         ids=["confluent-kafka", f"confluent-kafka-{OLDEST_CONFLUENT}", "kafka-python", "aiokafka"])
def test_python_admin_clients_on_every_node(cluster: Cluster, kafka: KafkaServer, client: Any) -> None:
    """Every call answered on every node; the group answers equal the Kafka broker's, the
    cluster's names every node and the raft leader as the controller."""
    theirs = client(kafka.bootstrap, 1)
    info = cluster.quorum()
    assert info is not None
    for role, node_id, hp in _nodes(cluster):
        ours = client(hp, node_id)
        assert ours["group"] == theirs["group"], (role, node_id)
        assert ours["groups"] == theirs["groups"], (role, node_id)
        assert ours.get("group_errors") == theirs.get("group_errors") == ([] if "group_errors" in ours else None)
        assert ours["cluster"] == (CLUSTER_ID, info.leader_id, [1, 2, 3]), (role, node_id)
        assert theirs["cluster"][1:] == (1, [1])
        if client is _kafka_python:  # kafka-python answers {} for a broker's own configs, as with Kafka
            assert ours["configs"] == {"broker": {str(node_id): {}}} and theirs["configs"] == {"broker": {"1": {}}}
        elif client is _aiokafka:  # error code, resource type and name, node.id
            assert ours["configs"][:2] == theirs["configs"][:2] == (0, 4)
            assert (ours["configs"][2:], theirs["configs"][2:]) == ((str(node_id), str(node_id)), ("1", "1"))
        else:  # both confluent-kafkas
            assert (ours["node.id"], theirs["node.id"]) == (str(node_id), "1")


def test_java_admin_on_every_node(cluster: Cluster, kafka: KafkaServer, kafka_home: KafkaHome) -> None:
    """``listConsumerGroups().all()`` (what ``kafka-consumer-groups.sh --list`` is built on;
    the script is not in the shared Kafka build) through every node, as through a Kafka broker."""
    admin = JavaAdmin(kafka_home)
    try:
        assert admin("open", "servers", kafka.bootstrap) == {"ok": True}
        assert admin("listgroups") == {"groups": 1}
        assert admin("configs", "broker", "1")["configs"]["node.id"] == "1"
        info = cluster.quorum()
        assert info is not None
        for role, node_id, hp in _nodes(cluster):
            assert admin("open", "servers", hp) == {"ok": True}
            assert admin("listgroups") == {"groups": 1}, (role, node_id)
            got = admin("cluster")
            assert (got["clusterId"], got["controller"], [n["id"] for n in got["nodes"]]) == \
                (CLUSTER_ID, info.leader_id, [1, 2, 3]), (role, node_id)
            assert admin("configs", "broker", str(node_id))["configs"]["node.id"] == str(node_id)
    finally:
        admin.close()


def test_java_admin_with_bootstrap_controllers_on_every_node(cluster: Cluster, kafka: KafkaServer,
                                                             kafka_home: KafkaHome) -> None:
    """The same Admin calls through ``bootstrap.controllers``, compared with a Kafka 3.9
    controller listener's answers: the cluster (the controllers, the active one), the node's
    configs, the features, the cluster's operations; ListGroups fails in the Admin alike
    (no broker among the controllers), without a request."""
    (voters,) = [ln for ln in kafka.properties.splitlines() if ln.startswith("controller.quorum.voters=")]
    admin = JavaAdmin(kafka_home)

    def calls(host_port: str, node_id: int) -> dict[str, Any]:
        assert admin("open", "controllers", host_port) == {"ok": True}
        got = admin("cluster")
        return {"cluster": (got["controller"], [n["id"] for n in got["nodes"]]),
                "groups": admin("listgroups"),
                "node.id": admin("configs", "broker", str(node_id))["configs"]["node.id"],
                "features": admin("features")["finalized"], "ops": admin("clusterops")}

    try:
        theirs = calls(f"127.0.0.1:{voters.rsplit(':', 1)[1]}", 1)
        assert theirs["cluster"] == (1, [1]) and theirs["node.id"] == "1"
        info = cluster.quorum()
        assert info is not None
        for role, node_id, hp in _nodes(cluster):
            ours = calls(hp, node_id)
            assert ours["cluster"] == (info.leader_id, [1, 2, 3]), (role, node_id)
            assert ours["node.id"] == str(node_id)
            assert (ours["groups"], ours["features"], ours["ops"]) == \
                (theirs["groups"], theirs["features"], theirs["ops"]), (role, node_id)
    finally:
        admin.close()
