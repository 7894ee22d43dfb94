"""What each API needs, as Kafka 3.9 checks it (ControllerApis, AclApis, and KafkaApis for the
broker APIs kraftnode serves), and the refusal Kafka sends when it is missing.

Request-level checks (one operation on the cluster) are made here, before the handler runs;
per-topic checks (Produce WRITE, consumer Fetch READ, ListOffsets/Metadata DESCRIBE,
DescribeConfigs DESCRIBE_CONFIGS) are made by the handlers per topic, through
:func:`denied`, since Kafka answers them per topic."""

from __future__ import annotations

import re
from typing import Any

from kraftnode.protocol import error_responses
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.registry import (
    ADD_RAFT_VOTER,
    ALTER_USER_SCRAM_CREDENTIALS,
    BEGIN_QUORUM_EPOCH,
    CONTROLLER_REGISTRATION,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_QUORUM,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    REMOVE_RAFT_VOTER,
    SERVED,
    UPDATE_FEATURES,
    UPDATE_RAFT_VOTER,
    VOTE,
)
from kraftnode.security import authorizer as az
from recordbatch.wire import UnsupportedVersionError

# API -> the operation it needs on the cluster (ControllerApis / AclApis)
CLUSTER_OPERATION: dict[int, int] = {
    VOTE: az.CLUSTER_ACTION, BEGIN_QUORUM_EPOCH: az.CLUSTER_ACTION,
    END_QUORUM_EPOCH: az.CLUSTER_ACTION, FETCH_SNAPSHOT: az.CLUSTER_ACTION,
    UPDATE_RAFT_VOTER: az.CLUSTER_ACTION, CONTROLLER_REGISTRATION: az.CLUSTER_ACTION,
    ADD_RAFT_VOTER: az.ALTER, REMOVE_RAFT_VOTER: az.ALTER, UPDATE_FEATURES: az.ALTER,
    CREATE_ACLS: az.ALTER, DELETE_ACLS: az.ALTER, ALTER_USER_SCRAM_CREDENTIALS: az.ALTER,
    DESCRIBE_QUORUM: az.DESCRIBE, DESCRIBE_ACLS: az.DESCRIBE,
    DESCRIBE_USER_SCRAM_CREDENTIALS: az.DESCRIBE,
    # the controller APIs (ControllerApis; per-topic checks are made by the handlers)
    62: az.CLUSTER_ACTION, 63: az.CLUSTER_ACTION, 56: az.CLUSTER_ACTION, 67: az.CLUSTER_ACTION,
    73: az.CLUSTER_ACTION, 58: az.CLUSTER_ACTION, 64: az.ALTER, 43: az.ALTER, 45: az.ALTER,
    46: az.DESCRIBE, 49: az.ALTER_CONFIGS, 94: az.ALTER,
}

# Errors.message() of the errors sent without a message of their own
MESSAGES: dict[int, str] = {
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    Errors.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    Errors.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
}

CONTROLLER_ENDPOINT = 2  # DescribeCluster EndpointType.CONTROLLER


def denied(authz: az.StandardAuthorizer | None, resource_type: int, name: str, op: int,
           api: int) -> bool:
    """True when the caller may not do ``op`` on the resource (never without an authorizer)."""
    if authz is None:
        return False
    return not authz.authorize(az.session(), resource_type, name, op, api=_name(api))


def _name(api: int) -> str:
    """Kafka's ApiKeys name (``REMOVE_RAFT_VOTER``), as its audit log prints it."""
    spec = SERVED.get(api)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", spec.name).upper() if spec is not None else str(api)


def cluster_operation(key: int, v: int, body: Any) -> int | None:
    """The operation ``key`` needs on the cluster resource, if any."""
    if key == FETCH:
        # a raft replica's fetch (ReplicaId >= 0): ControllerApis.handleFetch; a consumer's
        # fetch is checked per topic (READ) as a broker does. (The replica id moved into
        # ReplicaState at v15; read here rather than through the server's wire helpers,
        # which security does not import.)
        replica_id = body.replica_state.replica_id if v >= 15 else body.replica_id
        return az.CLUSTER_ACTION if replica_id >= 0 else None
    if key == DESCRIBE_CLUSTER:
        # ControllerApis: "Unlike on the broker, DESCRIBE_CLUSTER on the controller requires
        # ... ALTER on CLUSTER"; a broker-endpoint DescribeCluster needs nothing
        et = body.endpoint_type if v >= 1 else 1
        return az.ALTER if et == CONTROLLER_ENDPOINT else None
    return CLUSTER_OPERATION.get(key)


def refusal(authz: az.StandardAuthorizer, key: int, v: int, body: Any) -> Any | None:
    """The response refusing the request, or None when the caller may make it."""
    s = az.session()
    op = cluster_operation(key, v, body)
    if op is not None:
        if authz.authorize(s, az.CLUSTER, az.CLUSTER_NAME, op, api=_name(key)):
            return None
        return error_response(key, v, body, Errors.CLUSTER_AUTHORIZATION_FAILED)
    if key == INIT_PRODUCER_ID and body.transactional_id is None:
        # KafkaApis.handleInitProducerIdRequest: IDEMPOTENT_WRITE on the cluster, or WRITE
        # on at least one topic (authorizeByResourceType)
        if authz.authorize(s, az.CLUSTER, az.CLUSTER_NAME, az.IDEMPOTENT_WRITE,
                           api=_name(key), log_if_denied=False) \
                or authz.authorize_by_resource_type(s, az.WRITE, az.TOPIC):
            return None
        return error_response(key, v, body, Errors.CLUSTER_AUTHORIZATION_FAILED)
    if key == OFFSET_COMMIT and body.group_id and \
            not authz.authorize(s, az.GROUP, body.group_id, az.READ, api=_name(key)):
        return error_response(key, v, body, Errors.GROUP_AUTHORIZATION_FAILED)
    if key == OFFSET_FETCH and v < 8 and \
            not authz.authorize(s, az.GROUP, body.group_id, az.DESCRIBE, api=_name(key)):
        return error_response(key, v, body, Errors.GROUP_AUTHORIZATION_FAILED)
    if key == FIND_COORDINATOR and body.key_type == 0 and v < 4 and \
            not authz.authorize(s, az.GROUP, body.key, az.DESCRIBE, api=_name(key)):
        return error_response(key, v, body, Errors.GROUP_AUTHORIZATION_FAILED)
    return None


def error_response(key: int, v: int, body: Any, code: int) -> Any:
    """``AbstractRequest.getErrorResponse`` of the API: the error where Kafka puts it."""
    msg = MESSAGES.get(code)
    resp_cls = SERVED[key].response
    if key in error_responses.ERROR_SHAPED:
        return error_responses.error_response(key, v, body, code, msg)
    if key == CREATE_ACLS:
        return w.CreateAclsResponse(throttle_time_ms=0, results=[
            w.CreateAclsResponse.AclCreationResult(error_code=code, error_message=msg)
            for _ in body.creations])
    if key == DELETE_ACLS:
        return w.DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            w.DeleteAclsResponse.DeleteAclsFilterResult(error_code=code, error_message=msg,
                                                        matching_acls=[]) for _ in body.filters])
    if key == ALTER_USER_SCRAM_CREDENTIALS:
        R = w.AlterUserScramCredentialsResponse
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return R(throttle_time_ms=0, results=[
            R.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=msg)
            for u in users])
    if key == OFFSET_COMMIT:
        R2 = w.OffsetCommitResponse
        return R2(throttle_time_ms=0, topics=[R2.OffsetCommitResponseTopic(
            name=t.name, topic_id=t.topic_id, partitions=[
            R2.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in body.topics])
    if key == FETCH:
        # FetchRequest.getErrorResponse: the top-level error; before v13 every partition too
        F = w.FetchResponse
        topics = [] if v >= 13 else [F.FetchableTopicResponse(topic=t.topic, partitions=[
            F.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, records=None)
            for p in t.partitions]) for t in body.topics]
        return F(throttle_time_ms=0, error_code=code, session_id=0, responses=topics)
    if key == PRODUCE:
        P = w.ProduceResponse
        return P(throttle_time_ms=0, responses=[P.TopicProduceResponse(
            name=t.name, topic_id=t.topic_id, partition_responses=[
            P.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                       log_append_time_ms=-1, log_start_offset=-1)
            for p in t.partition_data]) for t in body.topic_data])
    if key == LIST_OFFSETS:
        L = w.ListOffsetsResponse
        return L(throttle_time_ms=0, topics=[L.ListOffsetsTopicResponse(name=t.name, partitions=[
            L.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                           timestamp=-1, offset=-1, leader_epoch=-1)
            for p in t.partitions]) for t in body.topics])
    if key == METADATA:
        M = w.MetadataResponse
        return M(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
            M.MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id, is_internal=False,
                                    partitions=[], topic_authorized_operations=-2147483648)
            for t in body.topics or []])
    resp: Any = resp_cls()
    if hasattr(resp, "error_code"):
        resp.error_code = code
    if hasattr(resp, "error_message") and msg is not None:
        resp.error_message = msg
    if key == INIT_PRODUCER_ID:
        resp.producer_id, resp.producer_epoch = -1, -1
    if key == FIND_COORDINATOR:
        resp.node_id, resp.host, resp.port = -1, "", -1
    if getattr(resp, "error_message", None) is not None:
        try:   # the field is absent at some versions (DescribeQuorum v0-1, FindCoordinator v0)
            resp.encode_into(bytearray(), v)
        except UnsupportedVersionError:
            resp.error_message = None
    return resp
