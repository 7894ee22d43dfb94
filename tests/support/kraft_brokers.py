"""Genuine Kafka 3.9 brokers on a kraftnode controller quorum -- or a mixed one, kraftnode nodes
and genuine Kafka controllers voting together -- for the controller's interop tests
(tests/interop/test_brokers_on_kraftnode.py, test_broker_admin_on_kraftnode.py,
test_mixed_controllers.py, ...).

:class:`Setup` holds the controllers (kraftnode: tests/support/cluster.py; Kafka:
tests/support/kafka_server.py) and genuine brokers; helpers read partition states from a
broker's metadata, run Kafka's tools, and produce single records straight to a partition leader.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftnode.commands.quorum import QuorumInfo, fetch_quorum_info
from kraftnode.errors import UsageError
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import METADATA, PRODUCE
from recordbatch import Record, build_batch
from tests.support.cluster import Cluster, free_ports
from tests.support.kafka import KafkaHome, java_env
from tests.support.kafka_server import KafkaServer, broker_properties, controller_properties
from tests.support.node import call

__all__ = ["BROKERS", "Part", "Setup", "Tool", "idempotent_producer_config", "partitions", "produce_one",
           "wait_until"]

BROKERS = (101, 102, 103)


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
    """A controller quorum of kraftnode nodes (``controller_extra``: lines for their properties)
    and, optionally, genuine Kafka controllers, with the genuine brokers ``BROKERS``
    (``broker_extra`` for theirs).

    ``voters``: the static voter set is 1..voters; ``kafka_voters`` among them are genuine Kafka
    3.9 controllers (``self.controllers``, their properties from ``kafka_extra``, by default
    ``controller_extra`` without kraftnode's own keys), every other id a kraftnode node, formatted
    with ``release`` (``kraftnode format`` flags; by default the suite's, SUITE_RELEASE)."""

    def __init__(self, kafka: KafkaHome, root: Path, controller_extra: str, broker_extra: str,
                 voters: int = 3, brokers: tuple[int, ...] = BROKERS, kafka_voters: tuple[int, ...] = (),
                 kafka_extra: str | None = None, release: tuple[str, ...] | None = None) -> None:
        self.kafka = kafka
        self.root = root
        self.broker_ids = brokers
        self.cl = Cluster(root / "controllers", voters, extra=controller_extra, foreign=kafka_voters,
                          application_records=False, release=release)
        self.kraft_ids = self.cl.own_ids
        self.kafka_ids = list(kafka_voters)
        self.voters_text = ",".join(f"{i}@127.0.0.1:{self.cl.port(i)}" for i in self.cl.ids)
        if kafka_extra is None:
            kafka_extra = "".join(ln + "\n" for ln in controller_extra.splitlines()
                                  if not ln.startswith("kraftnode."))
        self.controllers = {i: KafkaServer(kafka, root / f"kafka{i}", i, controller_properties(
            i, self.cl.port(i), root / f"kafka{i}" / "data", voters=self.voters_text, extra=kafka_extra),
            port=self.cl.port(i)) for i in kafka_voters}
        self.ports = dict(zip(brokers, free_ports(len(brokers)), strict=True))
        self.brokers = {b: KafkaServer(kafka, root / f"broker{b}", b, broker_properties(
            b, self.ports[b], self.voters_text, root / f"broker{b}" / "data", broker_extra),
            port=self.ports[b]) for b in brokers}
        self.tools: list[Tool] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for b, p in self.ports.items() if self.brokers[b].running)

    def any_port(self) -> int:
        return next(self.ports[b] for b in self.broker_ids if self.brokers[b].running)

    def logs(self) -> str:
        out = []
        for i in self.kraft_ids:
            out.append(f"--- controller {i}\n" + self.cl.log(i)[-3000:])
        for i, k in self.controllers.items():
            out.append(f"--- Kafka controller {i}\n" + k.log()[-3000:])
        for b, s in self.brokers.items():
            out.append(f"--- broker {b}\n" + s.log()[-3000:])
        return "\n".join(out)

    def tool(self, name: str, *args: str) -> Tool:
        env = java_env({"LOG_DIR": str(self.root / "tool-logs")})
        (self.root / "tool-logs").mkdir(parents=True, exist_ok=True)
        # the tool's own log lines (WARN and above, on stderr) are kept for a failing test to read
        with (self.root / "tool-logs" / f"{name}-{len(self.tools)}.err").open("w") as err:
            proc = subprocess.Popen([str(self.kafka.script(name)), *args], stdout=subprocess.PIPE,
                                    stderr=err, text=True, env=env)
        t = Tool(proc)
        t.start_reading()
        self.tools.append(t)
        return t

    def cli(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        """A Kafka tool against the running brokers (``--bootstrap-server`` first)."""
        return self.kafka.tool(name, "--bootstrap-server", self.bootstrap, *args, timeout=120,
                               env={"LOG_DIR": str(self.root / "tool-logs")})

    def topics_cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.cli("kafka-topics", *args)

    def create_topic(self, topic: str, *args: str) -> str:
        """``kafka-topics.sh --create``, then wait until every running broker's metadata has the
        topic: the tool returns once the controller committed it, and a broker learns it with
        its next metadata fetch, so a tool run right after (``--alter``) can be answered by a
        broker that does not know the topic yet ("does not exist as expected")."""
        r = self.topics_cli("--create", "--topic", topic, *args)
        assert r.returncode == 0, r.stdout + r.stderr
        wait_until(f"{topic} in every broker's metadata", lambda: all(
            partitions(self.ports[b], topic) for b in self.broker_ids if self.brokers[b].running), 30)
        return r.stdout

    def start_all(self, cluster_id: str, defer: tuple[int, ...] = ()) -> None:
        """Format and start every controller but those in ``defer`` (Kafka controllers a
        test starts later), then the brokers; return once every broker is unfenced."""
        for i in self.kraft_ids:
            self.cl.start(i)
        for i, k in self.controllers.items():
            if i not in defer:
                k.format(cluster_id)
                k.start()
        for i, k in self.controllers.items():
            if i not in defer:
                k.wait_started(120)
        self.wait_for_leader(60)
        for b in self.brokers.values():
            b.format(cluster_id)
            b.start()
        for b in self.brokers.values():
            b.wait_started(120)
        wait_until("every broker unfenced", lambda: all(
            "The broker has been unfenced" in self.brokers[b].log() for b in self.broker_ids), 60, self.logs)

    # ------------------------------------------------------------ controllers of both kinds
    def kind(self, i: int) -> str:
        """"kafka" or "kraftnode": which implementation controller ``i`` is."""
        return "kafka" if i in self.controllers else "kraftnode"

    def running_controllers(self) -> list[int]:
        return sorted([*self.cl.running(), *(i for i, k in self.controllers.items() if k.running)])

    def quorum(self) -> QuorumInfo | None:
        """The quorum as its leader describes it (asked through every running controller, of
        either kind); None when no leader answers."""
        servers = [("127.0.0.1", self.cl.port(i)) for i in self.running_controllers()]
        try:
            info = fetch_quorum_info(servers, 2)
        except UsageError:
            return None
        return info if info.leader_id >= 0 else None

    def wait_for_leader(self, timeout: float = 30, exclude: int | None = None, min_epoch: int = 0) -> QuorumInfo:
        """A leader that is running, not ``exclude``, in at least ``min_epoch``."""
        def found() -> QuorumInfo | None:
            info = self.quorum()
            if info is not None and info.leader_id != exclude and info.leader_epoch >= min_epoch \
                    and info.leader_id in self.running_controllers():
                return info
            return None
        info: QuorumInfo = wait_until("a leader", found, timeout, self.logs)
        return info

    def kill_controller(self, i: int) -> None:
        """kill -9 of controller ``i``, either kind."""
        if i in self.controllers:
            self.controllers[i].kill()
        else:
            self.cl.kill(i)

    def start_controller(self, i: int) -> None:
        """Start controller ``i`` again (a Kafka controller: until "Kafka Server started")."""
        if i in self.controllers:
            self.controllers[i].start()
            self.controllers[i].wait_started(120)
        else:
            self.cl.start(i)

    def check_clean(self) -> None:
        """No broker or Kafka controller logged an error or a fault; no kraftnode controller a
        traceback."""
        # an idempotent producer's batches that were in flight to a leader that lost its leadership
        # reach the new leader out of order (it answers OUT_OF_ORDER_SEQUENCE_NUMBER, logged as an
        # ERROR, and the producer resends in order): Kafka's own behaviour on every leader move
        faults = {b: srv.faults(benign=(r"OutOfOrderSequenceException",)) for b, srv in self.brokers.items()}
        # a Kafka controller asked DescribeCluster (our quorum helpers' first question) before its
        # metadata has loaded answers UNSUPPORTED_VERSION and logs it as an ERROR; one restarted
        # after leading sends its ControllerRegistration to itself (the last leader its log knows)
        # and logs the NOT_CONTROLLER it answers itself as an ERROR, then retries: both benign
        # (Kafka 4.4 words it "... so direct-to-controller communication is not supported")
        faults.update({i: k.faults(benign=(r"[Dd]irect-to-controller communication is not supported",
                                           r"NotControllerException"))
                       for i, k in self.controllers.items()})
        assert not any(faults.values()), faults
        for i in self.kraft_ids:
            assert "Traceback" not in self.cl.log(i), self.cl.log(i)[-5000:]

    def active_controller(self) -> int:
        return self.wait_for_leader(20).leader_id

    def registrations(self, b: int) -> list[int]:
        """The broker epochs broker ``b`` was given, from its log."""
        return [int(m) for m in re.findall(r"Successfully registered broker \d+ with broker epoch (\d+)",
                                           self.brokers[b].log())]

    def close(self) -> None:
        for t in self.tools:
            t.stop()
        for s in self.brokers.values():
            s.close()
        for k in self.controllers.values():
            k.close()
        self.cl.close()


def idempotent_producer_config(root: Path) -> Path:
    """A ``--producer.config`` making kafka-verifiable-producer.sh idempotent: the tool sets
    retries=0 (which silently disables idempotence) unless its config file says otherwise."""
    path = root / "idempotent-producer.properties"
    path.write_text("enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\n"
                    "acks=all\ndelivery.timeout.ms=120000\n")
    return path


def produce_one(port: int, topic: str, partition: int, value: bytes) -> int:
    """Produce one record (acks=-1) straight to the broker at ``port``; the error code."""
    P = w.ProduceRequest
    req = P(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=partition,
                                                           records=build_batch([Record(None, value)]))])])
    _, resp = call(port, PRODUCE, 9, req)
    return int(resp.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]


def assert_each_value_at_one_offset(got: dict[tuple[int, int], str]) -> None:
    """Idempotence: no value of ``got`` ((partition, offset) -> value) sits at two offsets (a
    retried send was not written twice)."""
    by_value: dict[str, set[tuple[int, int]]] = {}
    for k, v in got.items():
        by_value.setdefault(v, set()).add(k)
    twice = {v: ks for v, ks in by_value.items() if len(ks) > 1}
    assert not twice, twice
