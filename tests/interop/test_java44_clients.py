"""Kafka 4.4's Java clients and tools against kraftnode, each compared with a genuine Kafka
4.4 node doing the same (issue 36, must-shows 4 and 5).

- ``KafkaConsumer`` with ``group.protocol=consumer`` (KIP-848) against a 3-node quorum: 300
  values produced with acks=all read once each, committed, closed; 100 more; a second
  consumer of the group reads exactly those 100. Once subscribed by topic name and once with
  ``subscribe(SubscriptionPattern)`` -- the broker-side RE2/J regex, sent as
  ``SubscribedTopicRegex`` in ConsumerGroupHeartbeat v1.
- ``kafka-consumer-groups.sh`` (4.4) ``--list`` and ``--describe`` (offsets, ``--members``,
  ``--state``) after those runs, against kraftnode and against a genuine Kafka 4.4 node on
  which the same sequence ran (a 1-partition topic: ``__cluster_metadata`` is no client topic
  on Kafka).
- Kafka 4.4's ``Admin`` (``tests/interop/java/admin/AdminDriver.java`` compiled against 4.4's
  jars): describeCluster, describeFeatures, describeMetadataQuorum and describeConfigs through
  ``bootstrap.controllers`` against the kraftnode quorum and the Kafka node's CONTROLLER
  listener; listConsumerGroups and describeConsumerGroups through ``bootstrap.servers``
  (the Kafka node's broker listener: a Kafka controller serves no group API).

Every difference between the two answers is listed here with its reason.

The kraftnode log also holds KRaft metadata records and the groups' own records: the
consumer counts only the values it produced (a unique prefix).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import CLUSTER_ID, wait_for_hw
from tests.support.java_admin import JavaAdmin
from tests.support.kafka import KafkaHome, java_env
from tests.support.kafka_server import combined_server
from tests.support.quorums import StaticCluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]

TOPIC = "__cluster_metadata"
KAFKA_TOPIC = "j44"
# the same group timeouts on both sides (Kafka's names): members leave and join quickly
GROUP_CONFIG = ("group.consumer.session.timeout.ms=6000\ngroup.consumer.min.session.timeout.ms=1000\n"
                "group.consumer.heartbeat.interval.ms=500\ngroup.consumer.min.heartbeat.interval.ms=100\n")
# what combined_properties gives the Kafka node, given to kraftnode too, so that these keys
# are compared with the same values
SAME_PROPERTIES = ("offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
                   "transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n")
TIMEOUT_MS = 90_000
G_TOPIC, G_REGEX, G_CLASSIC = "g-j44-topic", "g-j44-regex", "g-j44-classic"


def run_java(kafka: KafkaHome, *args: object, timeout: float = 180) -> Any:
    classes = kafka.compile("kip848")
    r = subprocess.run(kafka.java(classes, "Kip848", *map(str, args)), capture_output=True, text=True,
                       timeout=timeout, env=java_env())
    assert r.returncode == 0, f"Kip848 {args} failed:\n{r.stderr[-4000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def table(text: str) -> list[dict[str, str]]:
    """kafka-consumer-groups.sh's tables: columns start where their header word starts
    (Kafka pads every column to its widest value); ``COORDINATOR (ID)`` is one column."""
    rows: list[dict[str, str]] = []
    header: list[tuple[str, int]] = []
    for line in text.splitlines():
        if not line.strip() or "has no active members" in line:
            continue
        if line.startswith("GROUP "):
            header = [(m.group(0), m.start()) for m in re.finditer(r"COORDINATOR \(ID\)|\S+", line)]
            continue
        assert header, text
        starts = [s for _, s in header] + [len(line) + 1]
        rows.append({name: line[starts[i]:starts[i + 1]].strip() for i, (name, _) in enumerate(header)})
    return rows


def group_sequence(kafka: KafkaHome, boot: str, topic: str, regex: str) -> dict[str, Any]:
    """The must-show on one cluster, then the tool and the Admin on its groups."""
    out: dict[str, Any] = {}
    for group, mode, name, prefix in ((G_TOPIC, "topic", topic, "j44t"), (G_REGEX, "regex", regex, "j44r")):
        a, b = [f"{prefix}-a-{i}" for i in range(300)], [f"{prefix}-b-{i}" for i in range(100)]
        assert run_java(kafka, "produce", boot, topic, f"{prefix}-a", 300) == {"sent": 300}
        first = run_java(kafka, "consume", boot, group, mode, name, f"{prefix}-", 300, TIMEOUT_MS)
        assert run_java(kafka, "produce", boot, topic, f"{prefix}-b", 100) == {"sent": 100}
        second = run_java(kafka, "consume", boot, group, mode, name, f"{prefix}-", 100, TIMEOUT_MS)
        out[group] = {"first": first, "second": second, "a": a, "b": b}
    # a classic group (the 4.4 consumer's group.protocol=classic) reads the topic's 400 "j44t" values
    out[G_CLASSIC] = run_java(kafka, "consume", boot, G_CLASSIC, "topic", topic, "j44t-", 400, TIMEOUT_MS,
                              "classic")

    def tool(*args: str) -> str:
        r = kafka.tool("kafka-consumer-groups", "--bootstrap-server", boot, *args, timeout=180)
        assert r.returncode == 0, r.stderr
        return r.stdout
    admin = JavaAdmin(kafka)
    try:
        assert admin("open", "servers", boot) == {"ok": True}
        # every member gone (each run closed its consumer): the groups are Empty
        out["list"] = sorted(tool("--list").split())
        for g in (G_TOPIC, G_REGEX, G_CLASSIC):
            out[f"describe {g}"] = table(tool("--describe", "--group", g))
            out[f"members {g}"] = table(tool("--describe", "--members", "--group", g))
            out[f"state {g}"] = table(tool("--describe", "--state", "--group", g))
        out["groups"] = admin("groups")
        for g in (G_TOPIC, G_REGEX, G_CLASSIC):
            out[f"admin {g}"] = admin("describegroup", g)
        # then one live member of G_TOPIC (a consumer waiting for a value that never comes):
        # the group Stable, its member and assignment as the tool and the Admin show them
        live = subprocess.Popen(kafka.java(kafka.compile("kip848"), "Kip848", "consume", boot, G_TOPIC, "topic",
                                           topic, "j44-never", "1", "120000"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=java_env())
        try:
            deadline = time.monotonic() + 90
            while True:
                st = table(tool("--describe", "--state", "--group", G_TOPIC))
                if st and (st[0]["STATE"], st[0]["#MEMBERS"]) == ("Stable", "1"):
                    break
                assert time.monotonic() < deadline, st
                time.sleep(0.5)
            out["live state"] = st
            out["live members"] = table(tool("--describe", "--members", "--group", G_TOPIC))
            out["live describe"] = table(tool("--describe", "--group", G_TOPIC))
            out["live admin"] = admin("describegroup", G_TOPIC)
        finally:
            live.kill()
            live.wait()
    finally:
        admin.close()
    return out


def controller_calls(kafka: KafkaHome, controllers: str, node_id: int) -> dict[str, Any]:
    admin = JavaAdmin(kafka)
    try:
        assert admin("open", "controllers", controllers) == {"ok": True}
        return {"cluster": admin("cluster"), "features": admin("features"), "quorum": admin("quorum"),
                "broker configs": admin("configs", "broker", node_id),
                "topic configs": admin("configs", "topic", TOPIC)}
    finally:
        admin.close()


@pytest.fixture(scope="module")
def sides(kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The same sequence against a genuine Kafka 4.4 node (broker and controller in one
    process, node id 1, kraftnode's cluster id) and a 3-node kraftnode quorum."""
    tmp: Path = tmp_path_factory.mktemp("java44")
    out: dict[str, Any] = {}
    server = combined_server(kafka44, tmp / "kafka", node_id=1, cluster_id=CLUSTER_ID, extra=GROUP_CONFIG)
    try:
        server.wait_started(timeout=240)
        m = re.search(r"CONTROLLER://127\.0\.0\.1:(\d+)", server.properties)
        assert m is not None
        out["kafka"] = group_sequence(kafka44, server.bootstrap, KAFKA_TOPIC, "^j44.*")
        out["kafka"].update(controller_calls(kafka44, f"127.0.0.1:{m.group(1)}", 1))
        out["kafka"]["port"] = server.port
    finally:
        server.close()
    cl = StaticCluster(tmp / "kraftnode", 3, extra=GROUP_CONFIG + SAME_PROPERTIES)
    cl.start_all()
    try:
        wait_for_hw(cl, 1, 60)
        out["kraftnode"] = group_sequence(kafka44, cl.bootstrap(), TOPIC, "^__cluster.*")
        out["kraftnode"]["leader"] = cl.wait_for_leader().leader_id
        out["kraftnode"].update(controller_calls(kafka44, cl.bootstrap(), 1))
    finally:
        cl.close()
    (tmp / "answers.json").write_text(json.dumps(out, indent=1))
    yield out


@pytest.mark.parametrize("side", ["kraftnode", "kafka"])
@pytest.mark.parametrize("group", [G_TOPIC, G_REGEX])
def test_kip848_consumer_reads_once_commits_and_resumes(sides: dict[str, Any], side: str, group: str) -> None:
    """The must-show: 300 read once each and committed; the second run reads exactly the 100
    produced after -- subscribed by name, and by ``SubscriptionPattern`` (RE2/J, resolved by
    the coordinator)."""
    r = sides[side][group]
    first, second = r["first"], r["second"]
    assert Counter(first["values"]) == Counter(r["a"]), Counter(first["values"]) - Counter(r["a"])
    assert Counter(second["values"]) == Counter(r["b"]), (len(second["values"]), Counter(second["values"]))
    topic = TOPIC if side == "kraftnode" else KAFKA_TOPIC
    assert first["assignment"] == second["assignment"] == [f"{topic}-0"]
    # each run a new member (its own id, chosen by the client: KIP-1082); between the runs
    # the first member's leave and the second's join bump the group epoch once each
    assert first["memberId"] != second["memberId"]
    assert second["generation"] - first["generation"] == 2
    # a difference of the release generation: Kafka 4.4 creates a consumer group at epoch 1
    # (KAFKA-20268, apache/kafka#21700: an empty assignment, for assignment offload), so its
    # first member's first assignment is epoch 2 ("Bumped group epoch to 2" on its first
    # heartbeat); kraftnode, as Kafka 3.9/4.0, creates it at 0 and assigns epoch 1
    assert first["generation"] == (1 if side == "kraftnode" else 2)


def test_a_classic_group_of_the_same_consumer(sides: dict[str, Any]) -> None:
    """Kafka 4.4's consumer with group.protocol=classic (JoinGroup/SyncGroup) reads the
    topic's 400 "j44t" values on both."""
    for side, topic in (("kraftnode", TOPIC), ("kafka", KAFKA_TOPIC)):
        r = sides[side][G_CLASSIC]
        assert Counter(r["values"]) == Counter([f"j44t-a-{i}" for i in range(300)] + [f"j44t-b-{i}" for i in range(100)])
        assert r["assignment"] == [f"{topic}-0"] and r["generation"] == 1


def test_consumer_groups_tool_list_and_describe_as_kafka(sides: dict[str, Any]) -> None:
    """``kafka-consumer-groups.sh`` (4.4) after the runs (every member gone): the same groups,
    the same columns and the same values but for these differences, each of the node's own:

    - TOPIC: ``__cluster_metadata`` on kraftnode, ``j44`` on Kafka (no client topic there);
    - CURRENT-OFFSET / LOG-END-OFFSET: offsets of each log. On Kafka the topic holds only the
      800 values produced; kraftnode's log also holds the KRaft records and the groups' own
      (offset commits, members): its offsets are larger and its LOG-END-OFFSET grows with
      every group record after the commit, so LAG there is the 400 values produced after the
      name group's commit plus those records (Kafka: exactly 400), and the regex and classic
      groups, which read to the end, lag only by the records written after their commits
      (Kafka: 0);
    - COORDINATOR (ID): each node's address; kraftnode's coordinator is the raft leader.
    """
    k, o = sides["kafka"], sides["kraftnode"]
    assert k["list"] == o["list"] == sorted([G_CLASSIC, G_REGEX, G_TOPIC])
    for g in (G_TOPIC, G_REGEX, G_CLASSIC):
        (kr,), (orow,) = k[f"describe {g}"], o[f"describe {g}"]
        assert list(kr) == list(orow) == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                          "CONSUMER-ID", "HOST", "CLIENT-ID"]
        for row in (kr, orow):
            assert int(row["LAG"]) == int(row["LOG-END-OFFSET"]) - int(row["CURRENT-OFFSET"])
        assert (kr["TOPIC"], orow["TOPIC"]) == (KAFKA_TOPIC, TOPIC)
        same = {c: kr[c] for c in kr if c not in ("TOPIC", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")}
        assert same == {c: orow[c] for c in same} == {"GROUP": g, "PARTITION": "0", "CONSUMER-ID": "-", "HOST": "-",
                                                      "CLIENT-ID": "-"}
        # Kafka: the name group committed after its 400 values, 400 more came after; the others read all 800
        assert (kr["CURRENT-OFFSET"], kr["LOG-END-OFFSET"], kr["LAG"]) == (
            ("400", "800", "400") if g == G_TOPIC else ("800", "800", "0"))
        assert int(orow["LAG"]) >= (400 if g == G_TOPIC else 0)
        # no members: both print only "Consumer group '...' has no active members."
        assert k[f"members {g}"] == o[f"members {g}"] == []
        (ks,), (os_,) = k[f"state {g}"], o[f"state {g}"]
        assert list(ks) == list(os_) == ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert ks["COORDINATOR (ID)"] == f"127.0.0.1:{k['port']}  (1)"
        assert os_["COORDINATOR (ID)"].endswith(f"({o['leader']})")
        assert {c: ks[c] for c in ks if c != "COORDINATOR (ID)"} == {c: os_[c] for c in os_ if c != "COORDINATOR (ID)"} \
            == {"GROUP": g, "ASSIGNMENT-STRATEGY": "-" if g == G_CLASSIC else "uniform", "STATE": "Empty",
                "#MEMBERS": "0"}


def test_consumer_groups_tool_describes_a_live_member_as_kafka(sides: dict[str, Any]) -> None:
    """One live KIP-848 member: ``--state`` Stable with 1 member, ``--members`` its client
    id, host and partition count, ``--describe`` its consumer id on the partition; the
    differences: the member id (each client's own random one), the coordinator's address,
    the topic name and offsets (above)."""
    k, o = sides["kafka"], sides["kraftnode"]
    (ks,), (os_,) = k["live state"], o["live state"]
    assert {c: ks[c] for c in ks if c != "COORDINATOR (ID)"} == {c: os_[c] for c in os_ if c != "COORDINATOR (ID)"} \
        == {"GROUP": G_TOPIC, "ASSIGNMENT-STRATEGY": "uniform", "STATE": "Stable", "#MEMBERS": "1"}
    (km,), (om,) = k["live members"], o["live members"]
    assert list(km) == list(om)
    assert {c: km[c] for c in km if c != "CONSUMER-ID"} == {c: om[c] for c in om if c != "CONSUMER-ID"}
    assert km["CLIENT-ID"] == f"consumer-{G_TOPIC}-1" and km["HOST"] == "/127.0.0.1" and km["#PARTITIONS"] == "1"
    (kd,), (od,) = k["live describe"], o["live describe"]
    assert od["CONSUMER-ID"] == om["CONSUMER-ID"] and kd["CONSUMER-ID"] == km["CONSUMER-ID"]
    assert (kd["HOST"], kd["CLIENT-ID"]) == (od["HOST"], od["CLIENT-ID"]) == ("/127.0.0.1", f"consumer-{G_TOPIC}-1")


def test_admin_groups_as_kafka(sides: dict[str, Any]) -> None:
    """Kafka 4.4's Admin through ``bootstrap.servers``: listConsumerGroups (the classic group
    and the two consumer ones, each Empty) and describeConsumerGroups, equal but for the
    coordinator (the raft leader on kraftnode, node 1 on Kafka) and the topic name."""
    k, o = sides["kafka"], sides["kraftnode"]
    assert k["groups"] == o["groups"] == {"groups": [
        {"groupId": g, "simple": False, "state": "EMPTY", "type": t}
        for g, t in ((G_CLASSIC, "CLASSIC"), (G_REGEX, "CONSUMER"), (G_TOPIC, "CONSUMER"))]}
    for g in (G_TOPIC, G_REGEX, G_CLASSIC):
        kd, od = dict(k[f"admin {g}"]), dict(o[f"admin {g}"])
        assert (kd.pop("coordinator"), od.pop("coordinator")) == (1, o["leader"])
        assert kd == od == {"groupId": g, "simple": False, "state": "EMPTY",
                            "type": "CLASSIC" if g == G_CLASSIC else "CONSUMER",
                            "assignor": "" if g == G_CLASSIC else "uniform", "members": []}
    kd, od = dict(k["live admin"]), dict(o["live admin"])
    assert (kd.pop("coordinator"), od.pop("coordinator")) == (1, o["leader"])
    assert kd["members"][0].pop("assignment") == [f"{KAFKA_TOPIC}-0"]
    assert od["members"][0].pop("assignment") == [f"{TOPIC}-0"]
    assert kd == od == {"groupId": G_TOPIC, "simple": False, "state": "STABLE", "type": "CONSUMER",
                        "assignor": "uniform", "members": [{"clientId": f"consumer-{G_TOPIC}-1", "host": "/127.0.0.1",
                                                            "instanceId": None}]}


def test_admin_describe_cluster_and_quorum_as_kafka(sides: dict[str, Any]) -> None:
    """describeCluster and describeMetadataQuorum through ``bootstrap.controllers``. The
    differences are the quorums': kraftnode's has three voters (1-3, leader elected), the
    Kafka node is the only voter of its own; offsets and timestamps are each log's own.
    Both static quorums (``controller.quorum.voters``): directory ids are all zero on both."""
    k, o = sides["kafka"], sides["kraftnode"]
    assert k["cluster"]["clusterId"] == o["cluster"]["clusterId"] == CLUSTER_ID
    assert (k["cluster"]["controller"], o["cluster"]["controller"]) == (1, o["leader"])
    for side, ids in ((k, [1]), (o, [1, 2, 3])):
        nodes = side["cluster"]["nodes"]
        assert [(n["id"], n["host"], n["rack"]) for n in nodes] == [(i, "127.0.0.1", None) for i in ids]
        q = side["quorum"]
        assert q["leaderId"] == side["cluster"]["controller"] and q["leaderEpoch"] >= 1
        assert [v["id"] for v in q["voters"]] == ids and q["observers"] == []
        for v in q["voters"]:
            assert v["directoryId"] == "AAAAAAAAAAAAAAAAAAAAAA"
            assert v["logEndOffset"] == q["highWatermark"] > 0 and v["lastFetchTimestamp"] > 0
        # the Nodes section: each voter's CONTROLLER endpoint, the one describeCluster gives
        assert q["nodes"] == {str(n["id"]): [f"CONTROLLER://127.0.0.1:{n['port']}"] for n in nodes}


# Kafka 4.4's features beside metadata.version and kraft.version (kraftnode supports them all: issue 37)
KAFKA_4_FEATURES = {"eligible.leader.replicas.version", "group.version", "share.version", "streams.version",
                    "transaction.version"}


def test_admin_describe_features_as_kafka(sides: dict[str, Any]) -> None:
    """describeFeatures: both support the same features at 4.4's ranges (issue 37); the
    finalized levels differ by how each side was formatted: kraftnode at the suite's 3.9-IV0
    (metadata.version 21, no other feature), Kafka 4.4 at its defaults (33 and the five 4.x
    features). kraft.version (0-1) is finalized by neither (level 0 of a static quorum). The
    epoch is the offset of each log's last feature change."""
    k, o = sides["kafka"]["features"], sides["kraftnode"]["features"]
    assert (o["finalized"], {f: r for f, r in k["finalized"].items() if f not in KAFKA_4_FEATURES}) == (
        {"metadata.version": [21, 21]}, {"metadata.version": [33, 33]})
    assert set(k["finalized"]) == {"metadata.version"} | KAFKA_4_FEATURES
    assert o["supported"] == k["supported"]
    assert k["supported"]["metadata.version"] == [7, 33]
    assert set(k["supported"]) == {"kraft.version", "metadata.version"} | KAFKA_4_FEATURES
    assert k["epoch"] > 0 and o["epoch"] > 0


#: key -> (Kafka 4.4's value, kraftnode's, why); the other keys both list have the same value
#: (ports and directories aside)
BROKER_CONFIG_DIFFERENCES: dict[str, tuple[str | None, str | None, str]] = {
    "broker.id": ("1", "-1", "a Kafka node reports broker.id = node.id; kraftnode the default -1 "
                  "-- a kraftnode difference, the same against 3.9 (test_go_clients.py)"),
    "group.coordinator.rebalance.protocols": ("classic,consumer,streams", "classic,consumer",
                                              "Kafka 4.4 adds streams (KIP-1071), which kraftnode does not serve"),
    "inter.broker.listener.name": ("PLAINTEXT", None, "the Kafka node is a broker too; kraftnode has no broker "
                                   "listener"),
    "num.recovery.threads.per.data.dir": ("2", "1", "Kafka 4.0 raised the default to 2; kraftnode has 3.9's 1"),
    "principal.builder.class": ("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
                                None, "Kafka 4.0 made DefaultKafkaPrincipalBuilder the default; 3.9's is null, "
                                "as kraftnode's"),
    "process.roles": ("broker,controller", "controller", "the Kafka node is a broker too"),
}
#: keys kraftnode lists and Kafka 4.4 does not
KRAFTNODE_ONLY_KEYS = {
    "kraftnode.application.records.enable",
    "kraftnode.log.file", "kraftnode.log.file.backups", "kraftnode.log.file.max.bytes", "kraftnode.metrics.listener",
    "kraftnode.raft.pre.vote.enable", "kraftnode.raft.topic", "kraftnode.read.linearizable",  # kraftnode's own
    "kraftnode.snapshot.fork.enable",
    "allow.everyone.if.no.acl.found", "super.users",  # the authorizer's: Kafka lists them only with one configured
    "inter.broker.protocol.version",  # removed in Kafka 4.0
    "metadata.log.segment.min.bytes", "unclean.leader.election.interval.ms",  # 3.9 keys Kafka 4.4 does not list
}


def test_admin_describe_configs_as_kafka(sides: dict[str, Any]) -> None:
    """describeConfigs of the node itself (BROKER ``1``) through ``bootstrap.controllers``.
    Kafka 4.4 lists ~350 keys, kraftnode (a controller) the ~80 it defines: every key
    kraftnode lists but those of KRAFTNODE_ONLY_KEYS is one Kafka lists too, with the same
    value but those of BROKER_CONFIG_DIFFERENCES (listeners, quorum voters and log
    directories are each node's own). The topic ``__cluster_metadata``: kraftnode describes
    it (no overrides), Kafka has no such client topic (UnknownTopicOrPartitionException)."""
    k, o = sides["kafka"]["broker configs"]["configs"], sides["kraftnode"]["broker configs"]["configs"]
    assert set(o) - set(k) == KRAFTNODE_ONLY_KEYS
    own = {"listeners", "controller.quorum.voters", "log.dirs"}
    diff = {key: (k[key], o[key]) for key in set(k) & set(o) - own if k[key] != o[key]}
    assert diff == {key: (kv, ov) for key, (kv, ov, _) in BROKER_CONFIG_DIFFERENCES.items()}
    assert o["node.id"] == k["node.id"] == "1" and len(k) > 300 and len(o) > 60
    assert o["controller.quorum.voters"].startswith("1@127.0.0.1:") and o["controller.quorum.voters"].count("@") == 3
    assert sides["kraftnode"]["topic configs"] == {"configs": {}}
    assert sides["kafka"]["topic configs"]["error"] == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
