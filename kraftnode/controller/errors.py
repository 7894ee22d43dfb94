"""Kafka's ApiError: an error code with a message, raised by the managers and answered to clients.

Kafka's managers throw ``ApiException`` subclasses whose messages reach the client (a request
fails with that code and message); :class:`ApiError` plays that part here. An error raised without
a message carries Kafka's default one (``Errors.message()``, :data:`DEFAULT_MESSAGES`), as
``new ApiError(Errors.X)`` does.
"""

from __future__ import annotations

from kraftnode.errors import RemoteError
from kraftnode.protocol.errors import Errors

__all__ = ["DEFAULT_MESSAGES", "ApiError", "default_message"]

#: ``org.apache.kafka.common.protocol.Errors``' default messages (Kafka 3.9), by code.
DEFAULT_MESSAGES: dict[int, str] = {
    Errors.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    Errors.OFFSET_OUT_OF_RANGE: "The requested offset is not within the range of offsets maintained by the server.",
    Errors.CORRUPT_MESSAGE: "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    Errors.INVALID_FETCH_SIZE: "The requested fetch size is invalid.",
    Errors.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    Errors.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.",
    Errors.REQUEST_TIMED_OUT: "The request timed out.",
    Errors.BROKER_NOT_AVAILABLE: "The broker is not available.",
    Errors.REPLICA_NOT_AVAILABLE: "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.",
    Errors.MESSAGE_TOO_LARGE: "The request included a message larger than the max message size the server will accept.",
    Errors.STALE_CONTROLLER_EPOCH: "The controller moved to another broker.",
    Errors.OFFSET_METADATA_TOO_LARGE: "The metadata field of the offset request was too large.",
    Errors.NETWORK_EXCEPTION: "The server disconnected before a response was received.",
    Errors.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    Errors.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    Errors.NOT_COORDINATOR: "This is not the correct coordinator.",
    Errors.INVALID_TOPIC_EXCEPTION: "The request attempted to perform an operation on an invalid topic.",
    Errors.RECORD_LIST_TOO_LARGE: "The request included message batch larger than the configured segment size on the server.",
    Errors.NOT_ENOUGH_REPLICAS: "Messages are rejected since there are fewer in-sync replicas than required.",
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "Messages are written to the log, but to fewer in-sync replicas than required.",
    Errors.INVALID_REQUIRED_ACKS: "Produce request specified an invalid value for required acks.",
    Errors.ILLEGAL_GENERATION: "Specified group generation id is not valid.",
    Errors.INCONSISTENT_GROUP_PROTOCOL: "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.",
    Errors.INVALID_GROUP_ID: "The configured groupId is invalid.",
    Errors.UNKNOWN_MEMBER_ID: "The coordinator is not aware of this member.",
    Errors.INVALID_SESSION_TIMEOUT: "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).",
    Errors.REBALANCE_IN_PROGRESS: "The group is rebalancing, so a rejoin is needed.",
    Errors.INVALID_COMMIT_OFFSET_SIZE: "The committing offset data size is not valid.",
    Errors.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    Errors.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    Errors.INVALID_TIMESTAMP: "The timestamp of the message is out of acceptable range.",
    Errors.UNSUPPORTED_SASL_MECHANISM: "The broker does not support the requested SASL mechanism.",
    Errors.ILLEGAL_SASL_STATE: "Request is not valid given the current SASL state.",
    Errors.UNSUPPORTED_VERSION: "The version of API is not supported.",
    Errors.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    Errors.INVALID_PARTITIONS: "Number of partitions is below 1.",
    Errors.INVALID_REPLICATION_FACTOR: "Replication factor is below 1 or larger than the number of available brokers.",
    Errors.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    Errors.INVALID_CONFIG: "Configuration is invalid.",
    Errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    Errors.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
    Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT: "The message format version on the broker does not support the request.",
    Errors.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: "The broker received an out of order sequence number.",
    Errors.DUPLICATE_SEQUENCE_NUMBER: "The broker received a duplicate sequence number.",
    Errors.INVALID_PRODUCER_EPOCH: "Producer attempted to produce with an old epoch.",
    Errors.INVALID_TXN_STATE: "The producer attempted a transactional operation in an invalid state.",
    Errors.INVALID_PRODUCER_ID_MAPPING: "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
    Errors.INVALID_TRANSACTION_TIMEOUT: "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
    Errors.CONCURRENT_TRANSACTIONS: "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.",
    Errors.TRANSACTION_COORDINATOR_FENCED: "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.",
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    Errors.SECURITY_DISABLED: "Security features are disabled.",
    Errors.OPERATION_NOT_ATTEMPTED: "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.",
    Errors.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    Errors.LOG_DIR_NOT_FOUND: "The user-specified log directory is not found in the broker config.",
    Errors.SASL_AUTHENTICATION_FAILED: "SASL Authentication failed.",
    Errors.UNKNOWN_PRODUCER_ID: "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.",
    Errors.REASSIGNMENT_IN_PROGRESS: "A partition reassignment is in progress.",
    Errors.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation Token feature is not enabled.",
    Errors.DELEGATION_TOKEN_NOT_FOUND: "Delegation Token is not found on server.",
    Errors.DELEGATION_TOKEN_OWNER_MISMATCH: "Specified Principal is not valid Owner/Renewer.",
    Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.",
    Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Delegation Token authorization failed.",
    Errors.DELEGATION_TOKEN_EXPIRED: "Delegation Token is expired.",
    Errors.INVALID_PRINCIPAL_TYPE: "Supplied principalType is not supported.",
    Errors.NON_EMPTY_GROUP: "The group is not empty.",
    Errors.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    Errors.FETCH_SESSION_ID_NOT_FOUND: "The fetch session ID was not found.",
    Errors.INVALID_FETCH_SESSION_EPOCH: "The fetch session epoch is invalid.",
    Errors.LISTENER_NOT_FOUND: "There is no listener on the leader broker that matches the listener on which metadata request was processed.",
    Errors.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    Errors.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    Errors.UNKNOWN_LEADER_EPOCH: "The leader epoch in the request is newer than the epoch on the broker.",
    Errors.UNSUPPORTED_COMPRESSION_TYPE: "The requesting client does not support the compression type of given partition.",
    Errors.STALE_BROKER_EPOCH: "Broker epoch has changed.",
    Errors.OFFSET_NOT_AVAILABLE: "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.",
    Errors.MEMBER_ID_REQUIRED: "The group member needs to have a valid member id before actually entering a consumer group.",
    Errors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    Errors.GROUP_MAX_SIZE_REACHED: "The consumer group has reached its max size.",
    Errors.FENCED_INSTANCE_ID: "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.",
    Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
    Errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    Errors.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    Errors.GROUP_SUBSCRIBED_TO_TOPIC: "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
    Errors.INVALID_RECORD: "This record has failed the validation on broker and hence will be rejected.",
    Errors.UNSTABLE_OFFSET_COMMIT: "There are unstable offsets that need to be cleared.",
    Errors.THROTTLING_QUOTA_EXCEEDED: "The throttling quota has been exceeded.",
    Errors.PRODUCER_FENCED: "There is a newer producer with the same transactionalId which fences the current one.",
    Errors.RESOURCE_NOT_FOUND: "A request illegally referred to a resource that does not exist.",
    Errors.DUPLICATE_RESOURCE: "A request illegally referred to the same resource twice.",
    Errors.UNACCEPTABLE_CREDENTIAL: "Requested credential would not meet criteria for acceptability.",
    Errors.INCONSISTENT_VOTER_SET: "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.",
    Errors.INVALID_UPDATE_VERSION: "The given update version was invalid.",
    Errors.FEATURE_UPDATE_FAILED: "Unable to update finalized features due to an unexpected server error.",
    Errors.PRINCIPAL_DESERIALIZATION_FAILURE: "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.",
    Errors.SNAPSHOT_NOT_FOUND: "Requested snapshot was not found.",
    Errors.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    Errors.DUPLICATE_BROKER_REGISTRATION: "This broker ID is already in use.",
    Errors.BROKER_ID_NOT_REGISTERED: "The given broker ID was not registered.",
    Errors.INCONSISTENT_TOPIC_ID: "The log's topic ID did not match the topic ID in the request.",
    Errors.INCONSISTENT_CLUSTER_ID: "The clusterId in the request does not match that found on the server.",
    Errors.TRANSACTIONAL_ID_NOT_FOUND: "The transactionalId could not be found.",
    Errors.FETCH_SESSION_TOPIC_ID_ERROR: "The fetch session encountered inconsistent topic ID usage.",
    Errors.INELIGIBLE_REPLICA: "The new ISR contains at least one ineligible replica.",
    Errors.NEW_LEADER_ELECTED: "The AlterPartition request successfully updated the partition state but the leader has changed.",
    Errors.OFFSET_MOVED_TO_TIERED_STORAGE: "The requested offset is moved to tiered storage.",
    Errors.FENCED_MEMBER_EPOCH: "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.",
    Errors.UNRELEASED_INSTANCE_ID: "The instance ID is still used by another member in the consumer group. That member must leave first.",
    Errors.UNSUPPORTED_ASSIGNOR: "The assignor or its version range is not supported by the consumer group.",
    Errors.STALE_MEMBER_EPOCH: "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.",
    Errors.MISMATCHED_ENDPOINT_TYPE: "The request was sent to an endpoint of the wrong type.",
    Errors.UNSUPPORTED_ENDPOINT_TYPE: "This endpoint type is not supported yet.",
    Errors.UNKNOWN_CONTROLLER_ID: "This controller ID is not known.",
    Errors.UNKNOWN_SUBSCRIPTION_ID: "Client sent a push telemetry request with an invalid or outdated subscription ID.",
    Errors.TELEMETRY_TOO_LARGE: "Client sent a push telemetry request larger than the maximum size the broker will accept.",
    Errors.INVALID_REGISTRATION: "The controller has considered the broker registration to be invalid.",
    Errors.TRANSACTION_ABORTABLE: "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.",
    Errors.INVALID_RECORD_STATE: "The record state is invalid. The acknowledgement of delivery could not be completed.",
    Errors.SHARE_SESSION_NOT_FOUND: "The share session was not found.",
    Errors.INVALID_SHARE_SESSION_EPOCH: "The share session epoch is invalid.",
    Errors.FENCED_STATE_EPOCH: "The share coordinator rejected the request because the share-group state epoch did not match.",
    Errors.INVALID_VOTER_KEY: "The voter key doesn't match the receiving replica's key.",
    Errors.DUPLICATE_VOTER: "The voter is already part of the set of voters.",
    Errors.VOTER_NOT_FOUND: "The voter is not part of the set of voters.",
    Errors.CONTROLLER_ID_NOT_REGISTERED: "The given controller ID was not registered.",
}


def default_message(code: int) -> str | None:
    return DEFAULT_MESSAGES.get(code)


class ApiError(RemoteError):
    """An error code and message for the client (Kafka's ApiError / ApiException): the request
    is refused in its answer, the node goes on (a RemoteError, kraftnode/errors.py)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = int(code)
        self.message: str | None = default_message(self.code) if message is None else message
        super().__init__(f"{_name(self.code)}: {self.message}")

    @classmethod
    def none(cls) -> ApiError:
        return cls(Errors.NONE)

    @classmethod
    def from_throwable(cls, e: ApiError) -> ApiError:
        """ApiError.fromThrowable: what a manager that *throws* answers. Kafka leaves the message
        out when it is the error's generic one (or the error is UNKNOWN_SERVER_ERROR), whereas
        ``new ApiError(Errors.X)`` carries the generic message."""
        generic = e.code == Errors.UNKNOWN_SERVER_ERROR or e.message == default_message(e.code)
        out = cls(e.code, "")
        out.message = None if generic else e.message
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiError) and (self.code, self.message) == (other.code, other.message)

    def __hash__(self) -> int:
        return hash((self.code, self.message))


def _name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return str(code)
