"""Kafka's admin tools through genuine brokers on a kraftnode controller quorum (issue 25,
must-show 2): each change is made with the genuine tool against a broker (which forwards it to
the active kraftnode controller in an Envelope), then seen in ``kafka-topics.sh --describe`` or
``kafka-configs.sh --describe`` and in what the brokers do.

* ``kafka-configs.sh --alter`` of a topic (max.message.bytes: a larger record is refused) and of
  a broker (message.max.bytes on broker 101: a larger record to a partition it leads is refused),
  and a refused value with the controller's validation message;
* ``kafka-topics.sh --alter --partitions``: the new partition takes records;
* ``kafka-reassign-partitions.sh --execute`` then ``--verify`` until complete: the new replicas
  hold the records;
* ``kafka-leader-election.sh --election-type PREFERRED`` after a restart left leaders elsewhere
  (the controllers run with ``auto.leader.rebalance.enable=false``);
* ``kafka-acls.sh --add`` / ``--remove`` (StandardAuthorizer on controllers and brokers; on the
  brokers everything is allowed where no ACL exists): a DENY on writes to a topic makes the brokers
  refuse them;
* ``kafka-topics.sh --delete``: the topic is gone from the brokers.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.protocol import Errors
from tests.support.cluster import CLUSTER_ID
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import BROKERS, Setup, partitions, produce_one, wait_until

pytestmark = pytest.mark.timeout(400)

AUTHORIZER = ("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
              "allow.everyone.if.no.acl.found=true\n")
# the controllers' own principal (PLAINTEXT: User:ANONYMOUS) must be a super user, as with Kafka's
# controllers: they talk to each other before the ACLs are loaded
CONTROLLER_EXTRA = ("broker.session.timeout.ms=6000\nauto.leader.rebalance.enable=false\n" + AUTHORIZER
                    + "super.users=User:ANONYMOUS\n")
BROKER_EXTRA = ("broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=6000\n"
                "offsets.topic.replication.factor=3\nnum.network.threads=2\nnum.io.threads=2\n"
                "replica.lag.time.max.ms=5000\n" + AUTHORIZER)


@pytest.fixture(scope="module")
def setup(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    s = Setup(kafka_home, tmp_path_factory.mktemp("admin"), CONTROLLER_EXTRA, BROKER_EXTRA)
    try:
        s.start_all(CLUSTER_ID)
        yield s
    finally:
        s.close()
        s.check_clean()


def ok(r: object) -> str:
    out = getattr(r, "stdout", "") + getattr(r, "stderr", "")
    assert getattr(r, "returncode", 1) == 0, out
    return out


def described_configs(setup: Setup, topic: str) -> set[str]:
    """The ``Configs:`` of ``kafka-topics.sh --describe`` (in the broker's order)."""
    m = re.search(r"Configs: (\S*)", setup.topics_cli("--describe", "--topic", topic).stdout)
    return set(m.group(1).split(",")) - {""} if m else set()


def leader_port(setup: Setup, topic: str, partition: int) -> int:
    parts = partitions(setup.any_port(), topic)
    assert parts is not None
    return setup.ports[parts[partition].leader]


def test_topic_and_broker_configs(setup: Setup) -> None:
    setup.create_topic("cfg", "--partitions", "3", "--replication-factor", "3")
    out = ok(setup.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "cfg",
                       "--add-config", "max.message.bytes=2048,retention.ms=3600000"))
    assert "Completed updating config for topic cfg." in out
    wait_until("the describe to show the overrides", lambda: described_configs(setup, "cfg")
               == {"max.message.bytes=2048", "retention.ms=3600000"}, 20)
    port = leader_port(setup, "cfg", 0)
    assert produce_one(port, "cfg", 0, b"x" * 4000) == Errors.MESSAGE_TOO_LARGE
    assert produce_one(port, "cfg", 0, b"x" * 1000) == Errors.NONE
    # the controller validates as LogConfig does, and the tool prints its message
    r = setup.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "cfg",
                  "--add-config", "retention.ms=soon")
    assert r.returncode != 0
    assert "Invalid value soon for configuration retention.ms: Not a number of type LONG" in r.stdout + r.stderr
    r = setup.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "cfg",
                  "--add-config", "no.such.config=1")
    assert "Unknown topic config name: no.such.config" in r.stdout + r.stderr, r.stdout + r.stderr
    # the controllers answer DescribeConfigs too (kafka-configs.sh --bootstrap-controller)
    out = ok(setup.kafka.tool("kafka-configs", "--bootstrap-controller", setup.cl.bootstrap(), "--describe",
                              "--entity-type", "topics", "--entity-name", "cfg",
                              env={"LOG_DIR": str(setup.root / "tool-logs")}))
    assert "max.message.bytes=2048 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=2048}" in out, out
    assert "retention.ms=3600000" in out
    out = ok(setup.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "cfg",
                       "--delete-config", "max.message.bytes"))
    wait_until("the override removed", lambda: described_configs(setup, "cfg") == {"retention.ms=3600000"}, 20)
    wait_until("a large record accepted again",
               lambda: produce_one(leader_port(setup, "cfg", 0), "cfg", 0, b"x" * 4000) == Errors.NONE, 20)

    # a broker config: message.max.bytes on broker 101 limits the partitions it leads
    setup.create_topic("on101", "--replica-assignment", "101")
    out = ok(setup.cli("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", "101",
                       "--add-config", "message.max.bytes=3000"))
    assert "Completed updating config for broker 101." in out
    out = ok(setup.cli("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "101"))
    assert "message.max.bytes=3000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=3000" in out, out
    wait_until("broker 101 refusing a large record",
               lambda: produce_one(setup.ports[101], "on101", 0, b"y" * 5000) == Errors.MESSAGE_TOO_LARGE, 20)
    assert produce_one(setup.ports[101], "on101", 0, b"y" * 2000) == Errors.NONE
    ok(setup.cli("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", "101",
                 "--delete-config", "message.max.bytes"))
    wait_until("broker 101 taking a large record again",
               lambda: produce_one(setup.ports[101], "on101", 0, b"y" * 5000) == Errors.NONE, 20)


def test_add_partitions(setup: Setup) -> None:
    setup.create_topic("grow", "--partitions", "2", "--replication-factor", "2")
    ok(setup.topics_cli("--alter", "--topic", "grow", "--partitions", "5"))
    out = wait_until("5 partitions described", lambda: (lambda o: o if "PartitionCount: 5" in o else None)(
        setup.topics_cli("--describe", "--topic", "grow").stdout), 20)
    assert "Partition: 4" in out
    wait_until("partition 4 in the brokers' metadata", lambda: 4 in (partitions(setup.any_port(), "grow") or {}), 20)
    assert produce_one(leader_port(setup, "grow", 4), "grow", 4, b"new partition") == Errors.NONE
    r = setup.topics_cli("--alter", "--topic", "grow", "--partitions", "3")
    assert r.returncode != 0 and "currently has 5 partition(s); 3 would not be an increase" in r.stdout + r.stderr


def test_reassign_partitions(setup: Setup, tmp_path: Path) -> None:
    setup.create_topic("moving", "--replica-assignment", "101:102,102:103")
    for p in (0, 1):
        for i in range(5):
            assert produce_one(leader_port(setup, "moving", p), "moving", p, f"m{p}-{i}".encode()) == Errors.NONE
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [103, 101], "log_dirs": ["any", "any"]},
        {"topic": "moving", "partition": 1, "replicas": [101, 103], "log_dirs": ["any", "any"]}]}))
    out = ok(setup.cli("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--execute"))
    assert "Successfully started partition reassignments for moving-0,moving-1" in out, out

    def verified() -> str | None:
        o = ok(setup.cli("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--verify"))
        return o if "Reassignment of partition moving-0 is completed." in o and \
            "Reassignment of partition moving-1 is completed." in o else None
    wait_until("the reassignment to complete", verified, 60, setup.logs)
    parts = partitions(setup.any_port(), "moving")
    assert parts is not None
    assert parts[0].replicas == [103, 101] and parts[1].replicas == [101, 103]
    assert sorted(parts[0].isr) == [101, 103] and sorted(parts[1].isr) == [101, 103]
    out = setup.topics_cli("--describe", "--topic", "moving").stdout
    assert re.search(r"Partition: 0\s+Leader: \d+\s+Replicas: 103,101\s+Isr: ", out), out
    # the new replicas hold the records: broker 103 has both partitions' logs, 102 none
    data = {b: setup.root / f"broker{b}" / "data" for b in BROKERS}
    wait_until("the logs moved", lambda: (data[103] / "moving-0").is_dir() and (data[103] / "moving-1").is_dir()
               and not (data[102] / "moving-0").exists() and not (data[102] / "moving-1").exists(), 90)


def test_preferred_leader_election(setup: Setup) -> None:
    setup.create_topic("elect", "--replica-assignment", "101:102:103,102:103:101,103:101:102")
    took = setup.brokers[101].stop()
    print(f"broker 101 stopped (controlled shutdown) in {took:.1f}s")
    parts = partitions(setup.ports[102], "elect")
    assert parts is not None and parts[0].leader != 101
    setup.brokers[101].start()
    setup.brokers[101].wait_started(120)
    wait_until("101 back in the ISR of elect-0", lambda: 101 in (partitions(setup.ports[102], "elect") or {
        0: type("P", (), {"isr": []})})[0].isr, 60, setup.logs)
    parts = partitions(setup.ports[102], "elect")
    assert parts is not None and parts[0].leader != 101  # auto.leader.rebalance.enable=false
    out = ok(setup.cli("kafka-leader-election", "--election-type", "PREFERRED", "--topic", "elect",
                       "--partition", "0"))
    assert "Successfully completed leader election (PREFERRED) for partitions elect-0" in out, out
    wait_until("101 leading elect-0 again", lambda: (partitions(setup.ports[102], "elect") or {})[0].leader == 101, 20)
    out = setup.topics_cli("--describe", "--topic", "elect").stdout
    assert re.search(r"Partition: 0\s+Leader: 101\s+Replicas: 101,102,103", out), out
    out = setup.cli("kafka-leader-election", "--election-type", "PREFERRED", "--topic", "elect",
                    "--partition", "1").stdout
    assert "Valid replica already elected for partitions elect-1" in out, out


def test_acls_through_a_broker(setup: Setup) -> None:
    setup.create_topic("secret", "--partitions", "1", "--replication-factor", "3")
    port = leader_port(setup, "secret", 0)
    assert produce_one(port, "secret", 0, b"before") == Errors.NONE
    out = ok(setup.cli("kafka-acls", "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write",
                       "--topic", "secret"))
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=secret, patternType=LITERAL)`" in out
    out = ok(setup.cli("kafka-acls", "--list", "--topic", "secret"))
    assert "(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=DENY)" in out, out
    wait_until("the brokers to refuse writes", lambda: produce_one(port, "secret", 0, b"denied")
               == Errors.TOPIC_AUTHORIZATION_FAILED, 20)
    ok(setup.cli("kafka-acls", "--remove", "--force", "--deny-principal", "User:ANONYMOUS", "--operation", "Write",
                 "--topic", "secret"))
    wait_until("the brokers to take writes again", lambda: produce_one(port, "secret", 0, b"after") == Errors.NONE, 20)


def test_delete_topic(setup: Setup) -> None:
    setup.create_topic("doomed", "--partitions", "2", "--replication-factor", "3")
    ok(setup.topics_cli("--delete", "--topic", "doomed"))
    wait_until("doomed gone from every broker", lambda: all(
        partitions(setup.ports[b], "doomed") is None for b in BROKERS), 20)
    r = setup.topics_cli("--describe", "--topic", "doomed")
    # (the genuine tool prints the name as "'Optional[doomed]'")
    assert r.returncode != 0 and "doomed]' does not exist as expected" in r.stdout + r.stderr, r.stdout + r.stderr
    data = [setup.root / f"broker{b}" / "data" for b in BROKERS]
    wait_until("the brokers to drop the logs", lambda: not any((d / f"doomed-{p}").exists()
                                                                for d in data for p in (0, 1)), 30)
    time.sleep(0.5)
    r = setup.topics_cli("--delete", "--topic", "doomed")
    assert r.returncode != 0
