"""Issue 36: a kraftnode node advertises, for every API a genuine Kafka 4.4 controller lists on
its controller listener, the range that controller lists -- measured here against a running
Kafka 4.4.0 controller, not against a table (docs/protocol.md, "Kafka 4.4's controller
listener"). Both are asked the same ApiVersions v4 and v5 requests.

Also checked against the genuine controller: the features it reports finalized include
kraft.version once its quorum is dynamic (KAFKA-18979), which kraftnode reports the same way
(tests/interop/test_java_admin.py), and ApiVersions v5 with a foreign ClusterId is answered
normally by a 4.4 *controller* (it does not check; kraftnode checks as a 4.4 broker does --
tests/kraftnode/server/net/test_api_versions.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraftnode.protocol import ApiVersionsRequest, ApiVersionsResponse
from kraftnode.protocol.registry import API_VERSIONS
from tests.support.cluster import free_ports
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import KafkaServer, controller_properties
from tests.support.node import NodeProcess, call, running_node

pytestmark = pytest.mark.timeout(240)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


@pytest.fixture(scope="module")
def kafka_controller(kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """A genuine Kafka 4.4 controller, the only voter of a dynamic quorum (format --standalone)."""
    root = tmp_path_factory.mktemp("kafka44ctl")
    (port,) = free_ports(1)
    server = KafkaServer(kafka44, root, 1, controller_properties(
        1, port, root / "data", bootstrap=f"127.0.0.1:{port}"), port=port)
    server.format(CLUSTER, "--standalone")
    server.start()
    try:
        server.wait_started(120)
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with running_node(tmp_path_factory.mktemp("node")) as n:
        yield n


def _ask(port: int, version: int, **fields: object) -> ApiVersionsResponse:
    req = ApiVersionsRequest(client_software_name="kraftnode-tests", client_software_version="1.0", **fields)
    _, resp = call(port, API_VERSIONS, version, req)
    assert isinstance(resp, ApiVersionsResponse)
    return resp


@pytest.mark.parametrize("version", [4, 5])
def test_every_controller_api_at_the_kafka_4_4_controllers_range(kafka_controller: KafkaServer, node: NodeProcess,
                                                                 version: int) -> None:
    theirs = {k.api_key: (k.min_version, k.max_version) for k in _ask(kafka_controller.port, version).api_keys}
    ours = {k.api_key: (k.min_version, k.max_version) for k in _ask(node.port, version).api_keys}
    assert len(theirs) > 30, theirs  # a real answer
    assert {k: ours.get(k) for k in theirs} == theirs
    # ControlledShutdown: removed in Kafka 4.0, advertised by neither
    assert 7 not in theirs and 7 not in ours


def test_kraft_version_is_finalized_by_a_dynamic_4_4_controller(kafka_controller: KafkaServer) -> None:
    resp = _ask(kafka_controller.port, 4)
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}
    assert finalized["kraft.version"] == (1, 1)


def test_a_4_4_controller_does_not_check_apiversions_v5_ids(kafka_controller: KafkaServer) -> None:
    resp = _ask(kafka_controller.port, 5, cluster_id="AAAAAAAAAAAAAAAAAAAAAA", node_id=77)
    assert resp.error_code == 0 and resp.api_keys


def test_kraftnode_lists_the_features_a_4_4_controller_supports(kafka_controller: KafkaServer,
                                                                node: NodeProcess) -> None:
    """Every feature a 4.4 controller supports, at its ranges and in its order (issue 37):
    metadata.version 3.3-IV3 to 4.4-IV2, kraft.version, group.version, transaction.version,
    share.version, streams.version, eligible.leader.replicas.version."""
    theirs = [(f.name, f.min_version, f.max_version) for f in _ask(kafka_controller.port, 4).supported_features]
    ours = [(f.name, f.min_version, f.max_version) for f in _ask(node.port, 4).supported_features]
    assert ours == theirs

