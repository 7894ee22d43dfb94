"""ACLs as Kafka 3.9's StandardAuthorizer enforces them, with genuine clients, on real
processes whose controller listener is SASL_PLAINTEXT (PLAIN users admin, alice, bob,
mallory; super.users=User:admin, the principal the nodes log in to each other with):

* the Java Admin creates, describes and deletes ACLs; a principal without ALTER on the
  cluster cannot remove a voter or change features (ClusterAuthorizationException) while
  the super user can; the ACLs replicate and survive a restart;
* a principal with WRITE but not READ on ``__cluster_metadata`` produces (kafka-python,
  acks=all) but cannot consume (TopicAuthorizationFailedError);
* a principal with valid credentials but no CLUSTER_ACTION cannot vote or fetch as a replica;
* the ACL records survive a snapshot that replaced the log segments holding them."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftnode.log.metadata_records import decode_metadata_record
from kraftnode.log.snapshot import list_snapshots, read_snapshot_batches, snapshot_file_name
from kraftnode.metadata.state_machine import snapshot_data_records
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.generated.metadata import AccessControlEntryRecord
from kraftnode.protocol.registry import (
    ALTER_USER_SCRAM_CREDENTIALS,
    BEGIN_QUORUM_EPOCH,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    FETCH,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SERVED,
    VOTE,
)
from recordbatch.wire import uuid_to_base64
from tests.kraftnode.server.test_voter_changes import DynamicPair, wait_until
from tests.support.java_admin import JavaAdmin
from tests.support.node import recv_frame, running_node

pytestmark = pytest.mark.timeout(300)

TOPIC = "__cluster_metadata"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "mallory": "mallory-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
SECURE = ("listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT\n"
          "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.controller.protocol=PLAIN\n"
          f"listener.name.controller.plain.sasl.jaas.config={JAAS}\n"
          "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
          "super.users=User:admin\n")


def client_props(tmp: Path, user: str) -> str:
    path = tmp / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user}" password="{USERS[user]}";\n')
    return str(path)


def sasl_socket(port: int, user: str) -> socket.socket:
    """A connection authenticated with PLAIN as ``user`` (SaslHandshake v1, SaslAuthenticate v2)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    hs = send(s, SASL_HANDSHAKE, 1, w.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert hs.error_code == 0
    auth = send(s, SASL_AUTHENTICATE, 2, w.SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{USERS[user]}".encode()), 2)
    assert auth.error_code == 0, auth.error_message
    return s


def send(s: socket.socket, api: int, v: int, body: Any, cid: int) -> Any:
    s.sendall(encode_request(SERVED[api], v, cid, "acl-test", body))
    frame = recv_frame(s, 10)
    assert frame is not None, "connection closed"
    got_cid, resp = parse_response(SERVED[api], v, frame)
    assert got_cid == cid
    return resp


def acl_count(port: int) -> int:
    """How many ACL bindings the node on ``port`` itself lists (DescribeAcls v3 as admin,
    any resource: a raw request, so exactly that node answers)."""
    with sasl_socket(port, "admin") as s:
        got = send(s, DESCRIBE_ACLS, 3, w.DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1), 3)
    assert got.error_code == 0, got.error_message
    return sum(len(r.acls) for r in got.resources)


@pytest.fixture(scope="module")
def admin(kafka_home: Any) -> Iterator[JavaAdmin]:
    a = JavaAdmin(kafka_home)
    try:
        yield a
    finally:
        a.close()


def _retry(admin: JavaAdmin, *cmd: object, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = admin(*cmd)
        if "error" not in got or time.monotonic() > deadline:
            return got
        time.sleep(1)


AUTHZ = "org.apache.kafka.common.errors.ClusterAuthorizationException"


def test_java_admin_acls_and_cluster_alter_rights(tmp_path: Path, admin: JavaAdmin) -> None:
    pair = DynamicPair(tmp_path / "q", SECURE)
    boot = ""
    try:
        pair.start(1)
        pair.start(2)
        boot = f"127.0.0.1:{pair.port(1)}"
        d2 = uuid_to_base64(pair.directory_id(2))
        assert admin("open", "controllers", boot, client_props(tmp_path, "admin")) == {"ok": True}
        # the super user adds node 2 (an observer fetching with the admin's credentials)
        added = _retry(admin, "add", 2, d2, "CONTROLLER", "127.0.0.1", pair.port(2))
        assert added == {"ok": True}, str(added) + pair.logs()

        # ---- ACLs made, listed and refused with the Java Admin's createAcls/describeAcls
        # (the 3.9 Admin sends the ACL APIs only with bootstrap.servers: with
        # bootstrap.controllers it throws UnsupportedEndpointTypeException itself)
        assert admin("open", "servers", boot, client_props(tmp_path, "admin")) == {"ok": True}
        assert admin("createacl", "CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", "DESCRIBE",
                     "ALLOW") == {"ok": True}
        assert admin("createacl", "TOPIC", TOPIC, "LITERAL", "User:bob", "*", "WRITE", "ALLOW") == {"ok": True}
        assert admin("createacl", "TOPIC", "__cluster", "PREFIXED", "User:mallory", "*", "ALL",
                     "DENY") == {"ok": True}
        bad = admin("createacl", "CLUSTER", "my-cluster", "LITERAL", "User:bob", "*", "ALTER", "ALLOW")
        assert bad == {"error": "org.apache.kafka.common.errors.InvalidRequestException",
                       "message": "The only valid name for the CLUSTER resource is kafka-cluster"}
        # (describeAcls goes to the Admin's least loaded node: node 2 lists what it has
        # replayed, which reaches the creations once its next fetch brings the high
        # watermark, as a Kafka broker's metadata cache does; wait for it, bounded)
        expected = sorted([
            "(pattern=ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL), "
            "entry=(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW))",
            f"(pattern=ResourcePattern(resourceType=TOPIC, name={TOPIC}, patternType=LITERAL), "
            "entry=(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW))",
            "(pattern=ResourcePattern(resourceType=TOPIC, name=__cluster, patternType=PREFIXED), "
            "entry=(principal=User:mallory, host=*, operation=ALL, permissionType=DENY))"])
        for port in (pair.port(1), pair.port(2)):
            wait_until(f"the node on port {port} to list the three ACLs",
                       lambda port=port: acl_count(port) == 3, logs=pair.logs)
        listed = admin("describeacls")["acls"]
        assert listed == expected

        # ---- alice: DESCRIBE on the cluster, no ALTER (bootstrap.servers: any node answers,
        # node 2 forwards what the leader must do, after checking the caller itself)
        for port in (pair.port(1), pair.port(2)):
            assert admin("open", "servers", f"127.0.0.1:{port}", client_props(tmp_path, "alice")) == {"ok": True}
            quorum = _retry(admin, "quorum")
            assert "error" not in quorum, quorum
            assert admin("describeacls")["acls"] == listed
            refused = admin("remove", 2, d2)
            assert refused["error"] == AUTHZ, refused
            refused = admin("upgradefeature", "metadata.version", 21)
            assert refused["error"] == AUTHZ, refused
            refused = admin("createacl", "TOPIC", "x", "LITERAL", "User:alice", "*", "READ", "ALLOW")
            assert refused["error"] == AUTHZ, refused
        # SCRAM users: DescribeUserScramCredentials needs DESCRIBE, AlterUserScramCredentials ALTER
        assert admin("scramusers") == {"users": []}
        assert admin("scramupsert", "erin", "SCRAM-SHA-512", "erin-secret", 8192)["error"] == AUTHZ
        # bob: no DESCRIBE on the cluster
        assert admin("open", "servers", boot, client_props(tmp_path, "bob")) == {"ok": True}
        assert admin("quorum")["error"] == AUTHZ
        assert admin("describeacls")["error"] == AUTHZ

        assert admin("scramusers")["error"] == AUTHZ

        # ---- the super user may do all of it; AlterUserScramCredentials sent to the
        # follower (node 2) is forwarded to the leader, as a Kafka broker forwards it
        assert admin("open", "servers", f"127.0.0.1:{pair.port(2)}",
                     client_props(tmp_path, "admin")) == {"ok": True}
        assert admin("scramupsert", "erin", "SCRAM-SHA-512", "erin-secret", 8192) == {"ok": True}
        # (the Admin picks a node itself; a raw request makes sure the follower forwards)
        U = w.AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        with sasl_socket(pair.port(2), "admin") as s:
            got = send(s, ALTER_USER_SCRAM_CREDENTIALS, 0, w.AlterUserScramCredentialsRequest(
                deletions=[], upsertions=[U(name="frank", mechanism=1, iterations=4096, salt=b"salt",
                                            salted_password=b"x" * 32)]), 3)
        assert [(r.user, r.error_code) for r in got.results] == [("frank", 0)]
        log2 = (pair.root / "node2" / "node.log").read_text(errors="replace")
        assert "AlterUserScramCredentials forwarded to leader 1" in log2
        # CreateAcls / DeleteAcls on the follower: checked there, then forwarded to the leader
        C = w.CreateAclsRequest.AclCreation
        F = w.DeleteAclsRequest.DeleteAclsFilter
        grant = w.CreateAclsRequest(creations=[C(resource_type=3, resource_name="grp", resource_pattern_type=3,
                                                 principal="User:alice", host="*", operation=3,
                                                 permission_type=3)])
        revoke = w.DeleteAclsRequest(filters=[F(resource_type_filter=3, resource_name_filter="grp",
                                                pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                operation=1, permission_type=1)])
        with sasl_socket(pair.port(2), "alice") as s:
            got = send(s, CREATE_ACLS, 3, grant, 3)
            assert [r.error_code for r in got.results] == [Errors.CLUSTER_AUTHORIZATION_FAILED]
        with sasl_socket(pair.port(2), "admin") as s:
            assert [r.error_code for r in send(s, CREATE_ACLS, 3, grant, 3).results] == [0]
            gone = send(s, DELETE_ACLS, 3, revoke, 4)
            assert [(r.error_code, [(m.resource_name, m.principal) for m in r.matching_acls])
                    for r in gone.filter_results] == [(0, [("grp", "User:alice")])]
        log2 = (pair.root / "node2" / "node.log").read_text(errors="replace")
        assert "CreateAcls forwarded to leader 1" in log2 and "DeleteAcls forwarded to leader 1" in log2
        wait_until("the credentials on node 2", lambda: admin("scramusers") == {
            "users": ["erin:SCRAM-SHA-512:8192", "frank:SCRAM-SHA-256:4096"]}, logs=pair.logs)
        assert admin("open", "controllers", boot, client_props(tmp_path, "admin")) == {"ok": True}
        assert admin("upgradefeature", "metadata.version", 21) == {"ok": True}
        assert _retry(admin, "remove", 2, d2) == {"ok": True}
        assert admin("open", "servers", boot, client_props(tmp_path, "admin")) == {"ok": True}
        deleted = admin("deleteacls", "CLUSTER", "-", "ANY", "User:alice", "-", "ANY", "ANY")
        assert deleted == {"deleted": [listed[0]]}
        assert admin("open", "servers", boot, client_props(tmp_path, "alice")) == {"ok": True}
        assert admin("quorum")["error"] == AUTHZ

        # ---- the ACLs replicated to node 2 and survive a restart of node 1
        pair.procs[1].kill()
        pair.procs[1].wait()
        pair.start(1)
        assert admin("open", "servers", f"127.0.0.1:{pair.port(1)}",
                     client_props(tmp_path, "admin")) == {"ok": True}
        # (a super user is answered at once, from what is replayed so far: wait for the
        # replay of the log up to the high watermark)
        wait_until("node 1's ACLs after its restart",
                   lambda: admin("describeacls") == {"acls": listed[1:]}, logs=pair.logs)
        assert admin("open", "servers", f"127.0.0.1:{pair.port(2)}",
                     client_props(tmp_path, "bob")) == {"ok": True}
        assert admin("describeacls")["error"] == AUTHZ      # bob: DESCRIBE on cluster still missing
        assert admin("open", "servers", f"127.0.0.1:{pair.port(2)}",
                     client_props(tmp_path, "admin")) == {"ok": True}
        wait_until("node 2's ACLs", lambda: acl_count(pair.port(2)) == 2, logs=pair.logs)
        assert admin("describeacls") == {"acls": listed[1:]}
        logs = "".join((pair.root / f"node{i}" / "node.log").read_text(errors="replace") for i in (1, 2))
        assert re.search(r"Principal = User:alice is Denied operation = ALTER from host = 127\.0\.0\.1 on "
                         r"resource = Cluster:LITERAL:kafka-cluster for request = REMOVE_RAFT_VOTER with "
                         r"resourceRefCount = 1 based on rule DefaultDeny", logs), logs[-3000:]
        assert "for request = UPDATE_FEATURES" in logs
        assert "Traceback" not in logs
    finally:
        admin("close")
        pair.close()


def test_write_without_read_produces_but_cannot_consume(tmp_path: Path, admin: JavaAdmin,
                                                        kafka_home: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    with running_node(tmp_path, SECURE) as node:
        boot = f"127.0.0.1:{node.port}"
        assert admin("open", "servers", boot, client_props(tmp_path, "admin")) == {"ok": True}
        made = _retry(admin, "createacl", "TOPIC", TOPIC, "LITERAL", "User:bob", "*", "WRITE", "ALLOW")
        assert made == {"ok": True}, made
        admin("close")
        cfg = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="bob",
                   sasl_plain_password="bob-secret")
        prod = KafkaProducer(bootstrap_servers=boot, acks="all", request_timeout_ms=10000, **cfg)
        offset = prod.send(TOPIC, value=b"bob-was-here", partition=0).get(timeout=30).offset
        prod.close()
        assert offset >= 0
        cons = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=5000, **cfg)
        tp = TopicPartition(TOPIC, 0)
        cons.assign([tp])
        cons.seek(tp, offset)
        with pytest.raises(TopicAuthorizationFailedError):
            for _ in range(20):
                cons.poll(timeout_ms=500)
        cons.close()
        # the same records are readable by the super user: the write was committed
        admin_cfg = dict(cfg, sasl_plain_username="admin", sasl_plain_password="admin-secret")
        cons = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=5000, **admin_cfg)
        cons.assign([tp])
        cons.seek(tp, offset)
        got = next(iter(cons))
        cons.close()
        assert (got.offset, got.value) == (offset, b"bob-was-here")
        # the Java console consumer as bob: TopicAuthorizationException; as admin: the record
        denied = kafka_home.tool("kafka-console-consumer", "--bootstrap-server", boot, "--topic", TOPIC,
                                 "--partition", "0", "--offset", str(offset), "--max-messages", "1",
                                 "--timeout-ms", "20000", "--consumer.config", client_props(tmp_path, "bob"))
        assert "TopicAuthorizationException" in denied.stderr, denied.stderr[-3000:]
        assert "bob-was-here" not in denied.stdout
        read = kafka_home.tool("kafka-console-consumer", "--bootstrap-server", boot, "--topic", TOPIC,
                               "--partition", "0", "--offset", str(offset), "--max-messages", "1",
                               "--timeout-ms", "20000", "--consumer.config", client_props(tmp_path, "admin"))
        assert read.stdout.strip().splitlines()[-1:] == ["bob-was-here"], read.stderr[-3000:]
        assert "Principal = User:bob is Denied operation = READ" in node.log()


def test_no_cluster_action_no_vote_and_no_replica_fetch(tmp_path: Path) -> None:
    with running_node(tmp_path, SECURE) as node:
        wait_until("the bootstrap commit", lambda: "controller activation" in node.log(), logs=node.log)
        vote = w.VoteRequest(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", topics=[w.VoteRequest.TopicData(
            topic_name=TOPIC, partitions=[w.VoteRequest.PartitionData(
                partition_index=0, candidate_epoch=1000, candidate_id=7, last_offset_epoch=1000,
                last_offset=1000)])])
        fetch = w.FetchRequest(replica_id=7, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            w.FetchRequest.FetchTopic(topic=TOPIC, partitions=[w.FetchRequest.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                last_fetched_epoch=-1, log_start_offset=-1)])])
        begin = w.BeginQuorumEpochRequest(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", topics=[
            w.BeginQuorumEpochRequest.TopicData(topic_name=TOPIC, partitions=[
                w.BeginQuorumEpochRequest.PartitionData(partition_index=0, leader_id=7, leader_epoch=1000)])])
        with sasl_socket(node.port, "mallory") as s:
            assert send(s, VOTE, 1, vote, 3).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
            got = send(s, FETCH, 12, fetch, 4)
            assert got.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
            assert got.responses[0].partitions[0].error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
            assert send(s, BEGIN_QUORUM_EPOCH, 0, begin, 5).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
        # the node's own principal (a super user) may: the vote is judged on its merits
        with sasl_socket(node.port, "admin") as s:
            answer = send(s, VOTE, 1, vote, 3)
            assert answer.error_code == 0
            assert answer.topics[0].partitions[0].error_code != Errors.CLUSTER_AUTHORIZATION_FAILED
            got = send(s, FETCH, 12, fetch, 4)
            assert got.error_code == 0
        log = node.log()
        assert "Principal = User:mallory is Denied operation = CLUSTER_ACTION" in log
        assert "for request = VOTE" in log and "for request = FETCH" in log


def test_acls_survive_a_snapshot_that_replaced_their_log_segments(tmp_path: Path, admin: JavaAdmin) -> None:
    from confluent_kafka import Producer

    extra = SECURE + ("metadata.log.max.record.bytes.between.snapshots=20000\n"
                      "metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=16384\n"
                      "metadata.max.retention.bytes=30000\n")
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "admin",
            "sasl.password": "admin-secret", "acks": "all"}
    part = tmp_path / "meta-1" / f"{TOPIC}-0"
    with running_node(tmp_path, extra) as node:
        boot = f"127.0.0.1:{node.port}"
        assert admin("open", "servers", boot, client_props(tmp_path, "admin")) == {"ok": True}
        made = _retry(admin, "createacl", "CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*",
                      "DESCRIBE", "ALLOW")
        assert made == {"ok": True}, made
        p = Producer({**conf, "bootstrap.servers": boot})

        def cleaned() -> bool:
            segs = sorted(part.glob("*.log"))
            return bool(list_snapshots(part)) and bool(segs) and int(segs[0].name[:20]) > 0
        for _round in range(20):   # 75 KB a round: snapshots follow, then cleaning
            for i in range(300):
                p.produce(TOPIC, value=b"x" * 250, partition=0)
                if i % 100 == 0:
                    p.poll(0)
            assert p.flush(30) == 0
            time.sleep(0.5)
            if cleaned():
                break
        assert cleaned(), node.log()
        admin("close")
    sid = list_snapshots(part)[-1]
    records = [decode_metadata_record(v)[0] for _k, v in snapshot_data_records(
        read_snapshot_batches(part / snapshot_file_name(sid))) if v is not None]
    acls = [r for r in records if isinstance(r, AccessControlEntryRecord)]
    assert [(a.principal, a.operation) for a in acls] == [("User:alice", 8)]
    # restarted from the snapshot: the ACL is still enforced and listed
    with running_node(tmp_path, extra) as node:
        boot = f"127.0.0.1:{node.port}"
        assert admin("open", "servers", boot, client_props(tmp_path, "alice")) == {"ok": True}
        quorum = _retry(admin, "quorum")
        assert "error" not in quorum, quorum
        assert admin("describeacls")["acls"] == [
            "(pattern=ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL), "
            "entry=(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW))"]
        assert admin("open", "servers", boot, client_props(tmp_path, "bob")) == {"ok": True}
        assert admin("quorum")["error"] == AUTHZ
        admin("close")


def test_broker_apis_check_topic_and_group_rights_per_resource(tmp_path: Path) -> None:
    """Per-topic and per-group checks as KafkaApis makes them, with raw requests: alice may
    READ the topic and the group ``g``; mallory may nothing (no ACL names her)."""
    from kraftnode.protocol.registry import (
        CONSUMER_GROUP_HEARTBEAT,
        DESCRIBE_CLUSTER,
        DESCRIBE_CONFIGS,
        FIND_COORDINATOR,
        LIST_OFFSETS,
        METADATA,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        PRODUCE,
    )
    from recordbatch import Record, build_batch

    def heartbeat(topics: list[str]) -> w.ConsumerGroupHeartbeatRequest:
        return w.ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="alice-member", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000, subscribed_topic_names=topics, subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[])

    with running_node(tmp_path, SECURE) as node:
        wait_until("the bootstrap commit", lambda: "controller activation" in node.log(), logs=node.log)
        C = w.CreateAclsRequest.AclCreation
        with sasl_socket(node.port, "admin") as s:
            made = send(s, CREATE_ACLS, 3, w.CreateAclsRequest(creations=[
                C(resource_type=2, resource_name=TOPIC, resource_pattern_type=3, principal="User:alice",
                  host="*", operation=3, permission_type=3),
                C(resource_type=3, resource_name="g", resource_pattern_type=4, principal="User:alice",
                  host="*", operation=3, permission_type=3),
                C(resource_type=2, resource_name="", resource_pattern_type=3, principal="User:alice",
                  host="*", operation=3, permission_type=3),
                C(resource_type=2, resource_name="t", resource_pattern_type=2, principal="User:alice",
                  host="*", operation=3, permission_type=3)]), 1)
        assert [(r.error_code, r.error_message) for r in made.results] == [
            (0, None), (0, None), (Errors.INVALID_REQUEST, "Invalid empty resource name"),
            (Errors.INVALID_REQUEST, "Invalid patternType MATCH")]
        T = Errors.TOPIC_AUTHORIZATION_FAILED
        meta_all = w.MetadataRequest(topics=None)
        meta_named = w.MetadataRequest(topics=[w.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                       include_topic_authorized_operations=True)
        lo = w.ListOffsetsRequest(replica_id=-1, topics=[w.ListOffsetsRequest.ListOffsetsTopic(
            name=TOPIC, partitions=[w.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)])])
        produce = w.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[w.ProduceRequest.TopicProduceData(
            name=TOPIC, partition_data=[w.ProduceRequest.PartitionProduceData(
                index=0, records=build_batch([Record(key=None, value=b"v")]))])])
        configs = w.DescribeConfigsRequest(resources=[
            w.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=TOPIC),
            w.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="1")])
        commit = w.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                       topics=[w.OffsetCommitRequest.OffsetCommitRequestTopic(
                                           name=TOPIC, partitions=[w.OffsetCommitRequest.OffsetCommitRequestPartition(
                                               partition_index=0, committed_offset=1)])])
        fetch_offsets = w.OffsetFetchRequest(groups=[w.OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="g", topics=None)])
        with sasl_socket(node.port, "mallory") as s:
            got = send(s, METADATA, 12, meta_all, 3)
            assert got.topics == []                               # left out
            got = send(s, METADATA, 10, meta_named, 4)
            assert got.topics[0].error_code == T and got.topics[0].partitions == []
            assert send(s, LIST_OFFSETS, 7, lo, 5).topics[0].partitions[0].error_code == T
            got = send(s, PRODUCE, 9, produce, 6)
            assert got.responses[0].partition_responses[0].error_code == T
            got = send(s, DESCRIBE_CONFIGS, 4, configs, 7)
            assert [(r.error_code, r.error_message) for r in got.results] == [
                (T, "Topic authorization failed."),
                (Errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")]
            got = send(s, DESCRIBE_CLUSTER, 1, w.DescribeClusterRequest(endpoint_type=2), 8)
            assert got.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
            got = send(s, DESCRIBE_CLUSTER, 1, w.DescribeClusterRequest(
                endpoint_type=1, include_cluster_authorized_operations=True), 9)
            assert got.error_code == 0 and got.cluster_authorized_operations == 0
            got = send(s, FIND_COORDINATOR, 4, w.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), 10)
            assert got.coordinators[0].error_code == Errors.GROUP_AUTHORIZATION_FAILED
            got = send(s, OFFSET_COMMIT, 8, commit, 11)
            assert got.topics[0].partitions[0].error_code == Errors.GROUP_AUTHORIZATION_FAILED
            got = send(s, OFFSET_FETCH, 8, fetch_offsets, 12)
            assert got.groups[0].error_code == Errors.GROUP_AUTHORIZATION_FAILED
        with sasl_socket(node.port, "alice") as s:
            got = send(s, METADATA, 12, meta_all, 3)
            assert [t.name for t in got.topics] == [TOPIC] and got.topics[0].error_code == 0
            got = send(s, METADATA, 10, meta_named, 4)
            assert got.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)  # READ, DESCRIBE
            assert send(s, LIST_OFFSETS, 7, lo, 5).topics[0].partitions[0].error_code == 0
            got = send(s, PRODUCE, 9, produce, 6)
            assert got.responses[0].partition_responses[0].error_code == T  # READ is not WRITE
            got = send(s, FIND_COORDINATOR, 4, w.FindCoordinatorRequest(key_type=0, coordinator_keys=["g1"]), 10)
            assert got.coordinators[0].error_code == 0                 # prefixed "g": DESCRIBE implied
            got = send(s, OFFSET_COMMIT, 8, commit, 11)
            assert got.topics[0].partitions[0].error_code == 0
            got = send(s, OFFSET_FETCH, 8, fetch_offsets, 12)
            assert got.groups[0].error_code == 0
            assert got.groups[0].topics[0].partitions[0].committed_offset == 1
            # ConsumerGroupHeartbeat (Kafka 4.4's KafkaApis): READ on the group, then DESCRIBE
            # on every named topic -- one she may not describe fails the whole heartbeat
            assert send(s, CONSUMER_GROUP_HEARTBEAT, 1, heartbeat([TOPIC, "hidden"]), 13).error_code == T
            got = send(s, CONSUMER_GROUP_HEARTBEAT, 1, heartbeat([TOPIC]), 14)
            assert (got.error_code, got.member_epoch) == (0, 1)
        with sasl_socket(node.port, "mallory") as s:
            got = send(s, CONSUMER_GROUP_HEARTBEAT, 1, heartbeat([TOPIC]), 15)
            assert got.error_code == Errors.GROUP_AUTHORIZATION_FAILED


def test_a_node_without_cluster_action_stops_as_kafkas_raft_client_does(tmp_path: Path, admin: JavaAdmin) -> None:
    """A genuine kraftnode observer logging in as mallory (valid credentials, no CLUSTER_ACTION):
    the leader refuses its replica Fetch; like Kafka's KafkaRaftClient (which throws
    ClusterAuthorizationException, fatal for its raft thread) it stops with a line saying
    what is missing. Once an ACL grants CLUSTER_ACTION, it replicates."""
    pair = DynamicPair(tmp_path / "q", SECURE)
    conf2 = pair.root / "node2" / "server.properties"
    conf2.write_text(conf2.read_text().replace('username="admin" password="admin-secret" user_admin',
                                               'username="mallory" password="mallory-secret" user_admin'))
    try:
        pair.start(1)
        pair.start(2)
        assert pair.procs[2].wait(60) != 0
        log2 = (pair.root / "node2" / "node.log").read_text(errors="replace")
        assert re.search(r"node 2 stopped: (node 1|bootstrap server) 127\.0\.0\.1:\d+ refused Fetch with "
                         r"CLUSTER_AUTHORIZATION_FAILED: this node's principal needs CLUSTER_ACTION on the "
                         r"cluster \(add it to super.users, or grant it with an ACL\)", log2), log2[-3000:]
        log1 = (pair.root / "node1" / "node.log").read_text(errors="replace")
        assert "Principal = User:mallory is Denied operation = CLUSTER_ACTION" in log1
        assert pair.procs[1].poll() is None
        # grant it: the observer now replicates the log
        assert admin("open", "servers", f"127.0.0.1:{pair.port(1)}", client_props(tmp_path, "admin")) == {"ok": True}
        made = _retry(admin, "createacl", "CLUSTER", "kafka-cluster", "LITERAL", "User:mallory", "*",
                      "CLUSTER_ACTION", "ALLOW")
        assert made == {"ok": True}, made
        pair.start(2)
        def second_run() -> str:
            text = (pair.root / "node2" / "node.log").read_text(errors="replace")
            return text.rsplit("node 2 listening on", 1)[-1]
        wait_until("node 2 following the leader", lambda: "became follower" in second_run(),
                   timeout=30, logs=pair.logs)
        time.sleep(3)
        assert pair.procs[2].poll() is None, pair.logs()
    finally:
        admin("close")
        pair.close()


def test_ssl_principal_from_the_mapped_certificate_subject(tmp_path: Path) -> None:
    """On an SSL listener the principal is the client certificate's subject mapped by
    ssl.principal.mapping.rules (DefaultKafkaPrincipalBuilder): User:client gets DESCRIBE on
    the cluster by ACL, User:other (same CA) does not, User:admin is a super user."""
    import ssl as _ssl

    from kraftnode.protocol.registry import CREATE_ACLS, DESCRIBE_QUORUM
    from tests.support.certs import PASSWORD, make_pki

    pki = make_pki(tmp_path / "pki")
    server, client, other, admin_cert = (pki.issue(n) for n in ("server", "client", "other", "admin"))
    extra = ("listener.security.protocol.map=CONTROLLER:SSL\n"
             f"ssl.keystore.type=PKCS12\nssl.keystore.location={server.p12}\nssl.keystore.password={PASSWORD}\n"
             f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_cert}\nssl.client.auth=required\n"
             # the subject as Java prints it: C=US,O=kraftnode tests,OU=test,CN=client
             "ssl.principal.mapping.rules=RULE:^.*CN=([^,]+)$/$1/L,DEFAULT\n"
             "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
             "super.users=User:admin\n")

    def tls(port: int, party: Any) -> Any:
        ctx = _ssl.create_default_context(cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(party.cert), str(party.key))
        return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                               server_hostname="localhost")

    dq = w.DescribeQuorumRequest(topics=[w.DescribeQuorumRequest.TopicData(
        topic_name=TOPIC, partitions=[w.DescribeQuorumRequest.PartitionData(partition_index=0)])])
    with running_node(tmp_path, extra) as node:
        wait_until("the bootstrap commit", lambda: "controller activation" in node.log(), logs=node.log)
        with tls(node.port, admin_cert) as s:
            made = send(s, CREATE_ACLS, 3, w.CreateAclsRequest(creations=[w.CreateAclsRequest.AclCreation(
                resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3,
                principal="User:client", host="127.0.0.1", operation=8, permission_type=3)]), 1)
            assert [r.error_code for r in made.results] == [0]
        with tls(node.port, client) as s:
            assert send(s, DESCRIBE_QUORUM, 2, dq, 2).error_code == 0
        with tls(node.port, other) as s:
            assert send(s, DESCRIBE_QUORUM, 2, dq, 3).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
        assert "Principal = User:other is Denied operation = DESCRIBE from host = 127.0.0.1" in node.log()


def test_snapshot_acl_order_is_kafkas_aclsimage_order(kafka_home: Any) -> None:
    """The ACL records of a snapshot come in the order Kafka 3.9's AclsImage.write gives
    them (a HashMap<Uuid, StandardAcl>), checked against the genuine AclsImage/AclsDelta
    over several batches with removals and a growing map."""
    import random
    import subprocess
    import uuid

    from kraftnode.metadata.state import MetadataState
    from kraftnode.protocol.generated.metadata import RemoveAccessControlEntryRecord
    from recordbatch.wire import uuid_to_base64

    rng = random.Random(15)
    state = MetadataState()
    live: list[uuid.UUID] = []
    lines: list[str] = []
    for _batch in range(12):
        for _ in range(rng.randint(1, 9)):
            if live and rng.random() < 0.25:
                gone = live.pop(rng.randrange(len(live)))
                state._apply(RemoveAccessControlEntryRecord(id=gone), 0)
                lines.append("-" + uuid_to_base64(gone))
            else:
                new = uuid.UUID(int=rng.getrandbits(128))
                live.append(new)
                state._apply(AccessControlEntryRecord(id=new, resource_type=2, resource_name=f"t-{new}",
                                                      pattern_type=3, principal="User:a", host="*",
                                                      operation=3, permission_type=3), 0)
                lines.append("+" + uuid_to_base64(new))
        lines.append("")
    ours = [uuid_to_base64(m.id) for m, _v in state.image.records() if isinstance(m, AccessControlEntryRecord)]
    classes = kafka_home.compile("acls-image")
    from tests.support.kafka import java_env
    r = subprocess.run(kafka_home.java(classes, "AclsImageOrder"), input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=120, env=java_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(ours) > 20
    assert ours == r.stdout.split()
    assert ours != [uuid_to_base64(i) for i in live]   # not merely the order of creation
