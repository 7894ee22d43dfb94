"""Kafka error codes the Raft core puts into responses.

The values are ``kraftnode.protocol.errors.Errors`` (Kafka 3.9's
``org.apache.kafka.common.protocol.Errors``), the one home of every code, re-exported
as plain ints so the server copies them 1:1 into the wire messages and the core's
actions stay simple data. Only the codes the core itself produces or reacts to are
listed here.
"""

from __future__ import annotations

from kraftnode.protocol.errors import Errors

NONE = int(Errors.NONE)
OFFSET_OUT_OF_RANGE = int(Errors.OFFSET_OUT_OF_RANGE)
NOT_LEADER_OR_FOLLOWER = int(Errors.NOT_LEADER_OR_FOLLOWER)
BROKER_NOT_AVAILABLE = int(Errors.BROKER_NOT_AVAILABLE)
REQUEST_TIMED_OUT = int(Errors.REQUEST_TIMED_OUT)
UNSUPPORTED_VERSION = int(Errors.UNSUPPORTED_VERSION)
INVALID_REQUEST = int(Errors.INVALID_REQUEST)
FENCED_LEADER_EPOCH = int(Errors.FENCED_LEADER_EPOCH)
UNKNOWN_LEADER_EPOCH = int(Errors.UNKNOWN_LEADER_EPOCH)
INCONSISTENT_VOTER_SET = int(Errors.INCONSISTENT_VOTER_SET)
INVALID_UPDATE_VERSION = int(Errors.INVALID_UPDATE_VERSION)
SNAPSHOT_NOT_FOUND = int(Errors.SNAPSHOT_NOT_FOUND)
POSITION_OUT_OF_RANGE = int(Errors.POSITION_OUT_OF_RANGE)
INCONSISTENT_CLUSTER_ID = int(Errors.INCONSISTENT_CLUSTER_ID)
INVALID_VOTER_KEY = int(Errors.INVALID_VOTER_KEY)
DUPLICATE_VOTER = int(Errors.DUPLICATE_VOTER)
VOTER_NOT_FOUND = int(Errors.VOTER_NOT_FOUND)

def name(code: int) -> str:
    """Kafka's name for an error code (for logs and exception messages)."""
    try:
        return Errors(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"

