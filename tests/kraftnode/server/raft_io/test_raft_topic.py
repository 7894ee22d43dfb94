"""A kraftnode quorum formatted with TestRaftServer's all-zero cluster id speaks raft on
``__raft_performance_test`` (topic id AAAAAAAAAAAAAAAAAAAAAg), as Kafka's standalone raft
server does, so Kafka's own Java Raft nodes can share the quorum."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.framing import (
    encode_response,
    parse_request,
)
from kraftnode.protocol.registry import (
    API_VERSIONS,
    BEGIN_QUORUM_EPOCH,
    DESCRIBE_QUORUM,
    FETCH,
    PRODUCE,
)
from kraftnode.server.handlers import kraft_record_shape_error
from recordbatch import Record, build_batch, iter_batches
from tests.support.cluster import SUITE_RELEASE, Cluster, free_ports, wait_for_hw
from tests.support.node import call, frame_call, recv_frame

pytestmark = pytest.mark.timeout(90)

ZERO = "AAAAAAAAAAAAAAAAAAAAAA"


def raft_fetch(port: int, topic_id: uuid.UUID, epoch: int) -> w.FetchResponse:
    F = w.FetchRequest
    req = F(cluster_id=ZERO, replica_state=F.ReplicaState(replica_id=3, replica_epoch=-1), max_wait_ms=0,
            min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(
                partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=0,
                log_start_offset=-1, partition_max_bytes=1 << 20, replica_directory_id=uuid.UUID(int=0))])],
            forgotten_topics_data=[], rack_id="")
    _, resp = call(port, FETCH, 17, req)
    return resp  # type: ignore[return-value]


def _reformat(cl: Cluster, cluster_id: str) -> None:
    for i in cl.ids:
        d = cl.root / f"node{i}"
        subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(d / "server.properties"),
                        "--cluster-id", cluster_id, "--ignore-formatted"], check=True, capture_output=True)


def test_zero_cluster_id_selects_the_test_raft_server_topic(tmp_path: Path) -> None:
    cl = Cluster(tmp_path / "a", 3)
    for i in cl.ids:  # re-create the node dirs under the all-zero cluster id
        subprocess.run(["rm", "-rf", str(cl.root / f"node{i}" / "metadata")], check=True)
    _reformat(cl, ZERO)
    try:
        cl.start(1)
        cl.start(2)
        info = wait_for_hw(cl)  # the nodes elected a leader over __raft_performance_test
        port = cl.port(info.leader_id)
        ok = raft_fetch(port, uuid.UUID(int=2), info.leader_epoch)
        assert ok.error_code == 0 and ok.responses[0].partitions[0].error_code == 0
        assert raft_fetch(port, uuid.UUID(int=1), info.leader_epoch).error_code == Errors.INVALID_REQUEST
        assert "quorum on __raft_performance_test" in cl.log(info.leader_id)
        assert "will refuse this node" not in cl.log(info.leader_id)
        # no controller records: the log carries only what is appended to it
        assert "controller activation" not in cl.log(info.leader_id)
    finally:
        cl.close()


def test_default_topic_is_cluster_metadata(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 3)
    try:
        cl.start(1)
        cl.start(2)
        info = wait_for_hw(cl)
        port = cl.port(info.leader_id)
        assert raft_fetch(port, uuid.UUID(int=2), info.leader_epoch).error_code == Errors.INVALID_REQUEST
    finally:
        cl.close()


def test_bad_raft_topic_setting_stops_start_up(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    d = tmp_path / "n"
    d.mkdir()
    (d / "server.properties").write_text(
        f"node.id=1\nprocess.roles=controller\nkraftnode.application.records.enable=true\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
        f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
        f"log.dirs={d / 'metadata'}\nkraftnode.raft.topic=orders\n")
    r = subprocess.run([sys.executable, "-m", "kraftnode", "start", str(d / "server.properties")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "kraftnode.raft.topic" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------------------------------
# Produce while a Kafka raft node votes: only records Kafka's RecordsIterator can read


def _shape(records: list[Record], **kw: object) -> str | None:
    return kraft_record_shape_error(next(iter_batches(build_batch(records, now_ms=1000, **kw))))  # type: ignore[arg-type]


def test_record_shape_matches_kafka_records_iterator() -> None:
    """TestRaftServer's scheduleAppend writes records with timestamp delta 0, no key, a
    non-empty value and no headers; anything else makes Kafka's RecordsIterator throw."""
    assert _shape([Record(None, b"\x00" * 256), Record(None, b"x", timestamp=1000)]) is None
    assert _shape([Record(None, b"a"), Record(None, b"b")], compression="zstd") is None
    assert "has a key" in (_shape([Record(b"k", b"v")]) or "")
    assert "headers" in (_shape([Record(None, b"v", headers=[("h", b"\x00")])]) or "")
    assert "timestamp delta 5" in (_shape([Record(None, b"a", timestamp=1000),
                                            Record(None, b"b", timestamp=1005)]) or "")
    assert "no value" in (_shape([Record(None, None)]) or "")
    assert "empty value" in (_shape([Record(None, b"")]) or "")


def _produce(port: int, batch: bytes) -> w.ProduceResponse.PartitionProduceResponse:
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="__raft_performance_test", partition_data=[P.PartitionProduceData(index=0, records=batch)])])
    _, resp = call(port, PRODUCE, 9, req)
    return resp.responses[0].partition_responses[0]  # type: ignore[attr-defined, no-any-return]



def test_produce_guards_a_test_raft_server_voter(tmp_path: Path) -> None:
    """A __raft_performance_test leader refuses records a TestRaftServer's raft client would
    throw on (KRaftControlRecordStateMachine decodes every appended batch) -- before any
    Java voter fetched too, since it would read them later -- yet takes opaque values
    that are no metadata records: that quorum has no metadata."""
    cl = Cluster(tmp_path / "a", 3)
    for i in cl.ids:
        subprocess.run(["rm", "-rf", str(cl.root / f"node{i}" / "metadata")], check=True)
    _reformat(cl, ZERO)
    try:
        cl.start(1)
        cl.start(2)
        info = wait_for_hw(cl)
        port = cl.port(info.leader_id)
        keyed = build_batch([Record(b"key", b"value")])
        early = _produce(port, keyed)  # no Java voter has fetched yet: refused all the same
        assert early.error_code == Errors.INVALID_RECORD
        assert "has a key" in (early.error_message or "") and "TestRaftServer" in (early.error_message or "")
        # voter 3 shows up as TestRaftServer does: ApiVersions naming its software
        # (KafkaRaftManager's NetworkClient discovers versions), then a raft Fetch
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            frame_call(s, API_VERSIONS, 3, w.ApiVersionsRequest(
                client_software_name="apache-kafka-java", client_software_version="3.9.0"), 1)
            F = w.FetchRequest
            fetch = F(cluster_id=ZERO, replica_state=F.ReplicaState(replica_id=3, replica_epoch=-1),
                      max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                      session_epoch=-1, topics=[F.FetchTopic(topic_id=uuid.UUID(int=2), partitions=[
                          F.FetchPartition(partition=0, current_leader_epoch=info.leader_epoch,
                                           fetch_offset=0, last_fetched_epoch=0, log_start_offset=-1,
                                           partition_max_bytes=1 << 20, replica_directory_id=uuid.UUID(int=0))])],
                      forgotten_topics_data=[], rack_id="")
            resp = frame_call(s, FETCH, 17, fetch, 2)
            assert resp.responses[0].partitions[0].error_code == 0  # type: ignore[attr-defined]
        bad = _produce(port, keyed)
        assert bad.error_code == Errors.INVALID_RECORD
        assert "has a key" in (bad.error_message or "") and "3 (apache-kafka-java)" in (bad.error_message or "")
        two_ms = build_batch([Record(None, b"a", timestamp=1000), Record(None, b"b", timestamp=1001)])
        assert _produce(port, two_ms).error_code == Errors.INVALID_RECORD
        good = _produce(port, build_batch([Record(None, b"\x00" * 256), Record(None, b"\x01" * 256)]))
        assert good.error_code == 0 and good.base_offset > 0
    finally:
        cl.close()


class _KafkaLeaderStub:
    """Voter 3 answering as Kafka 3.9's TestRaftServer answers a client: ApiVersions, and
    DescribeQuorum only for ``__raft_performance_test`` (KafkaRaftClient
    .handleDescribeQuorumRequest: UNKNOWN_TOPIC_OR_PARTITION for another topic). Other
    requests (the follower's Fetch) stay unanswered."""

    def __init__(self, port: int, epoch: int) -> None:
        self.epoch = epoch
        self.asked: list[str] = []
        self.srv = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _answer(self, req: Any) -> Any:
        if req.spec.key == API_VERSIONS:
            A = w.ApiVersionsResponse
            return A(error_code=0, throttle_time_ms=0, api_keys=[
                A.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, lo, hi in ((1, 4, 17), (18, 0, 4), (52, 0, 1), (53, 0, 1), (54, 0, 1),
                                  (55, 0, 2), (59, 0, 1))])
        if req.spec.key == DESCRIBE_QUORUM:
            D = w.DescribeQuorumResponse
            t = req.body.topics[0]
            self.asked.append(t.topic_name)
            if t.topic_name != "__raft_performance_test":
                return D(error_code=0, topics=[D.TopicData(topic_name=t.topic_name, partitions=[
                    D.PartitionData(partition_index=0, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION)])])
            voters = [D.ReplicaState(replica_id=i, log_end_offset=0) for i in (1, 2, 3)]
            return D(error_code=0, topics=[D.TopicData(topic_name=t.topic_name, partitions=[
                D.PartitionData(partition_index=0, error_code=0, leader_id=3, leader_epoch=self.epoch,
                                high_watermark=-1, current_voters=voters, observers=[])])])
        return None

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                frame = recv_frame(conn, timeout=30)
                if frame is None:
                    return
                req = parse_request(frame)
                resp = self._answer(req)
                if resp is not None:
                    conn.sendall(encode_response(req.spec, req.header.request_api_version,
                                                 req.header.correlation_id, resp))

    def close(self) -> None:
        self.srv.close()


def test_describe_quorum_forwarded_to_a_test_raft_server_leader(tmp_path: Path) -> None:
    """kafka-metadata-quorum.sh asks for __cluster_metadata; a kraftnode follower forwards
    the question to a TestRaftServer leader for the quorum's own topic (else Kafka answers
    UNKNOWN_TOPIC_OR_PARTITION) and returns the answer under the name asked."""
    cl = Cluster(tmp_path / "a", 3)
    for i in cl.ids:
        subprocess.run(["rm", "-rf", str(cl.root / f"node{i}" / "metadata")], check=True)
    _reformat(cl, ZERO)
    stub = None
    try:
        cl.start(1)
        cl.start(2)
        info = wait_for_hw(cl)
        follower = 1 if info.leader_id == 2 else 2
        epoch = info.leader_epoch + 1
        stub = _KafkaLeaderStub(cl.port(3), epoch)
        B = w.BeginQuorumEpochRequest
        _, began = call(cl.port(follower), BEGIN_QUORUM_EPOCH, 0, B(cluster_id=ZERO, topics=[B.TopicData(
            topic_name="__raft_performance_test", partitions=[B.PartitionData(
                partition_index=0, leader_id=3, leader_epoch=epoch)])]))
        assert began.error_code == 0  # type: ignore[attr-defined]
        Q = w.DescribeQuorumRequest
        _, resp = call(cl.port(follower), DESCRIBE_QUORUM, 1, Q(topics=[Q.TopicData(
            topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
        assert stub.asked == ["__raft_performance_test"]
        t = resp.topics[0]  # type: ignore[attr-defined]
        assert t.topic_name == "__cluster_metadata"
        assert t.partitions[0].error_code == 0 and t.partitions[0].leader_id == 3
        assert t.partitions[0].leader_epoch == epoch
    finally:
        if stub is not None:
            stub.close()
        cl.close()


def test_produce_of_a_batch_over_the_raft_limit_is_refused(tmp_path: Path) -> None:
    """A batch bigger than KafkaRaftClient.MAX_BATCH_SIZE_BYTES (8 MiB) cannot enter the
    raft log (nor a Kafka follower's): the producer gets MESSAGE_TOO_LARGE, as Kafka
    answers a batch over message.max.bytes, and the connection stays usable. A
    message.max.bytes above 8 MiB acts as 8 MiB."""
    cl = Cluster(tmp_path / "a", 1, extra="message.max.bytes=16777216\n")
    subprocess.run(["rm", "-rf", str(cl.root / "node1" / "metadata")], check=True)
    _reformat(cl, ZERO)
    try:
        cl.start(1)
        wait_for_hw(cl)
        port = cl.port(1)
        big = _produce(port, build_batch([Record(None, b"x" * (8 << 20))]))
        assert big.error_code == Errors.MESSAGE_TOO_LARGE, big
        assert "8388608" in (big.error_message or "")
        ok = _produce(port, build_batch([Record(None, b"x" * ((8 << 20) - 1000))]))
        assert ok.error_code == 0, ok
        assert "Traceback" not in cl.log(1)
    finally:
        cl.close()


def test_raft_topic_override_with_another_cluster_id_warns(tmp_path: Path) -> None:
    """TestRaftServer's cluster id is always the all-zero Uuid: choosing its topic with
    another cluster id cannot join it, and the log says so."""
    cl = Cluster(tmp_path / "a", 1, extra="kraftnode.raft.topic=__raft_performance_test\n")
    try:
        cl.start(1)
        wait_for_hw(cl)
        text = cl.log(1)
        assert "quorum on __raft_performance_test" in text
        assert "Kafka's TestRaftServer uses cluster id AAAAAAAAAAAAAAAAAAAAAA" in text
    finally:
        cl.close()
