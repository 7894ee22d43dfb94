"""kraftnode and genuine Kafka 3.9 controllers in one static quorum, with genuine brokers
(issue 26, must-shows 1 and 2).

Two journeys, each on its own quorum of three voters and two genuine brokers (101, 102):
(a) 1 Kafka controller (3) + 2 kraftnode controllers (1, 2) -- the full journey -- and
(b) 2 Kafka controllers (2, 3) + 1 kraftnode controller (1) -- a shorter one.

Leadership moves across implementations: towards a Kafka voter with kraftnode's
``transfer-leadership`` (an EndQuorumEpoch naming the Kafka voter), back with kill -9 of the
Kafka leader (Kafka 3.9 has no transfer; with two Kafka voters the election may go to the other
one, then it is killed in turn). In every term:

- a topic is created through a broker (CreateTopics, forwarded in an Envelope);
- the verifiable producer (acks -1, idempotent), running throughout, gets more acks;
- the leader epochs the brokers report never go back.

Across the terms: a broker killed under one implementation's term is fenced by it (its
leaderships move, the active controller logs the fence) and, restarted under the other's, is
unfenced; a topic created under one implementation's term is altered (CreatePartitions,
IncrementalAlterConfigs) and deleted under the other's; InitProducerId on a restarted broker
allocates a producer-id block from whichever controller leads, and the ProducerIdsRecords in the
log (``kraftnode dump-log``) never overlap; broker epochs, partition epochs and leader epochs
(the brokers' state-change logs) only grow. At the end every acked record is read back, and no
broker logged an unsupported API.
"""

from __future__ import annotations

import time

import pytest

from tests.support.kafka import KafkaHome
from tests.support.mixed_controllers import (
    alter_and_delete,
    check_clean,
    create_topic,
    finish,
    start,
)

pytestmark = pytest.mark.timeout(600)


def test_one_kafka_two_kraftnode_controllers_with_brokers(kafka_home: KafkaHome,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """(a) 1 Kafka (3) + 2 kraftnode (1, 2): four handovers across implementations at least,
    brokers fenced and unfenced across them, topics altered and deleted across them."""
    j = start(kafka_home, tmp_path_factory.mktemp("mixed1k"), (3,))
    s = j.s
    try:
        j.lead("kraftnode")
        create_topic(j.broker_port(), "born-kraftnode", 2)
        j.lead("kafka")  # handover 1: transfer-leadership towards the Kafka voter
        alter_and_delete(j, "born-kraftnode", 4, "retention.ms", "7200000")
        create_topic(j.broker_port(), "born-kafka", 2)
        j.kill_broker(101)  # fenced by the Kafka controller
        j.lead("kraftnode")  # handover 2: kill -9 of the Kafka leader
        j.restart_broker(101)  # unfenced by kraftnode; a producer-id block from kraftnode
        alter_and_delete(j, "born-kafka", 3, "cleanup.policy", "compact")
        j.kill_broker(102)  # fenced by kraftnode
        j.lead("kafka")  # handover 3
        j.restart_broker(102)  # unfenced by Kafka; a producer-id block from Kafka
        # a person's pause: longer than the quorum's fetch and election timeouts; nothing moves
        term = j.current()
        time.sleep(8)
        assert j.current() == term
        j.lead("kraftnode")  # handover 4
        assert sum(1 for a, b in zip(j.terms, j.terms[1:], strict=False) if a.kind != b.kind) >= 4, j.terms
        finish(j)
    finally:
        s.close()
    check_clean(s)


@pytest.mark.timeout(900)
def test_two_kafka_one_kraftnode_controller_with_brokers(kafka_home: KafkaHome,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    """(b) 2 Kafka (2, 3) + 1 kraftnode (1), a shorter journey starting under whichever kind
    leads first (X, the other Y): two handovers each way; a broker fenced under X and unfenced
    under Y, the other fenced under Y and unfenced under X; a topic born under each altered and
    deleted under the other."""
    j = start(kafka_home, tmp_path_factory.mktemp("mixed2k"), (2, 3))
    s = j.s
    try:
        x = j.lead(j.current().kind).kind
        y = "kraftnode" if x == "kafka" else "kafka"
        create_topic(j.broker_port(), f"born-{x}", 2)
        j.kill_broker(102)  # fenced under X
        j.lead(y)  # handover 1
        j.restart_broker(102)  # unfenced under Y; a producer-id block from Y
        alter_and_delete(j, f"born-{x}", 3, "retention.ms", "7200000")
        create_topic(j.broker_port(), f"born-{y}", 2)
        j.kill_broker(101)  # fenced under Y
        j.lead(x)  # handover 2
        j.restart_broker(101)  # unfenced under X; a producer-id block from X
        alter_and_delete(j, f"born-{y}", 3, "cleanup.policy", "compact")
        j.lead(y)  # handover 3
        j.lead(x)  # handover 4
        assert sum(1 for a, b in zip(j.terms, j.terms[1:], strict=False) if a.kind != b.kind) >= 4, j.terms
        finish(j)
    finally:
        s.close()
    check_clean(s)
