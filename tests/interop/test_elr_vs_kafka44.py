"""Must-show 2 of issue 37: eligible leader replicas (KIP-966) on kraftnode controllers and on an
all-Kafka 4.4 controller quorum give a partition the same leader, ISR, ELR and last-known ELR at
every step of the same sequence of broker kills and restarts.

Both runs: genuine Kafka 4.4 brokers 101-103 (the partition's replicas, min.insync.replicas=2)
and 104 (a bystander that answers ``kafka-topics.sh --describe`` when the replicas are all down),
the controllers formatted at Kafka 4.4's release (metadata.version 4.4-IV2,
eligible.leader.replicas.version 1): once three kraftnode controllers, once three genuine Kafka
4.4 controllers. The walk: kill -9 103, 102, 101 (the ISR drains into the ELR, then the partition
is leaderless with the last known leader 101), restart 102 (an unclean shutdown: it leaves the
ELR), restart 101 (it leaves the ELR too; when it is back the controller elects it as the last
known leader -- KIP-966's unclean recovery, leader recovery RECOVERING -- and 102 rejoins the
ISR), restart 103. At every step the state ``kafka-topics.sh --describe`` prints must be the one
Kafka 4.4's rules give, on both quorums (ISR order compared as a set where the order depends on
which follower catches up first).

Must-show 4, on the kraftnode run: the quorum has a fourth voter, a genuine Kafka 4.4 controller
started only after the walk (and after a ``min.insync.replicas`` change, whose ClearElrRecord the
brokers replay). Every record of the kraftnode controllers' logs decodes with Kafka 4.4's
MetadataRecordSerde and re-encodes to the same bytes; the Kafka controller catches up, replays the
whole log without a fault, takes the leadership over (kraftnode's transfer-leadership) and serves
the same brokers: the partition's state is unchanged and a topic is created through them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tests.support.cluster as cluster_support
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import DESCRIBE_QUORUM
from tests.support.cluster import CLUSTER_ID
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import Setup, wait_until
from tests.support.node import call

pytestmark = pytest.mark.timeout(1200)

BROKERS = (101, 102, 103, 104)
CONTROLLER_EXTRA = "broker.session.timeout.ms=6000\n"
BROKER_EXTRA = ("broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=6000\n"
                "offsets.topic.replication.factor=1\nnum.network.threads=2\nnum.io.threads=2\n"
                "replica.lag.time.max.ms=5000\n")
RELEASE_4_4 = ("--release-version", "4.4")

State = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # leader, ISR, ELR, last-known ELR

#: (action, broker, the state Kafka 4.4's rules give once the action has settled)
WALK: list[tuple[str, int, State]] = [
    ("create", 0, (101, (101, 102, 103), (), ())),
    ("kill", 103, (101, (101, 102), (), ())),
    ("kill", 102, (101, (101,), (102,), ())),
    ("kill", 101, (-1, (), (101, 102), (101,))),
    ("start", 102, (-1, (), (101,), (101,))),        # unclean shutdown: 102 leaves the ELR
    ("start", 101, (101, (101, 102), (), ())),       # leaves the ELR; elected as the last known leader
    ("start", 103, (101, (101, 102, 103), (), ())),
]


def describe(s: Setup, topic: str) -> State | None:
    r = s.topics_cli("--describe", "--topic", topic)
    if r.returncode != 0:
        return None
    m = re.search(r"Partition: 0\tLeader: (\S+)\tReplicas: \S+\tIsr: (\S*)\tElr: (\S*)\tLastKnownElr: (\S*)",
                  r.stdout)
    if m is None:
        return None

    def ids(text: str) -> tuple[int, ...]:
        return tuple(int(x) for x in text.split(",") if x)
    leader = -1 if m.group(1) == "none" else int(m.group(1))
    return leader, ids(m.group(2)), ids(m.group(3)), ids(m.group(4))


def same(got: State | None, want: State) -> bool:
    if got is None:
        return False
    # the ISR's order is the order followers caught up in; the ELR's and last-known ELR's are the
    # controller's (Java HashSet order): compared exactly
    return got[0] == want[0] and sorted(got[1]) == sorted(want[1]) and got[2:] == want[2:]


def run_walk(s: Setup) -> list[State]:
    seen: list[State] = []
    for action, broker, want in WALK:
        if action == "create":
            s.create_topic("elr", "--replica-assignment", "101:102:103", "--config", "min.insync.replicas=2")
        elif action == "kill":
            s.brokers[broker].kill()
        else:
            s.brokers[broker].start()
            s.brokers[broker].wait_started(120)
        got = wait_until(f"after {action} {broker}: {want}", lambda w=want: (  # type: ignore[misc]
            st if same(st := describe(s, "elr"), w) else None), 120,
            lambda: f"last describe: {describe(s, 'elr')}\n{s.logs()}")
        seen.append(got)
    return seen


def finalized(s: Setup) -> dict[str, str]:
    r = s.cli("kafka-features", "describe")
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(re.findall(r"Feature: (\S+)\s.*FinalizedVersionLevel: (\S+)", r.stdout))


KAFKA_JOINER = 4


def walk_on(kafka: KafkaHome, root: Path, kafka_controllers: bool, monkeypatch: pytest.MonkeyPatch,
            then: Callable[[Setup], None] | None = None) -> tuple[list[State], dict[str, str]]:
    monkeypatch.setattr(cluster_support, "SUITE_RELEASE", RELEASE_4_4)  # kraftnode format --release-version 4.4
    if kafka_controllers:
        s = Setup(kafka, root, CONTROLLER_EXTRA, BROKER_EXTRA, voters=3, brokers=BROKERS, kafka_voters=(1, 2, 3))
    else:  # three kraftnode voters and a Kafka 4.4 controller that joins after the walk
        s = Setup(kafka, root, CONTROLLER_EXTRA, BROKER_EXTRA, voters=4, brokers=BROKERS,
                  kafka_voters=(KAFKA_JOINER,))
    try:
        s.start_all(CLUSTER_ID, defer=() if kafka_controllers else (KAFKA_JOINER,))
        features = finalized(s)  # Kafka 4.4's kafka-storage.sh formats at its default: 4.4
        seen = run_walk(s)
        if then is not None:
            then(s)
        return seen, features
    finally:
        s.close()


def kraftnode_files(s: Setup, into: Path) -> list[Path]:
    out = []
    for i in s.kraft_ids:
        part = s.cl.root / f"node{i}" / "metadata" / "__cluster_metadata-0"
        for f in sorted(part.glob("*.log")) + sorted(part.glob("*.checkpoint")):
            try:
                out.append(Path(shutil.copy2(f, into / f"{i}-{f.name}")))
            except FileNotFoundError:
                continue
    return out


def kafka_joins_and_takes_over(s: Setup) -> None:
    """Must-show 4 on the cluster the walk ran on (see the module docstring)."""
    r = s.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", "elr",
              "--add-config", "min.insync.replicas=1")
    assert r.returncode == 0, r.stdout + r.stderr
    state = wait_until("the walk's end state after min.insync.replicas=1", lambda: describe(s, "elr"), 30)
    # every record the kraftnode controllers wrote, through Kafka 4.4's MetadataRecordSerde
    into = s.root / "decoded"
    into.mkdir()
    files = kraftnode_files(s, into)
    classes = s.kafka.compile("metadata-serde44")
    r = subprocess.run(s.kafka.java(classes, "MetadataDecode", *map(str, files)), capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    decoded = json.loads(r.stdout)
    assert decoded["errors"] == [], decoded["errors"][:5]
    assert {"ClearElrRecord", "PartitionChangeRecord", "RegisterBrokerRecord", "BrokerRegistrationChangeRecord",
            "FeatureLevelRecord", "RegisterControllerRecord"} <= set(decoded["types"]), decoded["types"]
    print(f"\nKafka 4.4's MetadataRecordSerde: {decoded['records']} records of the kraftnode logs decode and "
          f"re-encode to the same bytes: {decoded['types']}")
    # the Kafka 4.4 controller joins, replays everything, takes over
    kc = s.controllers[KAFKA_JOINER]
    kc.format(CLUSTER_ID)
    kc.start()
    kc.wait_started(120)

    def caught_up() -> bool:
        leader = s.cl.wait_for_leader(20)
        Q = w.DescribeQuorumRequest
        _, resp = call(s.cl.port(leader.leader_id), DESCRIBE_QUORUM, 2, Q(topics=[Q.TopicData(
            topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
        p = resp.topics[0].partitions[0]  # type: ignore[attr-defined]
        leo = {v.replica_id: v.log_end_offset for v in p.current_voters}
        return bool(leo.get(KAFKA_JOINER, -1) >= p.high_watermark > 0)
    wait_until("the Kafka controller to catch up", caught_up, 90, lambda: kc.log()[-5000:])
    leader = s.cl.wait_for_leader(20).leader_id
    r = subprocess.run([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                        f"127.0.0.1:{s.cl.port(leader)}", "transfer-leadership", "--to", str(KAFKA_JOINER)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until("the Kafka controller to lead", lambda: "Becoming the active controller" in kc.controller_log(), 60,
               lambda: kc.controller_log()[-5000:])
    s.create_topic("under-kafka", "--partitions", "2", "--replication-factor", "3")
    assert describe(s, "elr") == state
    faults = kc.faults(benign=(r"Direct-to-controller communication is not supported", r"NotControllerException"))
    assert not faults, faults


def test_the_same_kills_and_restarts_give_the_same_elr_as_kafka_44(kafka44: KafkaHome, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ours, our_features = walk_on(kafka44, tmp_path / "kraftnode", False, monkeypatch, kafka_joins_and_takes_over)
    assert our_features.get("eligible.leader.replicas.version") == "1"
    assert our_features.get("metadata.version") == "4.4-IV2"
    theirs, their_features = walk_on(kafka44, tmp_path / "kafka", True, monkeypatch)
    assert their_features.get("eligible.leader.replicas.version") == "1"
    assert [(st[0], tuple(sorted(st[1])), st[2], st[3]) for st in ours] == \
        [(st[0], tuple(sorted(st[1])), st[2], st[3]) for st in theirs]
    report: list[Any] = list(zip([f"{a} {b}" for a, b, _w in WALK], ours, theirs, strict=True))
    print("\n".join(f"{step:10} kraftnode {o}  kafka {t}" for step, o, t in report))
