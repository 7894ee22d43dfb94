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

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import METADATA
from tests.support.cluster import CLUSTER_ID, Cluster, free_ports, wait_serving
from tests.support.kafka import KafkaHome, java_env
from tests.support.kafka_server import KafkaServer, broker_properties
from tests.support.node import call

pytestmark = pytest.mark.timeout(400)

BROKERS = (101, 102, 103)
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


def wait_until(what: str, check: Callable[[], Any], timeout: float, logs: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{logs()}")


@dataclass
class Part:
    leader: int
    isr: list[int]
    replicas: list[int]


def partitions(port: int, topic: str) -> dict[int, Part] | None:
    """The topic's partitions as a broker's metadata cache has them (Metadata v12)."""
    M = w.MetadataRequest
    try:
        _, resp = call(port, METADATA, 12, M(topics=[M.MetadataRequestTopic(name=topic)],
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
    except OSError:
        return None
    t = resp.topics[0]  # type: ignore[attr-defined]
    if t.error_code:
        return None
    return {p.partition_index: Part(p.leader_id, list(p.isr_nodes), list(p.replica_nodes)) for p in t.partitions}


@dataclass
class Tool:
    """A Kafka tool running in the background, its JSON events collected."""

    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start_reading(self) -> None:
        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.startswith("{"):
                    try:
                        self.events.append(json.loads(line))
                    except ValueError:
                        pass
        self.thread = threading.Thread(target=read, daemon=True)
        self.thread.start()

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e.get("name") == name]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.thread is not None:
            self.thread.join(10)


class Setup:
    def __init__(self, kafka: KafkaHome, root: Path) -> None:
        self.kafka = kafka
        self.root = root
        self.cl = Cluster(root / "controllers", 3, extra=CONTROLLER_EXTRA)
        voters = ",".join(f"{i}@127.0.0.1:{self.cl.port(i)}" for i in self.cl.ids)
        self.ports = dict(zip(BROKERS, free_ports(len(BROKERS)), strict=True))
        self.brokers = {b: KafkaServer(kafka, root / f"broker{b}", b, broker_properties(
            b, self.ports[b], voters, root / f"broker{b}" / "data", BROKER_EXTRA)) for b in BROKERS}
        self.tools: list[Tool] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for b, p in self.ports.items() if self.brokers[b].running)

    def any_port(self) -> int:
        return next(self.ports[b] for b in BROKERS if self.brokers[b].running)

    def logs(self) -> str:
        out = []
        for i in self.cl.ids:
            out.append(f"--- controller {i}\n" + self.cl.log(i)[-3000:])
        for b, s in self.brokers.items():
            out.append(f"--- broker {b}\n" + s.log()[-3000:])
        return "\n".join(out)

    def tool(self, name: str, *args: str) -> Tool:
        env = java_env({"LOG_DIR": str(self.root / "tool-logs")})
        proc = subprocess.Popen([str(self.kafka.script(name)), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
        t = Tool(proc)
        t.start_reading()
        self.tools.append(t)
        return t

    def topics_cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.kafka.tool("kafka-topics", "--bootstrap-server", self.bootstrap, *args, timeout=120,
                               env={"LOG_DIR": str(self.root / "tool-logs")})

    def active_controller(self) -> int:
        info = self.cl.wait_for_leader(20)
        return info.leader_id

    def registrations(self, b: int) -> list[int]:
        """The broker epochs broker ``b`` was given, from its log."""
        return [int(m) for m in re.findall(r"Successfully registered broker \d+ with broker epoch (\d+)",
                                           self.brokers[b].log())]

    def close(self) -> None:
        for t in self.tools:
            t.stop()
        for s in self.brokers.values():
            s.close()
        self.cl.close()


@pytest.fixture(scope="module")
def setup(kafka_home: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    s = Setup(kafka_home, tmp_path_factory.mktemp("brokers"))
    try:
        s.cl.start_all()
        s.cl.wait_for_leader(30)
        for b in s.brokers.values():
            b.format(CLUSTER_ID)
            b.start()
        for b in s.brokers.values():
            b.wait_started(120)
        yield s
    finally:
        s.close()
        faults = {b: srv.faults() for b, srv in s.brokers.items()}
        assert not any(faults.values()), faults
        for i in s.cl.ids:
            assert "Traceback" not in s.cl.log(i), s.cl.log(i)[-5000:]


def test_brokers_register_and_a_topic_is_created_through_a_broker(setup: Setup) -> None:
    wait_until("every broker unfenced", lambda: all(
        "The broker has been unfenced" in setup.brokers[b].log() for b in BROKERS), 60, setup.logs)
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
    # a second creation is refused with Kafka's error
    r = setup.topics_cli("--create", "--topic", TOPIC, "--partitions", "1")
    assert r.returncode != 0 and "TopicExistsException" in r.stdout + r.stderr, r.stdout + r.stderr


def test_verifiable_producer_and_consumer_across_broker_and_controller_failures(setup: Setup) -> None:
    epochs_before = {b: setup.registrations(b) for b in BROKERS}
    producer = setup.tool("kafka-verifiable-producer", "--bootstrap-server", setup.bootstrap, "--topic", TOPIC,
                          "--acks", "-1", "--throughput", "150", "--max-messages", "-1")
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
    by_value: dict[str, set[tuple[int, int]]] = {}
    for k, v in got.items():
        by_value.setdefault(v, set()).add(k)
    twice = {v: ks for v, ks in by_value.items() if len(ks) > 1}
    assert not twice, twice
    print(f"{len(acked)} acked records all consumed; {len(consumer.named('record_data'))} deliveries "
          f"({len(consumer.named('record_data')) - len(got)} redelivered within the at-least-once window)")
