"""Controller duties over real processes: activation records, KIP-919 registration, and
the Produce guard that keeps a Kafka controller in the quorum alive."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kraftnode.log.bootstrap import bootstrap_checkpoint_bytes
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import FeatureLevelRecord, NoOpRecord
from kraftnode.protocol.registry import (
    API_VERSIONS,
    CONTROLLER_REGISTRATION,
    FETCH,
    PRODUCE,
)
from kraftnode.server.raft_io.wire import METADATA_TOPIC_ID
from recordbatch import Record, build_batch, iter_batches
from recordbatch.control import snapshot_footer_batch
from recordbatch.generated import SnapshotFooterRecord
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, Cluster, wait_for_hw
from tests.support.node import call, frame_call

pytestmark = pytest.mark.timeout(120)



def dump(cl: Cluster, i: int) -> str:
    seg = sorted((cl.root / f"node{i}" / "metadata" / "__cluster_metadata-0").glob("*.log"))
    out = subprocess.run([sys.executable, "-m", "kraftnode", "dump-log", *map(str, seg)],
                         capture_output=True, text=True, check=True)
    return out.stdout


def wait_until(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def produce(port: int, value: bytes) -> w.ProduceResponse.PartitionProduceResponse:
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="__cluster_metadata", partition_data=[P.PartitionProduceData(
            index=0, records=build_batch([Record(None, value)]))])])
    _, resp = call(port, PRODUCE, 9, req)
    return resp.responses[0].partition_responses[0]  # type: ignore[attr-defined, no-any-return]


def test_activation_and_registration_of_every_controller(cluster: Cluster) -> None:
    cluster.start_all()
    info = wait_for_hw(cluster)
    leader = info.leader_id
    # every node registers itself (KIP-919) once metadata.version 3.9-IV0 is committed
    wait_until(lambda: all(dump(cluster, leader).count(f'"controllerId":{i},') == 1 for i in cluster.ids),
               30, "three RegisterControllerRecords")
    text = dump(cluster, leader)
    order = [name for line in text.splitlines() for name in (
        "LEADER_CHANGE", "BEGIN_TRANSACTION_RECORD", "FEATURE_LEVEL_RECORD",
        "ZK_MIGRATION_STATE_RECORD", "END_TRANSACTION_RECORD", "REGISTER_CONTROLLER_RECORD") if name in line]
    # the log starts like a Kafka 3.9 controller's: LeaderChange, then the bootstrap transaction
    assert order[:5] == ["LEADER_CHANGE", "BEGIN_TRANSACTION_RECORD", "FEATURE_LEVEL_RECORD",
                         "ZK_MIGRATION_STATE_RECORD", "END_TRANSACTION_RECORD"], order
    assert order.count("FEATURE_LEVEL_RECORD") == 1
    assert '"name":"metadata.version","featureLevel":21' in text
    # ApiVersions reports the committed metadata.version
    _, av = call(cluster.port(leader), API_VERSIONS, 3, w.ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    fin = {f.name: f.max_version_level for f in av.finalized_features}  # type: ignore[attr-defined]
    assert fin["metadata.version"] == 21
    assert any(k.api_key == CONTROLLER_REGISTRATION for k in av.api_keys)  # type: ignore[attr-defined]

    # a restarted quorum does not bootstrap twice
    for i in cluster.ids:
        cluster.kill(i)
    cluster.start_all()
    wait_for_hw(cluster)
    time.sleep(2)
    assert dump(cluster, cluster.wait_for_leader().leader_id).count("FEATURE_LEVEL_RECORD") == 1


def test_registration_request_handling(cluster: Cluster) -> None:
    cluster.start_all()
    leader = wait_for_hw(cluster).leader_id
    follower = next(i for i in cluster.ids if i != leader)
    R = w.ControllerRegistrationRequest
    inc = uuid.uuid4()
    req = R(controller_id=7, incarnation_id=inc, zk_migration_ready=False,
            listeners=[R.Listener(name="CONTROLLER", host="127.0.0.1", port=1, security_protocol=0)],
            features=[R.Feature(name="metadata.version", min_supported_version=1, max_supported_version=21)])
    _, resp = call(cluster.port(follower), CONTROLLER_REGISTRATION, 0, req)
    assert resp.error_code == Errors.NOT_CONTROLLER  # type: ignore[attr-defined]
    deadline = time.monotonic() + 20
    while True:  # the leader answers NOT_CONTROLLER until its activation records are written
        _, resp = call(cluster.port(leader), CONTROLLER_REGISTRATION, 0, req)
        if resp.error_code == 0 or time.monotonic() > deadline:  # type: ignore[attr-defined]
            break
        time.sleep(0.2)
    assert resp.error_code == 0, resp  # type: ignore[attr-defined]
    # answered after commit: the record is in the log of a follower too
    wait_until(lambda: '"controllerId":7,' in dump(cluster, follower), 10,
               "the registration on a follower")
    # a listener with a security protocol Kafka does not know is refused and not written:
    # Kafka's controllers could not replay the record (ControllerRegistration.Builder)
    bad = R(controller_id=8, incarnation_id=uuid.uuid4(), zk_migration_ready=False,
            listeners=[R.Listener(name="CONTROLLER", host="127.0.0.1", port=1, security_protocol=9)],
            features=[])
    _, resp = call(cluster.port(leader), CONTROLLER_REGISTRATION, 0, bad)
    assert resp.error_code == Errors.UNKNOWN_SERVER_ERROR, resp  # type: ignore[attr-defined]
    assert "Unknown security protocol 9" in resp.error_message  # type: ignore[attr-defined]
    assert '"controllerId":8,' not in dump(cluster, leader)


def test_a_bootstrap_kafka_would_refuse_is_not_written(tmp_path: Path) -> None:
    """group.version 2 is beyond what a Kafka 4.4 controller supports: written into the log,
    FeatureControlManager.replay would stop every Kafka controller of the quorum."""
    cl = Cluster(tmp_path, 1)
    try:
        path = cl.root / "node1" / "metadata" / "bootstrap.checkpoint"
        # format's file with group.version 2 added to its data batch
        header, _data, _footer = (bytes(b.buffer) for b in iter_batches(bootstrap_checkpoint_bytes(21, 0)))
        levels = [("metadata.version", 21), ("group.version", 2)]
        data = build_batch([Record(None, encode_metadata_record(FeatureLevelRecord(name=n, feature_level=lv), 0))
                            for n, lv in levels], base_offset=1, now_ms=0)
        footer = snapshot_footer_batch(SnapshotFooterRecord(version_=0), base_offset=3,
                                       partition_leader_epoch=0, timestamp=0)
        path.write_bytes(header + data + footer)
        cl.start_all()
        wait_for_hw(cl)
        wait_until(lambda: "controller activation in epoch" in (cl.root / "node1" / "node.log").read_text(),
                   20, "the activation attempt")
        time.sleep(1)
        text = dump(cl, 1)
        assert "FEATURE_LEVEL_RECORD" not in text and "BEGIN_TRANSACTION_RECORD" not in text, text
        assert "but this controller only supports versions 0-1" in (cl.root / "node1" / "node.log").read_text()
    finally:
        cl.close()



def test_produce_accepts_only_metadata_records_once_a_kafka_controller_votes(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, 3)
    try:
        cl.start(1)
        cl.start(2)
        leader = wait_for_hw(cl).leader_id
        assert produce(cl.port(leader), b"application data").error_code == 0
        # voter 3 shows up as a Kafka 3.9 controller would: ApiVersions naming its
        # software, then a raft Fetch on the same connection
        with socket.create_connection(("127.0.0.1", cl.port(leader)), timeout=5) as s:
            frame_call(s, API_VERSIONS, 3, w.ApiVersionsRequest(
                client_software_name="apache-kafka-java", client_software_version="3.9.0"), 1)
            F = w.FetchRequest
            fetch = F(cluster_id=CLUSTER_ID, replica_state=F.ReplicaState(replica_id=3, replica_epoch=-1),
                      max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                      session_epoch=-1, topics=[F.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[
                          F.FetchPartition(partition=0, current_leader_epoch=cl.wait_for_leader().leader_epoch,
                                           fetch_offset=0, last_fetched_epoch=0, log_start_offset=-1,
                                           partition_max_bytes=1 << 20,
                                           replica_directory_id=uuid.UUID(int=0))])],
                      forgotten_topics_data=[], rack_id="")
            resp = frame_call(s, FETCH, 17, fetch, 2)
            assert resp.error_code == 0, resp  # type: ignore[attr-defined]
            assert resp.responses[0].partitions[0].error_code == 0  # type: ignore[attr-defined]
        bad = produce(cl.port(leader), b"application data")
        assert bad.error_code == Errors.INVALID_RECORD
        assert "Kafka controller(s) 3 (apache-kafka-java)" in (bad.error_message or "")
        good = produce(cl.port(leader), encode_metadata_record(NoOpRecord(), 0))
        assert good.error_code == 0 and good.base_offset > 0
    finally:
        cl.close()


def test_registration_lists_every_controller_listener(tmp_path: Path) -> None:
    """A Kafka 3.9 controller registers every controller listener (ControllerRegistration-
    Manager, KafkaConfig.effectiveAdvertisedControllerListeners), and a Kafka controller's
    DescribeCluster lists a registered controller only on a listener it registered; so a
    kraftnode with two controller listeners registers both, the default one first."""
    s1, s2 = socket.socket(), socket.socket()
    s1.bind(("127.0.0.1", 0))
    s2.bind(("127.0.0.1", 0))
    p1, p2 = s1.getsockname()[1], s2.getsockname()[1]
    s1.close()
    s2.close()
    d = tmp_path / "node1"
    d.mkdir()
    props = d / "server.properties"
    props.write_text(
        f"node.id=1\nprocess.roles=controller\nkraftnode.application.records.enable=true\n"
        f"listeners=CONTROLLER://127.0.0.1:{p1},SECOND://127.0.0.1:{p2}\n"
        f"controller.listener.names=CONTROLLER,SECOND\n"
        f"controller.quorum.voters=1@127.0.0.1:{p1}\nlog.dirs={d / 'metadata'}\n")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(props),
                    "--cluster-id", CLUSTER_ID], check=True, capture_output=True)
    logf = (d / "node.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "kraftnode", "start", str(props)],
                            stdout=subprocess.DEVNULL, stderr=logf)
    try:
        def registration() -> str | None:
            segs = sorted((d / "metadata" / "__cluster_metadata-0").glob("*.log"))
            if not segs:
                return None
            out = subprocess.run([sys.executable, "-m", "kraftnode", "dump-log", *map(str, segs)],
                                 capture_output=True, text=True, check=True).stdout
            return next((ln for ln in out.splitlines() if "REGISTER_CONTROLLER_RECORD" in ln), None)

        wait_until(registration, 30, "the RegisterControllerRecord")
        line = registration()
        assert line is not None
        first, second = line.find(f'"name":"CONTROLLER","host":"127.0.0.1","port":{p1}'), \
            line.find(f'"name":"SECOND","host":"127.0.0.1","port":{p2}')
        assert 0 <= first < second, line
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logf.close()
