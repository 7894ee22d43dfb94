"""Issue 38, must-show 2: the rolling upgrade of a mixed static quorum from Kafka 3.9 to 4.4, by
docs/operations.md's runbook ("Upgrading a mixed quorum from Kafka 3.9 to 4.4"), every documented
statement run as written (Kafka 4.4's upgrade guide, "Upgrading Servers to 4.4.0 from any version
3.3.x through 4.3.x").

Three static voters (``controller.quorum.voters``, kraft.version 0) -- (a) two Kafka 3.9
controllers and one kraftnode controller, (b) one Kafka 3.9 controller and two kraftnode
controllers -- and three Kafka 3.9 brokers at metadata.version 3.9-IV0, an idempotent verifiable
producer (acks -1) running throughout. Each Kafka controller is stopped and started again with
Kafka 4.4's ``bin/`` (same properties, same data directory), then each broker;
``kafka-features.sh upgrade --release-version 4.4`` runs with a Kafka controller active in (a)
and a kraftnode controller active in (b); ``upgrade --feature kraft.version=1``; then every node
is restarted, one at a time, with ``controller.quorum.bootstrap.servers`` in place of
``controller.quorum.voters``. Afterwards a KIP-848 consumer group (``group.protocol=consumer``)
reads every acknowledged record back exactly once, a share group consumes
(``kafka-console-share-consumer.sh``; share.version 2 is among the levels 4.4 finalizes) and a
transactional producer commits at transaction.version 2, read back ``read_committed``. The
brokers registered once per start of their own and never otherwise: the BrokerRegistration
records of the metadata log (``kraftnode dump-log``) are exactly the brokers' starts.

A third journey starts the Kafka nodes at 4.0.2 with every voter formatted at 4.0's default,
metadata.version 4.0-IV3 (transaction.version 2 and group.version 1 already finalized): the same
statements (4.4's guide covers every version from 3.3.x through 4.3.x alike, and 4.0's own notes
add nothing for a KRaft cluster going on from 4.0), the upgrade finalized under the Kafka
controller of a 1 Kafka + 2 kraftnode quorum.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.cluster import CLUSTER_ID
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import (
    Setup,
    Tool,
    assert_each_value_at_one_offset,
    idempotent_producer_config,
    wait_until,
)
from tests.support.migration import Runbook, runbook

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]

THIS = "tests/interop/test_rolling_upgrade44.py"
SECTION = "## Upgrading a mixed quorum from Kafka 3.9 to 4.4"
BROKERS = (101, 102, 103)
TOPIC = "upgrading"
SESSION_TIMEOUT_MS = 9000
CONTROLLER_EXTRA = f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
BROKER_EXTRA = ("broker.heartbeat.interval.ms=500\n"
                f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
                "offsets.topic.replication.factor=3\noffsets.topic.num.partitions=3\n"
                "transaction.state.log.replication.factor=3\ntransaction.state.log.min.isr=2\n"
                "transaction.state.log.num.partitions=3\nshare.coordinator.state.topic.replication.factor=3\n"
                "share.coordinator.state.topic.min.isr=2\nshare.coordinator.state.topic.num.partitions=3\n"
                "replica.lag.time.max.ms=5000\nnum.network.threads=2\nnum.io.threads=2\n")
#: 4.4's levels after ``upgrade --release-version 4.4`` (``kafka-features.sh version-mapping``)
FINALIZED_44 = {"metadata.version": "4.4-IV2", "kraft.version": "1", "transaction.version": "2",
                "group.version": "1", "share.version": "2", "streams.version": "1",
                "eligible.leader.replicas.version": "1"}


def finalized(describe_output: str) -> dict[str, str]:
    return dict(re.findall(r"Feature: (\S+)\s.*?FinalizedVersionLevel: (\S+)", describe_output))


class Upgrade:
    """One journey: the Setup, the runbook's blocks and the statements' runner."""

    producer: Tool

    def __init__(self, start: KafkaHome, kafka44: KafkaHome, root: Path, kafka_voters: tuple[int, ...],
                 metadata_version: str) -> None:
        self.kafka44 = kafka44
        self.s = Setup(start, root, CONTROLLER_EXTRA, BROKER_EXTRA, voters=3, brokers=BROKERS,
                       kafka_voters=kafka_voters)
        # every voter bootstraps the same metadata.version and features, whichever is elected first
        for i in self.s.kraft_ids:
            shutil.rmtree(self.s.cl.root / f"node{i}" / "metadata")
            subprocess.run([sys.executable, "-m", "kraftnode", "format", "--release-version", metadata_version,
                            "--config", str(self.s.cl.root / f"node{i}" / "server.properties"),
                            "--cluster-id", CLUSTER_ID], check=True, capture_output=True)
        for k in self.s.controllers.values():
            k.format(CLUSTER_ID, "--release-version", metadata_version)
        self.book = Runbook(kafka44, root / "work", CLUSTER_ID, self._start)
        self.blocks = runbook(THIS, SECTION)
        self.bootstrap_controllers = self.s.cl.bootstrap()

    # the long-running statements: `kafka-server-start.sh FILE` (4.4's bin/ on PATH), `kraftnode start FILE`
    def _start(self, command: str, props: Path) -> None:
        s = self.s
        if command == "kraftnode start":
            i = next(i for i in s.kraft_ids if s.cl.root / f"node{i}" / "server.properties" == props)
            s.cl.start(i)
            return
        server = next(k for k in [*s.controllers.values(), *s.brokers.values()] if k.props_path == props)
        server.home = self.kafka44  # the same properties and data directory, the new release's code
        server.properties = props.read_text()
        server.start()
        server.wait_started(180)

    def acks(self) -> int:
        return len(self.producer.named("producer_send_success"))

    def wait_serving(self, what: str, more: int = 30) -> None:
        """A leader, every running broker unfenced in its current run, and the producer's acks
        growing by ``more``."""
        s = self.s

        def voters_caught_up() -> bool:
            info = s.quorum()
            return info is not None and len(info.voters) == 3 and all(
                v.log_end_offset >= info.high_watermark - 50 for v in info.voters)
        # every voter caught up before the next one goes: a majority at every step
        wait_until(f"every voter caught up ({what})", voters_caught_up, 180, s.logs)
        for b in BROKERS:
            if s.brokers[b].running:
                wait_until(f"broker {b} unfenced ({what})",
                           lambda b=b: "The broker has been unfenced" in s.brokers[b].log(since_start=True),  # type: ignore[misc]
                           180, s.logs)
        n = self.acks()
        wait_until(f"the producer's acks after {what}", lambda: self.acks() >= n + more, 180, s.logs)

    def features(self) -> dict[str, str]:
        r = self.s.cli("kafka-features", "describe")
        assert r.returncode == 0, r.stdout + r.stderr
        return finalized(r.stdout)

    def lead(self, kind: str) -> int:
        """Move leadership to a controller of ``kind`` (towards Kafka: kraftnode's
        transfer-leadership; towards kraftnode: the Kafka leader stopped and started again);
        the leader's id."""
        s = self.s
        for _ in range(10):
            info = s.wait_for_leader(120)
            if s.kind(info.leader_id) == kind:
                return info.leader_id
            if kind == "kafka":
                to = s.kafka_ids[0]
                r = subprocess.run([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                                    f"127.0.0.1:{s.cl.port(info.leader_id)}", "transfer-leadership", "--to", str(to)],
                                   capture_output=True, text=True, timeout=60)
                # with Kafka 4.4 voters the resigned kraftnode leader may win the next election
                # itself (the successor pre-votes first): the tool says so, and the loop tries again
                assert r.returncode == 0 or "was elected in epoch" in r.stderr, r.stdout + r.stderr
            else:
                k = s.controllers[info.leader_id]
                k.stop(120)
                s.wait_for_leader(120, exclude=info.leader_id, min_epoch=info.leader_epoch + 1)
                k.start()
                k.wait_started(180)
            s.wait_for_leader(120, min_epoch=info.leader_epoch + 1)
        raise AssertionError(f"no {kind} leader after 10 moves")

    def broker_registrations(self) -> Counter[int]:
        """BrokerRegistrationRecords of the metadata log, by broker id (``kraftnode dump-log`` of
        a kraftnode voter's log directory)."""
        i = self.s.kraft_ids[0]
        r = subprocess.run([sys.executable, "-m", "kraftnode", "dump-log",
                            str(self.s.cl.root / f"node{i}" / "metadata")], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        return Counter(int(m) for m in re.findall(
            r'"type":"REGISTER_BROKER_RECORD","version":\d+,"data":\{"brokerId":(\d+)', r.stdout))


#: the release the Kafka nodes start at -> the metadata.version the cluster starts at: 3.9's, and
#: 4.0's own default (4.0-IV3: a cluster formatted by 4.0, or upgraded to it and finalized)
STARTS = {"3.9": "3.9-IV0", "4.0": "4.0-IV3"}


@pytest.mark.parametrize(("start", "kafka_voters", "finalize_under"), [
    ("3.9", (2, 3), "kafka"), ("3.9", (3,), "kraftnode"), ("4.0", (3,), "kafka")],
    ids=["from39-2kafka-1kraftnode", "from39-1kafka-2kraftnode", "from40-1kafka-2kraftnode"])
def test_rolling_upgrade_to_44(request: pytest.FixtureRequest, kafka44: KafkaHome, tmp_path: Path, start: str,
                               kafka_voters: tuple[int, ...], finalize_under: str) -> None:
    t0 = time.monotonic()
    home: KafkaHome = request.getfixturevalue("kafka_home" if start == "3.9" else "kafka40")
    up = Upgrade(home, kafka44, tmp_path, kafka_voters, STARTS[start])
    s, book = up.s, up.book
    assert len(up.blocks) == 6, [b.where for b in up.blocks]
    controller_start, broker_start, finalize, kraft_v1, kafka_swap, kraft_swap = up.blocks
    try:
        s.start_all(CLUSTER_ID)
        assert up.features()["metadata.version"] == STARTS[start]
        s.create_topic(TOPIC, "--partitions", "3", "--replication-factor", "3")
        up.producer = s.tool("kafka-verifiable-producer", "--bootstrap-server", s.bootstrap, "--topic", TOPIC,
                             "--acks", "-1", "--throughput", "40", "--max-messages", "-1",
                             "--producer.config", str(idempotent_producer_config(tmp_path)))
        up.wait_serving("the start", 50)

        # 1. the Kafka controllers, one at a time, to 4.4
        for i in kafka_voters:
            k = s.controllers[i]
            k.stop(120)
            book.run(controller_start, 0, {"kafka-N.properties": str(k.props_path)})
            assert k.home == kafka44
            up.wait_serving(f"Kafka controller {i} at 4.4")
        # 2. the brokers, one at a time
        for b in BROKERS:
            s.brokers[b].stop(120)
            book.run(broker_start, 0, {"kafka-N.properties": str(s.brokers[b].props_path)})
            up.wait_serving(f"broker {b} at 4.4")
        s.kafka = kafka44  # the tools of the new release from here
        assert up.features()["metadata.version"] == STARTS[start]

        # 3. finalize, under the kind of controller this journey wants active
        leader = up.lead(finalize_under)
        epoch = s.wait_for_leader(60).leader_epoch
        host_port = s.bootstrap.split(",")[0]
        # refused while a voter has not yet told a new leader its kraft.version range (right after
        # an election): run again a few seconds later, as the runbook says
        for attempt in range(10):
            try:
                out = book.run(finalize, 0, {"HOST:PORT": host_port})
                break
            except AssertionError as e:
                assert "because not all of the voters support it" in str(e) and attempt < 9, e
                time.sleep(3)
        assert "metadata.version was upgraded to 33." in out, out
        print(f"upgrade --release-version 4.4: {attempt + 1} run(s)")
        info = s.wait_for_leader(60)
        assert (info.leader_id, info.leader_epoch) == (leader, epoch), \
            f"the upgrade was to run under {finalize_under} {leader} (epoch {epoch}), not {info}"
        print(f"upgrade --release-version 4.4 under the {finalize_under} controller {leader}, epoch {epoch}")

        # 4. kraft.version 1 (already finalized by step 3: KAFKA-21426), describe shows every level
        book.run(kraft_v1, 0, {"HOST:PORT": host_port})
        wait_until("4.4's finalized levels", lambda: finalized(book.run(kraft_v1, 1, {"HOST:PORT": host_port},
                                                                        pace=False)) == FINALIZED_44,
                   60, lambda: book.transcript[-1])
        up.wait_serving("the finalized upgrade")

        # 5. controller.quorum.bootstrap.servers in place of controller.quorum.voters, node by node
        for i in s.cl.ids:
            if i in s.controllers:
                k = s.controllers[i]
                k.stop(120)
                values = {"kafka-N.properties": str(k.props_path), "BOOTSTRAP": up.bootstrap_controllers}
                book.run(kafka_swap, 0, values)
                book.run(kafka_swap, 1, values)
            else:
                props = s.cl.root / f"node{i}" / "server.properties"
                s.cl.stop(i, 30)
                values = {"kraftnode-N.properties": str(props), "BOOTSTRAP": up.bootstrap_controllers}
                book.run(kraft_swap, 0, values)
                assert "controller.quorum.voters" not in props.read_text()
                book.run(kraft_swap, 1, values)
            up.wait_serving(f"controller {i} on controller.quorum.bootstrap.servers")
        for b in BROKERS:
            k = s.brokers[b]
            k.stop(120)
            values = {"kafka-N.properties": str(k.props_path), "BOOTSTRAP": up.bootstrap_controllers}
            book.run(kafka_swap, 0, values)
            assert "controller.quorum.bootstrap.servers=" in k.props_path.read_text()
            book.run(kafka_swap, 1, values)
            up.wait_serving(f"broker {b} on controller.quorum.bootstrap.servers")
        assert up.features() == FINALIZED_44

        # what 4.4 brings: a transaction at transaction.version 2 ...
        r = s.cli("kafka-topics", "--create", "--topic", "txn", "--partitions", "2", "--replication-factor", "3")
        assert r.returncode == 0, r.stdout + r.stderr
        r = kafka44.tool("kafka-producer-perf-test", "--bootstrap-server", s.bootstrap, "--topic", "txn",
                         "--num-records", "200", "--throughput", "200", "--record-size", "32",
                         "--transactional-id", "upgraded-tx", "--transaction-duration-ms", "200",
                         "--producer-props", "acks=all", timeout=180, env={"LOG_DIR": str(tmp_path / "tool-logs")})
        assert r.returncode == 0 and "200 records sent" in r.stdout, r.stdout + r.stderr
        r = s.cli("kafka-console-consumer", "--topic", "txn", "--from-beginning", "--isolation-level",
                  "read_committed", "--max-messages", "200", "--timeout-ms", "60000")
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 200, r.stdout[-2000:] + r.stderr[-2000:]
        # ... a share group ...
        r = s.cli("kafka-configs", "--alter", "--entity-type", "groups", "--entity-name", "upgraded-share",
                  "--add-config", "share.auto.offset.reset=earliest")
        assert r.returncode == 0, r.stdout + r.stderr
        r = s.cli("kafka-console-share-consumer", "--topic", TOPIC, "--group", "upgraded-share",
                  "--max-messages", "50", "--timeout-ms", "60000")
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 50, r.stdout[-2000:] + r.stderr[-2000:]
        # ... and a KIP-848 consumer group reads every acknowledged record back, once
        up.producer.stop()
        acked = {(e["partition"], e["offset"]): e["value"] for e in up.producer.named("producer_send_success")}
        assert len(acked) >= 500, len(acked)
        consumer = s.tool("kafka-verifiable-consumer", "--bootstrap-server", s.bootstrap, "--topic", TOPIC,
                          "--group-id", "upgraded-848", "--group-protocol", "consumer", "--reset-policy", "earliest",
                          "--verbose")

        def consumed() -> dict[tuple[int, int], str]:
            return {(e["partition"], e["offset"]): e["value"] for e in consumer.named("record_data")}
        wait_until("every acked record consumed", lambda: set(acked) <= set(consumed()), 180,
                   lambda: f"missing {sorted(set(acked) - set(consumed()))[:20]}\n" + s.logs())
        # the group is of KIP-848's protocol: its assignment is the server-side assignor's ("uniform",
        # group.consumer.assignors' first), where a classic group's would be the client's ("range")
        r = s.cli("kafka-consumer-groups", "--describe", "--group", "upgraded-848", "--state")
        row = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("upgraded-848 ")]
        assert row and "uniform" in row[0] and "Stable" in row[0], r.stdout + r.stderr
        r = s.cli("kafka-share-groups", "--list")
        assert "upgraded-share" in r.stdout.split(), r.stdout + r.stderr
        consumer.stop()
        got = consumed()
        assert_each_value_at_one_offset(got)
        wrong = {k: (v, got[k]) for k, v in acked.items() if got[k] != v}
        assert not wrong, list(wrong.items())[:10]

        # the brokers registered once per start and never otherwise
        starts = {b: s.brokers[b].starts for b in BROKERS}
        assert starts == dict.fromkeys(BROKERS, 3), starts
        registrations = up.broker_registrations()
        assert dict(registrations) == starts, (dict(registrations), starts)
        s.check_clean()
        print(f"{len(acked)} acked records read back once; BrokerRegistration records {dict(registrations)}; "
              f"journey {time.monotonic() - t0:.0f}s")
    finally:
        s.close()
