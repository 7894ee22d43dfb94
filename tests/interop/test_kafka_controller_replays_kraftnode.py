"""Record fidelity of the kraftnode controller (issue 25, must-show 4).

Three kraftnode controllers of a static quorum of four voters (the fourth is a genuine Kafka 3.9
controller, started later) serve three genuine brokers while Kafka's tools make the controller
write every kind of record it writes: broker registrations, fencing and unfencing, controlled
shutdown, unregistration; topics with configs, partitions, partition changes (ISR, leaders,
reassignment), topic deletion; broker and cluster configs; producer id blocks; client quotas;
ACLs; NoOpRecords. Small segments and frequent snapshots make the log of kraftnode 1 and 2 start
after a snapshot; kraftnode 3 keeps its whole log.

* Every record of every kraftnode segment and snapshot decodes with Kafka's MetadataRecordSerde
  and re-encodes to the same bytes (tests/interop/java/metadata-serde).
* The genuine Kafka controller then joins (FetchSnapshot, then the log), replays everything
  without a fault or an ERROR line, and -- leadership transferred to it -- is the active
  controller of the same brokers: they heartbeat to it without registering again, and a topic
  is created, altered and deleted through a broker.
* ApiVersions: a kraftnode node advertises every controller API at the versions the Kafka 3.9
  controller does, except where Kafka 4.4's differ (issue 36): those are 4.4's.
* Differential: some 60 requests the controller refuses (bad topics, configs, partitions, elections,
  reassignments, quotas, deletions, registrations, heartbeats, producer ids, unregistration) are
  sent straight to the active kraftnode controller and, in the same state, to the Kafka controller
  once it leads: the same error codes and messages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import (
    ALLOCATE_PRODUCER_IDS,
    ALTER_CLIENT_QUOTAS,
    ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    API_VERSIONS,
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_QUORUM,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    UNREGISTER_BROKER,
)
from tests.support.api_ranges import differences_from_3_9
from tests.support.cluster import CLUSTER_ID
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import Setup, idempotent_producer_config, partitions, wait_until
from tests.support.node import call

pytestmark = pytest.mark.timeout(420)

KAFKA_CONTROLLER = 4
ZERO = uuid.UUID(int=0)
AUTHORIZER = ("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
              "allow.everyone.if.no.acl.found=true\n")
SNAPSHOTS = ("metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=4096\n"
             "metadata.log.max.record.bytes.between.snapshots=4096\nmetadata.max.retention.bytes=4000\n")
CONTROLLER_EXTRA = ("broker.session.timeout.ms=5000\nsuper.users=User:ANONYMOUS\n" + AUTHORIZER + SNAPSHOTS)
BROKER_EXTRA = ("broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=5000\n"
                "offsets.topic.replication.factor=2\ntransaction.state.log.replication.factor=2\n"
                "transaction.state.log.min.isr=1\nnum.network.threads=2\nnum.io.threads=2\n"
                "replica.lag.time.max.ms=5000\n" + AUTHORIZER)


@pytest.fixture(scope="module")
def setup(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    s = Setup(kafka_home, tmp_path_factory.mktemp("fidelity"), CONTROLLER_EXTRA, BROKER_EXTRA, voters=4,
              kafka_voters=(KAFKA_CONTROLLER,),
              kafka_extra="broker.session.timeout.ms=5000\n" + AUTHORIZER + "super.users=User:ANONYMOUS\n")
    # node 3 keeps its whole log (every record ever written stays on disk to be decoded); 1 and 2
    # clean theirs behind snapshots
    s.cl.node_extra = {3: "metadata.max.retention.bytes=-1\nmetadata.max.retention.ms=-1\n"}
    s.cl.write_properties()
    try:
        s.start_all(CLUSTER_ID, defer=(KAFKA_CONTROLLER,))  # the Kafka controller joins later
        yield s
    finally:
        s.close()
        s.check_clean()


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def probe(port: int) -> list[tuple[str, int, str | None]]:
    """Requests the active controller refuses, sent straight to it (as Admin with
    bootstrap.controllers would): (case, error code, message) of each answer. The same state is
    probed on kraftnode and on the Kafka controller, so the answers must be equal."""
    out: list[tuple[str, int, str | None]] = []
    C = w.CreateTopicsRequest

    def topic(name: str, n: int = 1, rf: int = 1, configs: dict[str, str | None] | None = None,
              assignments: dict[int, list[int]] | None = None) -> Any:
        return C.CreatableTopic(name=name, num_partitions=n, replication_factor=rf,
                                assignments=[C.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                                             for p, b in (assignments or {}).items()],
                                configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    cases = {"bad name": topic("bad name"), "dots": topic(".."), "exists": topic("alpha"),
             "rf too big": topic("big", rf=9), "rf 0": topic("rf0", rf=0), "partitions 0": topic("p0", n=0),
             "bad value": topic("bv", configs={"retention.ms": "soon"}),
             "unknown config": topic("uc", configs={"no.such": "1"}),
             "null config": topic("nc", configs={"retention.ms": None}),
             "range": topic("rg", configs={"segment.bytes": "10"}),
             "compaction lag": topic("cl", configs={"min.compaction.lag.ms": "9", "max.compaction.lag.ms": "5"}),
             "collides": topic("alpha_x"), "collides2": topic("alpha.x"),
             "assignment rf": topic("ar", n=-1, rf=-1, assignments={0: [101, 102], 1: [101]}),
             "assignment dup": topic("ad", n=-1, rf=-1, assignments={0: [101, 101]}),
             "assignment unknown": topic("au", n=-1, rf=-1, assignments={0: [101, 999]}),
             "assignment gap": topic("ag", n=-1, rf=-1, assignments={1: [101]}),
             "assignment and rf": topic("aa", n=-1, rf=2, assignments={0: [101]}),
             "metadata topic": topic("__cluster_metadata")}
    for case, t in cases.items():
        _, r = call(port, CREATE_TOPICS, 7, C(topics=[t], timeout_ms=10000, validate_only=True))
        x = r.topics[0]  # type: ignore[attr-defined]
        out.append((f"CreateTopics {case}", x.error_code, x.error_message))
    P = w.CreatePartitionsRequest
    for case, t in {"decrease": P.CreatePartitionsTopic(name="alpha", count=2, assignments=None),
                    "same": P.CreatePartitionsTopic(name="alpha", count=8, assignments=None),
                    "unknown": P.CreatePartitionsTopic(name="nope", count=2, assignments=None),
                    "assignments": P.CreatePartitionsTopic(name="alpha", count=10, assignments=[
                        P.CreatePartitionsAssignment(broker_ids=[101, 102])])}.items():
        _, r = call(port, CREATE_PARTITIONS, 3, P(topics=[t], timeout_ms=10000, validate_only=True))
        x = r.results[0]  # type: ignore[attr-defined]
        out.append((f"CreatePartitions {case}", x.error_code, x.error_message))
    IA = w.IncrementalAlterConfigsRequest
    for case, (rtype, name, key, op, value) in {
            "bad value": (2, "alpha", "retention.ms", 0, "soon"), "unknown topic": (2, "nope", "retention.ms", 0, "1"),
            "unknown name": (2, "alpha", "no.such", 0, "1"), "append non-list": (2, "alpha", "retention.ms", 2, "1"),
            "default topic": (2, "", "retention.ms", 0, "1"), "bad broker": (4, "x", "a", 0, "1"),
            "unknown broker": (4, "77", "a", 0, "1")}.items():
        _, r = call(port, INCREMENTAL_ALTER_CONFIGS, 1, IA(validate_only=True, resources=[IA.AlterConfigsResource(
            resource_type=rtype, resource_name=name, configs=[IA.AlterableConfig(name=key, config_operation=op,
                                                                                value=value)])]))
        x = r.responses[0]  # type: ignore[attr-defined]
        out.append((f"IncrementalAlterConfigs {case}", x.error_code, x.error_message))
    E = w.ElectLeadersRequest
    _, r = call(port, ELECT_LEADERS, 2, E(election_type=0, timeout_ms=10000, topic_partitions=[
        E.TopicPartitions(topic="alpha", partitions=[0, 99]), E.TopicPartitions(topic="nope", partitions=[0])]))
    for t in r.replica_election_results:  # type: ignore[attr-defined]
        for x in t.partition_result:
            out.append((f"ElectLeaders {t.topic}-{x.partition_id}", x.error_code, x.error_message))
    A = w.AlterPartitionReassignmentsRequest
    _, r = call(port, ALTER_PARTITION_REASSIGNMENTS, 0, A(timeout_ms=10000, topics=[
        A.ReassignableTopic(name="alpha", partitions=[A.ReassignablePartition(partition_index=0, replicas=None),
                                                      A.ReassignablePartition(partition_index=99, replicas=[101]),
                                                      A.ReassignablePartition(partition_index=1, replicas=[101, 101])]),
        A.ReassignableTopic(name="nope", partitions=[A.ReassignablePartition(partition_index=0, replicas=[101])])]))
    for t in r.responses:  # type: ignore[attr-defined]
        for x in t.partitions:
            out.append((f"AlterPartitionReassignments {t.name}-{x.partition_index}", x.error_code, x.error_message))
    Q = w.AlterClientQuotasRequest
    for case, (entity, key, value) in {"fractional": ([("user", "u")], "producer_byte_rate", 1.5),
                                        "bad key": ([("user", "u")], "nonsense", 1.0),
                                        "ip with user": ([("user", "u"), ("ip", "1.2.3.4")], "producer_byte_rate", 1.0),
                                        "negative": ([("client-id", "c")], "request_percentage", -1.0)}.items():
        _, r = call(port, ALTER_CLIENT_QUOTAS, 1, Q(validate_only=True, entries=[Q.EntryData(
            entity=[Q.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[Q.OpData(key=key, value=value, remove=False)])]))
        x = r.entries[0]  # type: ignore[attr-defined]
        out.append((f"AlterClientQuotas {case}", x.error_code, x.error_message))
    D = w.DeleteTopicsRequest
    unknown_id = uuid.UUID(int=(77 << 64) | 77)
    _, r = call(port, DELETE_TOPICS, 6, D(timeout_ms=10000, topic_names=[], topics=[
        D.DeleteTopicState(name="nope", topic_id=ZERO), D.DeleteTopicState(name=None, topic_id=unknown_id),
        D.DeleteTopicState(name="both", topic_id=unknown_id), D.DeleteTopicState(name=None, topic_id=ZERO),
        D.DeleteTopicState(name="twice", topic_id=ZERO), D.DeleteTopicState(name="twice", topic_id=ZERO)]))
    for x in sorted(r.responses, key=lambda x: (x.name or "", str(x.topic_id))):  # type: ignore[attr-defined]
        out.append((f"DeleteTopics {x.name} {x.topic_id}", x.error_code, x.error_message))
    L = w.AlterConfigsRequest
    for case, (rtype, name, key, value) in {"bad value": (2, "alpha", "retention.ms", "soon"),
                                             "unknown topic": (2, "nope", "retention.ms", "1"),
                                             "bad type": (99, "x", "a", "1")}.items():
        _, r = call(port, ALTER_CONFIGS, 2, L(validate_only=True, resources=[L.AlterConfigsResource(
            resource_type=rtype, resource_name=name, configs=[L.AlterableConfig(name=key, value=value)])]))
        x = r.responses[0]  # type: ignore[attr-defined]
        out.append((f"AlterConfigs {case}", x.error_code, x.error_message))
    R = w.BrokerRegistrationRequest

    def registration(**kw: Any) -> Any:
        fields: dict[str, Any] = dict(
            broker_id=555, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=(555 << 64) | 1),
            listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0)],
            features=[R.Feature(name="metadata.version", min_supported_version=1, max_supported_version=21)],
            rack=None, is_migrating_zk_broker=False, log_dirs=[uuid.UUID(int=(555 << 64) | 7)],
            previous_broker_epoch=-1)
        fields.update(kw)
        return R(**fields)
    taken = TAKEN_DIR[0]  # broker 101's log directory
    for case, q in {"cluster id": registration(cluster_id="AAAAAAAAAAAAAAAAAAAAAA"),
                    "features": registration(features=[R.Feature(name="metadata.version", min_supported_version=1,
                                                                 max_supported_version=20)]),
                    "no dirs": registration(log_dirs=[]), "reserved dir": registration(log_dirs=[uuid.UUID(int=5)]),
                    "taken dir": registration(log_dirs=[taken]),
                    "zk broker": registration(is_migrating_zk_broker=True)}.items():
        _, r = call(port, BROKER_REGISTRATION, 4, q)
        out.append((f"BrokerRegistration {case}", r.error_code, None))  # type: ignore[attr-defined]
    _, r = call(port, BROKER_HEARTBEAT, 1, w.BrokerHeartbeatRequest(
        broker_id=555, broker_epoch=1, current_metadata_offset=0, want_fence=False, want_shut_down=False,
        offline_log_dirs=[]))
    out.append(("BrokerHeartbeat unregistered", r.error_code, None))  # type: ignore[attr-defined]
    _, r = call(port, ALLOCATE_PRODUCER_IDS, 0, w.AllocateProducerIdsRequest(broker_id=101, broker_epoch=1))
    out.append(("AllocateProducerIds stale epoch", r.error_code, None))  # type: ignore[attr-defined]
    _, r = call(port, UNREGISTER_BROKER, 0, w.UnregisterBrokerRequest(broker_id=555))
    out.append(("UnregisterBroker unknown", r.error_code, r.error_message))  # type: ignore[attr-defined]
    return out


#: broker 101's log directory id (its meta.properties), set by the test before probing
TAKEN_DIR: list[uuid.UUID] = []


def transfer(setup: Setup, leader: int, to: int) -> None:
    r = subprocess.run([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                        f"127.0.0.1:{setup.cl.port(leader)}", "transfer-leadership", "--to", str(to)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def kraft_files(setup: Setup, i: int, into: Path) -> list[Path]:
    """Copies of node ``i``'s segments and snapshots, taken while it runs: its small retention
    may delete a file between listing it and the decoder opening it (a copy that vanished is
    skipped; a segment's last batch may be cut short, which a reader stops at)."""
    part = setup.cl.root / f"node{i}" / "metadata" / "__cluster_metadata-0"
    into.mkdir(parents=True, exist_ok=True)
    copies = []
    for f in sorted(part.glob("*.log")) + sorted(part.glob("*.checkpoint")):
        try:
            copies.append(Path(shutil.copy2(f, into / f.name)))
        except FileNotFoundError:
            continue
    return copies


def decode(kafka: KafkaHome, files: list[Path]) -> dict[str, object]:
    classes = kafka.compile("metadata-serde")
    r = subprocess.run(kafka.java(classes, "MetadataDecode", *map(str, files)), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    result: dict[str, object] = json.loads(r.stdout)
    return result


def test_the_controller_writes_every_kind_of_record(setup: Setup, tmp_path: Path) -> None:
    # topics, configs, partitions
    setup.create_topic("alpha", "--partitions", "6", "--replication-factor", "3",
                       "--config", "retention.ms=600000", "--config", "min.insync.replicas=2")
    setup.create_topic("beta", "--replica-assignment", "101,102", "--config", "cleanup.policy=compact,delete")
    ok(setup.topics_cli("--alter", "--topic", "alpha", "--partitions", "8"))
    ok(setup.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "alpha",
                 "--add-config", "max.message.bytes=100000", "--delete-config", "retention.ms"))
    ok(setup.cli("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", "102",
                 "--add-config", "log.cleaner.threads=2"))
    ok(setup.cli("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
                 "--add-config", "log.retention.ms=86400000"))
    ok(setup.cli("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
                 "--add-config", "producer_byte_rate=10240,consumer_byte_rate=20480"))
    ok(setup.cli("kafka-configs", "--alter", "--entity-type", "clients", "--entity-default",
                 "--add-config", "request_percentage=50"))
    ok(setup.cli("kafka-acls", "--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "gamma"))
    ok(setup.cli("kafka-acls", "--add", "--deny-principal", "User:eve", "--operation", "All", "--group", "*"))
    ok(setup.cli("kafka-acls", "--remove", "--force", "--deny-principal", "User:eve", "--operation", "All",
                 "--group", "*"))
    # producer id blocks: an idempotent producer on every broker's partitions
    prod = setup.kafka.tool("kafka-verifiable-producer", "--bootstrap-server", setup.bootstrap, "--topic", "alpha",
                            "--max-messages", "300", "--acks", "-1",
                            "--producer.config", str(idempotent_producer_config(setup.root)), timeout=120,
                            env={"LOG_DIR": str(setup.root / "tool-logs")})
    assert '"acked":300' in prod.stdout, prod.stdout[-2000:]
    # a reassignment (adding and removing replicas), then a preferred election
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "beta", "partition": 0, "replicas": [103, 101], "log_dirs": ["any", "any"]}]}))
    ok(setup.cli("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--execute"))
    wait_until("the reassignment", lambda: "is completed" in setup.cli(
        "kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--verify").stdout, 60, setup.logs)
    # fencing and unfencing (kill -9 and restart of 101), controlled shutdown and unregistration of 103
    setup.brokers[101].kill()
    wait_until("101 fenced", lambda: all(101 not in p.isr for p in (partitions(setup.ports[102], "alpha") or {
        0: type("P", (), {"isr": [101]})}).values()), 20, setup.logs)
    setup.brokers[101].start()
    setup.brokers[101].wait_started(120)
    wait_until("101 back in the ISRs", lambda: all(101 in p.isr for p in (partitions(setup.ports[102], "alpha") or {
        0: type("P", (), {"isr": []})}).values()), 60, setup.logs)
    ok(setup.cli("kafka-leader-election", "--election-type", "PREFERRED", "--all-topic-partitions"))
    setup.brokers[103].stop()
    ok(setup.kafka.tool("kafka-cluster", "unregister", "--bootstrap-server", setup.bootstrap, "--id", "103",
                        timeout=120, env={"LOG_DIR": str(setup.root / "tool-logs")}))
    ok(setup.topics_cli("--delete", "--topic", "beta"))
    time.sleep(2)  # a few NoOpRecords, and a snapshot covering all of the above

    # every record of every kraftnode segment and snapshot decodes with Kafka's serde
    wanted = {"RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "UnregisterBrokerRecord", "TopicRecord",
              "PartitionRecord", "PartitionChangeRecord", "RemoveTopicRecord", "ConfigRecord",
              "ProducerIdsRecord", "ClientQuotaRecord", "AccessControlEntryRecord",
              "RemoveAccessControlEntryRecord", "NoOpRecord", "FeatureLevelRecord", "RegisterControllerRecord"}
    for i in setup.kraft_ids:
        files = kraft_files(setup, i, tmp_path / f"node{i}")
        assert any(f.suffix == ".checkpoint" for f in files), files
        got = decode(setup.kafka, files)
        assert got["errors"] == [], got["errors"]
        print(f"kraftnode {i}: {got['records']} records decoded by MetadataRecordSerde: {got['types']}")
        if i == 3:  # the whole log
            assert wanted <= set(got["types"]), wanted - set(got["types"])  # type: ignore[arg-type]
    # kraftnode 1's log was cleaned behind a snapshot: a controller joining now needs FetchSnapshot
    assert not (setup.cl.root / "node1" / "metadata" / "__cluster_metadata-0" / "00000000000000000000.log").exists()
    assert (setup.cl.root / "node3" / "metadata" / "__cluster_metadata-0" / "00000000000000000000.log").exists()


def test_a_kafka_controller_joins_replays_everything_and_takes_over(setup: Setup) -> None:
    kc = setup.controllers[KAFKA_CONTROLLER]
    registered = {b: setup.registrations(b) for b in (101, 102)}
    if setup.cl.wait_for_leader(20).leader_id == 3:  # a leader whose log starts after a snapshot
        transfer(setup, 3, 1)
    kc.format(CLUSTER_ID)
    kc.start()
    kc.wait_started(120)

    def caught_up() -> bool:
        leader = setup.cl.wait_for_leader(20)
        Q = w.DescribeQuorumRequest
        _, resp = call(setup.cl.port(leader.leader_id), DESCRIBE_QUORUM, 2, Q(topics=[Q.TopicData(
            topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
        p = resp.topics[0].partitions[0]  # type: ignore[attr-defined]
        leo = {v.replica_id: v.log_end_offset for v in p.current_voters}
        return leo.get(KAFKA_CONTROLLER, -1) >= p.high_watermark > 0
    wait_until("the Kafka controller to catch up", caught_up, 60, lambda: kc.log()[-5000:])
    assert "Successfully loaded snapshot" in kc.controller_log(), kc.controller_log()[-3000:]
    # ApiVersions: every controller API at the Kafka controller's versions
    req = w.ApiVersionsRequest(client_software_name="kraftnode-tests", client_software_version="1")
    kafka_apis = {a.api_key: (a.min_version, a.max_version)
                  for a in call(setup.cl.port(KAFKA_CONTROLLER), API_VERSIONS, 3, req)[1].api_keys}  # type: ignore[attr-defined]
    ours = {a.api_key: (a.min_version, a.max_version)
            for a in call(setup.cl.port(1), API_VERSIONS, 3, req)[1].api_keys}  # type: ignore[attr-defined]
    # kraftnode advertises Kafka 4.4's ranges (issue 36, docs/protocol.md); where a 3.9 controller
    # differs, exactly these (ControlledShutdown: removed in 4.0; Vote v2 is pre-vote)
    got, want = differences_from_3_9(ours, kafka_apis)
    assert got == want

    # the same refused requests to the active kraftnode controller now and to the Kafka controller
    # once it leads: the same answers
    from kraftnode.log.meta_properties import read_meta_properties
    meta = read_meta_properties(setup.root / "broker101" / "data")
    assert meta is not None and meta.directory_id is not None
    TAKEN_DIR[:] = [meta.directory_id]
    ours_answers = probe(setup.cl.port(setup.cl.wait_for_leader(20).leader_id))
    # leadership to the Kafka controller (kraftnode's transfer-leadership)
    transfer(setup, setup.cl.wait_for_leader(20).leader_id, KAFKA_CONTROLLER)
    wait_until("the Kafka controller to lead", lambda: "Becoming the active controller" in kc.controller_log(), 30,
               lambda: kc.controller_log()[-5000:])
    kafka_answers = probe(setup.cl.port(KAFKA_CONTROLLER))
    differ = [(o, k) for o, k in zip(ours_answers, kafka_answers, strict=True) if o != k]
    assert not differ, "kraftnode vs Kafka:\n" + "\n".join(f"  {o}\n  {k}" for o, k in differ)
    # it is the active controller of the same brokers
    setup.create_topic("under-kafka", "--partitions", "4", "--replication-factor", "2")
    ok(setup.topics_cli("--alter", "--topic", "under-kafka", "--partitions", "6"))
    wait_until("the new partitions on the brokers", lambda: len(partitions(setup.ports[102], "under-kafka") or {})
               == 6, 20)
    ok(setup.topics_cli("--delete", "--topic", "under-kafka"))
    ok(setup.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "alpha",
                 "--add-config", "retention.ms=7200000"))
    time.sleep(3)  # a few heartbeats to the new active controller
    assert {b: setup.registrations(b) for b in (101, 102)} == registered, "a broker registered again"
    faults = kc.faults()
    assert not faults, faults
    assert "The broker has been unfenced" in setup.brokers[101].log()
