"""Simple consumer groups (the group coordinator, kraftnode/groups): the offset-commit record
layout, its replay, and the refusal of commits while a Kafka (Java) raft node is a voter.
The genuine-client tests are in tests/interop/test_simple_groups.py."""

from __future__ import annotations

import socket
import struct
import uuid
from pathlib import Path

from kraftnode.groups import GroupConfig, GroupCoordinator
from kraftnode.groups import records as rec
from kraftnode.groups.records import RECORD_KEY_PREFIX as OFFSET_KEY_PREFIX
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import API_VERSIONS, FETCH, OFFSET_COMMIT, OFFSET_FETCH
from tests.support.cluster import CLUSTER_ID, Cluster, wait_for_hw
from tests.support.node import frame_call


def test_record_layout_is_kafkas_offset_commit_key_and_value() -> None:
    key, value = rec.offset_commit("g", "__cluster_metadata", 0, 42, 7, "m", 1000)
    # OffsetCommitKey v1 after the prefix: version, group, topic, partition
    assert key == OFFSET_KEY_PREFIX + b"\x00\x01" + b"\x00\x01g" + b"\x00\x12__cluster_metadata" + b"\x00" * 4
    # OffsetCommitValue v3: version, offset, leader epoch, metadata, commit timestamp
    assert value == struct.pack(">hqi", 3, 42, 7) + b"\x00\x01m" + struct.pack(">q", 1000)
    kv, k, v = rec.decode(key, value)  # type: ignore[misc]
    assert (kv, k.group, k.topic, k.partition, v.offset, v.leader_epoch, v.metadata) == \
        (1, "g", "__cluster_metadata", 0, 42, 7, "m")
    assert rec.decode(b"other", value) is None and rec.decode(OFFSET_KEY_PREFIX + b"\x00", value) is None
    assert rec.decode(key, b"\x00\x03") is None
    view = GroupCoordinator(GroupConfig(), dict)
    view.replay(key, value)
    view.replay(*rec.offset_commit("g", "__cluster_metadata", 0, 43, 7, "", 1001))  # the later commit wins
    view.replay(b"an application key", value)         # not an offset record: ignored
    assert view.offsets == {"g": {("__cluster_metadata", 0): (43, 7, "", 1001)}}
    view.replay(*rec.offset_tombstone("g", "__cluster_metadata", 0))   # OffsetDelete / DeleteGroups
    assert view.offsets == {}


def _commit(group: str) -> w.OffsetCommitRequest:
    R = w.OffsetCommitRequest
    return R(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        R.OffsetCommitRequestTopic(name="__cluster_metadata", partitions=[
            R.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)])])


def test_commits_refused_while_a_kafka_voter_fetches(tmp_path: Path) -> None:
    """Kafka's raft client throws on a keyed record: once a Java voter fetches from the
    leader, OffsetCommit answers COORDINATOR_NOT_AVAILABLE; what was committed is kept."""
    cl = Cluster(tmp_path, 3)
    try:
        cl.start(1)
        cl.start(2)
        info = wait_for_hw(cl, 1, 30)
        with socket.create_connection(("127.0.0.1", cl.port(info.leader_id)), timeout=10) as s:
            ok = frame_call(s, OFFSET_COMMIT, 8, _commit("g1"), 1)
            assert ok.topics[0].partitions[0].error_code == 0  # type: ignore[attr-defined]
            frame_call(s, API_VERSIONS, 3, w.ApiVersionsRequest(
                client_software_name="apache-kafka-java", client_software_version="3.9.0"), 2)
            F = w.FetchRequest
            fetch = F(cluster_id=CLUSTER_ID, replica_state=F.ReplicaState(replica_id=3, replica_epoch=-1),
                      max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                      session_epoch=-1, topics=[F.FetchTopic(topic_id=uuid.UUID(int=1), partitions=[
                          F.FetchPartition(partition=0, current_leader_epoch=info.leader_epoch,
                                           fetch_offset=0, last_fetched_epoch=0, log_start_offset=-1,
                                           partition_max_bytes=1 << 20, replica_directory_id=uuid.UUID(int=0))])],
                      forgotten_topics_data=[], rack_id="")
            assert frame_call(s, FETCH, 17, fetch, 3).responses[0].partitions[0].error_code == 0  # type: ignore[attr-defined]
            bad = frame_call(s, OFFSET_COMMIT, 8, _commit("g2"), 4)
            assert bad.topics[0].partitions[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]
            f = frame_call(s, OFFSET_FETCH, 7, w.OffsetFetchRequest(group_id="g1", topics=None), 5)
            assert [(t.name, p.committed_offset) for t in f.topics for p in t.partitions] == \
                [("__cluster_metadata", 3)]  # type: ignore[attr-defined]
    finally:
        cl.close()


def test_share_coordinator_keys_are_parsed_as_kafka_does() -> None:
    """FindCoordinator v6, key type 2: "groupId:topicId:partition" as Kafka's SharePartitionKey
    reads it -- the group id may hold colons, the topic id is a base64 Uuid, the partition an
    int32. A genuine Kafka 4.4 broker answers the well-formed ones COORDINATOR_NOT_AVAILABLE and
    the others INVALID_REQUEST (tests/interop/test_kafka44_versions.py asks both servers)."""
    from kraftnode.server.handlers.groups import _share_key_valid

    assert _share_key_valid("g:AAAAAAAAAAAAAAAAAAAAAQ:0") and _share_key_valid("a:b:AAAAAAAAAAAAAAAAAAAAAQ:-1")
    for bad in ("g:x:0", "g:AAAAAAAAAAAAAAAAAAAAAQ", ":AAAAAAAAAAAAAAAAAAAAAQ:0", "g:AAAAAAAAAAAAAAAAAAAAAQ:p",
                "g:AAAAAAAAAAAAAAAAAAAAAQ:2147483648", "g:AAAAAAAAAAAAAAAAAAAA:0", "", "g::0"):
        assert not _share_key_valid(bad), bad
