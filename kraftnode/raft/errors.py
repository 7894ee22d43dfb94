"""Kafka error codes the Raft core puts into responses.

The numbers are Kafka 3.9's ``org.apache.kafka.common.protocol.Errors`` codes, so the
server can copy them 1:1 into the wire messages. Only the codes the core itself
produces or reacts to are listed here.
"""

from __future__ import annotations

NONE = 0
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
BROKER_NOT_AVAILABLE = 8
REQUEST_TIMED_OUT = 7
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
INCONSISTENT_VOTER_SET = 94
INVALID_UPDATE_VERSION = 95
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INCONSISTENT_CLUSTER_ID = 104
INVALID_VOTER_KEY = 125
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127

NAMES: dict[int, str] = {
    NONE: "NONE",
    OFFSET_OUT_OF_RANGE: "OFFSET_OUT_OF_RANGE",
    NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER",
    REQUEST_TIMED_OUT: "REQUEST_TIMED_OUT",
    BROKER_NOT_AVAILABLE: "BROKER_NOT_AVAILABLE",
    INVALID_REQUEST: "INVALID_REQUEST",
    FENCED_LEADER_EPOCH: "FENCED_LEADER_EPOCH",
    UNKNOWN_LEADER_EPOCH: "UNKNOWN_LEADER_EPOCH",
    INCONSISTENT_VOTER_SET: "INCONSISTENT_VOTER_SET",
    INVALID_UPDATE_VERSION: "INVALID_UPDATE_VERSION",
    SNAPSHOT_NOT_FOUND: "SNAPSHOT_NOT_FOUND",
    POSITION_OUT_OF_RANGE: "POSITION_OUT_OF_RANGE",
    INCONSISTENT_CLUSTER_ID: "INCONSISTENT_CLUSTER_ID",
    INVALID_VOTER_KEY: "INVALID_VOTER_KEY",
    UNSUPPORTED_VERSION: "UNSUPPORTED_VERSION",
    DUPLICATE_VOTER: "DUPLICATE_VOTER",
    VOTER_NOT_FOUND: "VOTER_NOT_FOUND",
}


def name(code: int) -> str:
    """Kafka's name for an error code (for logs and exception messages)."""
    return NAMES.get(code, f"UNKNOWN_ERROR_{code}")


class RaftError(Exception):
    """An operation refused by the core, carrying the Kafka error code to report."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{name(code)}: {message}")
        self.code = code


class NotLeaderError(RaftError):
    """Raised/completed when an append is attempted or lost without leadership."""

    def __init__(self, message: str) -> None:
        super().__init__(NOT_LEADER_OR_FOLLOWER, message)
