"""What Kafka's admin tools send besides the quorum APIs, against a real node process.

``kafka-topics.sh --describe`` asks for the topic's configs (DescribeConfigs) after its
Metadata and fails the whole command when the node does not serve it; ``kafka-features.sh
upgrade|downgrade|disable`` prints each UpdateFeatures result's message after "Could not
upgrade F to N.", so refusals carry the messages of Kafka 3.9's FeatureControlManager.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import API_VERSIONS, DESCRIBE_CONFIGS, METADATA, UPDATE_FEATURES
from tests.support.node import NodeProcess, call, running_node

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    tmp: Path = tmp_path_factory.mktemp("admin-tools")
    with running_node(tmp) as n:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # leader elected and metadata.version committed
            r = _update(n.port, 1, [("metadata.version", 21, 1)])
            if r.error_code == 0 and r.results[0].error_code == 0:  # else NOT_CONTROLLER
                break
            time.sleep(0.2)
        yield n


def _describe_configs(port: int, version: int, *resources: tuple[int, str]) -> w.DescribeConfigsResponse:
    R = w.DescribeConfigsRequest.DescribeConfigsResource
    _, resp = call(port, DESCRIBE_CONFIGS, version, w.DescribeConfigsRequest(
        resources=[R(resource_type=t, resource_name=n, configuration_keys=None) for t, n in resources],
        include_synonyms=False, include_documentation=False))
    assert isinstance(resp, w.DescribeConfigsResponse)
    return resp


def _update(port: int, version: int, updates: list[tuple[str, int, int]],
            validate_only: bool = False) -> w.UpdateFeaturesResponse:
    K = w.UpdateFeaturesRequest.FeatureUpdateKey
    _, resp = call(port, UPDATE_FEATURES, version, w.UpdateFeaturesRequest(
        timeout_ms=60000, validate_only=validate_only,
        feature_updates=[K(feature=f, max_version_level=lvl, upgrade_type=kind if version >= 1 else 1,
                           allow_downgrade=version == 0 and kind != 1) for f, lvl, kind in updates]))
    assert isinstance(resp, w.UpdateFeaturesResponse)
    return resp


def test_kafka_python_admin_describes_the_topic_configs(node: NodeProcess) -> None:
    """kafka-python's admin checks ApiVersions before sending DescribeConfigs, as the Java
    Admin does (which otherwise fails kafka-topics.sh --describe with "The node does not
    support DESCRIBE_CONFIGS"). No config of the topic is overridden."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{node.port}", request_timeout_ms=10000)
    try:
        got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "__cluster_metadata")],
                                     config_filter="all")
    finally:
        admin.close()
    assert got == {"topic": {"__cluster_metadata": {}}}


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_answers_each_resource_as_kafka(node: NodeProcess, version: int) -> None:
    r = _describe_configs(node.port, version, (2, "__cluster_metadata"), (2, "other"), (2, "bad name"),
                          (4, "1"), (4, ""), (4, "7"), (8, "1"))
    got = [(x.resource_type, x.resource_name, x.error_code, x.error_message,
            [] if x.resource_name == "1" and x.resource_type == 4 else list(x.configs)) for x in r.results]
    # the node's own broker resource: every config with its source (ConfigHelper)
    own = {c.name: c for c in r.results[3].configs}
    static, default = (own["node.id"], own["controller.quorum.election.timeout.ms"])
    # v1 is the oldest Kafka 4.x serves (KIP-896: v0's IsDefault is gone)
    assert (static.value, static.config_source, default.config_source, default.read_only) == ("1", 4, 5, True)
    assert own["message.max.bytes"].value == "1048588" and len(own) > 50
    # no message is Kafka's default "", not null, as genuine 3.9 and 4.4 controllers send it
    # (tests/interop/test_go_clients.py)
    assert got == [
        (2, "__cluster_metadata", 0, "", []),
        (2, "other", Errors.UNKNOWN_TOPIC_OR_PARTITION, "", []),
        (2, "bad name", Errors.INVALID_TOPIC_EXCEPTION,
         "Topic name is invalid: 'bad name' contains one or more characters other than ASCII "
         "alphanumerics, '.', '_' and '-'", []),
        (4, "1", 0, "", []),
        (4, "", 0, "", []),
        (4, "7", Errors.INVALID_REQUEST,
         "Unexpected broker id, expected 1 or empty string, but received 7", []),
        (8, "1", Errors.INVALID_REQUEST, "Unsupported resource type: BROKER_LOGGER", []),
    ]


PREFIX = "The update failed for all features since the following feature had an error: "


def _outcome(resp: w.UpdateFeaturesResponse) -> tuple[int, str | None]:
    """The whole request's answer (Kafka 4.4: one error for all features), at v2: no results."""
    assert resp.results == []
    return resp.error_code, resp.error_message


def test_update_features_current_levels_succeed(node: NodeProcess) -> None:
    for validate_only in (False, True):
        assert _outcome(_update(node.port, 2, [("metadata.version", 21, 1), ("kraft.version", 0, 1)],
                                validate_only)) == (0, None)


def test_update_features_v0_v1_list_every_feature_with_the_requests_error(node: NodeProcess) -> None:
    """v0-1 (QuorumController.updateFeatures): a result per feature, in the request's order,
    with the whole request's error and that error's generic text -- "NONE" on success."""
    for version in (0, 1):
        ok = _update(node.port, version, [("metadata.version", 21, 1), ("kraft.version", 0, 1)])
        assert (ok.error_code, ok.error_message) == (0, None)
        assert [(x.feature, x.error_code, x.error_message) for x in ok.results] == [
            ("metadata.version", 0, "NONE"), ("kraft.version", 0, "NONE")]
        bad = _update(node.port, version, [("kraft.version", 0, 1), ("foo.bar", 1, 1)])
        assert bad.error_code == Errors.INVALID_UPDATE_VERSION
        assert [(x.feature, x.error_code, x.error_message) for x in bad.results] == [
            ("kraft.version", bad.error_code, "The given update version was invalid."),
            ("foo.bar", bad.error_code, "The given update version was invalid.")]


def test_update_features_refusals_carry_kafkas_messages(node: NodeProcess) -> None:
    """The first refusal, in the order Java's HashMap of the updates iterates them, fails the
    request (Kafka 4.4's FeatureControlManager.updateFeatures); messages are updateFeature's."""
    bad = Errors.INVALID_UPDATE_VERSION
    # HashMap order (String.hashCode buckets): foo.bar, kraft.version, metadata.version --
    # not the request's order, nor the names' (Kafka 3.9 sorted them)
    assert _outcome(_update(node.port, 2, [
        ("metadata.version", 22, 1), ("kraft.version", -1, 1), ("foo.bar", 1, 1)])) == (
        bad, PREFIX + "Invalid update version 1 for feature foo.bar. Local controller 1 does not support this feature.")
    assert _outcome(_update(node.port, 2, [("metadata.version", 22, 1), ("kraft.version", -1, 1)])) == (
        bad, PREFIX + "Invalid update version -1 for feature kraft.version. A feature version cannot be less than 0.")
    assert _outcome(_update(node.port, 2, [("metadata.version", 34, 1)])) == (
        bad, PREFIX + "Invalid update version 34 for feature metadata.version. Local controller 1 only supports "
                      "versions 7-33")
    assert _outcome(_update(node.port, 2, [("metadata.version", 20, 1)])) == (
        bad, PREFIX + "Invalid update version 20 for feature metadata.version. Can't downgrade the version of this "
                      "feature without setting the upgrade type to either safe or unsafe downgrade.")
    assert _outcome(_update(node.port, 2, [("kraft.version", 1, 2)])) == (
        bad, PREFIX + "Invalid update version 1 for feature kraft.version. Can't downgrade to a newer version.")
    assert _outcome(_update(node.port, 2, [("metadata.version", 3, 2)])) == (
        bad, PREFIX + "Invalid update version 3 for feature metadata.version. Local controller 1 only supports "
                      "versions 7-33")
    assert _outcome(_update(node.port, 2, [("metadata.version", 21, 7)])) == (
        bad, PREFIX + "Invalid update version 21 for feature metadata.version. The controller does not support "
                      "the given upgrade type.")
    # "disable": level 0 is outside metadata.version's range
    assert _outcome(_update(node.port, 2, [("metadata.version", 0, 3)])) == (
        bad, PREFIX + "Invalid update version 0 for feature metadata.version. Local controller 1 only supports "
                      "versions 7-33")


def _finalized(port: int, expect: dict[str, int] | None = None) -> dict[str, int]:
    """The finalized features ApiVersions reports; with ``expect``, polled until they are that
    (the committed state is replayed behind the commit, as a Kafka controller publishes it)."""
    deadline = time.monotonic() + 10
    while True:
        _, r = call(port, API_VERSIONS, 4, w.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        got = {f.name: f.max_version_level for f in r.finalized_features}
        if expect is None or got == expect or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_update_features_finalizes_what_kafka_would(node: NodeProcess) -> None:
    """Kafka 4.4's FeatureControlManager: a change that passes its checks is written (a
    FeatureLevelRecord, committed before the answer) and ApiVersions reports it; a dry run
    changes nothing; dependencies, downgrade rules and their messages are Kafka's."""
    port = node.port
    assert _outcome(_update(port, 2, [("group.version", 1, 1)], validate_only=True)) == (0, None)
    assert "group.version" not in _finalized(port)
    assert _outcome(_update(port, 2, [("group.version", 1, 1), ("transaction.version", 2, 1)])) == (0, None)
    assert _finalized(port, {"metadata.version": 21, "group.version": 1, "transaction.version": 2}) == {"metadata.version": 21, "group.version": 1, "transaction.version": 2}
    # Feature.validateVersion: ELR 1 needs metadata.version 4.0-IV1 (23), judged on the levels the
    # request would leave -- with metadata.version 23 in the same request it passes (dry run)
    assert _outcome(_update(port, 2, [("eligible.leader.replicas.version", 1, 1)])) == (
        Errors.INVALID_UPDATE_VERSION,
        PREFIX + "Invalid update version 1 for feature eligible.leader.replicas.version. "
                 "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23")
    assert _outcome(_update(port, 2, [("eligible.leader.replicas.version", 1, 1), ("metadata.version", 23, 1)],
                            validate_only=True)) == (0, None)
    assert _outcome(_update(port, 2, [("group.version", 2, 1)])) == (
        Errors.INVALID_UPDATE_VERSION,
        PREFIX + "Invalid update version 2 for feature group.version. Local controller 1 only supports versions 0-1")
    # disable (level 0, a downgrade type): the feature is no longer listed
    assert _outcome(_update(port, 2, [("group.version", 0, 2), ("transaction.version", 0, 3)])) == (0, None)
    assert _finalized(port, {"metadata.version": 21}) == {"metadata.version": 21}
    # metadata.version: a downgrade across a level that changed the metadata is refused, safe or
    # unsafe; 3.9-IV0 to 3.8-IV0 changed nothing and is made, and back
    assert _outcome(_update(port, 2, [("metadata.version", 14, 2)])) == (
        Errors.INVALID_UPDATE_VERSION,
        PREFIX + "Unsupported metadata.version downgrade from 21 to 14. Refusing to perform the requested "
                 "downgrade because it might delete metadata information.")
    assert _outcome(_update(port, 2, [("metadata.version", 14, 3)])) == (
        Errors.INVALID_UPDATE_VERSION,
        PREFIX + "Unsupported metadata.version downgrade from 21 to 14. Unsafe metadata downgrade is not "
                 "supported in this version.")
    assert _outcome(_update(port, 2, [("metadata.version", 20, 2)])) == (0, None)
    assert _finalized(port, {"metadata.version": 20}) == {"metadata.version": 20}
    assert _outcome(_update(port, 2, [("metadata.version", 21, 1)])) == (0, None)
    assert _finalized(port, {"metadata.version": 21}) == {"metadata.version": 21}
    # kraft.version: the raft's; a downgrade is refused as Kafka refuses it
    assert _outcome(_update(port, 2, [("kraft.version", 0, 2)])) == (0, None)


def test_update_features_v0_allow_downgrade_is_a_safe_downgrade(node: NodeProcess) -> None:
    r = _update(node.port, 0, [("metadata.version", 14, 2)])
    assert "Refusing to perform the requested downgrade" in (r.error_message or "")  # a safe downgrade
    r = _update(node.port, 0, [("metadata.version", 14, 1)])
    assert "without setting the upgrade type" in (r.error_message or "")


def test_metadata_v0_empty_topic_list_means_all_topics(node: NodeProcess) -> None:
    """v0 cannot send a null list: an empty one asks for every topic (MetadataRequest.isAllTopics)."""
    for version, topics, names in ((0, [], ["__cluster_metadata"]), (1, [], []), (1, None, ["__cluster_metadata"])):
        _, resp = call(node.port, METADATA, version, w.MetadataRequest(
            topics=topics, allow_auto_topic_creation=True))
        assert isinstance(resp, w.MetadataResponse)
        assert [t.name for t in resp.topics] == names, version


def test_metadata_authorized_operations_when_asked(node: NodeProcess) -> None:
    """KafkaApis.handleTopicMetadataRequest without an authorizer: every supported operation
    (AclEntry.supportedOperations) when asked -- cluster ones at v8-10 only -- and the schema
    default otherwise. The Java Admin's describeTopics(includeAuthorizedOperations) reads
    them (tests/interop/test_java_admin.py)."""
    from kraftnode.server.handlers import CLUSTER_AUTHORIZED_OPERATIONS, TOPIC_AUTHORIZED_OPERATIONS

    assert (CLUSTER_AUTHORIZED_OPERATIONS, TOPIC_AUTHORIZED_OPERATIONS) == (8096, 3576)
    T = w.MetadataRequest.MetadataRequestTopic
    for version, asked, cluster_ops, topic_ops in ((8, True, 8096, 3576), (10, True, 8096, 3576),
                                                    (12, True, -2147483648, 3576),
                                                    (8, False, -2147483648, -2147483648)):
        _, resp = call(node.port, METADATA, version, w.MetadataRequest(
            topics=[T(name="__cluster_metadata"), T(name="other")],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=asked and version <= 10,
            include_topic_authorized_operations=asked))
        assert isinstance(resp, w.MetadataResponse)
        if version <= 10:
            assert resp.cluster_authorized_operations == cluster_ops
        assert [t.topic_authorized_operations for t in resp.topics] == [topic_ops, topic_ops]


def test_metadata_by_topic_id_ignores_the_names(node: NodeProcess) -> None:
    """KafkaApis.handleTopicMetadataRequest: a v12+ request naming any topic id is answered
    by its ids alone, once each. Java's KIP-848 consumer resolves its assigned topic ids so,
    leaving each name "" (the field's default): that was INVALID_TOPIC_EXCEPTION for "" and a
    Kafka 4.4 consumer of a regex subscription (SubscriptionPattern) never read its
    assignment (tests/interop/test_java44_clients.py)."""
    import uuid

    from kraftnode.vocabulary import METADATA_TOPIC_ID

    T = w.MetadataRequest.MetadataRequestTopic
    other = uuid.UUID(int=7)
    _, resp = call(node.port, METADATA, 12, w.MetadataRequest(
        topics=[T(name="", topic_id=METADATA_TOPIC_ID), T(name="", topic_id=other),
                T(name="", topic_id=METADATA_TOPIC_ID)], allow_auto_topic_creation=False))
    assert isinstance(resp, w.MetadataResponse)
    assert [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in resp.topics] == [
        (0, "__cluster_metadata", METADATA_TOPIC_ID, 1), (Errors.UNKNOWN_TOPIC_ID, None, other, 0)]
    # by name (no id) as before: "" is not a valid topic name
    _, resp = call(node.port, METADATA, 12, w.MetadataRequest(topics=[T(name="")], allow_auto_topic_creation=False))
    assert isinstance(resp, w.MetadataResponse)
    assert [(t.error_code, t.name) for t in resp.topics] == [(Errors.INVALID_TOPIC_EXCEPTION, "")]
