"""Which Kafka APIs a kraftnode serves, at which versions, with which header versions.

The version ranges are what we advertise in ApiVersions and accept on the wire.
They follow the interop table in DESIGN.md, with two deliberate narrowings
(docs/protocol.md): Produce starts at v3 and Fetch at v4, because older versions
carry magic 0/1 message sets and a KRaft log holds only v2 batches (Kafka 3.9
would down-convert; we do not).  The client-facing APIs (Produce, ListOffsets,
Metadata, the group APIs) are served at Kafka 4.4's ranges, KIP-896's minimums
included; Produce advertises v0-2 without serving them, as Kafka 4.4 does.
InitProducerId (22) is served beyond the table because Kafka producers are
idempotent by default and start with it, and DescribeConfigs (32) because ``kafka-topics.sh --describe`` fails without it, and
the group coordinator's APIs (FindCoordinator, OffsetCommit/OffsetFetch, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete,
ConsumerGroupHeartbeat/Describe: kraftnode.groups), the
ACL APIs (29-31) a Kafka 3.9 controller serves with an authorizer, and
DescribeUserScramCredentials (50, a broker API) so the Java Admin can list SCRAM users.
The controller APIs (issue 25, docs/controller.md) are served by every node (only the
active controller answers them), and the controller listener's APIs at the ranges a Kafka 4.4
controller advertises (issue 36, docs/protocol.md "Kafka 4.4's controller listener"): KIP-896's
raised minimums, the new versions of Fetch, ApiVersions, UpdateFeatures, DescribeCluster,
AddRaftVoter, BrokerHeartbeat and AlterPartitionReassignments, and no ControlledShutdown
(removed in Kafka 4.0). Raft peers and brokers of Kafka 3.9 negotiate down through ApiVersions.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.protocol import generated as g
from recordbatch.message import Message


@dataclass(frozen=True)
class ApiSpec:
    key: int
    name: str
    request: type[Message]
    response: type[Message]
    min_version: int
    max_version: int
    #: the minimum ApiVersions advertises when it is below the one served: Produce, whose
    #: v0-2 Kafka 4 advertises but refuses (KAFKA-18659: librdkafka disables compression
    #: unless Produce v0 is listed; ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION)
    advertised_min: int | None = None

    @property
    def advertised_min_version(self) -> int:
        return self.min_version if self.advertised_min is None else self.advertised_min

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def request_header_version(self, version: int) -> int:
        """Header v2 for flexible request versions, else v1 (v0 was ControlledShutdown v0's only,
        and Kafka 4.0 removed that API)."""
        return 2 if self.request.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """Header v1 for flexible responses, else v0; ApiVersions always uses v0 so that
        a client that does not yet know our versions can always read the answer."""
        if self.key == API_VERSIONS:
            return 0
        return 1 if self.response.is_flexible(version) else 0


PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
SASL_HANDSHAKE = 17
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
INIT_PRODUCER_ID = 22
API_VERSIONS = 18
SASL_AUTHENTICATE = 36
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
DESCRIBE_QUORUM = 55
UPDATE_FEATURES = 57
FETCH_SNAPSHOT = 59
DESCRIBE_CLUSTER = 60
CONTROLLER_REGISTRATION = 70
ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82
# the controller APIs (docs/controller.md)
CREATE_TOPICS = 19
DELETE_TOPICS = 20
ALTER_CONFIGS = 33
CREATE_PARTITIONS = 37
CREATE_DELEGATION_TOKEN = 38
RENEW_DELEGATION_TOKEN = 39
EXPIRE_DELEGATION_TOKEN = 40
DESCRIBE_DELEGATION_TOKEN = 41
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
ALTER_CLIENT_QUOTAS = 49
ALTER_PARTITION = 56
ENVELOPE = 58
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
UNREGISTER_BROKER = 64
ALLOCATE_PRODUCER_IDS = 67
ASSIGN_REPLICAS_TO_DIRS = 73
UNREGISTER_CONTROLLER = 94


def _spec(key: int, name: str, lo: int, hi: int, advertised_min: int | None = None) -> ApiSpec:
    req = getattr(g, f"{name}Request")
    resp = getattr(g, f"{name}Response")
    assert req.API_KEY == key == resp.API_KEY, name
    assert req.VALID_VERSIONS[0] <= lo and hi <= req.VALID_VERSIONS[1], name
    return ApiSpec(key, name, req, resp, lo, hi, advertised_min)


SERVED: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        # the client-facing APIs at the versions a Kafka 4.4 broker serves (issue 36, KIP-896
        # minimums); Produce advertises 0-13 and serves 3-13, as Kafka 4.4 does (KAFKA-18659)
        _spec(PRODUCE, "Produce", 3, 13, advertised_min=0),
        _spec(FETCH, "Fetch", 4, 18),
        _spec(LIST_OFFSETS, "ListOffsets", 1, 11),
        _spec(METADATA, "Metadata", 0, 13),
        _spec(OFFSET_COMMIT, "OffsetCommit", 2, 10),
        _spec(OFFSET_FETCH, "OffsetFetch", 1, 10),
        _spec(FIND_COORDINATOR, "FindCoordinator", 0, 6),
        # the group coordinator (kraftnode.groups), at the versions a Kafka 4.4 broker serves
        _spec(JOIN_GROUP, "JoinGroup", 0, 9),
        _spec(HEARTBEAT, "Heartbeat", 0, 4),
        _spec(LEAVE_GROUP, "LeaveGroup", 0, 5),
        _spec(SYNC_GROUP, "SyncGroup", 0, 5),
        _spec(DESCRIBE_GROUPS, "DescribeGroups", 0, 6),
        _spec(LIST_GROUPS, "ListGroups", 0, 5),
        _spec(DELETE_GROUPS, "DeleteGroups", 0, 3),
        _spec(OFFSET_DELETE, "OffsetDelete", 0, 0),
        # Kafka 4.4's ranges: v1 is KIP-848's regex subscription / KIP-1082's member ids
        # (librdkafka's new consumer requires it) and KIP-1099's MemberType
        _spec(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1),
        _spec(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1),
        _spec(SASL_HANDSHAKE, "SaslHandshake", 0, 1),
        _spec(DESCRIBE_ACLS, "DescribeAcls", 1, 3),
        _spec(CREATE_ACLS, "CreateAcls", 1, 3),
        _spec(DELETE_ACLS, "DeleteAcls", 1, 3),
        _spec(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4),
        _spec(INIT_PRODUCER_ID, "InitProducerId", 0, 5),
        _spec(API_VERSIONS, "ApiVersions", 0, 5),
        _spec(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
        _spec(DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0),
        _spec(ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0),
        # v2 (KIP-996 PreVote, Kafka 4.0) is advertised only with kraftnode.raft.pre.vote.enable
        # (FeatureView.api_max): by default a node advertises Kafka 3.9's 0-1.
        _spec(VOTE, "Vote", 0, 2),
        _spec(BEGIN_QUORUM_EPOCH, "BeginQuorumEpoch", 0, 1),
        _spec(END_QUORUM_EPOCH, "EndQuorumEpoch", 0, 1),
        _spec(DESCRIBE_QUORUM, "DescribeQuorum", 0, 2),
        _spec(UPDATE_FEATURES, "UpdateFeatures", 0, 2),
        _spec(FETCH_SNAPSHOT, "FetchSnapshot", 0, 1),
        _spec(DESCRIBE_CLUSTER, "DescribeCluster", 0, 2),
        _spec(CONTROLLER_REGISTRATION, "ControllerRegistration", 0, 0),
        _spec(ADD_RAFT_VOTER, "AddRaftVoter", 0, 1),
        _spec(REMOVE_RAFT_VOTER, "RemoveRaftVoter", 0, 0),
        _spec(UPDATE_RAFT_VOTER, "UpdateRaftVoter", 0, 0),
        # the controller APIs, at the versions a Kafka 3.9 controller advertises
        _spec(CREATE_TOPICS, "CreateTopics", 2, 7),
        _spec(DELETE_TOPICS, "DeleteTopics", 1, 6),
        _spec(ALTER_CONFIGS, "AlterConfigs", 0, 2),
        _spec(CREATE_PARTITIONS, "CreatePartitions", 0, 3),
        _spec(CREATE_DELEGATION_TOKEN, "CreateDelegationToken", 1, 3),
        _spec(RENEW_DELEGATION_TOKEN, "RenewDelegationToken", 1, 2),
        _spec(EXPIRE_DELEGATION_TOKEN, "ExpireDelegationToken", 1, 2),
        _spec(DESCRIBE_DELEGATION_TOKEN, "DescribeDelegationToken", 1, 3),
        _spec(ELECT_LEADERS, "ElectLeaders", 0, 2),
        _spec(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1),
        _spec(ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1),
        _spec(LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0),
        _spec(ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 1),
        _spec(ALTER_PARTITION, "AlterPartition", 2, 3),
        _spec(ENVELOPE, "Envelope", 0, 0),
        _spec(BROKER_REGISTRATION, "BrokerRegistration", 0, 4),
        _spec(BROKER_HEARTBEAT, "BrokerHeartbeat", 0, 2),
        _spec(UNREGISTER_BROKER, "UnregisterBroker", 0, 0),
        _spec(ALLOCATE_PRODUCER_IDS, "AllocateProducerIds", 0, 0),
        _spec(ASSIGN_REPLICAS_TO_DIRS, "AssignReplicasToDirs", 0, 0),
        # Kafka 4.x; at the metadata.versions kraftnode finalizes it is refused as Kafka 4.4's
        # controller refuses it there (docs/protocol.md)
        _spec(UNREGISTER_CONTROLLER, "UnregisterController", 0, 0),
    )
}
