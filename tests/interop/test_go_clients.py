"""Genuine Go clients against a kraftnode quorum (issue 36): franz-go (producer, classic and
KIP-848 group consumers, kadm) and sarama, built from ``tests/interop/go/``
(tests/support/go_clients.py).

Groups: franz-go produces 300 values (acks=all), a group consumer reads them, each once, and
commits; franz-go produces 100 more and a second run of the same group reads exactly those
100 (it resumed at the committed offset). The log also holds KRaft metadata records and the
groups' own records: the consumers keep only the values with the test's prefix.

kadm: franz-go's admin answers from kraftnode and from a genuine Kafka 4.4 node (a combined
broker+controller, the same node id and cluster id), compared field by field where both serve
the call; every difference is listed here with its reason."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster, serving
from tests.support.go_clients import GoClients, require_go_clients
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import combined_server
from tests.support.node import running_node
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]
TOPIC = "__cluster_metadata"
# small timeouts so that rebalances take a fraction of a second (docs/server.md)
GROUP_CONFIG = ("group.initial.rebalance.delay.ms=100\ngroup.min.session.timeout.ms=1000\n"
                "group.coordinator.rebalance.protocols=classic,consumer\n"
                "group.consumer.session.timeout.ms=6000\ngroup.consumer.min.session.timeout.ms=1000\n"
                "group.consumer.heartbeat.interval.ms=500\ngroup.consumer.min.heartbeat.interval.ms=100\n")
FIRST, SECOND = 300, 100
CONSUME_TIMEOUT_MS = 60_000


@pytest.fixture(scope="session")
def go_clients() -> GoClients:
    return require_go_clients()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cl = StaticCluster(tmp_path_factory.mktemp("goclients"), 3, extra=GROUP_CONFIG)
    yield from serving(cl)


def produce(go: GoClients, bootstrap: str, topic: str, prefix: str, n: int) -> list[int]:
    """franz-go writes prefix-0..prefix-(n-1) with acks=all; their offsets, checked in order."""
    offsets: list[int] = go.run("produce", bootstrap, topic, prefix, n)["offsets"]
    assert len(offsets) == n and offsets == sorted(set(offsets)), offsets
    return offsets


def two_runs(go: GoClients, bootstrap: str, topic: str, tag: str, consume: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """produce 300, run 1 of the group, produce 100, run 2; asserts each run read its values
    exactly once and committed past them. ``consume(prefix, n)`` runs one group member."""
    a = [f"{tag}-a-{i}" for i in range(FIRST)]
    b = [f"{tag}-b-{i}" for i in range(SECOND)]
    off_a = produce(go, bootstrap, topic, f"{tag}-a", FIRST)
    first = consume(f"{tag}-", FIRST)
    assert not first["timed_out"], f"first run read {len(first['values'])} of {FIRST}"
    assert Counter(first["values"]) == Counter(a)
    assert first["committed"] > off_a[-1], first["committed"]
    off_b = produce(go, bootstrap, topic, f"{tag}-b", SECOND)
    second = consume(f"{tag}-", SECOND)
    assert not second["timed_out"], f"second run read {len(second['values'])} of {SECOND}"
    # exactly the 100 new ones: none of the first 300 again (it resumed at the commit)
    assert Counter(second["values"]) == Counter(b)
    assert second["committed"] > off_b[-1], second["committed"]
    return first, second


# ---------------------------------------------------------------------- consumer groups
def test_franz_go_classic_group_consumer(cluster: Cluster, go_clients: GoClients) -> None:
    boot = cluster.bootstrap()

    def consume(prefix: str, n: int) -> dict[str, Any]:
        return go_clients.run("franz-consume", boot, TOPIC, "g-franz-classic", prefix, n, CONSUME_TIMEOUT_MS,
                              "classic")

    first, second = two_runs(go_clients, boot, TOPIC, "fzc", consume)
    assert (first["group_type"], second["group_type"]) == ("classic", "classic")


def test_sarama_classic_group_consumer(cluster: Cluster, go_clients: GoClients) -> None:
    boot = cluster.bootstrap()

    def consume(prefix: str, n: int) -> dict[str, Any]:
        return go_clients.run("sarama-consume", boot, TOPIC, "g-sarama", prefix, n, CONSUME_TIMEOUT_MS)

    two_runs(go_clients, boot, TOPIC, "srm", consume)


def test_franz_go_kip848_group_consumer(cluster: Cluster, go_clients: GoClients) -> None:
    boot = cluster.bootstrap()

    def consume(prefix: str, n: int) -> dict[str, Any]:
        return go_clients.run("franz-consume", boot, TOPIC, "g-franz-848", prefix, n, CONSUME_TIMEOUT_MS,
                              "consumer")

    first, second = two_runs(go_clients, boot, TOPIC, "fz848", consume)
    # the group was a KIP-848 consumer group while each member was in it
    assert (first["group_type"], second["group_type"]) == ("consumer", "consumer")


# ---------------------------------------------------------------------- kadm vs Kafka 4.4
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"  # tests/support/node.py formats kraftnode with it
# what combined_properties gives the Kafka node, given to kraftnode too, so that these keys
# are compared with the same values
SAME_PROPERTIES = ("num.partitions=1\noffsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
                   "transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n")


def normalized(x: Any) -> Any:
    """Ports and directories out of the way: they are each node's own."""
    if isinstance(x, dict):
        return {k: ("<port>" if k == "port" else normalized(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [normalized(v) for v in x]
    if isinstance(x, str):
        return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", re.sub(r"^/\S+$", "<dir>", x))
    return x


KADM_GROUP = "g-kadm"


@pytest.fixture(scope="module")
def answers(go_clients: GoClients, kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """goclients admin against a genuine Kafka 4.4 node (its controller listener, and its
    broker listener for the groups, which a Kafka controller does not serve) and against a
    one-voter kraftnode, node id 1 and the same cluster id on both; on each, franz-go first
    produced 10 values and a classic group ``g-kadm`` read and committed them."""
    tmp: Path = tmp_path_factory.mktemp("kadm")
    out: dict[str, Any] = {}

    def group_run(boot: str, topic: str) -> None:
        produce(go_clients, boot, topic, "kadm", 10)
        r = go_clients.run("franz-consume", boot, topic, KADM_GROUP, "kadm-", 10, CONSUME_TIMEOUT_MS, "classic")
        assert Counter(r["values"]) == Counter(f"kadm-{i}" for i in range(10)), r

    server = combined_server(kafka44, tmp / "kafka", node_id=1, cluster_id=CLUSTER_ID)
    try:
        server.wait_started(timeout=180)
        m = re.search(r"CONTROLLER://127\.0\.0\.1:(\d+)", server.properties)
        assert m is not None
        boot = f"127.0.0.1:{server.port}"
        group_run(boot, "t")
        out["kafka"] = go_clients.run("admin", f"127.0.0.1:{m.group(1)}", 1, TOPIC, KADM_GROUP)
        out["kafka_broker"] = go_clients.run("admin", boot, 1, "t", KADM_GROUP)
        # the KIP-848 program against a coordinator that serves ConsumerGroupHeartbeat v1
        out["kafka_kip848"] = go_clients.run("franz-consume", boot, "t", "g-kadm-848", "kadm-", 10,
                                             CONSUME_TIMEOUT_MS, "consumer")
    finally:
        server.close()
    (tmp / "kraftnode").mkdir()
    with running_node(tmp / "kraftnode", extra=SAME_PROPERTIES) as node:
        boot = f"127.0.0.1:{node.port}"
        group_run(boot, TOPIC)
        out["kraftnode"] = go_clients.run("admin", boot, 1, TOPIC, KADM_GROUP)
    return out



def result(answers: dict[str, Any], side: str, call: str) -> Any:
    sec = answers[side][call]
    assert "error" not in sec, f"{side} {call}: {sec['error']}"
    return sec["result"]


def refused(answers: dict[str, Any], side: str, call: str) -> str:
    """The error franz-go reported: a Kafka controller closes the connection on an API its
    listener does not serve (SocketServer), which franz-go words as below."""
    err = answers[side][call].get("error", "")
    assert "broker closed the connection" in err, answers[side][call]
    return err


def test_kadm_describe_cluster_as_kafka(answers: dict[str, Any]) -> None:
    """DescribeCluster (EndpointType 2, as a client bootstrapped to controllers sends it):
    cluster id, controller, the controller endpoints, fencing, authorized operations."""
    ours, kafka = (normalized(result(answers, s, "describe_cluster")) for s in ("kraftnode", "kafka"))
    # franz-go negotiates v2 with both (IncludeFencedBrokers, KIP-1073; docs/protocol.md)
    assert ours == kafka and ours["version"] == 2
    assert ours["cluster_id"] == CLUSTER_ID and ours["controller_id"] == 1


def test_kadm_describe_quorum_as_kafka(answers: dict[str, Any]) -> None:
    """DescribeQuorum of __cluster_metadata-0 (v2 on both): leader, epoch, voters, observers,
    directory ids, the Nodes section with the CONTROLLER listener. Offsets and timestamps are
    each log's own: compared as relations (the leader's end offset is the high watermark)."""
    sides = []
    for side in ("kraftnode", "kafka"):
        q = normalized(result(answers, side, "describe_quorum"))
        (voter,) = q["current_voters"]
        assert voter["log_end_offset"] == q["high_watermark"] > 0
        assert voter["last_fetch_timestamp"] == voter["last_caught_up_timestamp"] > 0
        for k in ("log_end_offset", "last_fetch_timestamp", "last_caught_up_timestamp"):
            voter[k] = "<own>"
        q["high_watermark"] = "<own>"
        sides.append(q)
    assert sides[0] == sides[1]


# Kafka 4.4's features beside metadata.version and kraft.version (not finalized by the 3.9-IV0 kraftnode side)
KAFKA_4_FEATURES = {"eligible.leader.replicas.version", "group.version", "share.version", "streams.version",
                    "transaction.version"}


def test_kadm_describe_features_as_kafka(answers: dict[str, Any]) -> None:
    """Features (ApiVersions, as Admin.describeFeatures reads them). Every difference is of
    how each side was formatted: kraftnode supports what Kafka 4.4 supports (issue 37) and is
    formatted at the suite's 3.9-IV0 (metadata.version 21, no other feature finalized); Kafka 4.4
    finalizes its latest level, 33, and the 4.x features."""
    ours, kafka = (result(answers, s, "describe_features") for s in ("kraftnode", "kafka"))
    assert ours["error"] == kafka["error"] == "NONE"
    assert ours["supported"]["kraft.version"] == kafka["supported"]["kraft.version"] == [0, 1]
    assert ours["supported"] == kafka["supported"]
    assert kafka["supported"]["metadata.version"] == [7, 33]
    assert (ours["finalized"]["metadata.version"], kafka["finalized"]["metadata.version"]) == ([21, 21], [33, 33])
    assert set(kafka["finalized"]) - set(ours["finalized"]) == KAFKA_4_FEATURES
    assert set(ours["supported"]) <= set(kafka["supported"]) and set(ours["finalized"]) <= set(kafka["finalized"])
    # the epoch is the offset of the last FeatureLevelRecord: each log's own
    assert ours["finalized_epoch"] > 0 and kafka["finalized_epoch"] > 0


READ_ONLY = ("read_only: Kafka marks the broker configs it can update dynamically (DynamicBrokerConfig) "
             "not read-only; kraftnode marks every config read-only (handlers/broker_configs.py) -- a "
             "kraftnode difference, the same against Kafka 3.9")
SHORT = ("type: Kafka defines it SHORT (3.9 and 4.4), kraftnode's key table int (kraftnode/config/keys.py) "
         "-- a kraftnode difference")
#: key -> (the fields that differ, why); every other key both list is the same in every field
#: (value, source, type, read_only, sensitive, synonyms), ports and directories aside
BROKER_CONFIG_DIFFERENCES: dict[str, tuple[set[str], str]] = {
    "advertised.listeners": ({"type"}, "LIST since Kafka 4.0 (3.9: STRING, as kraftnode)"),
    "log.dir": ({"type"}, "LIST since Kafka 4.0 (3.9: STRING, as kraftnode)"),
    "listeners": ({"type", "read_only", "value", "synonyms"},
                  "value: each node's own listeners (the Kafka node is a broker too); type: LIST since 4.0; "
                  + READ_ONLY),
    "broker.id": ({"source", "value", "synonyms"},
                  "a Kafka node reports broker.id = node.id as a static config (KafkaConfig sets it); kraftnode "
                  "reports the default -1 -- a kraftnode difference, the same against 3.9"),
    "group.coordinator.rebalance.protocols": ({"value", "synonyms"},
                                              "default: classic,consumer,streams in Kafka 4.4; kraftnode has 3.9's "
                                              "classic"),
    "inter.broker.listener.name": ({"source", "value", "synonyms"},
                                   "the Kafka node is a broker and its properties name it; kraftnode has no "
                                   "broker listener"),
    "listener.security.protocol.map": ({"read_only", "type"},
                                       "type: Kafka defines it STRING (3.9 and 4.4), kraftnode's key table "
                                       "list -- a kraftnode difference; " + READ_ONLY),
    "log.segment.bytes": ({"read_only"}, READ_ONLY),
    "message.max.bytes": ({"read_only"}, READ_ONLY),
    "num.io.threads": ({"read_only"}, READ_ONLY),
    "num.network.threads": ({"read_only"}, READ_ONLY),
    "unclean.leader.election.enable": ({"read_only"}, READ_ONLY),
    "min.insync.replicas": ({"read_only", "source", "synonyms"},
                            "a Kafka 4.x controller writes a cluster-level min.insync.replicas at bootstrap "
                            "(KIP-966), hence DYNAMIC_DEFAULT_BROKER_CONFIG; " + READ_ONLY),
    "node.id": ({"synonyms"}, "Kafka 4.x's node.id has no default synonym (3.9: -1, as kraftnode)"),
    "num.recovery.threads.per.data.dir": ({"read_only", "value", "synonyms"},
                                          "default 2 since Kafka 4.0 (3.9: 1, as kraftnode); " + READ_ONLY),
    "offsets.topic.replication.factor": ({"type"}, SHORT),
    "transaction.state.log.replication.factor": ({"type"}, SHORT),
    "principal.builder.class": ({"read_only", "synonyms", "type", "value"},
                                "Kafka: CLASS, default DefaultKafkaPrincipalBuilder; kraftnode: string, no "
                                "default (it builds principals itself) -- a kraftnode difference, the same "
                                "against 3.9; " + READ_ONLY),
    "process.roles": ({"value", "synonyms"},
                      "each node's own roles (broker,controller / controller); Kafka 4.x's process.roles has no "
                      "default synonym (3.9: '', as kraftnode)"),
}
#: keys kraftnode lists that Kafka 4.4 does not (Kafka lists ~350 keys, kraftnode the keys of
#: its own table, docs/configuration.md)
KRAFTNODE_ONLY_KEYS: dict[str, str] = {
    **{k: "kraftnode's own key" for k in ("kraftnode.application.records.enable",
                                          "kraftnode.log.file", "kraftnode.log.file.backups",
                                          "kraftnode.log.file.max.bytes", "kraftnode.metrics.listener",
                                          "kraftnode.raft.pre.vote.enable", "kraftnode.raft.topic",
                                          "kraftnode.read.linearizable", "kraftnode.snapshot.fork.enable")},
    "allow.everyone.if.no.acl.found": "an authorizer's key, not in KafkaConfig: Kafka never lists it",
    "super.users": "an authorizer's key, not in KafkaConfig: Kafka never lists it",
    "inter.broker.protocol.version": "removed in Kafka 4.0 (3.9 lists it)",
    "metadata.log.segment.min.bytes": "internal in Kafka 4.x, not listed (3.9 lists it)",
    "unclean.leader.election.interval.ms": "internal in Kafka, not listed (3.9 neither)",
}


def test_kadm_describe_configs_as_kafka(answers: dict[str, Any]) -> None:
    """DescribeConfigs of the node itself (broker resource "1", with synonyms, v4 on both):
    every key both list compared in every field; each difference is listed above with why."""
    (ours,), (kafka,) = (result(answers, s, "describe_broker_configs") for s in ("kraftnode", "kafka"))
    head = ("resource_type", "resource_name", "error", "error_message")
    assert [ours[k] for k in head] == [kafka[k] for k in head] == ["BROKER", "1", "NONE", ""]
    oc, kc = normalized(ours["configs"]), normalized(kafka["configs"])
    assert {k: KRAFTNODE_ONLY_KEYS.get(k) for k in set(oc) - set(kc)} == KRAFTNODE_ONLY_KEYS
    found = {k: {f for f in oc[k] if oc[k][f] != kc[k].get(f)} for k in set(oc) & set(kc)}
    found = {k: v for k, v in found.items() if v}
    assert found == {k: fields for k, (fields, _why) in BROKER_CONFIG_DIFFERENCES.items()}, (
        {k: (kc[k], oc[k]) for k in set(found) ^ set(BROKER_CONFIG_DIFFERENCES) if k in found})
    assert len(set(oc) & set(kc)) > 60

    # the metadata topic: kraftnode serves __cluster_metadata-0 as a topic to clients (produce,
    # fetch, groups) and has no overrides for it; a Kafka controller's image has no such topic
    (ours_t,), (kafka_t,) = (result(answers, s, "describe_topic_configs") for s in ("kraftnode", "kafka"))
    assert (ours_t["error"], ours_t["configs"]) == ("NONE", {})
    assert (kafka_t["error"], kafka_t["configs"]) == ("UNKNOWN_TOPIC_OR_PARTITION", {})
    assert ours_t["error_message"] == kafka_t["error_message"] == ""

    # kadm's own DescribeBrokerConfigs routes a broker resource by node id through Metadata,
    # which kraftnode serves and a Kafka controller does not
    assert result(answers, "kraftnode", "kadm_describe_broker_configs") == [
        {"name": "1", "error": "", "configs": len(oc)}]
    refused(answers, "kafka", "kadm_describe_broker_configs")


def test_kadm_groups_as_kafka(answers: dict[str, Any]) -> None:
    """ListGroups, DescribeGroups and OffsetFetch of the classic group franz-go ran and left:
    a Kafka controller serves no group API (it closes the connection), so kraftnode's answers
    are compared with the Kafka 4.4 node's broker listener, the group coordinator there."""
    for call in ("list_groups", "describe_groups", "fetch_offsets"):
        refused(answers, "kafka", call)
    assert result(answers, "kraftnode", "list_groups") == result(answers, "kafka_broker", "list_groups") == [
        {"coordinator": 1, "group": KADM_GROUP, "group_type": "classic", "protocol_type": "consumer",
         "state": "Empty"}]
    assert result(answers, "kraftnode", "describe_groups") == result(answers, "kafka_broker", "describe_groups") == [
        {"coordinator": 1, "error": "", "group": KADM_GROUP, "members": [], "protocol": "",
         "protocol_type": "consumer", "state": "Empty"}]
    (ours,), (kafka,) = (result(answers, s, "fetch_offsets") for s in ("kraftnode", "kafka_broker"))
    # each committed past its 10 values (kraftnode's log holds metadata records before them);
    # the commit's metadata is franz-go's member id on both; the leader epoch is the one of the
    # batch read last: the raft epoch (1, the first election) in kraftnode, the new topic's
    # partition leader epoch (0) in Kafka
    assert (ours["topic"], ours["partition"], ours["leader_epoch"]) == (TOPIC, 0, 1)
    assert (kafka["topic"], kafka["partition"], kafka["offset"], kafka["leader_epoch"]) == ("t", 0, 10, 0)
    assert ours["offset"] >= 10
    assert ours["metadata"].startswith("kgo-") and kafka["metadata"].startswith("kgo-")


def test_franz_go_kip848_program_against_kafka(answers: dict[str, Any]) -> None:
    """The control of test_franz_go_kip848_group_consumer: the same program, against Kafka
    4.4's broker (ConsumerGroupHeartbeat v1), runs a KIP-848 group (ListGroups: "consumer")."""
    r = answers["kafka_kip848"]
    assert Counter(r["values"]) == Counter(f"kadm-{i}" for i in range(10)) and not r["timed_out"]
    assert (r["group_type"], r["committed"]) == ("consumer", 10)
