"""Kafka compatibility details in one place: the shapes of records Kafka's raft client
accepts, the checks a producer's batches get before they touch the log, topic-name rules,
and the numbers (operation bit sets, config resource types, upgrade types, error texts)
Kafka 3.9 answers with.

Each is a fact of Kafka's behaviour, named after the Java code it copies."""

from __future__ import annotations

from kraftnode.features import MV_NAMES
from kraftnode.log.bootstrap import MINIMUM_BOOTSTRAP_MV
from kraftnode.log.metadata_log import MAX_BATCH_SIZE_BYTES
from kraftnode.metadata.state import is_metadata_record
from kraftnode.protocol import Errors
from recordbatch import BatchView, CorruptBatchError, iter_batches
from recordbatch.wire import DecodeError, read_varint, read_varlong

__all__ = ["APPLICATION_RECORDS_KEY", "MINIMUM_BOOTSTRAP_MV", "application_records_refusal",
           "kraft_record_shape_error", "metadata_only_check"]

# FeatureUpdate.UpgradeType codes (UpdateFeatures v1 UpgradeType)
_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3
_MV_NAMES = MV_NAMES

# ConfigResource.Type ids (DescribeConfigs ResourceType)
_CONFIG_TOPIC = 2
_CONFIG_BROKER = 4
_CONFIG_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _invalid_topic_name(name: str) -> str | None:
    """Why Kafka's Topic.validate rejects ``name``, in its words; None if it is legal."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > 249:
        reason = f"the length of '{name}' is longer than the max allowed length 249"
    elif not set(name) <= _TOPIC_CHARS:
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


# Authorized-operations bit sets as Kafka 3.9 computes them without an authorizer
# (AuthHelper.authorizedOperations: every operation AclEntry.supportedOperations lists for
# the resource type, as bits of AclOperation codes, Utils.to32BitField). kraftnode has no
# authorizer, so everything is allowed, as on a Kafka node without authorizer.class.name.
_NOT_REQUESTED = -2147483648  # the schemas' default: the client did not ask
# CLUSTER: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
# TOPIC: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


# Kafka's Errors.message() texts, which Kafka puts in DescribeQuorum's ErrorMessage
_ERROR_MESSAGES = {
    Errors.NOT_LEADER_OR_FOLLOWER: (
        "For requests intended only for the leader, this error indicates that the broker is "
        "not the current leader. For requests intended for any replica, this error indicates "
        "that the broker is not a replica of the topic partition."),
}


def kraft_record_shape_error(batch: BatchView) -> str | None:
    """Why Kafka 3.9's raft client would refuse a data record of ``batch``, else None.

    Kafka's RecordsIterator.readRecord / decodeDataRecord throw unless each record has
    timestamp delta 0, no key (length -1), a value of at least one byte, and a last byte
    of 0 (read as the header count). Each record here must end with a header count of 0
    right after its value, which implies Kafka's last-byte test. Raw fields are read,
    since a decoded record's timestamp hides its delta in a LogAppendTime batch."""
    data = batch.records_data()
    pos = 0
    try:
        for i in range(batch.records_count):
            length, pos = read_varint(data, pos)
            end = pos + length
            if length <= 0 or end > len(data):
                return f"record {i} has an invalid size {length}"
            ts_delta, p = read_varlong(data, pos + 1)  # after the attributes byte
            if ts_delta != 0:
                return f"record {i} has timestamp delta {ts_delta}"
            _, p = read_varint(data, p)  # offset delta
            key_len, p = read_varint(data, p)
            if key_len >= 0:
                return f"record {i} has a key"
            value_len, p = read_varint(data, p)
            if value_len <= 0:
                return f"record {i} has {'no' if value_len < 0 else 'an empty'} value"
            headers, p = read_varint(data, p + value_len)
            if headers != 0 or p != end:
                return f"record {i} has headers"
            pos = end
    except (DecodeError, IndexError):
        return "a record is malformed"
    return None


def validate_produce_records(records: bytes | None, max_batch_bytes: int,
                             topic: str = "__cluster_metadata") -> tuple[tuple[int, str] | None, int, list[BatchView]]:
    """Check a producer's batches before they touch the log; (error, record count, batches).
    ``max_batch_bytes``: ``message.max.bytes`` (never above the raft log's 8 MiB)."""
    if records is None or len(records) == 0:
        return (Errors.INVALID_RECORD, "no records"), 0, []
    count = 0
    views: list[BatchView] = []
    try:
        it = iter_batches(records)
        for b in it:
            b.validate()
            if b.is_control:
                return (Errors.INVALID_RECORD, "producers may not write control batches"), 0, []
            limit = min(max_batch_bytes, MAX_BATCH_SIZE_BYTES)
            if b.size_in_bytes > limit:
                # Kafka answers a batch over message.max.bytes with RecordTooLargeException
                # (UnifiedLog.analyzeAndValidateRecords), in these words; the raft log takes no
                # batch over 8 MiB whatever the key says (KafkaRaftClient.MAX_BATCH_SIZE_BYTES)
                return (Errors.MESSAGE_TOO_LARGE,
                        f"The record batch size in the append to {topic}-0 is {b.size_in_bytes} bytes "
                        f"which exceeds the maximum configured value of {limit}."), 0, []
            count += b.records_count
            views.append(b)
        if it.incomplete or it.position != len(records):
            return (Errors.CORRUPT_MESSAGE, "records end with a partial batch"), 0, []
    except CorruptBatchError as e:
        return (Errors.CORRUPT_MESSAGE, str(e)), 0, []
    if count == 0:
        return (Errors.INVALID_RECORD, "no records"), 0, []
    return None, count, views


#: the opt-in key for records that are not KRaft metadata records (docs/server.md, "Application records")
APPLICATION_RECORDS_KEY = "kraftnode.application.records.enable"


def application_records_refusal(topic: str) -> tuple[int, str]:
    """Produce to the metadata topic without the opt-in: refused, whatever the records are
    (a well-formed metadata record from a client can poison the log too: a PartitionRecord of
    a topic that does not exist stops every broker replaying it). Kafka refuses a client's
    append to an internal topic with INVALID_TOPIC_EXCEPTION ("Cannot append to internal
    topic ..."), the error every client treats as fatal for the record."""
    return (Errors.INVALID_TOPIC_EXCEPTION,
            f"Cannot append to internal topic {topic}: only the controllers write metadata "
            f"records; application records need {APPLICATION_RECORDS_KEY}=true on every node "
            f"of the quorum, after which no Kafka broker can use it (docs/server.md)")


def metadata_only_check(views: list[BatchView], kafka_nodes: dict[int, str], test_raft_quorum: bool,
                        topic: str) -> tuple[int, str] | None:
    """Produce accepts only records Kafka's raft nodes can read.

    Every Kafka 3.9 raft node decodes every batch it appends (KafkaRaftClient updates
    KRaftControlRecordStateMachine, whose maybeLoadLog runs RecordsIterator over the
    log) and throws on a data record that ``kraft_record_shape_error`` refuses -- a
    TestRaftServer too, although its ByteArraySerde takes any value. So the shape is
    checked while a Kafka node votes (``kafka_nodes``: voter id -> software), and always
    in a ``__raft_performance_test`` quorum (``test_raft_quorum``: no controller duties),
    which exists to be shared with TestRaftServer: a record it holds before a Java voter
    first fetches would reach that voter later. A Kafka controller also halts on a
    committed record it cannot replay as a metadata record."""
    if not kafka_nodes and not test_raft_quorum:
        return None
    names = ", ".join(f"{i} ({sw})" for i, sw in sorted(kafka_nodes.items()))
    who = (f"the quorum includes Kafka raft node(s) {names}, whose raft client accepts"
           if kafka_nodes else
           f"a {topic} quorum is shared with Kafka's TestRaftServer, which accepts")
    try:
        for b in views:
            shape = kraft_record_shape_error(b)
            if shape is not None:
                return (Errors.INVALID_RECORD,
                        f"batch at offset {b.base_offset}: {shape}; {who} only records with "
                        f"timestamp delta 0, no key, a non-empty value and no headers")
            if test_raft_quorum:
                continue  # values are opaque bytes there: no metadata
            for r in b.records():
                if not is_metadata_record(r.value):
                    return (Errors.INVALID_RECORD,
                            f"record at batch offset {r.offset} is not a KRaft metadata record; "
                            f"the quorum includes Kafka controller(s) {names}, which accept only "
                            f"metadata records")
    except (CorruptBatchError, ValueError) as e:
        return (Errors.CORRUPT_MESSAGE, str(e))
    return None
