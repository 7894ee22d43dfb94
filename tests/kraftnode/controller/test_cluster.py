"""Broker registration, heartbeats, fencing and controlled shutdown (kraftnode.controller.cluster),
checked record by record against what Kafka 3.9's ClusterControlManager and
ReplicationControlManager write, with Kafka's error codes and messages."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kraftnode.controller import ApiError, ControllerResult
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    UnregisterBrokerRecord,
)
from tests.kraftnode.controller.support import CLUSTER, Harness, dir_of, incarnation


def test_a_new_broker_is_registered_fenced_with_the_offset_as_its_epoch() -> None:
    h = Harness()
    result = h.ctl.register_broker(h.registration(101, rack="r1"), h.offset, 0, h.now)
    assert result.atomic and result.response == h.offset == 1
    [(rec, version)] = result.records
    assert version == 3  # metadata.version 3.9-IV0: RegisterBrokerRecord v3 (log dirs)
    R = RegisterBrokerRecord
    assert rec == R(broker_id=101, is_migrating_zk_broker=False, incarnation_id=incarnation(101), broker_epoch=1,
                    end_points=[R.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9101, security_protocol=0)],
                    features=[R.BrokerFeature(name="metadata.version", min_supported_version=1, max_supported_version=21),
                              R.BrokerFeature(name="kraft.version", min_supported_version=0, max_supported_version=1)],
                    rack="r1", fenced=True, in_controlled_shutdown=False, log_dirs=[dir_of(101)])


def test_re_registering_the_same_incarnation_keeps_the_epoch_and_the_state() -> None:
    h = Harness()
    h.active_brokers(101)
    epoch = h.view.broker(101).broker_epoch  # type: ignore[union-attr]
    result = h.ctl.register_broker(h.registration(101), h.offset, 0, h.now)
    rec = result.records[0][0]
    assert (rec.broker_epoch, rec.fenced, rec.in_controlled_shutdown) == (epoch, False, False)
    assert result.response == epoch


def test_another_incarnation_is_refused_while_the_session_lives_and_accepted_after() -> None:
    h = Harness(session_timeout_ms=9000)
    h.active_brokers(101)
    with pytest.raises(ApiError) as e:
        h.ctl.register_broker(h.registration(101, n=2), h.offset, 0, h.now)
    assert (e.value.code, e.value.message) == (  # Kafka 4.4's message
        Errors.DUPLICATE_BROKER_REGISTRATION, "Another broker is registered with that broker id. If the broker was "
        "recently restarted this should self-resolve once the heartbeat manager expires the broker's session.")
    h.now += 9001
    epoch = h.register(101, n=2)
    assert epoch == h.offset - 1 and h.view.broker(101).fenced  # type: ignore[union-attr]


@pytest.mark.parametrize("change, code, message", [
    (lambda q: setattr(q, "cluster_id", "other"), Errors.INCONSISTENT_CLUSTER_ID,
     f"Expected cluster ID {CLUSTER}, but got cluster ID other"),
    (lambda q: setattr(q, "log_dirs", []), Errors.INVALID_REGISTRATION, "No directories specified in request"),
    (lambda q: setattr(q, "log_dirs", [dir_of(5), dir_of(5)]), Errors.INVALID_REGISTRATION,
     "Duplicate directory ID in request"),
    (lambda q: setattr(q.features[0], "max_supported_version", 20), Errors.UNSUPPORTED_VERSION,
     "Unable to register because the broker does not support finalized version 21 of metadata.version. "
     "The broker wants a version between 1 and 20, inclusive."),
])
def test_registrations_kafka_refuses(change: object, code: int, message: str) -> None:
    h = Harness()
    q = h.registration(101)
    change(q)  # type: ignore[operator]
    with pytest.raises(ApiError) as e:
        h.ctl.register_broker(q, h.offset, 0, h.now)
    assert (e.value.code, e.value.message) == (code, message)


def test_a_directory_of_another_broker_is_refused() -> None:
    h = Harness()
    h.register(101)
    q = h.registration(102)
    q.log_dirs = [dir_of(101)]
    with pytest.raises(ApiError) as e:
        h.ctl.register_broker(q, h.offset, 0, h.now)
    assert e.value.message == f"Broker 101 is already registered with directory {dir_of(101)}"


def test_a_fenced_broker_is_unfenced_once_it_has_replayed_its_registration() -> None:
    h = Harness()
    h.register(101)
    register_offset = h.view.register_offsets[101]
    result = h.heartbeat(101, offset=register_offset - 1)
    assert result.records == []
    assert (result.response.is_caught_up, result.response.is_fenced) == (False, True)
    result = h.heartbeat(101, offset=register_offset)
    assert result.records == [(BrokerRegistrationChangeRecord(broker_id=101, broker_epoch=register_offset,
                                                              fenced=-1), 0)]
    assert (result.response.is_caught_up, result.response.is_fenced, result.response.should_shut_down) == \
        (True, False, False)


def test_a_heartbeat_before_registration_or_with_another_epoch_is_stale() -> None:
    h = Harness()
    from kraftnode.protocol import generated as w
    q = w.BrokerHeartbeatRequest(broker_id=7, broker_epoch=3, current_metadata_offset=0, want_fence=False,
                                 want_shut_down=False, offline_log_dirs=[])
    with pytest.raises(ApiError) as e:
        h.ctl.broker_heartbeat(q, h.now)
    assert (e.value.code, e.value.message) == (Errors.STALE_BROKER_EPOCH,
                                                "Receive a heartbeat from broker 7 before registration")
    h.register(7)
    with pytest.raises(ApiError) as e:
        h.ctl.broker_heartbeat(q, h.now)
    assert e.value.message == "Expected broker epoch 1, but got broker epoch 3"


def cordon(h: Harness, broker: int, dirs: list[uuid.UUID] | None) -> ControllerResult[Any]:
    """A BrokerHeartbeat v2 of ``broker`` with CordonedLogDirs ``dirs``, committed."""
    reg = h.view.broker(broker)
    assert reg is not None
    q = w.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=reg.broker_epoch, current_metadata_offset=h.offset,
                                 want_fence=False, want_shut_down=False, offline_log_dirs=[],
                                 cordoned_log_dirs=dirs)
    result = h.ctl.broker_heartbeat(q, h.now)
    h.commit(result)
    return result


def test_cordoned_log_dirs_write_nothing_below_4_3() -> None:
    """BrokerHeartbeat v2's CordonedLogDirs (KIP-1066) below metadata.version 4.3-IV0: Kafka 4.4's
    controller ignores them (isCordonedLogDirsSupported), so placement uses the broker still."""
    h = Harness(mv=21)
    h.active_brokers(7)
    assert cordon(h, 7, [dir_of(7)]).records == []
    assert h.view.broker(7).cordoned_log_dirs is None  # type: ignore[union-attr]
    assert h.commit(h.create_topic("t", 1, 1)).topics[0].error_code == 0


def test_cordoned_log_dirs_are_written_into_the_registration_at_4_3() -> None:
    """handleDirectoriesCordoned: a registration has no cordoned directories (null) until the
    broker's first non-null list -- written even when empty, as BrokerRegistrationChangeRecord
    v3; then only a list that differs as a set; null (before the broker's RECOVERY) says nothing."""
    h = Harness(mv=33)
    h.active_brokers(7)
    other = uuid.UUID(int=(7 << 64) | 9)
    assert cordon(h, 7, None).records == []
    first = cordon(h, 7, [])
    assert [(type(m).__name__, v, m.cordoned_log_dirs, m.fenced, m.log_dirs) for m, v in first.records] == [
        ("BrokerRegistrationChangeRecord", 3, [], 0, [])]
    assert h.view.broker(7).cordoned_log_dirs == []  # type: ignore[union-attr]
    assert cordon(h, 7, []).records == []
    changed = cordon(h, 7, [dir_of(7), other])
    assert [m.cordoned_log_dirs for m, _v in changed.records] == [[dir_of(7), other]]
    assert cordon(h, 7, [other, dir_of(7)]).records == []  # the same set
    assert cordon(h, 7, None).records == []
    assert h.view.broker(7).cordoned_log_dirs == [dir_of(7), other]  # type: ignore[union-attr]
    # the registration as a snapshot writes it: RegisterBrokerRecord v4 keeps the cordoned dirs
    assert h.view.image.brokers[7][1] == 4


def test_a_broker_with_every_log_dir_cordoned_gets_no_new_replicas() -> None:
    """ClusterControlManager.usableBrokers (Kafka 4.4): a broker whose every directory is cordoned
    is left out of placement -- of new topics and new partitions -- and a manual assignment naming
    it is refused with Kafka's message; uncordoned, it is used again."""
    h = Harness(mv=33)
    h.active_brokers(1, 2, 3)
    cordon(h, 2, [dir_of(2)])
    made = h.commit(h.create_topic("spread", 6, 2))
    assert made.topics[0].error_code == 0
    replicas = {b for r in h.view.partitions(h.topic("spread")).values() for b in r.replicas}
    assert replicas == {1, 3}
    refused = h.commit(h.create_topic("three", 1, 3)).topics[0]
    assert (refused.error_code, refused.error_message) == (
        Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 time(s): The target replication "
        "factor of 3 cannot be reached because only 2 broker(s) are registered.")
    manual = h.commit(h.create_topic("manual", assignments={0: [1, 2]})).topics[0]
    assert (manual.error_code, manual.error_message) == (
        Errors.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 2, but all its log directories are cordoned.")
    for b in (1, 3):
        cordon(h, b, [dir_of(b)])
    none = h.commit(h.create_topic("none", 1, 1)).topics[0]
    assert (none.error_code, none.error_message) == (
        Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 1 time(s): All brokers are currently "
        "fenced, or have all their log directories cordoned.")
    cordon(h, 2, [])
    assert h.commit(h.create_topic("again", 1, 1)).topics[0].error_code == 0
    assert [r.replicas for r in h.view.partitions(h.topic("again")).values()] == [[2]]


def test_unregister_controller_is_refused_below_4_4_iv2() -> None:
    """UnregisterController (Kafka 4.4): ClusterControlManager.unregisterController refuses it at
    a metadata.version without controller unregistration (below 4.4-IV2) with Kafka's message,
    before looking the controller up, and writes nothing."""
    h = Harness(mv=32)
    for controller_id in (1, 42):
        with pytest.raises(ApiError) as e:
            h.ctl.unregister_controller(controller_id, h.now)
        assert (e.value.code, e.value.message) == (
            Errors.UNSUPPORTED_VERSION, "The current MetadataVersion is too old to support controller unregistration.")


def test_unregister_controller_writes_an_unregister_controller_record_at_4_4_iv2() -> None:
    """At 4.4-IV2: a registered controller's registration is removed by an UnregisterControllerRecord
    (v0, atomically); an id without a registration is CONTROLLER_ID_NOT_REGISTERED."""
    h = Harness(mv=33)
    C = RegisterControllerRecord
    h.apply([(C(controller_id=2, incarnation_id=uuid.UUID(int=5 << 64), zk_migration_ready=False,
                end_points=[C.ControllerEndpoint(name="CONTROLLER", host="127.0.0.1", port=9093, security_protocol=0)],
                features=[]), 0)])
    assert 2 in h.view.controllers
    with pytest.raises(ApiError) as e:
        h.ctl.unregister_controller(3, h.now)
    assert (e.value.code, e.value.message) == (Errors.CONTROLLER_ID_NOT_REGISTERED,
                                                "Controller ID 3 is not currently registered.")
    result = h.ctl.unregister_controller(2, h.now)
    assert result.atomic and [(type(m).__name__, v, m.controller_id) for m, v in result.records] == [
        ("UnregisterControllerRecord", 0, 2)]
    h.commit(result)
    assert 2 not in h.view.controllers


def leaders_of(h: Harness, topic: str) -> dict[int, tuple[int, list[int]]]:
    return {p: (r.leader, list(r.isr)) for p, r in h.view.partitions(h.topic(topic)).items()}


def test_a_broker_whose_session_expires_is_fenced_leaves_every_isr_and_loses_its_leaderships() -> None:
    h = Harness(session_timeout_ms=9000)
    h.active_brokers(1, 2, 3)
    h.commit(h.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 2, 1]}))
    assert h.ctl.next_deadline_ms() == h.now + 500  # the NoOp timer comes first
    # brokers 2 and 3 keep heartbeating, 1 does not
    h.now += 5000
    for b in (2, 3):
        h.commit(h.heartbeat(b))
    h.now += 4001
    result = h.ctl.run_due(h.now, noop_allowed=False)
    assert result is not None
    tid = h.topic("t")
    assert result.records == [
        (PartitionChangeRecord(topic_id=tid, partition_id=0, leader=2, isr=[2, 3]), 1),
        (PartitionChangeRecord(topic_id=tid, partition_id=1, isr=[2, 3]), 1),
        (PartitionChangeRecord(topic_id=tid, partition_id=2, isr=[3, 2]), 1),
        (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=h.view.broker(1).broker_epoch, fenced=1), 0),  # type: ignore[union-attr]
    ]
    h.commit(result)
    assert leaders_of(h, "t") == {0: (2, [2, 3]), 1: (2, [2, 3]), 2: (3, [3, 2])}
    assert h.view.broker(1).fenced  # type: ignore[union-attr]
    # one broker per run: nothing else is stale
    assert all(not r.records for r in iter(lambda: h.ctl.run_due(h.now, noop_allowed=False), None))


def test_the_last_isr_member_stays_in_the_isr_without_a_leader_and_leads_again_when_unfenced() -> None:
    h = Harness()
    h.active_brokers(1, 2)
    h.commit(h.create_topic("t", assignments={0: [1]}))
    h.commit(h.heartbeat(1, want_fence=True))
    assert leaders_of(h, "t") == {0: (-1, [1])}   # an empty ISR is never written (no ELR in 3.9)
    result = h.heartbeat(1)
    tid = h.topic("t")
    assert result.records[1:] == [(PartitionChangeRecord(topic_id=tid, partition_id=0, leader=1), 1)]
    h.commit(result)
    assert leaders_of(h, "t") == {0: (1, [1])}


def test_controlled_shutdown_moves_leaderships_then_lets_the_broker_go() -> None:
    h = Harness()
    h.active_brokers(1, 2)
    h.commit(h.create_topic("t", assignments={0: [1, 2], 1: [2, 1]}))
    epoch = h.view.broker(1).broker_epoch  # type: ignore[union-attr]
    result = h.heartbeat(1, want_shut_down=True)
    tid = h.topic("t")
    assert result.records == [
        (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, in_controlled_shutdown=1), 1),
        (PartitionChangeRecord(topic_id=tid, partition_id=0, leader=2, isr=[2]), 1),
        (PartitionChangeRecord(topic_id=tid, partition_id=1, isr=[2]), 1),
    ]
    assert (result.response.in_controlled_shutdown, result.response.should_shut_down) == (True, False)
    h.commit(result)
    shutdown_offset = h.offset - 1
    # broker 2 has not yet replayed the change: 1 must wait
    h.commit(h.heartbeat(2, offset=shutdown_offset - 1))
    result = h.heartbeat(1, want_shut_down=True)
    assert (result.records, result.response.should_shut_down) == ([], False)
    h.commit(h.heartbeat(2, offset=shutdown_offset))
    result = h.heartbeat(1, want_shut_down=True)
    assert result.response.should_shut_down and result.response.is_fenced
    assert result.records == [(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=1), 0)]


def test_a_broker_without_leaderships_shuts_down_at_once() -> None:
    h = Harness()
    h.active_brokers(1, 2)
    result = h.heartbeat(1, want_shut_down=True)
    assert result.response.should_shut_down
    assert [type(m) for m, _v in result.records] == [BrokerRegistrationChangeRecord]


def test_unregistering_removes_the_broker_from_isrs_first() -> None:
    h = Harness()
    h.active_brokers(1, 2)
    h.commit(h.create_topic("t", assignments={0: [1, 2]}))
    epoch = h.view.broker(1).broker_epoch  # type: ignore[union-attr]
    result = h.ctl.unregister_broker(1, h.now)
    tid = h.topic("t")
    assert result.records == [(PartitionChangeRecord(topic_id=tid, partition_id=0, leader=2, isr=[2]), 1),
                              (UnregisterBrokerRecord(broker_id=1, broker_epoch=epoch), 0)]
    with pytest.raises(ApiError) as e:
        h.ctl.unregister_broker(9, h.now)
    assert (e.value.code, e.value.message) == (Errors.BROKER_ID_NOT_REGISTERED, "Broker ID 9 is not currently registered")


def test_a_new_controller_gives_every_registered_broker_a_fresh_session() -> None:
    h = Harness(session_timeout_ms=9000)
    h.active_brokers(1, 2)
    from kraftnode.controller import ControllerConfig, QuorumController
    later = h.now + 60_000
    ctl = QuorumController(ControllerConfig(cluster_id=CLUSTER, node_id=1, session_timeout_ms=9000), h.view, later)
    assert ctl.heartbeats.next_check_ms() == later + 9000
    assert all(not r.records for r in iter(lambda: ctl.run_due(later + 8999, noop_allowed=False), None))
    fenced = ctl.run_due(later + 9001, noop_allowed=False)
    assert fenced is not None and [type(m) for m, _v in fenced.records] == [BrokerRegistrationChangeRecord]
