"""The client-facing APIs at Kafka 4.4's versions (issue 36), asked of kraftnode and of a
genuine Apache Kafka 4.4 server (combined broker + controller, tests/support/kafka_server.py)
with the same client, and Kafka 4.4's own Java clients against kraftnode.

- ApiVersions: kraftnode advertises exactly Kafka 4.4's ranges for Produce, ListOffsets,
  Metadata and the group APIs (KIP-896's minimums; Produce 0-13 although v0-2 are refused,
  KAFKA-18659), and both close the connection on a Produce v2.
- The new versions' answers where both servers can be asked the same thing: an unknown topic
  id (Produce v13, Metadata v13, OffsetCommit/OffsetFetch v10), an unknown group
  (DescribeGroups v5/v6, DeleteGroups v3), a share coordinator (FindCoordinator v5/v6), the
  special ListOffsets timestamps at the versions that do and do not know them.
- What only kraftnode can show (its one topic, ``__cluster_metadata``, id
  ``AAAAAAAAAAAAAAAAAAAAAQ``): offsets committed and fetched by topic id, a Produce by id.
- Kafka 4.4's console producer and a console consumer in a group (classic protocol) write,
  read and commit through kraftnode; the node's request metrics show which versions they
  negotiated: the newest ones, Kafka 4.4's.
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol import registry as r
from kraftnode.server.raft_io.wire import METADATA_TOPIC, METADATA_TOPIC_ID
from recordbatch import Record, build_batch
from tests.support.cluster import Cluster, serving
from tests.support.doc_blocks import free_ports
from tests.support.kafka import KafkaHome, java_env
from tests.support.kafka_server import KafkaServer, combined_server
from tests.support.node import frame_call

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

UNKNOWN_ID = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
#: the APIs whose versions issue 36 raised to Kafka 4.4's, and the group APIs that already were
CLIENT_APIS = (r.PRODUCE, r.LIST_OFFSETS, r.METADATA, r.OFFSET_COMMIT, r.OFFSET_FETCH,
               r.FIND_COORDINATOR, r.JOIN_GROUP, r.HEARTBEAT, r.LEAVE_GROUP, r.SYNC_GROUP,
               r.DESCRIBE_GROUPS, r.LIST_GROUPS, r.DELETE_GROUPS, r.OFFSET_DELETE, r.INIT_PRODUCER_ID)


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_ports(1)[0]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[str]:
    """A one-node kraftnode quorum (its own leader and group coordinator): its bootstrap."""
    cl = Cluster(tmp_path_factory.mktemp("kafka44-versions"), 1,
                 extra=f"kraftnode.metrics.listener=127.0.0.1:{metrics_port}\n"
                 "group.coordinator.rebalance.protocols=classic,consumer\n")
    for _ in serving(cl):
        _until_coordinator(cl.bootstrap())
        yield cl.bootstrap()


@pytest.fixture(scope="module")
def broker(kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A genuine Kafka 4.4 server whose group coordinator is loaded: its bootstrap."""
    b: KafkaServer = combined_server(kafka44, tmp_path_factory.mktemp("kafka44-broker"))
    try:
        b.wait_started()
        _until_coordinator(b.bootstrap)
        yield b.bootstrap
    finally:
        b.close()


def _ask(host_port: str, api: int, version: int, body: Any) -> Any:
    host, port = host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        return frame_call(s, api, version, body, 1, client_id="kafka44-versions")


#: the groups the tests below ask about
GROUPS = ["no-such-group", "g-ids", "by-id", "g44-classic", "g44-consumer"]


def _until_coordinator(host_port: str, timeout: float = 90) -> None:
    """Until the coordinator of every group in GROUPS answers (Kafka creates __consumer_offsets
    on the first FindCoordinator, then loads its partitions one by one)."""
    F = w.FindCoordinatorRequest
    deadline = time.monotonic() + timeout
    while True:
        found = _ask(host_port, r.FIND_COORDINATOR, 6, F(key_type=0, coordinator_keys=GROUPS))
        described = _ask(host_port, r.DESCRIBE_GROUPS, 5, w.DescribeGroupsRequest(groups=GROUPS))
        codes = [c.error_code for c in found.coordinators] + [g.error_code for g in described.groups]
        if not any(codes):
            return
        assert time.monotonic() < deadline, (found, described)
        time.sleep(0.5)


def _api_versions(host_port: str) -> dict[int, tuple[int, int]]:
    resp = _ask(host_port, r.API_VERSIONS, 3, w.ApiVersionsRequest(
        client_software_name="kraftnode-tests", client_software_version="1"))
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_advertised_ranges_are_kafka_4_4s(node: str, broker: str) -> None:
    ours, kafka = _api_versions(node), _api_versions(broker)
    assert {k: ours.get(k) for k in CLIENT_APIS} == {k: kafka.get(k) for k in CLIENT_APIS}
    assert ours[r.PRODUCE] == (0, 13) and ours[r.OFFSET_COMMIT] == (2, 10)


def _produce_v2_closes(host_port: str) -> bool:
    """A Produce v2 (advertised, KAFKA-18659, but no longer served): the connection closes."""
    host, port = host_port.rsplit(":", 1)
    frame = struct.pack(">hhih", r.PRODUCE, 2, 7, 5) + b"probe" + struct.pack(">hii", 1, 1000, 0)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        return s.recv(100) == b""


def test_produce_v0_to_v2_are_advertised_but_refused(node: str, broker: str) -> None:
    assert _produce_v2_closes(node) and _produce_v2_closes(broker)


# ------------------------------------------------------------ the same answers as Kafka 4.4
def _unknown_group_answers(host_port: str) -> list[Any]:
    D, G = w.DescribeGroupsRequest, w.DeleteGroupsRequest
    out: list[Any] = []
    for v in (5, 6):
        g = _ask(host_port, r.DESCRIBE_GROUPS, v, D(groups=["no-such-group"])).groups[0]
        out.append((v, g.error_code, g.error_message, g.group_state, g.members))
    d = _ask(host_port, r.DELETE_GROUPS, 3, G(groups_names=["no-such-group"])).results[0]
    out.append((d.error_code, d.error_message))
    return out


def test_unknown_group_describe_v6_and_delete_v3(node: str, broker: str) -> None:
    """KIP-1043: DescribeGroups v6 says GROUP_ID_NOT_FOUND with a message, v5 a Dead group."""
    ours = _unknown_group_answers(node)
    assert ours == _unknown_group_answers(broker)
    assert ours[1][1:3] == (Errors.GROUP_ID_NOT_FOUND, "Group no-such-group not found.")


#: share coordinator keys ("groupId:topicId:partition"): well-formed (the group id may hold
#: colons, the partition is any int32), then malformed (a topic id that is no Uuid, no
#: partition, no group, a partition that is no int32)
WELL_FORMED = ["sg:AAAAAAAAAAAAAAAAAAAAAQ:0", "a:b:AAAAAAAAAAAAAAAAAAAAAQ:3", "sg:AAAAAAAAAAAAAAAAAAAAAQ:-1",
               "sg:AAAAAAAAAAAAAAAAAAAAAQ:+1"]
MALFORMED = ["sg:x:0", "sg:AAAAAAAAAAAAAAAAAAAAAQ", ":AAAAAAAAAAAAAAAAAAAAAQ:0", "sg:AAAAAAAAAAAAAAAAAAAAAQ:p",
             "sg:AAAAAAAAAAAAAAAAAAAAAQ:2147483648", "sg:AAAAAAAAAAAAAAAAAAAA:0", ""]
SHARE_KEYS = WELL_FORMED + MALFORMED


def _share_coordinator(host_port: str) -> list[Any]:
    F = w.FindCoordinatorRequest
    return [(v, c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
            for v in (5, 6)
            for c in _ask(host_port, r.FIND_COORDINATOR, v,
                          F(key_type=2, coordinator_keys=SHARE_KEYS)).coordinators]


def test_share_coordinator_is_not_available(node: str, broker: str) -> None:
    """KIP-932 key type 2: kraftnode serves no share groups. Kafka 4.4 without an available
    share coordinator: INVALID_REQUEST below v6; from v6 COORDINATOR_NOT_AVAILABLE for a
    well-formed key, INVALID_REQUEST for a malformed one."""
    ours = _share_coordinator(node)
    assert ours == _share_coordinator(broker)
    assert [c[2] for c in ours if c[0] == 6] == \
        [Errors.COORDINATOR_NOT_AVAILABLE] * len(WELL_FORMED) + [Errors.INVALID_REQUEST] * len(MALFORMED)


def _unknown_topic_id_answers(host_port: str) -> list[Any]:
    C, F, P, M = w.OffsetCommitRequest, w.OffsetFetchRequest, w.ProduceRequest, w.MetadataRequest
    commit = _ask(host_port, r.OFFSET_COMMIT, 10, C(
        group_id="g-ids", generation_id_or_member_epoch=-1, member_id="", topics=[
            C.OffsetCommitRequestTopic(topic_id=UNKNOWN_ID, partitions=[
                C.OffsetCommitRequestPartition(partition_index=p, committed_offset=1) for p in (0, 1)])]))
    fetch = _ask(host_port, r.OFFSET_FETCH, 10, F(groups=[F.OffsetFetchRequestGroup(
        group_id="g-ids", topics=[F.OffsetFetchRequestTopics(topic_id=UNKNOWN_ID, partition_indexes=[0, 3])])]))
    produce = _ask(host_port, r.PRODUCE, 13, P(acks=-1, timeout_ms=1000, topic_data=[
        P.TopicProduceData(topic_id=UNKNOWN_ID, partition_data=[P.PartitionProduceData(index=0, records=None)])]))
    metadata = _ask(host_port, r.METADATA, 13, M(topics=[M.MetadataRequestTopic(topic_id=UNKNOWN_ID, name=None)],
                                                 allow_auto_topic_creation=False))
    return [
        [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in commit.topics],
        [(g.error_code, [(t.topic_id, [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                                       for p in t.partitions]) for t in g.topics]) for g in fetch.groups],
        [(t.topic_id, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
         for t in produce.responses],
        (metadata.error_code, [(t.error_code, t.name, t.topic_id, t.partitions) for t in metadata.topics]),
    ]


def test_unknown_topic_ids(node: str, broker: str) -> None:
    """OffsetCommit/OffsetFetch v10 (KIP-848) and Produce v13 (KIP-516) name topics by id;
    Metadata v13 has the top-level error code (KIP-1102), 0 here on both."""
    ours = _unknown_topic_id_answers(node)
    assert ours == _unknown_topic_id_answers(broker)
    assert ours[0] == [(UNKNOWN_ID, [(0, Errors.UNKNOWN_TOPIC_ID), (1, Errors.UNKNOWN_TOPIC_ID)])]


SPECIAL = [(v, ts) for ts, first in ((-3, 7), (-4, 8), (-5, 9), (-6, 11)) for v in (first - 1, first)] \
    + [(1, -3), (11, -7), (11, -1), (1, -2)]


def _special_timestamps(host_port: str, topic: str) -> list[Any]:
    L = w.ListOffsetsRequest
    out = []
    for v, ts in SPECIAL:
        p = _ask(host_port, r.LIST_OFFSETS, v, L(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
            L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=ts)])])
                 ).topics[0].partitions[0]
        # the offsets differ (two different logs); whether there is one does not, for these
        out.append((v, ts, p.error_code, p.offset >= 0 if ts in (-1, -2, -4) else None if ts == -3 else p.offset))
    return out


def test_list_offsets_special_timestamps_by_version(node: str, broker: str) -> None:
    """A special timestamp below the version that introduced it, or an unknown negative one,
    is UNSUPPORTED_VERSION; EARLIEST_PENDING_UPLOAD (-6, v11) and LATEST_TIERED (-5) answer
    -1 where nothing is tiered. (Kafka's topic here: its own __consumer_offsets.)"""
    ours = _special_timestamps(node, METADATA_TOPIC)
    assert ours == _special_timestamps(broker, "__consumer_offsets")
    assert (11, -6, 0, -1) in ours and (10, -6, Errors.UNSUPPORTED_VERSION, -1) in ours


# -------------------------------------------------------- kraftnode's own topic, by its id
def test_offsets_and_produce_by_topic_id(node: str) -> None:
    C, F, P = w.OffsetCommitRequest, w.OffsetFetchRequest, w.ProduceRequest
    commit = _ask(node, r.OFFSET_COMMIT, 10, C(
        group_id="by-id", generation_id_or_member_epoch=-1, member_id="", topics=[
            C.OffsetCommitRequestTopic(topic_id=METADATA_TOPIC_ID, partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata="m")])]))
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in commit.topics] == [(METADATA_TOPIC_ID, [0])]
    for topics in ([F.OffsetFetchRequestTopics(topic_id=METADATA_TOPIC_ID, partition_indexes=[0])], None):
        got = _ask(node, r.OFFSET_FETCH, 10, F(groups=[F.OffsetFetchRequestGroup(group_id="by-id", topics=topics)]))
        assert [(t.topic_id, [(p.committed_offset, p.metadata, p.error_code) for p in t.partitions])
                for t in got.groups[0].topics] == [(METADATA_TOPIC_ID, [(5, "m", 0)])]
    # the same offset, by name, for a client of an older version (v9)
    by_name = _ask(node, r.OFFSET_FETCH, 9, F(groups=[F.OffsetFetchRequestGroup(group_id="by-id", topics=[
        F.OffsetFetchRequestTopics(name=METADATA_TOPIC, partition_indexes=[0])])]))
    assert by_name.groups[0].topics[0].partitions[0].committed_offset == 5
    batch = build_batch([Record(key=b"k", value=b"by-id")])
    produced = _ask(node, r.PRODUCE, 13, P(acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(topic_id=METADATA_TOPIC_ID, partition_data=[P.PartitionProduceData(index=0,
                                                                                           records=batch)])]))
    t = produced.responses[0]
    assert t.topic_id == METADATA_TOPIC_ID and t.partition_responses[0].error_code == 0
    assert t.partition_responses[0].base_offset > 0


# ---------------------------------------------------------------- Kafka 4.4's Java clients
def _requests_by_version(metrics_port: int) -> dict[tuple[str, int], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    return {(m[0], int(m[1])): float(m[2]) for m in re.findall(
        r'^kafka_network_requestmetrics_requests_total\{request="(\w+)",version="(\d+)"\} (\S+)$', text, re.M)}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_kafka_4_4_console_clients_in_a_group(node: str, kafka44: KafkaHome, metrics_port: int,
                                              tmp_path: Path, protocol: str) -> None:
    """Kafka 4.4's console producer writes 20 lines; its console consumer, in a group of the
    classic or the KIP-848 protocol, reads from the beginning until it has seen them and
    commits on exit; the group's committed offset is past the last of them, and the node
    counted the newest versions among the requests the clients sent: Produce 13 (by topic
    id), Metadata 13, ListOffsets 11, FindCoordinator 6, and the offsets APIs at v9 (classic:
    by name) or v10 (consumer protocol: by topic id)."""
    group = f"g44-{protocol}"
    before = _requests_by_version(metrics_port)
    lines = [f"kafka44-{protocol}-{i}" for i in range(20)]
    prod = subprocess.run([str(kafka44.script("kafka-console-producer")), "--bootstrap-server", node,
                           "--topic", METADATA_TOPIC, "--producer-property", "acks=all"],
                          input="\n".join(lines).encode() + b"\n", capture_output=True, env=java_env(),
                          timeout=120)
    assert prod.returncode == 0, prod.stderr.decode(errors="replace")
    props = tmp_path / "consumer.properties"
    props.write_text(f"auto.offset.reset=earliest\nenable.auto.commit=true\ngroup.protocol={protocol}\n")
    cons = subprocess.Popen([str(kafka44.script("kafka-console-consumer")), "--bootstrap-server", node,
                             "--topic", METADATA_TOPIC, "--group", group, "--consumer.config", str(props),
                             "--timeout-ms", "15000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=java_env())
    try:
        out, err = cons.communicate(timeout=180)
    finally:
        if cons.poll() is None:
            cons.kill()
    seen = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith(f"kafka44-{protocol}-")]
    assert seen == lines, err.decode(errors="replace")[-3000:]
    counted = _requests_by_version(metrics_port)   # before this test's own requests below
    used = {(api, v) for (api, v), n in counted.items() if n > before.get((api, v), 0)}
    print(f"Kafka 4.4's console clients ({protocol}) sent (api, version):", sorted(used))
    offsets_version = 9 if protocol == "classic" else 10
    for api, newest in (("Produce", 13), ("Metadata", 13), ("FindCoordinator", 6), ("ListOffsets", 11),
                        ("OffsetFetch", offsets_version), ("OffsetCommit", offsets_version)):
        assert (api, newest) in used, (api, sorted(used))
    F = w.OffsetFetchRequest
    committed = _ask(node, r.OFFSET_FETCH, 10, F(groups=[F.OffsetFetchRequestGroup(group_id=group, topics=[
        F.OffsetFetchRequestTopics(topic_id=METADATA_TOPIC_ID, partition_indexes=[0])])]))
    end = _ask(node, r.LIST_OFFSETS, 11, w.ListOffsetsRequest(replica_id=-1, topics=[
        w.ListOffsetsRequest.ListOffsetsTopic(name=METADATA_TOPIC, partitions=[
            w.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])).topics[0].partitions[0]
    # past every line read (the consumer's own commit record comes after them)
    assert 20 < committed.groups[0].topics[0].partitions[0].committed_offset <= end.offset
