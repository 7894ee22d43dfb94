"""Genuine Kafka 3.9 brokers on a controller quorum of three kraftnode nodes (issue 25, must-show 1).

Three kraftnode controllers and three genuine brokers (``kafka-server-start.sh``,
``process.roles=broker``) start; ``kafka-topics.sh --bootstrap-server`` creates a topic of 12
partitions, replication factor 3, through a broker (which forwards CreateTopics in an Envelope);
``kafka-verifiable-producer.sh --acks -1`` (idempotent: InitProducerId -> AllocateProducerIds)
and ``kafka-verifiable-consumer.sh`` with a consumer group run across:

1. kill -9 of a broker: it is fenced within the session timeout, leads nothing, and leaves every
   ISR; restarted, it registers a new incarnation and is back in every ISR (AlterPartition);
2. a controlled shutdown of a broker (SIGTERM): its leaderships move away before it exits, well
   within the session timeout;
3. kill -9 of the active kraftnode controller: another takes over; the brokers re-register
   nothing (the same broker epochs) and a topic can still be created;
4. a restart of a kraftnode controller.

Every acked record is read back by the group's consumer, and no record was written twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import DESCRIBE_QUORUM
from tests.support.cluster import CLUSTER_ID, wait_serving
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import (
    BROKERS,
    Part,
    Setup,
    assert_each_value_at_one_offset,
    idempotent_producer_config,
    partitions,
    wait_until,
)
from tests.support.node import call

pytestmark = pytest.mark.timeout(400)

SESSION_TIMEOUT_MS = 4000
TOPIC = "verifiable"
# the controllers' keys (docs/controller.md); the brokers heartbeat every 500 ms
CONTROLLER_EXTRA = (f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
                    "leader.imbalance.check.interval.seconds=5\n")
BROKER_EXTRA = ("broker.heartbeat.interval.ms=500\n"
                f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
                "offsets.topic.replication.factor=3\noffsets.topic.num.partitions=4\n"
                "transaction.state.log.replication.factor=3\ntransaction.state.log.min.isr=2\n"
                "replica.lag.time.max.ms=5000\nnum.network.threads=2\nnum.io.threads=2\n")


@pytest.fixture(scope="module")
def setup(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    s = Setup(kafka_home, tmp_path_factory.mktemp("brokers"), CONTROLLER_EXTRA, BROKER_EXTRA)
    try:
        s.start_all(CLUSTER_ID)
        yield s
    finally:
        s.close()
        s.check_clean()


def test_brokers_register_and_a_topic_is_created_through_a_broker(setup: Setup) -> None:
    r = setup.topics_cli("--create", "--topic", TOPIC, "--partitions", "12", "--replication-factor", "3")
    assert r.returncode == 0 and f"Created topic {TOPIC}." in r.stdout, r.stdout + r.stderr
    parts = wait_until("the topic in the brokers' metadata", lambda: partitions(setup.any_port(), TOPIC), 30)
    assert sorted(parts) == list(range(12))
    for p in parts.values():
        assert sorted(p.replicas) == list(BROKERS) and sorted(p.isr) == list(BROKERS)
        assert p.leader == p.replicas[0]
    # StripedReplicaPlacer spreads the preferred leaders evenly: 4 partitions each
    leaders = [p.leader for p in parts.values()]
    assert sorted(leaders.count(b) for b in BROKERS) == [4, 4, 4], leaders
    # DescribeQuorum at every version lists the brokers as observers (v0-1 without directory ids)
    Q = w.DescribeQuorumRequest
    for v in (0, 1, 2):
        _, resp = call(setup.cl.port(setup.active_controller()), DESCRIBE_QUORUM, v, Q(topics=[Q.TopicData(
            topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
        observers = resp.topics[0].partitions[0].observers  # type: ignore[attr-defined]
        assert sorted(o.replica_id for o in observers) == list(BROKERS), (v, observers)
    # a second creation is refused with Kafka's error
    r = setup.topics_cli("--create", "--topic", TOPIC, "--partitions", "1")
    assert r.returncode != 0 and "TopicExistsException" in r.stdout + r.stderr, r.stdout + r.stderr


def test_verifiable_producer_and_consumer_across_broker_and_controller_failures(setup: Setup) -> None:
    epochs_before = {b: setup.registrations(b) for b in BROKERS}
    producer = setup.tool("kafka-verifiable-producer", "--bootstrap-server", setup.bootstrap, "--topic", TOPIC,
                          "--acks", "-1", "--throughput", "150", "--max-messages", "-1",
                          "--producer.config", str(idempotent_producer_config(setup.root)))
    consumer = setup.tool("kafka-verifiable-consumer", "--bootstrap-server", setup.bootstrap, "--topic", TOPIC,
                          "--group-id", "verifiers", "--reset-policy", "earliest", "--verbose")
    wait_until("the producer's first acks", lambda: len(producer.named("producer_send_success")) > 100, 60,
               setup.logs)
    wait_until("the consumer's first records", lambda: consumer.named("record_data"), 60, setup.logs)

    # 1. kill -9 of broker 101: fenced within the session timeout, its leaderships moved
    victim = 101
    setup.brokers[victim].kill()
    t0 = time.monotonic()
    other = next(setup.ports[b] for b in BROKERS if b != victim)

    def fenced() -> bool:
        parts = partitions(other, TOPIC)
        return parts is not None and all(p.leader != victim and victim not in p.isr for p in parts.values())
    wait_until(f"broker {victim} fenced", fenced, SESSION_TIMEOUT_MS / 1000 + 10, setup.logs)
    took = time.monotonic() - t0
    print(f"broker {victim} fenced, leaderships moved and ISRs shrunk {took:.1f}s after kill -9")
    assert took < SESSION_TIMEOUT_MS / 1000 + 6
    setup.brokers[victim].start()
    setup.brokers[victim].wait_started(120)

    def back_in_isr() -> bool:
        parts = partitions(other, TOPIC)
        return parts is not None and all(victim in p.isr for p in parts.values())
    wait_until(f"broker {victim} back in every ISR", back_in_isr, 60, setup.logs)
    assert len(setup.registrations(victim)) == len(epochs_before[victim]) + 1
    assert setup.registrations(victim)[-1] > epochs_before[victim][-1]  # a new incarnation, a new epoch

    # 2. controlled shutdown of broker 102: leaderships move away before it exits
    victim = 102
    took = setup.brokers[victim].stop()
    print(f"broker {victim} shut down (controlled) in {took:.1f}s")
    assert "Transitioning from PENDING_CONTROLLED_SHUTDOWN to SHUTTING_DOWN" in setup.brokers[victim].log()
    assert took < SESSION_TIMEOUT_MS / 1000 + 10
    parts = partitions(setup.ports[103], TOPIC)
    assert parts is not None and all(p.leader != victim and victim not in p.isr for p in parts.values()), parts
    setup.brokers[victim].start()
    setup.brokers[victim].wait_started(120)
    wait_until(f"broker {victim} back in every ISR", lambda: all(
        victim in p.isr for p in (partitions(setup.ports[103], TOPIC) or {0: Part(-1, [], [])}).values()), 60,
        setup.logs)

    # 3. kill -9 of the active kraftnode controller
    registered = {b: setup.registrations(b) for b in BROKERS}
    active = setup.active_controller()
    setup.cl.kill(active)
    t0 = time.monotonic()
    new = setup.cl.wait_for_leader(30, exclude=active).leader_id
    print(f"kraftnode controller {active} killed: {new} leads after {time.monotonic() - t0:.1f}s")
    r = setup.topics_cli("--create", "--topic", "after-failover", "--partitions", "3", "--replication-factor", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert {b: setup.registrations(b) for b in BROKERS} == registered  # nobody re-registered
    setup.cl.start(active)
    wait_serving(setup.cl, active)

    # 4. a restart of a kraftnode controller (a follower now)
    follower = next(i for i in setup.cl.ids if i != setup.active_controller())
    setup.cl.stop(follower)
    setup.cl.start(follower)
    wait_serving(setup.cl, follower)
    assert {b: setup.registrations(b) for b in BROKERS} == registered

    # every acked record is read back; nothing written twice
    time.sleep(2)
    producer.stop()
    acked = {(e["partition"], e["offset"]): e["value"] for e in producer.named("producer_send_success")}
    assert len(acked) > 500, len(acked)

    def consumed() -> dict[tuple[int, int], str]:
        return {(e["partition"], e["offset"]): e["value"] for e in consumer.named("record_data")}
    wait_until("every acked record consumed", lambda: set(acked) <= set(consumed()), 60,
               lambda: f"missing {sorted(set(acked) - set(consumed()))[:20]}\n" + setup.logs())
    consumer.stop()
    got = consumed()
    assert all(got[k] == v for k, v in acked.items())
    # idempotence: each value sits at one offset only (retries were not written twice)
    assert_each_value_at_one_offset(got)
    assert not producer.named("producer_send_error"), producer.named("producer_send_error")[:5]
    # the producer was idempotent: its producer ids came from blocks the controller allocated
    got_blocks = [ln for i in setup.cl.ids for ln in setup.cl.log(i).splitlines() if "allocated producer id block" in ln]
    assert got_blocks, "no AllocateProducerIds answered"
    print(f"{len(acked)} acked records all consumed; {len(consumer.named('record_data'))} deliveries "
          f"({len(consumer.named('record_data')) - len(got)} redelivered within the at-least-once window)")
