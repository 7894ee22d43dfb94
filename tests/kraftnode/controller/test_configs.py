"""Dynamic configs and client quotas (kraftnode.controller.configs, quotas): records, validation
and Kafka's messages."""

from __future__ import annotations

from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import ClientQuotaRecord, ConfigRecord
from tests.kraftnode.controller.support import Harness

TOPIC, BROKER, CLIENT_METRICS, GROUP = 2, 4, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def harness() -> Harness:
    h = Harness()
    h.active_brokers(1, 2)
    h.commit(h.create_topic("t", 1, 1, configs={"cleanup.policy": "delete"}))
    return h


def cfg(rtype: int, name: str, key: str, value: str | None) -> tuple[ConfigRecord, int]:
    return ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=value), 0


def test_incremental_alter_configs_set_delete_append_subtract() -> None:
    h = harness()
    result = h.ctl.incremental_alter_configs({(TOPIC, "t"): {
        "retention.ms": (SET, "1000"), "cleanup.policy": (APPEND, "compact")}}, False, h.now)
    assert result.atomic and result.response[(TOPIC, "t")].code == 0
    assert result.records == [cfg(TOPIC, "t", "retention.ms", "1000"), cfg(TOPIC, "t", "cleanup.policy", "delete,compact")]
    h.commit(result)
    result = h.ctl.incremental_alter_configs({(TOPIC, "t"): {
        "retention.ms": (DELETE, None), "cleanup.policy": (SUBTRACT, "delete")}}, False, h.now)
    assert result.records == [cfg(TOPIC, "t", "retention.ms", None), cfg(TOPIC, "t", "cleanup.policy", "compact")]
    h.commit(result)
    assert h.view.topic_config("t") == {"cleanup.policy": "compact"}
    # an unchanged topic value writes nothing
    assert h.ctl.incremental_alter_configs({(TOPIC, "t"): {"cleanup.policy": (SET, "compact")}}, False,
                                           h.now).records == []


def test_broker_configs_are_written_even_unchanged_and_only_checked_by_name() -> None:
    h = harness()
    for _ in range(2):
        result = h.ctl.incremental_alter_configs({(BROKER, "1"): {"log.cleaner.threads": (SET, "2")}}, False, h.now)
        assert result.records == [cfg(BROKER, "1", "log.cleaner.threads", "2")]
        h.commit(result)
    result = h.ctl.incremental_alter_configs({(BROKER, ""): {"message.max.bytes": (SET, "5000")},
                                              (BROKER, "x"): {"a": (SET, "1")},
                                              (BROKER, "9"): {"a": (SET, "1")}}, False, h.now)
    errors = {r: (e.code, e.message) for r, e in result.response.items()}
    assert errors == {(BROKER, ""): (0, None),
                      (BROKER, "x"): (Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
                      (BROKER, "9"): (Errors.BROKER_ID_NOT_REGISTERED, "No node with id 9 found.")}
    assert result.records == [cfg(BROKER, "", "message.max.bytes", "5000")]


def test_topic_configs_are_validated_on_their_result() -> None:
    h = harness()
    result = h.ctl.incremental_alter_configs({
        (TOPIC, "t"): {"segment.bytes": (SET, "10")},
        (TOPIC, "missing"): {"retention.ms": (SET, "1")},
        (TOPIC, ""): {"retention.ms": (SET, "1")},
        (TOPIC, "t2"): {"retention.ms": (APPEND, "1")}}, False, h.now)
    errors = {r: (e.code, e.message) for r, e in result.response.items()}
    assert errors == {
        (TOPIC, "t"): (Errors.INVALID_CONFIG, "Invalid value 10 for configuration segment.bytes: Value must be at least 14"),
        (TOPIC, "missing"): (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
        (TOPIC, ""): (Errors.INVALID_REQUEST, "Default topic resources are not allowed."),
        (TOPIC, "t2"): (Errors.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")}
    assert result.records == []


def test_legacy_alter_configs_replaces_the_whole_config_and_validate_only_writes_nothing() -> None:
    h = harness()
    result = h.ctl.legacy_alter_configs({(TOPIC, "t"): {"retention.ms": "5"}}, False, h.now)
    assert result.records == [cfg(TOPIC, "t", "retention.ms", "5"), cfg(TOPIC, "t", "cleanup.policy", None)]
    assert h.ctl.legacy_alter_configs({(TOPIC, "t"): {"retention.ms": "5"}}, True, h.now).records == []


def test_client_quotas() -> None:
    h = harness()
    alice = (("user", "alice"),)
    default_client = (("client-id", None),)
    result = h.ctl.alter_client_quotas([(alice, [("producer_byte_rate", 1024.0)]),
                                        (default_client, [("request_percentage", 50.5)])], False, h.now)
    C = ClientQuotaRecord
    assert result.records == [
        (C(entity=[C.EntityData(entity_type="user", entity_name="alice")], key="producer_byte_rate", value=1024.0,
           remove=False), 0),
        (C(entity=[C.EntityData(entity_type="client-id", entity_name=None)], key="request_percentage", value=50.5,
           remove=False), 0)]
    h.commit(result)
    result = h.ctl.alter_client_quotas([(alice, [("producer_byte_rate", None)])], False, h.now)
    assert result.records == [(C(entity=[C.EntityData(entity_type="user", entity_name="alice")],
                                 key="producer_byte_rate", value=0.0, remove=True), 0)]
    bad = h.ctl.alter_client_quotas([
        ((("user", "bob"),), [("producer_byte_rate", 1.5)]),
        ((("user", "bob"), ("ip", "1.2.3.4")), [("producer_byte_rate", 1.0)]),
        ((("group", "g"),), [("x", 1.0)]),
        ((("user", "carol"),), [("nonsense", 1.0)]),
        ((("user", "dave"),), [("consumer_byte_rate", -1.0)])], False, h.now).response
    assert [(e.code, e.message) for e in bad.values()] == [
        (Errors.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value."),
        (Errors.INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        (Errors.INVALID_REQUEST, "Unhandled client quota entity type: group"),
        (Errors.INVALID_REQUEST, "Invalid configuration key nonsense"),
        (Errors.INVALID_REQUEST, "Quota consumer_byte_rate must be greater than 0")]


def test_group_configs_as_kafka_4_4s_controller_validates_them() -> None:
    """GROUP resources (Kafka 4.x, ``kafka-configs.sh --entity-type groups``): any group name but
    the default "", no existence check (groups are created by their members), GroupConfig's names
    and value types with Kafka's messages; SET/DELETE write ConfigRecords of type 32."""
    h = harness()
    result = h.ctl.incremental_alter_configs({
        (GROUP, "share44"): {"share.auto.offset.reset": (SET, "earliest"), "share.isolation.level":
                             (SET, "read_committed")},
        (GROUP, ""): {"share.auto.offset.reset": (SET, "earliest")},
        (GROUP, "g2"): {"share.auto.offest.reset": (SET, "earliest")},
        (GROUP, "g3"): {"consumer.session.timeout.ms": (SET, "soon")},
        (GROUP, "g4"): {"share.auto.offset.reset": (SET, "never")},
        (GROUP, "g5"): {"share.isolation.level": (SET, "dirty")},
        (GROUP, "g6"): {"errors.deadletterqueue.topic.name": (SET, "__dlq")},
    }, False, h.now)
    errors = {r[1]: (e.code, e.message) for r, e in result.response.items()}
    assert errors == {
        "share44": (0, None),
        "": (Errors.INVALID_REQUEST, "Default group resources are not allowed."),
        "g2": (Errors.INVALID_CONFIG, "Unknown group config name: share.auto.offest.reset"),
        "g3": (Errors.INVALID_CONFIG, "Invalid value soon for configuration consumer.session.timeout.ms: "
                                      "Not a number of type INT"),
        "g4": (Errors.INVALID_CONFIG, "Invalid value never for configuration share.auto.offset.reset: Invalid value "
                                      "`never` for configuration share.auto.offset.reset. The value must be either "
                                      "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
        "g5": (Errors.INVALID_CONFIG, "Invalid value dirty for configuration share.isolation.level: String must "
                                      "be one of: read_committed, read_uncommitted"),
        "g6": (Errors.INVALID_CONFIG, "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
    }
    assert result.records == [cfg(GROUP, "share44", "share.auto.offset.reset", "earliest"),
                              cfg(GROUP, "share44", "share.isolation.level", "read_committed")]
    h.commit(result)
    assert h.view.config(GROUP, "share44") == {"share.auto.offset.reset": "earliest",
                                               "share.isolation.level": "read_committed"}
    result = h.ctl.incremental_alter_configs({(GROUP, "share44"): {"share.isolation.level": (DELETE, None)}},
                                             False, h.now)
    assert result.records == [cfg(GROUP, "share44", "share.isolation.level", None)]


def test_cordoned_log_dirs_need_4_3_and_a_subset_unless_a_broker_forwards_them() -> None:
    """KIP-1066's checks of a broker's cordoned.log.dirs (ConfigurationControlManager, Kafka 4.4):
    refused below metadata.version 4.3-IV0; sent to the controller directly, a new value must be a
    subset of the current one (a forwarding broker checked its own directories)."""
    key = "cordoned.log.dirs"
    old = Harness(mv=21)
    old.active_brokers(1)
    result = old.ctl.incremental_alter_configs({(BROKER, "1"): {key: (SET, "/d1")}}, False, old.now, True)
    assert (result.response[(BROKER, "1")].code, result.response[(BROKER, "1")].message) == (
        Errors.INVALID_CONFIG, "The cordoned.log.dirs configuration value cannot be set because it requires "
        "metadata.version >= 4.3-IV0")
    assert result.records == []
    h = Harness(mv=33)
    h.active_brokers(1)
    forwarded = h.ctl.incremental_alter_configs({(BROKER, "1"): {key: (SET, "/d1,/d2")}}, False, h.now, True)
    assert forwarded.response[(BROKER, "1")].code == 0
    h.commit(forwarded)
    direct = h.ctl.incremental_alter_configs({(BROKER, "1"): {key: (SET, "/d1, /d3")}}, False, h.now)
    assert (direct.response[(BROKER, "1")].code, direct.response[(BROKER, "1")].message) == (
        Errors.INVALID_CONFIG, "When updating cordoned.log.dirs via controllers,  the new value must be a subset "
        "of the current configuration value.")
    for value in ("/d2", " ", None):
        ok = h.ctl.incremental_alter_configs({(BROKER, "1"): {key: (DELETE if value is None else SET, value)}},
                                             False, h.now)
        assert ok.response[(BROKER, "1")].code == 0, value


def test_client_metrics_subscriptions_as_kafka_4_4s_controller_validates_them() -> None:
    """CLIENT_METRICS resources (KIP-714, ``kafka-client-metrics.sh``): ClientMetricsConfigs.validate's
    names, interval range and match selectors, with Kafka's codes and messages."""
    h = harness()
    result = h.ctl.incremental_alter_configs({
        (CLIENT_METRICS, "sub1"): {"metrics": (SET, "org.apache.kafka.producer."), "interval.ms": (SET, "1000"),
                                   "match": (SET, "client_id=app-.*,client_software_name=apache-kafka-java")},
        (CLIENT_METRICS, ""): {"interval.ms": (SET, "1000")},
        (CLIENT_METRICS, "s2"): {"intervals": (SET, "1000")},
        (CLIENT_METRICS, "s3"): {"interval.ms": (SET, "50")},
        (CLIENT_METRICS, "s4"): {"match": (SET, "client_idx=a")},
        (CLIENT_METRICS, "s5"): {"match": (SET, "client_id=")},
    }, False, h.now)
    errors = {r[1]: (e.code, e.message) for r, e in result.response.items()}
    assert errors == {
        "sub1": (0, None),
        "": (Errors.INVALID_REQUEST, "Subscription name can't be empty"),
        "s2": (Errors.INVALID_CONFIG, "Unknown client metrics configuration: intervals"),
        "s3": (Errors.INVALID_REQUEST, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 "
                                       "(1 hour)"),
        "s4": (Errors.INVALID_CONFIG, "Illegal client matching pattern: client_idx=a"),
        "s5": (Errors.INVALID_CONFIG, "Illegal client matching pattern: client_id="),
    }
    assert [(r.resource_type, r.resource_name, r.name) for r, _v in result.records] == [
        (CLIENT_METRICS, "sub1", "metrics"), (CLIENT_METRICS, "sub1", "interval.ms"), (CLIENT_METRICS, "sub1", "match")]
