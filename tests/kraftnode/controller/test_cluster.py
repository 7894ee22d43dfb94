"""Broker registration, heartbeats, fencing and controlled shutdown (kraftnode.controller.cluster),
checked record by record against what Kafka 3.9's ClusterControlManager and
ReplicationControlManager write, with Kafka's error codes and messages."""

from __future__ import annotations

import pytest

from kraftnode.controller import ApiError
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
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
    assert (e.value.code, e.value.message) == (Errors.DUPLICATE_BROKER_REGISTRATION,
                                                "Another broker is registered with that broker id.")
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


def test_a_v2_heartbeats_cordoned_log_dirs_are_kept_and_write_nothing() -> None:
    """BrokerHeartbeat v2 (KIP-1066): CordonedLogDirs are kept with the broker's heartbeat
    state (for placement, issue 37); at metadata.version 3.9 Kafka 4.4 writes no record for
    them (isCordonedLogDirsSupported), so neither do we; null (before RECOVERY) keeps the last."""
    from kraftnode.protocol import generated as w
    h = Harness()
    h.active_brokers(7)
    reg = h.view.broker(7)
    assert reg is not None and reg.log_dirs
    q = w.BrokerHeartbeatRequest(broker_id=7, broker_epoch=reg.broker_epoch, current_metadata_offset=h.offset,
                                 want_fence=False, want_shut_down=False, offline_log_dirs=[],
                                 cordoned_log_dirs=[reg.log_dirs[0]])
    result = h.ctl.broker_heartbeat(q, h.now)
    assert result.records == []
    assert h.ctl.heartbeats.brokers[7].cordoned_log_dirs == [reg.log_dirs[0]]
    q.cordoned_log_dirs = None
    h.ctl.broker_heartbeat(q, h.now)
    assert h.ctl.heartbeats.brokers[7].cordoned_log_dirs == [reg.log_dirs[0]]
    assert w.BrokerHeartbeatRequest().cordoned_log_dirs is None  # what v0-1 decode to


def test_unregister_controller_is_refused_below_a_4x_metadata_version() -> None:
    """UnregisterController (Kafka 4.x): ClusterControlManager.unregisterController refuses it
    at a metadata.version without controller unregistration -- every level kraftnode finalizes
    (3.9-IV0 at most) -- with Kafka's message, and writes nothing."""
    h = Harness()
    for controller_id in (1, 42):  # registered or not: the version is checked first
        with pytest.raises(ApiError) as e:
            h.ctl.unregister_controller(controller_id, h.now)
        assert (e.value.code, e.value.message) == (
            Errors.UNSUPPORTED_VERSION, "The current MetadataVersion is too old to support controller unregistration.")


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
