"""Which Kafka APIs a kraftnode serves, at which versions, with which header versions.

The version ranges are what we advertise in ApiVersions and accept on the wire.
They follow the interop table in DESIGN.md, with two deliberate narrowings
(docs/protocol.md): Produce starts at v3 and Fetch at v4, because older versions
carry magic 0/1 message sets and a KRaft log holds only v2 batches (Kafka 3.9
would down-convert; we do not).  InitProducerId (22) is served beyond the table
because Kafka producers are idempotent by default and start with it, and
DescribeConfigs (32) because ``kafka-topics.sh --describe`` fails without it, and
the group coordinator's APIs (FindCoordinator, OffsetCommit/OffsetFetch, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete,
ConsumerGroupHeartbeat/Describe: kraftnode.groups), the
ACL APIs (29-31) a Kafka 3.9 controller serves with an authorizer, and
DescribeUserScramCredentials (50, a broker API) so the Java Admin can list SCRAM users.
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

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def request_header_version(self, version: int) -> int:
        """Header v2 for flexible request versions, else v1 (v0 is ControlledShutdown v0 only)."""
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


def _spec(key: int, name: str, lo: int, hi: int) -> ApiSpec:
    req = getattr(g, f"{name}Request")
    resp = getattr(g, f"{name}Response")
    assert req.API_KEY == key == resp.API_KEY, name
    assert req.VALID_VERSIONS[0] <= lo and hi <= req.VALID_VERSIONS[1], name
    return ApiSpec(key, name, req, resp, lo, hi)


SERVED: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        _spec(PRODUCE, "Produce", 3, 11),
        _spec(FETCH, "Fetch", 4, 17),
        _spec(LIST_OFFSETS, "ListOffsets", 1, 9),
        _spec(METADATA, "Metadata", 0, 12),
        _spec(OFFSET_COMMIT, "OffsetCommit", 0, 9),
        _spec(OFFSET_FETCH, "OffsetFetch", 0, 9),
        _spec(FIND_COORDINATOR, "FindCoordinator", 0, 5),
        # the group coordinator (kraftnode.groups), at the versions a Kafka 3.9 broker serves
        _spec(JOIN_GROUP, "JoinGroup", 0, 9),
        _spec(HEARTBEAT, "Heartbeat", 0, 4),
        _spec(LEAVE_GROUP, "LeaveGroup", 0, 5),
        _spec(SYNC_GROUP, "SyncGroup", 0, 5),
        _spec(DESCRIBE_GROUPS, "DescribeGroups", 0, 5),
        _spec(LIST_GROUPS, "ListGroups", 0, 5),
        _spec(DELETE_GROUPS, "DeleteGroups", 0, 2),
        _spec(OFFSET_DELETE, "OffsetDelete", 0, 0),
        _spec(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 0),
        _spec(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 0),
        _spec(SASL_HANDSHAKE, "SaslHandshake", 0, 1),
        _spec(DESCRIBE_ACLS, "DescribeAcls", 0, 3),
        _spec(CREATE_ACLS, "CreateAcls", 0, 3),
        _spec(DELETE_ACLS, "DeleteAcls", 0, 3),
        _spec(DESCRIBE_CONFIGS, "DescribeConfigs", 0, 4),
        _spec(INIT_PRODUCER_ID, "InitProducerId", 0, 5),
        _spec(API_VERSIONS, "ApiVersions", 0, 4),
        _spec(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
        _spec(DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0),
        _spec(ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0),
        # v2 (KIP-996 PreVote, Kafka 4.0) is advertised only with kraftnode.raft.pre.vote.enable
        # (FeatureView.api_max): by default a node advertises Kafka 3.9's 0-1.
        _spec(VOTE, "Vote", 0, 2),
        _spec(BEGIN_QUORUM_EPOCH, "BeginQuorumEpoch", 0, 1),
        _spec(END_QUORUM_EPOCH, "EndQuorumEpoch", 0, 1),
        _spec(DESCRIBE_QUORUM, "DescribeQuorum", 0, 2),
        _spec(UPDATE_FEATURES, "UpdateFeatures", 0, 1),
        _spec(FETCH_SNAPSHOT, "FetchSnapshot", 0, 1),
        _spec(DESCRIBE_CLUSTER, "DescribeCluster", 0, 1),
        _spec(CONTROLLER_REGISTRATION, "ControllerRegistration", 0, 0),
        _spec(ADD_RAFT_VOTER, "AddRaftVoter", 0, 0),
        _spec(REMOVE_RAFT_VOTER, "RemoveRaftVoter", 0, 0),
        _spec(UPDATE_RAFT_VOTER, "UpdateRaftVoter", 0, 0),
    )
}
