"""StandardAuthorizer's decisions (StandardAuthorizerData.authorize / findResult, and
Authorizer.authorizeByResourceType), the ACL filters of Describe/DeleteAcls, the
per-API refusals, and ACLs in the metadata image and its snapshots."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kraftnode.config import ConfigError
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata.state import MetadataState
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from kraftnode.protocol.registry import (
    ADD_RAFT_VOTER,
    CREATE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_QUORUM,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    REMOVE_RAFT_VOTER,
    UPDATE_FEATURES,
    VOTE,
)
from kraftnode.security import api_checks
from kraftnode.security import authorizer as az
from kraftnode.security.authorizer import Session, StandardAuthorizer

ALICE = Session("User:alice", "10.0.0.1")
BOB = Session("User:bob", "10.0.0.2")


def record(rt: int, name: str, pt: int, principal: str, host: str, op: int, perm: int) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(id=uuid.uuid4(), resource_type=rt, resource_name=name, pattern_type=pt,
                                    principal=principal, host=host, operation=op, permission_type=perm)


def authorizer(*acls: AccessControlEntryRecord, supers: str = "", allow_if_none: bool = False
               ) -> StandardAuthorizer:
    state = MetadataState()
    for a in acls:
        state._apply(a, 0)
    return StandardAuthorizer(az.parse_super_users(supers), allow_if_none,
                              lambda: (state.acl_generation, state.image.acls))


def test_no_acl_follows_allow_everyone_if_no_acl_found() -> None:
    assert not authorizer().authorize(ALICE, az.TOPIC, "t", az.READ)
    assert authorizer(allow_if_none=True).authorize(ALICE, az.TOPIC, "t", az.READ)
    # an ACL naming the resource for someone else: denied even with allow.everyone
    a = authorizer(record(az.TOPIC, "t", az.LITERAL, "User:bob", "*", az.READ, az.ALLOW), allow_if_none=True)
    assert not a.authorize(ALICE, az.TOPIC, "t", az.READ)
    assert a.authorize(ALICE, az.TOPIC, "other", az.READ)


def test_super_users_are_semicolon_separated_and_allowed_everything() -> None:
    a = authorizer(record(az.CLUSTER, "kafka-cluster", az.LITERAL, "User:*", "*", az.ALL, az.DENY),
                   supers="User:admin; User:alice")
    assert a.authorize(ALICE, az.CLUSTER, "kafka-cluster", az.ALTER)
    assert not a.authorize(BOB, az.CLUSTER, "kafka-cluster", az.ALTER)
    with pytest.raises(ConfigError, match="super.users"):
        az.parse_super_users("admin")


def test_literal_prefixed_and_wildcard_patterns() -> None:
    a = authorizer(record(az.TOPIC, "foo", az.LITERAL, "User:alice", "*", az.READ, az.ALLOW),
                   record(az.TOPIC, "pre", az.PREFIXED, "User:alice", "*", az.WRITE, az.ALLOW),
                   record(az.GROUP, "*", az.LITERAL, "User:alice", "*", az.READ, az.ALLOW))
    assert a.authorize(ALICE, az.TOPIC, "foo", az.READ)
    assert not a.authorize(ALICE, az.TOPIC, "foobar", az.READ)     # literal: exact name only
    assert a.authorize(ALICE, az.TOPIC, "prefix-topic", az.WRITE)
    assert not a.authorize(ALICE, az.TOPIC, "pr", az.WRITE)
    assert a.authorize(ALICE, az.GROUP, "any-group", az.READ)     # literal '*'
    assert not a.authorize(ALICE, az.TOPIC, "foo", az.WRITE)
    assert not a.authorize(BOB, az.TOPIC, "foo", az.READ)


def test_deny_wins_and_hosts_match_exactly() -> None:
    a = authorizer(record(az.TOPIC, "t", az.LITERAL, "User:*", "*", az.READ, az.ALLOW),
                   record(az.TOPIC, "t", az.PREFIXED, "User:bob", "10.0.0.2", az.READ, az.DENY))
    assert a.authorize(ALICE, az.TOPIC, "t", az.READ)
    assert not a.authorize(BOB, az.TOPIC, "t", az.READ)
    assert a.authorize(Session("User:bob", "10.0.0.3"), az.TOPIC, "t", az.READ)


def test_implied_operations_only_for_allow() -> None:
    a = authorizer(record(az.TOPIC, "t", az.LITERAL, "User:alice", "*", az.WRITE, az.ALLOW),
                   record(az.TOPIC, "t", az.LITERAL, "User:alice", "*", az.ALTER_CONFIGS, az.ALLOW),
                   record(az.TOPIC, "u", az.LITERAL, "User:alice", "*", az.READ, az.DENY),
                   record(az.TOPIC, "u", az.LITERAL, "User:alice", "*", az.DESCRIBE, az.ALLOW))
    assert a.authorize(ALICE, az.TOPIC, "t", az.DESCRIBE)          # WRITE implies DESCRIBE
    assert a.authorize(ALICE, az.TOPIC, "t", az.DESCRIBE_CONFIGS)  # ALTER_CONFIGS implies it
    assert not a.authorize(ALICE, az.TOPIC, "t", az.READ)
    assert a.authorize(ALICE, az.TOPIC, "u", az.DESCRIBE)          # a DENY READ does not deny DESCRIBE
    assert not a.authorize(ALICE, az.TOPIC, "u", az.READ)


def test_all_matches_every_operation() -> None:
    a = authorizer(record(az.CLUSTER, "kafka-cluster", az.LITERAL, "User:alice", "*", az.ALL, az.ALLOW))
    assert a.authorize(ALICE, az.CLUSTER, "kafka-cluster", az.CLUSTER_ACTION)
    assert a.authorized_operations(ALICE, az.CLUSTER, "kafka-cluster") == sum(
        1 << op for op in az.SUPPORTED_OPERATIONS[az.CLUSTER])


def test_authorize_by_resource_type_as_kafkas_default_method() -> None:
    allow = record(az.TOPIC, "t", az.LITERAL, "User:alice", "*", az.WRITE, az.ALLOW)
    assert authorizer(allow).authorize_by_resource_type(ALICE, az.WRITE, az.TOPIC)
    assert not authorizer(allow).authorize_by_resource_type(BOB, az.WRITE, az.TOPIC)
    deny_prefix = record(az.TOPIC, "", az.PREFIXED, "User:alice", "*", az.WRITE, az.DENY)
    deny_prefix.resource_name = "t"
    assert not authorizer(allow, deny_prefix).authorize_by_resource_type(ALICE, az.WRITE, az.TOPIC)


def test_acls_replay_remove_and_survive_a_snapshot_in_hashmap_order() -> None:
    state = MetadataState()
    recs = [record(az.TOPIC, f"t{i}", az.LITERAL, "User:alice", "*", az.READ, az.ALLOW) for i in range(20)]
    for r in recs:
        state._apply(r, 0)
    state._apply(RemoveAccessControlEntryRecord(id=recs[3].id), 0)
    written = [decode_metadata_record(v)[0] for _k, v in state.snapshot()() if v is not None]
    acls = [m for m in written if isinstance(m, AccessControlEntryRecord)]
    assert {m.id for m in acls} == {r.id for r in recs} - {recs[3].id}

    def java_hash(u: uuid.UUID) -> int:
        x = (u.int >> 64) ^ (u.int & (2**64 - 1))
        h = ((x >> 32) ^ x) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 31   # 19 entries: a HashMap of capacity 32
    buckets = [java_hash(m.id) for m in acls]
    assert buckets == sorted(buckets)
    fresh = MetadataState()
    fresh.load_snapshot((None, encode_metadata_record(m, 0)) for m in written)
    a = StandardAuthorizer(frozenset(), False, lambda: (fresh.acl_generation, fresh.image.acls))
    assert a.authorize(ALICE, az.TOPIC, "t5", az.READ) and not a.authorize(ALICE, az.TOPIC, "t3", az.READ)


def test_filters_as_acl_binding_filter_matches() -> None:
    acl = az.Acl(az.TOPIC, "foo", az.PREFIXED, "User:alice", "*", az.READ, az.ALLOW)

    def f(rt: int = az.R_ANY, name: str | None = None, pt: int = az.P_ANY, principal: str | None = None,
          op: int = az.O_ANY, perm: int = az.A_ANY) -> Any:
        return w.DescribeAclsRequest(resource_type_filter=rt, resource_name_filter=name, pattern_type_filter=pt,
                                     principal_filter=principal, host_filter=None, operation=op,
                                     permission_type=perm)
    assert az.filter_matches(f(), acl)
    assert az.filter_matches(f(name="foo"), acl) and not az.filter_matches(f(name="foobar"), acl)
    assert az.filter_matches(f(name="foobar", pt=az.MATCH), acl)     # MATCH: the ACLs that apply
    assert not az.filter_matches(f(name="fo", pt=az.MATCH), acl)
    assert not az.filter_matches(f(pt=az.LITERAL), acl)
    assert not az.filter_matches(f(principal="User:bob"), acl)
    assert az.filter_matches(f(op=az.READ, perm=az.ALLOW), acl) and not az.filter_matches(f(op=az.WRITE), acl)


@pytest.mark.parametrize("key,v,body,op", [
    (VOTE, 1, w.VoteRequest(), az.CLUSTER_ACTION),
    (FETCH, 16, w.FetchRequest(replica_state=w.FetchRequest.ReplicaState(replica_id=3)), az.CLUSTER_ACTION),
    (FETCH, 16, w.FetchRequest(replica_state=w.FetchRequest.ReplicaState(replica_id=-1)), None),
    (ADD_RAFT_VOTER, 0, w.AddRaftVoterRequest(), az.ALTER),
    (REMOVE_RAFT_VOTER, 0, w.RemoveRaftVoterRequest(), az.ALTER),
    (UPDATE_FEATURES, 1, w.UpdateFeaturesRequest(), az.ALTER),
    (CREATE_ACLS, 3, w.CreateAclsRequest(), az.ALTER),
    (DESCRIBE_QUORUM, 2, w.DescribeQuorumRequest(), az.DESCRIBE),
    (DESCRIBE_CLUSTER, 1, w.DescribeClusterRequest(endpoint_type=2), az.ALTER),
    (DESCRIBE_CLUSTER, 1, w.DescribeClusterRequest(endpoint_type=1), None),
    (94, 0, w.UnregisterControllerRequest(controller_id=3), az.ALTER),  # UnregisterController (Kafka 4.x)
])
def test_cluster_operation_of_each_api_is_controller_apis(key: int, v: int, body: Any, op: int | None) -> None:
    assert api_checks.cluster_operation(key, v, body) == op


def test_refusals_carry_cluster_authorization_failed_where_kafka_puts_it() -> None:
    a = authorizer(record(az.TOPIC, "t", az.LITERAL, "User:alice", "*", az.WRITE, az.ALLOW))
    token = az.CURRENT_SESSION.set(ALICE)
    try:
        vote = api_checks.refusal(a, VOTE, 1, w.VoteRequest())
        assert vote.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
        upd = api_checks.refusal(a, UPDATE_FEATURES, 1, w.UpdateFeaturesRequest())
        assert (upd.error_code, upd.error_message) == (Errors.CLUSTER_AUTHORIZATION_FAILED,
                                                       "Cluster authorization failed.")
        create = api_checks.refusal(a, CREATE_ACLS, 3, w.CreateAclsRequest(creations=[
            w.CreateAclsRequest.AclCreation(), w.CreateAclsRequest.AclCreation()]))
        assert [r.error_code for r in create.results] == [Errors.CLUSTER_AUTHORIZATION_FAILED] * 2
        fetch = api_checks.refusal(a, FETCH, 12, w.FetchRequest(replica_id=2, topics=[
            w.FetchRequest.FetchTopic(topic="__cluster_metadata", partitions=[w.FetchRequest.FetchPartition()])]))
        assert fetch.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
        assert fetch.responses[0].partitions[0].error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
        # InitProducerId: WRITE on some topic is enough (KIP-679), as for an idempotent producer
        assert api_checks.refusal(a, INIT_PRODUCER_ID, 4, w.InitProducerIdRequest(transactional_id=None)) is None
    finally:
        az.CURRENT_SESSION.reset(token)
    token = az.CURRENT_SESSION.set(BOB)
    try:
        ipid = api_checks.refusal(a, INIT_PRODUCER_ID, 4, w.InitProducerIdRequest(transactional_id=None))
        assert (ipid.error_code, ipid.producer_id) == (Errors.CLUSTER_AUTHORIZATION_FAILED, -1)
    finally:
        az.CURRENT_SESSION.reset(token)


def test_only_the_standard_authorizer_is_accepted() -> None:
    assert az.from_config({}, lambda: (0, {})) is None
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        az.check_config({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    a = az.from_config({"authorizer.class.name": az.STANDARD_AUTHORIZER,
                        "allow.everyone.if.no.acl.found": "true", "super.users": "User:a;User:b"},
                       lambda: (0, {}))
    assert a is not None and a.allow_if_no_acl and a.super_users == {"User:a", "User:b"}


def test_only_super_users_are_authorized_before_the_initial_load() -> None:
    loaded = [False]
    state = MetadataState()
    a = StandardAuthorizer(frozenset({"User:admin"}), True, lambda: (state.acl_generation, state.image.acls),
                           lambda: loaded[0])
    assert a.authorize(Session("User:admin", "h"), az.CLUSTER, "kafka-cluster", az.ALTER)
    with pytest.raises(az.AuthorizerNotReady):
        a.authorize(ALICE, az.TOPIC, "t", az.READ)
    loaded[0] = True
    assert a.authorize(ALICE, az.TOPIC, "t", az.READ)
    loaded[0] = False   # latched: loading completes once
    assert a.authorize(ALICE, az.TOPIC, "t", az.READ)


@pytest.mark.parametrize("key,v,body", [
    (DESCRIBE_QUORUM, 0, w.DescribeQuorumRequest()), (DESCRIBE_QUORUM, 2, w.DescribeQuorumRequest()),
    (FIND_COORDINATOR, 0, w.FindCoordinatorRequest(key="g")),
    (FIND_COORDINATOR, 3, w.FindCoordinatorRequest(key="g")),
    (UPDATE_FEATURES, 0, w.UpdateFeaturesRequest()), (VOTE, 0, w.VoteRequest()),
    (UPDATE_FEATURES, 2, w.UpdateFeaturesRequest()), (94, 0, w.UnregisterControllerRequest()),
])
def test_refusals_encode_at_every_version(key: int, v: int, body: Any) -> None:
    from kraftnode.protocol.registry import SERVED

    resp = api_checks.error_response(key, v, body, Errors.CLUSTER_AUTHORIZATION_FAILED)
    out = bytearray()
    resp.encode_into(out, v)
    assert SERVED[key].response.decode(bytes(out), v).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED


def test_only_the_unknown_code_refuses_an_acl_request_as_kafka_does() -> None:
    """Create/Describe/DeleteAclsRequest compare the raw codes with UNKNOWN's (0): a code
    Kafka does not know passes and is read as UNKNOWN afterwards (issue 43, found by
    tools/fuzz/differential.py: a Kafka 3.9 controller answered SECURITY_DISABLED where
    kraftnode closed the connection)."""
    from kraftnode.security import authorizer as az

    def describe(**codes: int) -> w.DescribeAclsRequest:
        q = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                 principal_filter=None, host_filter=None, operation=1, permission_type=1)
        return w.DescribeAclsRequest(**{**q, **codes})

    assert not az.unknown_elements([describe()])
    for field in ("resource_type_filter", "pattern_type_filter", "operation", "permission_type"):
        assert az.unknown_elements([describe(**{field: 0})]), field
        q = describe(**{field: -106})
        assert not az.unknown_elements([q]), field
        assert getattr(q, field) == 0  # what Kafka's fromCode makes of it
    C = w.CreateAclsRequest.AclCreation
    c = C(resource_type=2, resource_name="t", resource_pattern_type=77, principal="User:a", host="*",
          operation=3, permission_type=3)
    assert not az.unknown_elements([c]) and c.resource_pattern_type == 0
