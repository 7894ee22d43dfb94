"""Topics, partitions, leaders and ISRs (kraftnode.controller.replication): the records and the
answers Kafka 3.9's ReplicationControlManager gives for the same inputs."""

from __future__ import annotations

from typing import Any

import pytest

from kraftnode.controller import ApiError
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import (
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from tests.kraftnode.controller.support import Harness, dir_of


def harness(*brokers: int, **config: object) -> Harness:
    h = Harness(**config)  # type: ignore[arg-type]
    h.active_brokers(*(brokers or (1, 2, 3)))
    return h


def test_create_topics_writes_the_topic_its_configs_then_its_partitions_atomically() -> None:
    h = harness()
    result = h.create_topic("orders", 2, 3, configs={"retention.ms": "1000"})
    assert result.atomic
    tid = result.records[0][0].topic_id
    assert [type(m) for m, _v in result.records] == [TopicRecord, ConfigRecord, PartitionRecord, PartitionRecord]
    assert result.records[0] == (TopicRecord(name="orders", topic_id=tid), 0)
    assert result.records[1] == (ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms",
                                              value="1000"), 0)
    p0, v = result.records[2]
    assert v == 1 and p0.partition_id == 0 and p0.leader == p0.replicas[0] and p0.isr == p0.replicas
    assert (p0.leader_epoch, p0.partition_epoch, p0.leader_recovery_state) == (0, 0, 0)
    assert p0.directories == [dir_of(b) for b in p0.replicas]
    t = result.response.topics[0]
    assert (t.name, t.topic_id, t.error_code, t.num_partitions, t.replication_factor) == ("orders", tid, 0, 2, 3)
    configs = {c.name: (c.value, c.config_source) for c in t.configs}
    assert configs["retention.ms"] == ("1000", 1)          # DYNAMIC_TOPIC_CONFIG
    assert configs["min.insync.replicas"] == ("1", 5)     # DEFAULT_CONFIG
    assert [c.name for c in t.configs] == sorted(configs)


def test_defaults_come_from_the_controllers_configuration() -> None:
    h = harness(num_partitions=4, default_replication_factor=2,
                static_configs={"log.retention.hours": "2", "min.insync.replicas": "2"})
    result = h.create_topic("d")
    t = result.response.topics[0]
    assert (t.num_partitions, t.replication_factor) == (4, 2)
    configs = {c.name: (c.value, c.config_source) for c in t.configs}
    assert configs["retention.ms"] == ("7200000", 4) and configs["min.insync.replicas"] == ("2", 4)


def test_validate_only_writes_nothing_and_answers_the_same() -> None:
    h = harness()
    result = h.create_topic("v", 3, 2, validate_only=True)
    assert result.records == [] and result.response.topics[0].error_code == 0


@pytest.mark.parametrize("name, partitions, rf, configs, code, message", [
    ("bad name", 1, 1, None, Errors.INVALID_TOPIC_EXCEPTION,
     "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("..", 1, 1, None, Errors.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '..' is not allowed"),
    ("t", 0, 1, None, Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
    ("t", 1, 0, None, Errors.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    ("t", 1, 4, None, Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 4 time(s): The target "
     "replication factor of 4 cannot be reached because only 3 broker(s) are registered."),
    ("t", 1, 1, {"retention.ms": "soon"}, Errors.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ("t", 1, 1, {"no.such": "1"}, Errors.INVALID_CONFIG, "Unknown topic config name: no.such"),
    ("t", 1, 1, {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, Errors.INVALID_CONFIG,
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
])
def test_topics_kafka_refuses(name: str, partitions: int, rf: int, configs: dict[str, str] | None, code: int,
                              message: str) -> None:
    h = harness()
    result = h.create_topic(name, partitions, rf, configs=configs)
    t = result.response.topics[0]
    assert (t.error_code, t.error_message) == (code, message)
    assert result.records == []


def test_existing_and_colliding_names_are_refused() -> None:
    h = harness()
    h.commit(h.create_topic("a.b", 1, 1))
    t = h.create_topic("a.b", 1, 1).response.topics[0]
    assert (t.error_code, t.error_message) == (Errors.TOPIC_ALREADY_EXISTS, "Topic 'a.b' already exists.")
    t = h.create_topic("a_b", 1, 1).response.topics[0]
    assert (t.error_code, t.error_message) == (Errors.INVALID_TOPIC_EXCEPTION,
                                               "Topic 'a_b' collides with existing topic: a.b")


def test_manual_assignments_are_checked() -> None:
    h = harness()
    cases = [({0: [1, 1]}, "The manual partition assignment includes the broker 1 more than once."),
             ({0: [1, 9]}, "The manual partition assignment includes broker 9, but no such broker is registered."),
             ({0: [1, 2], 1: [3]}, "The manual partition assignment includes a partition with 1 replica(s), but "
                                   "this is not consistent with previous partitions, which have 2 replica(s)."),
             ({1: [1]}, "partitions should be a consecutive 0-based integer sequence")]
    for assignments, message in cases:
        t = h.create_topic("m", assignments=assignments).response.topics[0]
        assert (t.error_code, t.error_message) == (Errors.INVALID_REPLICA_ASSIGNMENT, message)


def test_fenced_brokers_are_left_out_of_the_isr_and_the_leadership() -> None:
    h = harness(1, 2, 3)
    h.commit(h.heartbeat(1, want_fence=True))
    result = h.create_topic("f", assignments={0: [1, 2, 3]})
    p = result.records[-1][0]
    assert (p.replicas, p.isr, p.leader) == ([1, 2, 3], [2, 3], 2)


def test_delete_topics_and_create_partitions() -> None:
    h = harness()
    h.commit(h.create_topic("g", 2, 2))
    tid = h.topic("g")
    P = w.CreatePartitionsRequest
    result = h.ctl.create_partitions([P.CreatePartitionsTopic(name="g", count=4, assignments=None)], False, h.now)
    assert [(type(m), m.partition_id) for m, _v in result.records] == [(PartitionRecord, 2), (PartitionRecord, 3)]
    assert all(len(m.replicas) == 2 for m, _v in result.records)
    h.commit(result)
    errors = h.ctl.create_partitions([P.CreatePartitionsTopic(name="g", count=3, assignments=None),
                                      P.CreatePartitionsTopic(name="nope", count=3, assignments=None)], False, h.now)
    assert [(r.error_code, r.error_message) for r in errors.response] == [
        (Errors.INVALID_PARTITIONS, "The topic g currently has 4 partition(s); 3 would not be an increase."),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, None)]  # thrown errors carry no generic message (fromThrowable)
    result = h.ctl.delete_topics([tid], h.now)
    assert result.records == [(RemoveTopicRecord(topic_id=tid), 0)]
    h.commit(result)
    assert h.view.topic_id("g") is None and h.view.topic_config("g") == {}
    assert h.ctl.delete_topics([tid], h.now).response[tid].code == Errors.UNKNOWN_TOPIC_ID


def alter_isr(h: Harness, topic: str, partition: int, leader: int, isr: list[int], *, version: int = 3,
              leader_epoch: int | None = None, partition_epoch: int | None = None) -> w.AlterPartitionResponse:
    part = h.view.partition(h.topic(topic), partition)
    assert part is not None
    A = w.AlterPartitionRequest
    q = A(broker_id=leader, broker_epoch=h.view.broker(leader).broker_epoch, topics=[A.TopicData(  # type: ignore[union-attr]
        topic_id=h.topic(topic), partitions=[A.PartitionData(
            partition_index=partition, leader_epoch=part.leader_epoch if leader_epoch is None else leader_epoch,
            new_isr=isr, new_isr_with_epochs=[A.BrokerState(broker_id=b, broker_epoch=-1) for b in isr],
            leader_recovery_state=0,
            partition_epoch=part.partition_epoch if partition_epoch is None else partition_epoch)])])
    result = h.ctl.alter_partition(q, version, h.now)
    h.commit(result)
    return result.response  # type: ignore[no-any-return]


def test_alter_partition_shrinks_and_expands_the_isr() -> None:
    h = harness()
    h.commit(h.create_topic("isr", assignments={0: [1, 2, 3]}))
    tid = h.topic("isr")
    r = alter_isr(h, "isr", 0, 1, [1, 2])
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.leader_id, p.isr, p.leader_epoch, p.partition_epoch) == (0, 1, [1, 2], 0, 1)
    assert h.view.partition(tid, 0).isr == [1, 2]  # type: ignore[union-attr]
    r = alter_isr(h, "isr", 0, 1, [1, 2, 3])
    assert r.topics[0].partitions[0].isr == [1, 2, 3] and r.topics[0].partitions[0].partition_epoch == 2


@pytest.mark.parametrize("kwargs, code", [
    ({"leader_epoch": 5}, Errors.NOT_CONTROLLER),             # the leader knows a newer state
    ({"partition_epoch": 0, "leader_epoch": -1}, Errors.FENCED_LEADER_EPOCH),
    ({"partition_epoch": 0}, Errors.INVALID_UPDATE_VERSION),
    ({"isr": [2, 3]}, Errors.INVALID_REQUEST),               # the leader must stay in the ISR
    ({"isr": [1, 4]}, Errors.INVALID_REQUEST),               # not a replica
    ({"leader": 2}, Errors.INVALID_REQUEST),                 # not the leader
])
def test_alter_partition_errors(kwargs: dict[str, object], code: int) -> None:
    h = harness(1, 2, 3, 4)
    h.commit(h.create_topic("e", assignments={0: [1, 2, 3]}))
    alter_isr(h, "e", 0, 1, [1, 2])
    args: dict[str, object] = {"leader": 1, "isr": [1, 2, 3], **kwargs}
    r = alter_isr(h, "e", 0, args.pop("leader"), args.pop("isr"), **args)  # type: ignore[arg-type]
    assert r.topics[0].partitions[0].error_code == code


def test_a_fenced_broker_may_not_join_the_isr() -> None:
    h = harness()
    h.commit(h.create_topic("i", assignments={0: [1, 2, 3]}))
    alter_isr(h, "i", 0, 1, [1, 2])
    h.commit(h.heartbeat(3, want_fence=True))
    assert alter_isr(h, "i", 0, 1, [1, 2, 3]).topics[0].partitions[0].error_code == Errors.INELIGIBLE_REPLICA
    # v2, the oldest version Kafka 4.x serves (v0-1 answered OPERATION_NOT_ATTEMPTED)
    assert alter_isr(h, "i", 0, 1, [1, 2, 3], version=2).topics[0].partitions[0].error_code == \
        Errors.INELIGIBLE_REPLICA


def test_a_reassignment_adds_then_completes_when_the_new_replicas_are_in_sync() -> None:
    h = harness(1, 2, 3)
    h.commit(h.create_topic("r", assignments={0: [1, 2]}))
    tid = h.topic("r")
    R = w.AlterPartitionReassignmentsRequest
    q = R(timeout_ms=1000, topics=[R.ReassignableTopic(name="r", partitions=[
        R.ReassignablePartition(partition_index=0, replicas=[3, 1])])])
    result = h.ctl.alter_partition_reassignments(q, h.now)
    assert result.records == [(PartitionChangeRecord(
        topic_id=tid, partition_id=0, replicas=[3, 1, 2], directories=[dir_of(3), dir_of(1), dir_of(2)],
        removing_replicas=[2], adding_replicas=[3]), 1)]
    h.commit(result)
    listed = h.ctl.replication.list_partition_reassignments(None)
    assert [(t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas) for p in t.partitions])
            for t in listed.topics] == [("r", [(0, [3, 1, 2], [3], [2])])]
    # the leader (1) reports 3 in sync: the reassignment completes, 2 leaves
    r = alter_isr(h, "r", 0, 1, [1, 2, 3])
    assert r.topics[0].partitions[0].error_code == 0
    p = h.view.partition(tid, 0)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader) == ([3, 1], [1, 3], [], [], 1)  # type: ignore[union-attr]
    assert h.ctl.replication.list_partition_reassignments(None).topics == []


def test_cancelling_a_reassignment_and_cancelling_none() -> None:
    h = harness(1, 2, 3)
    h.commit(h.create_topic("c", assignments={0: [1, 2]}))
    R = w.AlterPartitionReassignmentsRequest
    change = R(timeout_ms=1000, topics=[R.ReassignableTopic(name="c", partitions=[
        R.ReassignablePartition(partition_index=0, replicas=[3, 1])])])
    cancel = R(timeout_ms=1000, topics=[R.ReassignableTopic(name="c", partitions=[
        R.ReassignablePartition(partition_index=0, replicas=None)])])
    h.commit(h.ctl.alter_partition_reassignments(change, h.now))
    h.commit(h.ctl.alter_partition_reassignments(cancel, h.now))
    p = h.view.partition(h.topic("c"), 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([1, 2], [], [])  # type: ignore[union-attr]
    again = h.ctl.alter_partition_reassignments(cancel, h.now).response.responses[0].partitions[0]
    assert (again.error_code, again.error_message) == (Errors.NO_REASSIGNMENT_IN_PROGRESS, None)


def test_a_reassignment_may_be_refused_to_change_the_replication_factor() -> None:
    """AlterPartitionReassignments v1 (KIP-860): AllowReplicationFactorChange false refuses a
    target of another size (INVALID_REPLICATION_FACTOR, Kafka's message), judged against the
    target of a reassignment in progress; the flag is echoed; v0 (the default, true) allows it."""
    h = harness(1, 2, 3, 4)
    h.commit(h.create_topic("f", assignments={0: [1, 2], 1: [1, 2]}))
    R = w.AlterPartitionReassignmentsRequest

    def ask(allow: bool, **targets: list[int]) -> Any:
        return h.ctl.alter_partition_reassignments(R(
            timeout_ms=1000, allow_replication_factor_change=allow, topics=[R.ReassignableTopic(
                name="f", partitions=[R.ReassignablePartition(partition_index=int(p[1:]), replicas=r)
                                      for p, r in targets.items()])]), h.now)

    refused = ask(False, p0=[1, 2, 3], p1=[3, 4])
    assert refused.response.allow_replication_factor_change is False
    got = [(p.error_code, p.error_message) for p in refused.response.responses[0].partitions]
    assert got == [(Errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"),
                   (Errors.NONE, None)]
    h.commit(refused)  # partition 1 moves to [3, 4]: in progress, its target has 2 replicas
    again = ask(False, p1=[4, 1, 2]).response.responses[0].partitions[0]
    assert (again.error_code, again.error_message) == (
        Errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3")
    allowed = ask(True, p0=[1, 2, 3])
    assert allowed.response.allow_replication_factor_change is True
    assert allowed.response.responses[0].partitions[0].error_code == Errors.NONE
    assert R().allow_replication_factor_change is True  # what a v0 request decodes to


def test_preferred_elections() -> None:
    h = harness(1, 2)
    h.commit(h.create_topic("p", assignments={0: [1, 2], 1: [2, 1]}))
    h.commit(h.heartbeat(1, want_fence=True))
    h.commit(h.heartbeat(1))  # unfenced, but 2 still leads partition 0 (1 is not in its ISR)
    tid = h.topic("p")
    alter_isr(h, "p", 0, 2, [2, 1])
    E = w.ElectLeadersRequest
    q = E(election_type=0, timeout_ms=1000, topic_partitions=[E.TopicPartitions(topic="p", partitions=[0, 1, 7])])
    result = h.ctl.elect_leaders(q, h.now)
    assert result.records == [(PartitionChangeRecord(topic_id=tid, partition_id=0, leader=1), 1)]
    assert [(x.partition_id, x.error_code, x.error_message) for x in result.response.replica_election_results[0].partition_result] == [
        (0, 0, None), (1, Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        (7, Errors.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as p-7")]
    # the leader imbalance check does the same by itself
    assert h.ctl.replication.maybe_balance_partition_leaders().records == result.records


def test_unclean_election_only_where_the_topic_allows_it() -> None:
    h = harness(1, 2)
    h.commit(h.create_topic("u", assignments={0: [1, 2]}, configs={"unclean.leader.election.enable": "true"}))
    alter_isr(h, "u", 0, 1, [1])
    h.commit(h.heartbeat(1, want_fence=True))   # 1 was the only ISR member: an unclean election makes 2 lead
    p = h.view.partition(h.topic("u"), 0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, [2], 1)  # type: ignore[union-attr]


def test_producer_id_blocks_follow_each_other() -> None:
    h = harness()
    q = w.AllocateProducerIdsRequest(broker_id=1, broker_epoch=h.view.broker(1).broker_epoch)  # type: ignore[union-attr]
    first = h.ctl.allocate_producer_ids(q, h.now)
    assert first.records == [(ProducerIdsRecord(broker_id=1, broker_epoch=q.broker_epoch, next_producer_id=1000), 0)]
    assert (first.response.first_producer_id, first.response.size) == (0, 1000)
    h.commit(first)
    second = h.ctl.allocate_producer_ids(q, h.now)
    assert second.response.first_producer_id == 1000
    q.broker_epoch = 999
    with pytest.raises(ApiError) as e:
        h.ctl.allocate_producer_ids(q, h.now)
    assert e.value.code == Errors.STALE_BROKER_EPOCH


def test_a_directory_reported_offline_drops_its_replicas_and_the_broker_keeps_the_others() -> None:
    h = harness(1, 2)
    h.commit(h.create_topic("d", assignments={0: [1, 2], 1: [2, 1]}))
    tid = h.topic("d")
    reg = h.view.broker(1)
    assert reg is not None and reg.log_dirs == [dir_of(1)]
    q = w.BrokerHeartbeatRequest(broker_id=1, broker_epoch=reg.broker_epoch, current_metadata_offset=h.offset,
                                 want_fence=False, want_shut_down=False, offline_log_dirs=[dir_of(1)])
    result = h.ctl.broker_heartbeat(q, h.now)
    from kraftnode.protocol.generated.metadata import BrokerRegistrationChangeRecord
    assert result.records == [
        (PartitionChangeRecord(topic_id=tid, partition_id=0, leader=2, isr=[2]), 1),
        (PartitionChangeRecord(topic_id=tid, partition_id=1, isr=[2]), 1),
        (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=reg.broker_epoch, log_dirs=[]), 2)]


def test_assign_replicas_to_dirs() -> None:
    h = harness(1, 2)
    h.commit(h.create_topic("a", assignments={0: [1, 2]}))
    tid = h.topic("a")
    A = w.AssignReplicasToDirsRequest
    new_dir = dir_of(1)
    q = A(broker_id=1, broker_epoch=h.view.broker(1).broker_epoch, directories=[A.DirectoryData(  # type: ignore[union-attr]
        id=new_dir, topics=[A.TopicData(topic_id=tid, partitions=[A.PartitionData(partition_index=0),
                                                                   A.PartitionData(partition_index=5)])])])
    # the partition was created with broker 1's only directory: nothing changes; partition 5 does not exist
    result = h.ctl.assign_replicas_to_dirs(q, h.now)
    assert result.records == []
    assert [(p.partition_index, p.error_code) for p in result.response.directories[0].topics[0].partitions] == [
        (0, 0), (5, Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    q.broker_id, q.broker_epoch = 2, h.view.broker(2).broker_epoch  # type: ignore[union-attr]
    result = h.ctl.assign_replicas_to_dirs(q, h.now)   # broker 2 reports partition 0 in a directory it does not own
    assert result.records[0][0].directories == [dir_of(1), new_dir]
