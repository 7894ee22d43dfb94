"""Kafka's names and numbers that several layers need: one home for each.

Everything here is a fact of Apache Kafka 3.9, not a choice of ours; each constant names the
Java constant it copies. Error codes have their own home, ``kraftnode.protocol.errors.Errors``
(Kafka's ``org.apache.kafka.common.protocol.Errors``); configuration keys and their defaults
live in the key table ``kraftnode.config.keys``; the defaults that a layer below the
configuration also needs (the raft core's ``controller.quorum.*`` timeouts, the log's segment
settings and its snapshots', the request size limit) are the constants below, and the key table reads them from
here: each default is written once.

This module imports nothing, so every layer (recordbatch excepted) may use it.
"""

from __future__ import annotations

import uuid

#: Topic.CLUSTER_METADATA_TOPIC_NAME: the topic a KRaft controller quorum replicates.
METADATA_TOPIC = "__cluster_metadata"
#: Uuid.METADATA_TOPIC_ID (``AAAAAAAAAAAAAAAAAAAAAQ``).
METADATA_TOPIC_ID = uuid.UUID(int=1)
#: The one partition of a raft topic (Topic.CLUSTER_METADATA_TOPIC_PARTITION).
METADATA_PARTITION = 0

#: The topic of Kafka's standalone raft server (kafka.tools.TestRaftServer) ...
TEST_RAFT_TOPIC = "__raft_performance_test"
#: ... its topic id (TestRaftServer uses Uuid.ONE_UUID + 1) ...
TEST_RAFT_TOPIC_ID = uuid.UUID(int=2)
#: ... and its cluster id, always all zeros.
TEST_RAFT_SERVER_CLUSTER_ID = "AAAAAAAAAAAAAAAAAAAAAA"

#: The topics Kafka's own raft runs on, with their ids.
RAFT_TOPICS: dict[str, uuid.UUID] = {
    METADATA_TOPIC: METADATA_TOPIC_ID,
    TEST_RAFT_TOPIC: TEST_RAFT_TOPIC_ID,
}

#: QuorumConfig defaults (Kafka 3.9), in milliseconds.
QUORUM_ELECTION_TIMEOUT_MS = 1000       # controller.quorum.election.timeout.ms
QUORUM_ELECTION_BACKOFF_MAX_MS = 1000   # controller.quorum.election.backoff.max.ms
QUORUM_FETCH_TIMEOUT_MS = 2000          # controller.quorum.fetch.timeout.ms
QUORUM_REQUEST_TIMEOUT_MS = 2000        # controller.quorum.request.timeout.ms
QUORUM_RETRY_BACKOFF_MS = 20            # controller.quorum.retry.backoff.ms

#: MetadataLogConfig / KRaftConfigs defaults (Kafka 3.9): the metadata log's segments.
METADATA_LOG_SEGMENT_BYTES = 1024 * 1024 * 1024     # metadata.log.segment.bytes
METADATA_LOG_SEGMENT_MIN_BYTES = 8 * 1024 * 1024    # metadata.log.segment.min.bytes
METADATA_LOG_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000   # metadata.log.segment.ms
#: ... and the snapshots behind it (when one is generated, how much log they retain).
METADATA_SNAPSHOT_MAX_NEW_RECORD_BYTES = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
METADATA_SNAPSHOT_MAX_INTERVAL_MS = 60 * 60 * 1000          # metadata.log.max.snapshot.interval.ms
METADATA_MAX_RETENTION_BYTES = 100 * 1024 * 1024            # metadata.max.retention.bytes
METADATA_MAX_RETENTION_MS = 7 * 24 * 60 * 60 * 1000         # metadata.max.retention.ms

#: SocketServerConfigs.SOCKET_REQUEST_MAX_BYTES_DEFAULT: the largest request frame accepted.
SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024        # socket.request.max.bytes
