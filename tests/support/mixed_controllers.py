"""The machinery of the mixed-controller journeys (tests/interop/test_mixed_controllers.py with
Kafka 3.9, test_mixed_controllers44.py with Kafka 4.4): kraftnode and genuine Kafka controllers in
one static quorum with genuine brokers, leadership moved across implementations (``Journey.lead``),
every term checked (``Journey.in_term``), brokers killed and restarted across terms, and the
end-of-journey checks (``finish``): every acked record read back once, epochs only grew,
producer-id blocks disjoint, no unsupported API.

The wire helpers (``create_topic``, ``add_partitions``, ``set_config``, ``delete_topic``,
``init_producer_id``, ``leader_epochs``) go through a broker, retrying Kafka's retriable error
codes while a forwarded request meets a handover.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
    METADATA,
)
from tests.support.cluster import CLUSTER_ID
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import (
    Setup,
    Tool,
    assert_each_value_at_one_offset,
    idempotent_producer_config,
    partitions,
    wait_until,
)
from tests.support.node import call

BROKER_IDS = (101, 102)
SESSION_TIMEOUT_MS = 6000  # longer than an election: a broker is fenced only when it is gone
TOPIC = "verifiable"
CONTROLLER_EXTRA = f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
BROKER_EXTRA = ("broker.heartbeat.interval.ms=500\n"
                f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
                "offsets.topic.replication.factor=2\noffsets.topic.num.partitions=2\n"
                "transaction.state.log.replication.factor=2\ntransaction.state.log.min.isr=1\n"
                "replica.lag.time.max.ms=5000\nnum.network.threads=2\nnum.io.threads=2\n")
# Kafka's error codes the journey tolerates while a request is forwarded across a handover
# REQUEST_TIMED_OUT, NOT_CONTROLLER, LEADER_NOT_AVAILABLE, COORDINATOR_NOT_AVAILABLE, and
# COORDINATOR_LOAD_IN_PROGRESS (a broker's InitProducerId while it fetches a producer-id block)
RETRIABLE = {7, 41, 5, 15, 14}
TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION = 36, 3
UNSUPPORTED = re.compile(r"UnsupportedVersionException|does not support")
#: a broker that could not replay or publish a metadata record (Kafka's MetadataLoader and
#: publishers log these, then run the fault handler)
REPLAY_FAULT = re.compile(r"MetadataLoader.*(?:ERROR|rror)|Error replaying|[Ff]ault handler|"
                          r"Unable to (?:replay|load|publish)|Unknown metadata id")


@dataclass
class Term:
    epoch: int
    leader: int
    kind: str


@dataclass
class Journey:
    setup: Setup
    producer: Tool
    terms: list[Term] = field(default_factory=list)
    #: partition -> leader epochs the brokers' metadata reported, one per term
    leader_epochs: dict[int, list[int]] = field(default_factory=dict)
    #: (broker, first producer id) of each InitProducerId the journey sent, with the term's kind
    producer_ids: list[tuple[int, int, str]] = field(default_factory=list)
    #: the group consumer running throughout, when the journey has one (``start(live_group=...)``)
    consumer: Tool | None = None
    #: brokers killed (each must be fenced exactly once, no running broker ever)
    kills: int = 0

    @property
    def s(self) -> Setup:
        return self.setup

    def broker_port(self, avoid: int | None = None) -> int:
        return next(self.s.ports[b] for b in BROKER_IDS if b != avoid and self.s.brokers[b].running)

    # ------------------------------------------------------------------ leadership
    def current(self) -> Term:
        info = self.s.wait_for_leader(60)
        return Term(info.leader_epoch, info.leader_id, self.s.kind(info.leader_id))

    def lead(self, kind: str) -> Term:
        """Move leadership to a controller of ``kind``: kraftnode -> Kafka by kraftnode's
        transfer-leadership, Kafka -> anything by kill -9 of the Kafka leader (restarted once a
        new leader is elected). Every new term is recorded and checked (``in_term``)."""
        now = self.current()
        if not self.terms:
            self.in_term(now)
        # with two Kafka voters the election after a kill may go to the other Kafka voter (on this
        # host Kafka 3.9 won ~4 in 5 of them: issue 26 must-show 5's business); bounded attempts
        for _ in range(20):
            if now.kind == kind:
                return now
            t0 = time.monotonic()
            seen = {b: len(self.s.brokers[b].log()) for b in BROKER_IDS if self.s.brokers[b].running}
            if now.kind == "kraftnode":
                to = next(i for i in self.s.kafka_ids if i in self.s.running_controllers())
                r = subprocess.run([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                                    f"127.0.0.1:{self.s.cl.port(now.leader)}", "transfer-leadership", "--to", str(to)],
                                   capture_output=True, text=True, timeout=60)
                assert r.returncode == 0, r.stdout + r.stderr
                info = self.s.wait_for_leader(60, min_epoch=now.epoch + 1)
                how = f"transfer-leadership to {to}"
            else:
                self.s.kill_controller(now.leader)
                info = self.s.wait_for_leader(60, exclude=now.leader, min_epoch=now.epoch + 1)
                how = f"kill -9 of {now.leader}"
            new = Term(info.leader_epoch, info.leader_id, self.s.kind(info.leader_id))
            elected = datetime.now()
            print(f"epoch {now.epoch} {now.kind} {now.leader} -> epoch {new.epoch} {new.kind} {new.leader} "
                  f"({how}, {time.monotonic() - t0:.1f}s)")
            for b, offset in seen.items():
                self.follows(b, offset, new, elected)
            for i in (1, 2, 3):
                if i not in self.s.running_controllers():
                    self.s.start_controller(i)
            self.in_term(new)
            now = new
        raise AssertionError(f"no {kind} leader after twenty handovers: {self.terms}")

    def follows(self, b: int, offset: int, term: Term, elected: datetime) -> None:
        """Broker ``b`` (its log from ``offset``) turns its heartbeat channel to the new
        controller promptly: the broker is not pinned to the old one (issue 26: a node that
        does not advertise an API is refused locally, never telling the broker to look again),
        and it is without a controller for no longer than the election (+ 5 s of slack on a
        loaded host, well under the session timeout)."""
        # Kafka 3.9 names the channel ([broker-N-to-controller-heartbeat-channel-manager]: ...);
        # Kafka 4.x's NodeToControllerRequestThread does not
        pat = re.compile(r"^\[([\d-]+ [\d:,]+)\] INFO (?:\[broker-\d+-to-controller-heartbeat-channel-manager\]: )?"
                         rf"Recorded new KRaft controller, from now on will use node \S+ \(id: {term.leader} ", re.M)

        def found() -> re.Match[str] | None:
            return pat.search(self.s.brokers[b].log()[offset:])
        m: re.Match[str] = wait_until(f"broker {b}'s heartbeats to controller {term.leader}", found, 30, self.s.logs)
        at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
        late = (at - elected).total_seconds()
        print(f"  broker {b} heartbeats to {term.kind} {term.leader} {late:+.1f}s after the election was seen")
        assert late < 5, (b, term, late)

    def in_term(self, term: Term) -> None:
        """A topic created through a broker, the producer's acks growing, leader epochs not
        going back -- all under ``term`` (checked still current at the end)."""
        self.terms.append(term)
        name = f"term-{term.epoch}-{term.kind}"
        create_topic(self.broker_port(), name, 2)
        wait_until(f"{name} in the brokers' metadata", lambda: partitions(self.broker_port(), name), 60, self.s.logs)
        acked = len(self.producer.named("producer_send_success"))
        wait_until(f"the producer's acks under epoch {term.epoch}",
                   lambda: len(self.producer.named("producer_send_success")) > acked + 50, 60, self.s.logs)
        for p, epoch in leader_epochs(self.broker_port(), TOPIC).items():
            seen = self.leader_epochs.setdefault(p, [])
            assert not seen or epoch >= seen[-1], (p, seen, epoch)
            seen.append(epoch)
        assert self.current().epoch == term.epoch, ("the term ended early", term, self.current())

    # ------------------------------------------------------------------ brokers
    def kill_broker(self, b: int) -> None:
        """kill -9 of broker ``b``: the active controller fences it after the session timeout,
        its leaderships move to the other broker."""
        term = self.current()
        fences_before = self.fence_lines(term.leader, b)
        self.s.brokers[b].kill()
        self.kills += 1
        other = self.broker_port(avoid=b)

        def moved() -> bool:
            parts = partitions(other, TOPIC)
            return parts is not None and all(p.leader != b and b not in p.isr for p in parts.values())
        wait_until(f"broker {b} fenced under {term}", moved, SESSION_TIMEOUT_MS / 1000 + 30, self.s.logs)
        wait_until(f"the {term.kind} controller {term.leader} to log broker {b}'s fence",
                   lambda: self.fence_lines(term.leader, b) > fences_before, 20, self.s.logs)
        assert self.current() == term, "the fence must be this term's"

    def restart_broker(self, b: int) -> None:
        """Broker ``b`` restarted: registered anew (a higher broker epoch) and unfenced by the
        controller leading now, back in every ISR; InitProducerId on it allocates a block."""
        term = self.current()
        epochs = self.s.registrations(b)
        self.s.brokers[b].start()
        self.s.brokers[b].wait_started(120)
        wait_until(f"broker {b} unfenced", lambda: "The broker has been unfenced"
                   in self.s.brokers[b].log(since_start=True), 60, self.s.logs)
        assert self.s.registrations(b)[-1] > epochs[-1], (epochs, self.s.registrations(b))
        wait_until(f"broker {b} back in every ISR", lambda: all(
            b in p.isr for p in (partitions(self.s.ports[b], TOPIC) or {}).values()) and partitions(
            self.s.ports[b], TOPIC), 90, self.s.logs)
        self.producer_ids.append((b, init_producer_id(self.s.ports[b]), term.kind))
        assert self.current() == term, "the unfence must be this term's"

    def fence_lines(self, controller: int, b: int) -> int:
        line = f"Fencing broker {b} because its session has timed out."
        if self.s.kind(controller) == "kafka":
            return self.s.controllers[controller].controller_log().count(line)
        return self.s.cl.log(controller).count(line)


# ---------------------------------------------------------------------- wire helpers (through a broker)
def retrying(what: str, send: Callable[[], int], ok: set[int], timeout: float = 90) -> int:
    """Send until the answer's error code is in ``ok`` (a retriable one, or a dropped connection,
    is tried again: a forwarded request may meet a handover)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            code = send()
        except OSError as e:
            last = e
        else:
            if code in ok:
                return code
            assert code in RETRIABLE, f"{what}: error {code}"
            last = code
        time.sleep(0.5)
    raise AssertionError(f"{what}: still {last} after {timeout}s")


def create_topic(port: int, name: str, n: int) -> None:
    C = w.CreateTopicsRequest
    req = C(topics=[C.CreatableTopic(name=name, num_partitions=n, replication_factor=2, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False)
    retrying(f"create {name}", lambda: int(call(port, CREATE_TOPICS, 7, req, timeout=40)[1]
                                           .topics[0].error_code), {0, TOPIC_ALREADY_EXISTS})  # type: ignore[attr-defined]


def add_partitions(port: int, name: str, count: int) -> None:
    P = w.CreatePartitionsRequest
    req = P(topics=[P.CreatePartitionsTopic(name=name, count=count, assignments=None)], timeout_ms=30000,
            validate_only=False)
    # a retry after a lost answer finds the count already there: INVALID_PARTITIONS (37)
    retrying(f"partitions of {name}", lambda: int(call(port, CREATE_PARTITIONS, 3, req, timeout=40)[1]
                                                  .results[0].error_code), {0, 37})  # type: ignore[attr-defined]


def set_config(port: int, name: str, key: str, value: str) -> None:
    IA = w.IncrementalAlterConfigsRequest
    req = IA(validate_only=False, resources=[IA.AlterConfigsResource(resource_type=2, resource_name=name, configs=[
        IA.AlterableConfig(name=key, config_operation=0, value=value)])])
    retrying(f"config of {name}", lambda: int(call(port, INCREMENTAL_ALTER_CONFIGS, 1, req, timeout=40)[1]
                                              .responses[0].error_code), {0})  # type: ignore[attr-defined]


def topic_config(port: int, name: str, key: str) -> str | None:
    D = w.DescribeConfigsRequest
    _, r = call(port, DESCRIBE_CONFIGS, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=2, resource_name=name, configuration_keys=[key])], include_synonyms=False,
        include_documentation=False))
    res = r.results[0]  # type: ignore[attr-defined]
    return next((c.value for c in res.configs if c.name == key), None) if res.error_code == 0 else None


def delete_topic(port: int, name: str) -> None:
    D = w.DeleteTopicsRequest
    zero = __import__("uuid").UUID(int=0)
    req = D(timeout_ms=30000, topic_names=[], topics=[D.DeleteTopicState(name=name, topic_id=zero)])
    retrying(f"delete {name}", lambda: int(call(port, DELETE_TOPICS, 6, req, timeout=40)[1]
                                           .responses[0].error_code), {0, UNKNOWN_TOPIC_OR_PARTITION})  # type: ignore[attr-defined]


def init_producer_id(port: int) -> int:
    """InitProducerId (idempotent, no transactional id) answered by the broker at ``port``: a
    broker without a block of producer ids asks the active controller for one first."""
    got: list[int] = []

    def send() -> int:
        _, r = call(port, INIT_PRODUCER_ID, 4, w.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1), timeout=40)
        got.append(r.producer_id)  # type: ignore[attr-defined]
        return int(r.error_code)  # type: ignore[attr-defined]
    retrying("InitProducerId", send, {0})
    return got[-1]


def leader_epochs(port: int, topic: str) -> dict[int, int]:
    M = w.MetadataRequest
    _, resp = call(port, METADATA, 12, M(topics=[M.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
    t = resp.topics[0]  # type: ignore[attr-defined]
    assert t.error_code == 0, t
    return {p.partition_index: p.leader_epoch for p in t.partitions}


# ---------------------------------------------------------------------- the log and the brokers' logs
def producer_id_blocks(setup: Setup, node: int) -> list[tuple[int, int, int]]:
    """(batch leader epoch, broker id, next producer id) of every ProducerIdsRecord in kraftnode
    node ``node``'s log, in log order."""
    r = subprocess.run([sys.executable, "-m", "kraftnode", "dump-log", str(setup.cl.root / f"node{node}" / "metadata")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out, epoch = [], -1
    for line in r.stdout.splitlines():
        m = re.search(r"partitionLeaderEpoch: (\d+)", line)
        if m:
            epoch = int(m.group(1))
        if "PRODUCER_IDS_RECORD" in line:
            data = json.loads(line[line.index("payload: ") + len("payload: "):])["data"]
            out.append((epoch, data["brokerId"], data["nextProducerId"]))
    return out


def partition_epochs(setup: Setup, b: int, topic: str) -> dict[int, list[tuple[int, int]]]:
    """(leader epoch, partition epoch) of each leader or follower start broker ``b``'s
    state-change log records for ``topic``'s partitions, in order."""
    path = setup.root / f"broker{b}" / "logs" / "state-change.log"
    out: dict[int, list[tuple[int, int]]] = {}
    pat = re.compile(rf"(?:Leader|Follower) {re.escape(topic)}-(\d+) .*?starts at leader epoch (\d+) .*?"
                     r"with partition epoch (\d+)")
    for m in pat.finditer(path.read_text(errors="replace") if path.exists() else ""):
        out.setdefault(int(m.group(1)), []).append((int(m.group(2)), int(m.group(3))))
    return out


def producer_config(root: Path) -> Path:
    """The idempotent producer's config, plus a metadata refresh every 2 s: the journey restarts
    one broker and kills the other seconds later, and a Kafka 3.9 client whose metadata still
    lists only the killed broker (the restarted one was fenced at its last refresh) never finds
    the other again (``metadata.recovery.strategy`` is ``none`` by default in 3.9) -- a client
    matter, the same on an all-Kafka cluster."""
    path = idempotent_producer_config(root)
    path.write_text(path.read_text() + "metadata.max.age.ms=2000\nmetadata.recovery.strategy=rebootstrap\n")
    return path


def start(kafka_home: KafkaHome, root: Path, kafka_voters: tuple[int, ...], controller_extra: str = CONTROLLER_EXTRA,
          release: tuple[str, ...] | None = None, live_group: tuple[str, ...] = ()) -> Journey:
    """The quorum (``kafka_voters`` genuine, the rest kraftnode, formatted with ``release``),
    the brokers, the topic and the verifiable producer, acking; with ``live_group`` (more
    kafka-verifiable-consumer arguments, e.g. ``--group-protocol consumer``) a group consumer of
    the topic too, running throughout (``finish`` reads the acked records back through it)."""
    s = Setup(kafka_home, root, controller_extra, BROKER_EXTRA, voters=3, brokers=BROKER_IDS,
              kafka_voters=kafka_voters, release=release)
    s.start_all(CLUSTER_ID)
    create_topic(s.ports[101], TOPIC, 4)
    wait_until("the topic", lambda: partitions(s.ports[101], TOPIC), 60, s.logs)
    producer = s.tool("kafka-verifiable-producer", "--bootstrap-server", s.bootstrap, "--topic", TOPIC,
                      "--acks", "-1", "--throughput", "100", "--max-messages", "-1",
                      "--producer.config", str(producer_config(s.root)))
    wait_until("the producer's first acks", lambda: len(producer.named("producer_send_success")) > 50, 90, s.logs)
    consumer = None
    if live_group:
        consumer = s.tool("kafka-verifiable-consumer", "--bootstrap-server", s.bootstrap, "--topic", TOPIC,
                          "--group-id", "live", "--reset-policy", "earliest", "--verbose", *live_group)
        wait_until("the group consumer's first records", lambda: len(consumer.named("record_data")) > 50, 90,
                   s.logs)
    return Journey(s, producer, consumer=consumer)


def finish(j: Journey) -> None:
    """Every acked record read back; no unsupported API; epochs only grew; producer-id blocks
    disjoint."""
    s = j.s
    j.producer.stop()
    acked = {(e["partition"], e["offset"]): e["value"] for e in j.producer.named("producer_send_success")}
    assert not j.producer.named("producer_send_error"), j.producer.named("producer_send_error")[:5]
    consumer = j.consumer or s.tool("kafka-verifiable-consumer", "--bootstrap-server", s.bootstrap, "--topic",
                                    TOPIC, "--group-id", "readback", "--reset-policy", "earliest", "--verbose")

    def consumed() -> dict[tuple[int, int], str]:
        return {(e["partition"], e["offset"]): e["value"] for e in consumer.named("record_data")}
    wait_until("every acked record consumed", lambda: set(acked) <= set(consumed()), 120,
               lambda: f"missing {sorted(set(acked) - set(consumed()))[:20]}\n" + s.logs())
    got = consumed()
    assert all(got[k] == v for k, v in acked.items())
    # idempotence across the handovers: each value at one offset only (no retry written twice)
    assert_each_value_at_one_offset(got)
    consumer.stop()
    # no running broker lost its controller for as long as a session across the handovers: the
    # only fences any controller of either kind decided are those of the killed brokers
    fences = sum(j.fence_lines(i, b) for i in (1, 2, 3) for b in BROKER_IDS)
    assert fences == j.kills, (fences, j.kills)
    print(f"{len(acked)} acked records across {len(j.terms)} terms: "
          + ", ".join(f"{t.epoch}:{t.kind}{t.leader}" for t in j.terms))
    for b in BROKER_IDS:
        bad = [ln for ln in s.brokers[b].log().splitlines() if UNSUPPORTED.search(ln) or REPLAY_FAULT.search(ln)]
        assert not bad, (b, bad[:5])
        regs = s.registrations(b)
        assert regs == sorted(set(regs)), (b, regs)  # broker epochs only grow
        for p, seq in partition_epochs(s, b, TOPIC).items():
            assert seq == sorted(seq), (b, p, seq)  # leader and partition epochs only grow
            assert [pe for _, pe in seq] == sorted(pe for _, pe in seq), (b, p, seq)
    if not j.producer_ids:
        return
    # producer-id blocks: allocated under both kinds of term, disjoint, in the log in order
    blocks = producer_id_blocks(s, s.kraft_ids[0])
    kinds = {t.epoch: t.kind for t in j.terms}
    print("producer-id blocks (epoch, broker, next id):", blocks)
    nexts = [n for _, _, n in blocks]
    assert nexts == sorted(set(nexts)), blocks
    assert {kinds.get(e) for e, _, _ in blocks} >= {"kafka", "kraftnode"}, (blocks, kinds)
    firsts = [pid for _, pid, _ in j.producer_ids]
    assert len(set(firsts)) == len(firsts), j.producer_ids
    for b, pid, _ in j.producer_ids:  # each id came from the block its broker was given last
        assert any(bb == b and n - 1000 <= pid < n for _, bb, n in blocks), (b, pid, blocks)


def alter_and_delete(j: Journey, name: str, count: int, key: str, value: str) -> None:
    """Through a broker: ``name`` grows to ``count`` partitions, gets ``key=value``, is deleted
    -- each seen by the brokers before the next."""
    port = j.broker_port()
    add_partitions(port, name, count)
    wait_until(f"{count} partitions of {name}", lambda: len(partitions(port, name) or {}) == count, 30, j.s.logs)
    set_config(port, name, key, value)
    wait_until(f"{key} of {name}", lambda: topic_config(port, name, key) == value, 30, j.s.logs)
    delete_topic(port, name)
    wait_until(f"{name} gone", lambda: partitions(port, name) is None, 30, j.s.logs)


def _check_clean(s: Setup) -> None:
    s.check_clean()
    for i in s.kraft_ids:
        assert "Traceback" not in s.cl.log(i)




def check_clean(s: Setup) -> None:
    """No broker or Kafka controller logged an error or a fault, no kraftnode controller a
    traceback."""
    s.check_clean()
    for i in s.kraft_ids:
        assert "Traceback" not in s.cl.log(i)
