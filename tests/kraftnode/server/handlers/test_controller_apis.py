"""The controller APIs on real kraftnode processes, without Kafka (the genuine brokers are in
tests/interop/test_brokers_on_kraftnode.py): who answers (the active controller; NOT_CONTROLLER
elsewhere, the Envelope too), what every node advertises, an Envelope's forwarded request and
principal, and the applications'-records policy (docs/controller.md)."""

from __future__ import annotations

import ipaddress
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.generated.metadata import NoOpRecord
from kraftnode.protocol.registry import (
    API_VERSIONS,
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    CREATE_TOPICS,
    ENVELOPE,
    OFFSET_COMMIT,
    PRODUCE,
    SERVED,
)
from recordbatch import Record, build_batch
from tests.support.cluster import CLUSTER_ID, Cluster, serving
from tests.support.node import call

pytestmark = pytest.mark.timeout(180)

# What a Kafka 4.4 controller advertises for the controller APIs (ApiVersions of a genuine
# controller, checked against one in tests/interop/test_controller_listener_versions.py;
# tests/interop/test_kafka_controller_replays_kraftnode.py checks how a 3.9 controller differs).
# ControlledShutdown (7) is not among them: Kafka 4.0 removed it.
KAFKA_4_4_CONTROLLER = {19: (2, 7), 20: (1, 6), 33: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2),
                        40: (1, 2), 41: (1, 3), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 49: (0, 1),
                        56: (2, 3), 58: (0, 0), 62: (0, 4), 63: (0, 2), 64: (0, 0), 67: (0, 0), 73: (0, 0),
                        94: (0, 0)}


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from serving(Cluster(tmp_path_factory.mktemp("ctlapis"), 3, extra="broker.session.timeout.ms=60000\n"))


def registration(broker: int) -> w.BrokerRegistrationRequest:
    R = w.BrokerRegistrationRequest
    return R(broker_id=broker, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=broker << 64 | 1),
             listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)],
             features=[R.Feature(name="metadata.version", min_supported_version=1, max_supported_version=21)],
             rack=None, is_migrating_zk_broker=False, log_dirs=[uuid.UUID(int=broker << 64 | 7)],
             previous_broker_epoch=-1)


def produce(port: int, records: list[Record]) -> w.ProduceResponse.PartitionProduceResponse:
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="__cluster_metadata", partition_data=[P.PartitionProduceData(index=0, records=build_batch(records))])])
    _, resp = call(port, PRODUCE, 9, req)
    return resp.responses[0].partition_responses[0]  # type: ignore[attr-defined, no-any-return]


def create_topics_request(name: str) -> w.CreateTopicsRequest:
    C = w.CreateTopicsRequest
    return C(topics=[C.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                                      configs=[])], timeout_ms=5000, validate_only=False)


def envelope(inner: bytes, principal: str = "User:alice") -> w.EnvelopeRequest:
    ptype, _, pname = principal.partition(":")
    data = w.DefaultPrincipalData(type_=ptype, name=pname, token_authenticated=False)
    return w.EnvelopeRequest(request_data=inner[4:],  # the inner request without its size prefix
                             request_principal=(0).to_bytes(2, "big") + data.encode(0),
                             client_host_address=ipaddress.ip_address("10.1.2.3").packed)


def test_every_node_advertises_the_controller_apis_as_a_kafka_4_4_controller(cl: Cluster) -> None:
    req = w.ApiVersionsRequest(client_software_name="kraftnode-tests", client_software_version="1")
    for i in cl.ids:
        got = {a.api_key: (a.min_version, a.max_version) for a in call(cl.port(i), API_VERSIONS, 3, req)[1].api_keys}  # type: ignore[attr-defined]
        assert {k: got.get(k) for k in KAFKA_4_4_CONTROLLER} == KAFKA_4_4_CONTROLLER
        assert 7 not in got  # ControlledShutdown
    assert {k: (SERVED[k].min_version, SERVED[k].max_version) for k in KAFKA_4_4_CONTROLLER} == KAFKA_4_4_CONTROLLER


def test_only_the_active_controller_answers(cl: Cluster) -> None:
    leader = cl.wait_for_leader(20).leader_id
    follower = next(i for i in cl.ids if i != leader)
    _, resp = call(cl.port(follower), BROKER_REGISTRATION, 4, registration(201))
    assert resp.error_code == Errors.NOT_CONTROLLER  # type: ignore[attr-defined]
    # a forwarded request answered NOT_CONTROLLER: the envelope itself says so (no payload)
    inner = encode_request(SERVED[CREATE_TOPICS], 7, 42, "client", create_topics_request("x"))
    _, env = call(cl.port(follower), ENVELOPE, 0, envelope(inner))
    assert (env.error_code, env.response_data) == (Errors.NOT_CONTROLLER, None)  # type: ignore[attr-defined]


def test_an_envelope_runs_the_forwarded_request(cl: Cluster) -> None:
    leader = cl.wait_for_leader(20).leader_id
    inner = encode_request(SERVED[CREATE_TOPICS], 7, 42, "client", create_topics_request("orders"))
    _, env = call(cl.port(leader), ENVELOPE, 0, envelope(inner))
    assert env.error_code == 0  # type: ignore[attr-defined]
    cid, resp = parse_response(SERVED[CREATE_TOPICS], 7, bytes(env.response_data))  # type: ignore[attr-defined]
    t = resp.topics[0]  # type: ignore[attr-defined]
    assert cid == 42
    # no broker is registered: Kafka's placement error, from the controller
    assert (t.name, t.error_code, t.error_message) == (
        "orders", Errors.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log directories cordoned.")
    # an API that is not forwardable, and a principal that does not parse
    inner = encode_request(SERVED[BROKER_HEARTBEAT], 1, 1, "client", w.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=1, current_metadata_offset=0, want_fence=False, want_shut_down=False,
        offline_log_dirs=[]))
    assert call(cl.port(leader), ENVELOPE, 0, envelope(inner))[1].error_code == Errors.INVALID_REQUEST  # type: ignore[attr-defined]
    bad = envelope(inner)
    bad.request_principal = b"\x00"
    assert call(cl.port(leader), ENVELOPE, 0, bad)[1].error_code == Errors.PRINCIPAL_DESERIALIZATION_FAILURE  # type: ignore[attr-defined]


def test_while_a_broker_is_registered_only_metadata_records_are_written(cl: Cluster) -> None:
    leader = cl.wait_for_leader(20).leader_id
    _, resp = call(cl.port(leader), BROKER_REGISTRATION, 4, registration(101))
    assert resp.error_code == 0 and resp.broker_epoch > 0  # type: ignore[attr-defined]
    time.sleep(0.5)  # the registration commits and is replayed
    r = produce(cl.port(leader), [Record(None, b"application data")])
    assert r.error_code == Errors.INVALID_RECORD
    assert r.error_message == ("record at batch offset 0 is not a KRaft metadata record; Kafka broker(s) 101 are "
                               "registered and replay every record of the log")
    r = produce(cl.port(leader), [Record(b"k", encode_metadata_record(NoOpRecord(), 0))])
    assert r.error_code == Errors.INVALID_RECORD and "has a key" in (r.error_message or ""), r.error_message
    assert produce(cl.port(leader), [Record(None, encode_metadata_record(NoOpRecord(), 0))]).error_code == 0
    OC = w.OffsetCommitRequest
    _, oc = call(cl.port(leader), OFFSET_COMMIT, 8, OC(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                                      group_instance_id=None, retention_time_ms=-1, topics=[
        OC.OffsetCommitRequestTopic(name="__cluster_metadata", partitions=[OC.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=None)])]))
    assert oc.topics[0].partitions[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]


def test_a_broker_may_not_register_while_the_log_holds_application_records(tmp_path: Path) -> None:
    cl1 = Cluster(tmp_path, 1)
    gen = serving(cl1)
    next(gen)
    try:
        assert produce(cl1.port(1), [Record(b"key", b"value")]).error_code == 0
        time.sleep(1.5)  # committed and replayed into the committed state
        _, resp = call(cl1.port(1), BROKER_REGISTRATION, 4, registration(101))
        assert resp.error_code == Errors.INVALID_REGISTRATION  # type: ignore[attr-defined]
        assert "refusing the registration of broker 101: the metadata log holds 1 record(s) that are not KRaft " \
               "metadata records" in cl1.log(1)
    finally:
        for _ in gen:
            pass
