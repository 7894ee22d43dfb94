"""Genuine Kafka 4.4 brokers on three kraftnode controllers formatted at Kafka 4.4's default
features (issue 37, must-show 1), one shared cluster for the whole module.

``kraftnode format`` without ``--release-version`` finalizes what ``kafka-storage.sh format``
of Kafka 4.4 finalizes (metadata.version 4.4-IV2, group.version, transaction.version 2,
share.version, eligible.leader.replicas.version, streams.version); three Kafka 4.4 brokers
(``process.roles=broker``) register at those levels. Through the brokers:

1. an idempotent ``kafka-verifiable-producer.sh`` (acks=all) writes to a 6-partition topic of
   replication factor 3 while two consumer groups read it with KIP-848's protocol
   (``group.protocol=consumer``): Kafka 4.4's ``kafka-verifiable-consumer.sh --group-protocol
   CONSUMER`` (KafkaConsumer) and librdkafka's (confluent-kafka). Across a kill -9 of a broker
   (fenced, leaderships moved, restarted: back in every ISR) and a kill -9 of the active
   kraftnode controller (another takes over; nobody re-registers), every acked record is read
   by both groups, each value at exactly one offset (idempotence);
2. a share group (KIP-932): Kafka 4.4's ``KafkaShareConsumer`` with explicit acknowledgement
   (tests/interop/java/features44) reads a topic -- a RELEASEd record comes back with a higher
   delivery count, every other is ACCEPTed and committed -- and ``kafka-share-groups.sh
   --describe`` shows the group and its start offsets past every record;
3. a transactional producer with transaction.version 2 (KIP-890: the epoch bumps with every
   transaction) commits, aborts and commits; a ``read_committed`` consumer reads exactly the
   committed records, a ``read_uncommitted`` one the aborted ones as well.

Also through the brokers: a broker's ``cordoned.log.dirs`` (KIP-1066) keeps new replicas off it;
``kafka-client-metrics.sh`` (KIP-714); and UnregisterController (4.4) removes a controller's
registration, which the brokers replay. No broker logs an ERROR, a fault or an
UnsupportedVersionException, and no kraftnode controller a traceback (``Setup.check_clean`` and :func:`assert_no_unsupported_version`).
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

import tests.support.cluster as cluster_support
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.registry import UNREGISTER_CONTROLLER
from tests.support.cluster import CLUSTER_ID, wait_serving
from tests.support.kafka import KafkaHome, java_env
from tests.support.kraft_brokers import (
    BROKERS,
    Setup,
    assert_each_value_at_one_offset,
    idempotent_producer_config,
    partitions,
    wait_until,
)
from tests.support.node import call

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]

SESSION_TIMEOUT_MS = 4000
CONTROLLER_EXTRA = (f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
                    "leader.imbalance.check.interval.seconds=5\n")
# Kafka 4.4 brokers with small pools (a 2-core host) and quick group timeouts; the internal
# topics (offsets, transactions, share-group state) replicated 3 times with min.insync.replicas 2
BROKER_EXTRA = ("broker.heartbeat.interval.ms=500\n"
                f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
                "offsets.topic.replication.factor=3\noffsets.topic.num.partitions=3\n"
                "transaction.state.log.replication.factor=3\ntransaction.state.log.min.isr=2\n"
                "transaction.state.log.num.partitions=3\n"
                "share.coordinator.state.topic.replication.factor=3\nshare.coordinator.state.topic.min.isr=2\n"
                "share.coordinator.state.topic.num.partitions=3\n"
                "group.consumer.session.timeout.ms=6000\ngroup.consumer.min.session.timeout.ms=1000\n"
                "group.consumer.heartbeat.interval.ms=500\ngroup.consumer.min.heartbeat.interval.ms=100\n"
                "group.share.session.timeout.ms=6000\ngroup.share.min.session.timeout.ms=1000\n"
                "group.share.heartbeat.interval.ms=500\ngroup.share.min.heartbeat.interval.ms=100\n"
                "replica.lag.time.max.ms=5000\nnum.network.threads=2\nnum.io.threads=2\n"
                "background.threads=2\nlog.cleaner.threads=1\n")
TOPIC = "verifiable44"
TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def setup(kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with pytest.MonkeyPatch.context() as mp:
        # kraftnode format's own defaults (Kafka 4.4's), not the suite's 3.9-IV0
        mp.setattr(cluster_support, "SUITE_RELEASE", (), raising=False)
        s = Setup(kafka44, tmp_path_factory.mktemp("brokers44"), CONTROLLER_EXTRA, BROKER_EXTRA)
    try:
        s.start_all(CLUSTER_ID)
        yield s
    finally:
        s.close()
        s.check_clean()
        assert_no_unsupported_version(s)


def assert_no_unsupported_version(s: Setup) -> None:
    """What a broker logs when its controller lacks an API or a version it needs (at any level)."""
    for b, srv in s.brokers.items():
        bad = [ln for ln in srv.log().splitlines() if "UnsupportedVersion" in ln or "UNSUPPORTED_VERSION" in ln]
        assert not bad, (b, bad[:5])


def finalized(s: Setup) -> dict[str, str]:
    """``kafka-features.sh describe`` through a broker: feature -> finalized level (metadata.version
    by its name, 4.4-IV2, the others by number)."""
    r = s.cli("kafka-features", "describe")
    assert r.returncode == 0, r.stdout + r.stderr
    return {m.group(1): m.group(2) for m in
            re.finditer(r"Feature: (\S+)\s+SupportedMinVersion: \S+\s+SupportedMaxVersion: \S+\s+"
                        r"FinalizedVersionLevel: (\S+)", r.stdout)}


def java(s: Setup, *args: object, timeout: float = 240) -> list[str]:
    classes = s.kafka.compile("features44")
    r = subprocess.run(s.kafka.java(classes, "Features44", *map(str, args)), capture_output=True, text=True,
                       timeout=timeout, env=java_env())
    assert r.returncode == 0, f"Features44 {args} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout.splitlines()


def test_the_brokers_register_at_kafka_44s_default_features(setup: Setup) -> None:
    levels = finalized(setup)
    print("finalized:", levels)
    assert levels["metadata.version"] == "4.4-IV2"
    assert int(levels["group.version"]) >= 1 and int(levels["transaction.version"]) == 2
    assert int(levels["share.version"]) >= 1
    setup.create_topic(TOPIC, "--partitions", "6", "--replication-factor", "3")
    parts = partitions(setup.any_port(), TOPIC)
    assert parts is not None and all(sorted(p.isr) == list(BROKERS) for p in parts.values()), parts


class RdkafkaConsumer:
    """librdkafka's KIP-848 consumer (``group.protocol=consumer``) polling in a thread."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": True,
                                  "auto.commit.interval.ms": 500})
        self.consumer.subscribe([topic])
        self.got: list[tuple[int, int, str]] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            m = self.consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                self.errors.append(str(m.error()))
                continue
            self.got.append((m.partition(), m.offset(), (m.value() or b"").decode()))
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def test_consumer_groups_read_every_acked_record_across_a_broker_and_a_controller_kill(setup: Setup) -> None:
    producer = setup.tool("kafka-verifiable-producer", "--bootstrap-server", setup.bootstrap, "--topic", TOPIC,
                          "--acks", "-1", "--throughput", "100", "--max-messages", "-1",
                          "--producer.config", str(idempotent_producer_config(setup.root)))
    java_consumer = setup.tool("kafka-verifiable-consumer", "--bootstrap-server", setup.bootstrap, "--topic", TOPIC,
                               "--group-id", "verifiers44", "--group-protocol", "CONSUMER",
                               "--reset-policy", "earliest", "--verbose")
    rd = RdkafkaConsumer(setup.bootstrap, "rdkafka44", TOPIC)
    try:
        wait_until("the producer's first acks", lambda: len(producer.named("producer_send_success")) > 100, 90,
                   setup.logs)
        wait_until("both groups' first records", lambda: java_consumer.named("record_data") and rd.got, 90,
                   setup.logs)

        # kill -9 of broker 101: fenced within the session timeout; restarted, back in every ISR
        victim = 101
        setup.brokers[victim].kill()
        t0 = time.monotonic()
        other = next(setup.ports[b] for b in BROKERS if b != victim)

        def fenced() -> bool:
            parts = partitions(other, TOPIC)
            return parts is not None and all(p.leader != victim and victim not in p.isr for p in parts.values())
        wait_until(f"broker {victim} fenced", fenced, SESSION_TIMEOUT_MS / 1000 + 15, setup.logs)
        print(f"broker {victim} fenced and out of every ISR {time.monotonic() - t0:.1f}s after kill -9")
        setup.brokers[victim].start()
        setup.brokers[victim].wait_started(180)
        wait_until(f"broker {victim} back in every ISR", lambda: all(
            victim in p.isr for p in (partitions(other, TOPIC) or {}).values()) and partitions(other, TOPIC), 90,
            setup.logs)

        # kill -9 of the active kraftnode controller: another leads, nobody re-registers
        registered = {b: setup.registrations(b) for b in BROKERS}
        active = setup.active_controller()
        setup.cl.kill(active)
        t0 = time.monotonic()
        new = setup.cl.wait_for_leader(30, exclude=active).leader_id
        print(f"kraftnode controller {active} killed: {new} leads after {time.monotonic() - t0:.1f}s")
        setup.create_topic("after-failover44", "--partitions", "3", "--replication-factor", "3")
        assert {b: setup.registrations(b) for b in BROKERS} == registered
        setup.cl.start(active)
        wait_serving(setup.cl, active)

        time.sleep(3)
        producer.stop()
        acked = {(e["partition"], e["offset"]): e["value"] for e in producer.named("producer_send_success")}
        assert len(acked) > 500, len(acked)
        assert not producer.named("producer_send_error"), producer.named("producer_send_error")[:5]

        def java_got() -> dict[tuple[int, int], str]:
            return {(e["partition"], e["offset"]): e["value"] for e in java_consumer.named("record_data")}

        def rd_got() -> dict[tuple[int, int], str]:
            return {(p, o): v for p, o, v in rd.got}
        wait_until("every acked record read by both groups",
                   lambda: set(acked) <= set(java_got()) and set(acked) <= set(rd_got()), 90,
                   lambda: f"java missing {sorted(set(acked) - set(java_got()))[:10]}, rdkafka missing "
                           f"{sorted(set(acked) - set(rd_got()))[:10]}\n" + setup.logs())
    finally:
        java_consumer.stop()
        rd.stop()
    for name, got, deliveries in (("KafkaConsumer", java_got(), len(java_consumer.named("record_data"))),
                                  ("librdkafka", rd_got(), len(rd.got))):
        assert all(got[k] == v for k, v in acked.items()), name
        assert_each_value_at_one_offset(got)  # idempotence: no retried send written twice
        print(f"{name}: {len(acked)} acked records all read, each value at one offset; {deliveries} deliveries "
              f"({deliveries - len(got)} redelivered after the kills)")
    assert not [e for e in rd.errors if "_PARTITION_EOF" not in e], rd.errors[:5]


def test_a_share_group_consumes_a_topic_with_acknowledgements(setup: Setup) -> None:
    topic, group = "shared44", "share44"
    setup.create_topic(topic, "--partitions", "3", "--replication-factor", "3")
    # share groups start at the latest offset unless the group says otherwise (GroupConfig)
    r = setup.cli("kafka-configs", "--alter", "--entity-type", "groups", "--entity-name", group,
                  "--add-config", "share.auto.offset.reset=earliest")
    assert r.returncode == 0, r.stdout + r.stderr
    values = [f"s{i}" for i in range(30)]
    r = subprocess.run([str(setup.kafka.script("kafka-console-producer")), "--bootstrap-server", setup.bootstrap,
                        "--topic", topic, "--producer-property", "acks=all"], input="\n".join(values) + "\n",
                       capture_output=True, text=True, timeout=120, env=java_env())
    assert r.returncode == 0, r.stderr
    out = java(setup, "share", setup.bootstrap, group, topic, len(values), TIMEOUT_MS)
    records = [ln.upper().split() for ln in out if ln.startswith("record ")]  # AcknowledgeType prints lower case
    released = [x for x in records if x[5] == "RELEASE"]
    accepted = [x for x in records if x[5] == "ACCEPT"]
    assert len(released) == 1, out
    assert sorted(x[3] for x in accepted) == sorted(v.upper() for v in values), out  # each value accepted once
    again = next(x for x in accepted if x[3] == released[0][3])
    assert int(again[4]) > int(released[0][4]), (released, again)  # redelivered, a higher delivery count
    commits = [ln.split() for ln in out if ln.startswith("commit ")]
    assert commits and all(c[2] == "0" for c in commits), commits
    assert out[-1] == f"done {len(values)}", out

    def described() -> str | None:
        d = setup.cli("kafka-share-groups", "--describe", "--group", group)
        text = d.stdout + d.stderr
        return text if d.returncode == 0 and topic in text else None
    text = wait_until("the share group described", described, 60)
    print(text)
    assert group in text
    # every partition that held records has a share-partition state with nothing left to deliver
    # (LAG 0); one that never held any was never initialized ("-"), as a genuine 4.4 cluster shows it
    lines = text.splitlines()
    header = next(ln.split() for ln in lines if ln.startswith("GROUP "))
    rows = {int(r["PARTITION"]): r for r in (dict(zip(header, ln.split(), strict=False)) for ln in lines
                                              if ln.startswith(group) and topic in ln)}
    assert sorted(rows) == [0, 1, 2], text
    ends = {p: int(m.group(1)) for p, m in ((p, re.search(rf"{topic}:{p}:(\d+)", offsets_text(setup, topic)))
                                            for p in range(3)) if m}
    assert sum(ends.values()) == len(values), ends
    held = {int(x[1]) for x in records}
    assert held == {p for p, end in ends.items() if end > 0}, (held, ends)
    for p in held:
        assert rows[p]["LAG"] == "0" and rows[p]["START-OFFSET"] != "-", text


def offsets_text(setup: Setup, topic: str) -> str:
    r = setup.cli("kafka-get-offsets", "--topic", topic, "--time", "-1")
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_transactions_v2_commit_and_abort_and_read_committed_sees_exactly_the_committed(setup: Setup) -> None:
    topic, txid = "txn44", "txn44-producer"
    setup.create_topic(topic, "--partitions", "3", "--replication-factor", "3")
    out = java(setup, "txn", setup.bootstrap, txid, topic)
    committed = sorted(ln.split()[1] for ln in out if ln.startswith("committed "))
    aborted = sorted(ln.split()[1] for ln in out if ln.startswith("aborted "))
    assert out[-1] == "done" and len(committed) == 10 and len(aborted) == 5, out
    read_committed = java(setup, "read", setup.bootstrap, topic, "read_committed", TIMEOUT_MS)
    got = sorted(ln.split()[3] for ln in read_committed if ln.startswith("value "))
    assert got == committed, read_committed
    uncommitted = java(setup, "read", setup.bootstrap, topic, "read_uncommitted", TIMEOUT_MS)
    assert sorted(ln.split()[3] for ln in uncommitted if ln.startswith("value ")) == sorted(committed + aborted)
    # transaction.version 2 (KIP-890): every transaction's end bumps the producer epoch
    d = setup.cli("kafka-transactions", "describe", "--transactional-id", txid)
    assert d.returncode == 0, d.stdout + d.stderr
    print(d.stdout)
    header, row = d.stdout.strip().splitlines()[:2]
    cols = dict(zip((c.strip() for c in header.split("\t")), (c.strip() for c in row.split("\t")), strict=False))
    assert int(cols["ProducerEpoch"]) >= 3, cols
    assert cols["TransactionState"] == "CompleteCommit", cols


def test_a_broker_with_its_log_dirs_cordoned_gets_no_new_replicas(setup: Setup) -> None:
    """KIP-1066 end to end: ``cordoned.log.dirs`` set on broker 103 (a dynamic broker config,
    forwarded by the broker to the controller); the broker reports its cordoned directory in its
    heartbeats, the controller writes it into the registration and stops placing replicas there:
    replication factor 3 cannot be reached with two usable brokers, 2 is placed on 101 and 102
    only. Uncordoned, 103 is used again."""
    victim = 103
    data = str(setup.root / f"broker{victim}" / "data")

    def alter(*args: str) -> None:
        r = setup.cli("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", str(victim), *args)
        assert r.returncode == 0, r.stdout + r.stderr
    alter("--add-config", f"cordoned.log.dirs={data}")

    def refused() -> str | None:
        r = setup.topics_cli("--create", "--topic", "cordon-rf3", "--partitions", "1", "--replication-factor", "3")
        text = r.stdout + r.stderr
        return text if r.returncode != 0 and "InvalidReplicationFactorException" in text else None
    text = wait_until("replication factor 3 refused with broker 103 cordoned", refused, 60, setup.logs)
    assert "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered." in text
    setup.create_topic("cordon-rf2", "--partitions", "6", "--replication-factor", "2")
    parts = partitions(setup.any_port(), "cordon-rf2")
    assert parts is not None and {b for p in parts.values() for b in p.replicas} == {101, 102}, parts
    # the controller wrote the broker's cordoned directory into its registration
    assert any(f"in broker {victim} marked cordoned" in setup.cl.log(i) for i in setup.cl.ids)
    alter("--delete-config", "cordoned.log.dirs")

    def placed() -> bool:
        r = setup.topics_cli("--create", "--topic", "uncordoned-rf3", "--partitions", "1",
                             "--replication-factor", "3")
        return r.returncode == 0
    wait_until("replication factor 3 placed again", placed, 60, setup.logs)


def test_kafka_client_metrics_sh_through_a_broker(setup: Setup) -> None:
    """KIP-714's subscriptions (``kafka-client-metrics.sh``, forwarded by the broker to the
    controller as CLIENT_METRICS configs): written, described by the brokers, and an interval out
    of Kafka's range refused with Kafka's message."""
    r = setup.cli("kafka-client-metrics", "--alter", "--name", "sub44", "--metrics", "org.apache.kafka.producer.",
                  "--interval", "1000", "--match", "client_software_name=apache-kafka-java")
    assert r.returncode == 0, r.stdout + r.stderr

    def described() -> str | None:
        d = setup.cli("kafka-client-metrics", "--describe", "--name", "sub44")
        return d.stdout if d.returncode == 0 and "interval.ms=1000" in d.stdout else None
    text = wait_until("the subscription described", described, 30)
    assert "metrics=org.apache.kafka.producer." in text and "match=client_software_name=apache-kafka-java" in text
    r = setup.cli("kafka-client-metrics", "--alter", "--name", "sub44", "--interval", "10")
    assert r.returncode != 0
    assert "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)" in r.stdout + r.stderr


def test_unregister_controller_at_4_4_iv2(setup: Setup) -> None:
    """UnregisterController (Kafka 4.4) to the active kraftnode controller: an id without a
    registration is CONTROLLER_ID_NOT_REGISTERED with Kafka's message; a follower's registration
    is removed by an UnregisterControllerRecord, which the 4.4 brokers replay (no fault: the
    fixture's check), and the follower registers itself again, as Kafka's controllers do."""
    active = setup.active_controller()
    follower = next(i for i in setup.cl.ids if i != active)
    U = w.UnregisterControllerRequest
    _, resp = call(setup.cl.port(active), UNREGISTER_CONTROLLER, 0, U(controller_id=99))
    assert (resp.error_code, resp.error_message) == (  # type: ignore[attr-defined]
        Errors.CONTROLLER_ID_NOT_REGISTERED, "Controller ID 99 is not currently registered.")
    before = setup.cl.log(active).count(f"registered controller {follower} ")
    _, resp = call(setup.cl.port(active), UNREGISTER_CONTROLLER, 0, U(controller_id=follower))
    assert resp.error_code == 0, resp  # type: ignore[attr-defined]
    wait_until(f"controller {follower} registered again",
               lambda: setup.cl.log(active).count(f"registered controller {follower} ") > before, 60, setup.logs)
