"""Controller auto-join (``controller.quorum.auto.join.enable``, Kafka 4.2+) both ways with genuine
Kafka 4.4 controllers, and what becomes of a voter removed with ``remove-controller`` (issue 38,
must-show 3).

One dynamic quorum (kraft.version 1, ``controller.quorum.bootstrap.servers``), every node at
release 4.4-IV2, grown and shrunk by auto-join alone:

1. Kafka 4.4 controller 1 formatted ``--standalone`` leads a quorum of one.
2. kraftnode controllers 2 and 3, formatted ``--no-initial-controllers`` (kraftnode's
   ``format`` calls it what ``kafka-storage.sh`` does) with auto-join on, start as observers of
   the Kafka leader and join by themselves: AddRaftVoter (v1 to a 4.4 leader) of themselves, one
   at a time, committed by the Kafka leader -- voters {1, 2, 3}.
3. kill -9 of the Kafka leader: a kraftnode voter leads; Kafka 1 restarts and follows it.
4. Kafka 4.4 controller 4, formatted ``--no-initial-controllers`` with auto-join on, starts as
   an observer of the kraftnode leader and joins by itself (kraftnode's leader takes its
   AddRaftVoter) -- voters {1, 2, 3, 4}.
5. The removed-voter rule, as genuine 4.4 has it: Kafka 4.4's ``KafkaRaftClient`` has no rule
   keeping a removed voter out -- KAFKA-19850 ("auto join will add a removed voter
   immediately") was settled by documenting it (4.2's upgrade notes and ``Admin#removeRaftVoter``:
   with auto-join on, shut the controller down before removing it, or it joins again). Measured
   here on both kinds: ``kafka-metadata-quorum.sh remove-controller`` of the running Kafka voter 4
   under a kraftnode leader, and of a running kraftnode voter under a Kafka leader -- each
   becomes an observer and joins again by itself after one update-voter period, as a Kafka node
   does. The documented procedure keeps a voter out: stopped first, then removed, it is not a
   voter while down, and a kraftnode leader's quorum carries on without it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kraftnode.errors import UsageError
from kraftnode.quorum_client import QuorumInfo, fetch_quorum_info
from recordbatch.wire import uuid_to_base64
from tests.support.cluster import CLUSTER_ID, free_ports
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import KafkaServer, controller_properties
from tests.support.kraft_brokers import wait_until
from tests.support.quorums import format_node

pytestmark = pytest.mark.timeout(600)

RELEASE = ("--release-version", "4.4-IV2")
FETCH_TIMEOUT_MS = 2000
AUTO_JOIN = f"controller.quorum.auto.join.enable=true\ncontroller.quorum.fetch.timeout.ms={FETCH_TIMEOUT_MS}\n"
KAFKA_IDS = (1, 4)
KRAFT_IDS = (2, 3)


@dataclass
class Quorum:
    kafka: KafkaHome
    root: Path
    ports: dict[int, int] = field(default_factory=dict)
    servers: dict[int, KafkaServer] = field(default_factory=dict)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ports = dict(zip((1, 2, 3, 4), free_ports(4), strict=True))

    @property
    def bootstrap(self) -> str:
        """``controller.quorum.bootstrap.servers``: the first voter (Kafka 1)."""
        return f"127.0.0.1:{self.ports[1]}"

    def kind(self, i: int) -> str:
        return "kafka" if i in KAFKA_IDS else "kraftnode"

    # ------------------------------------------------------------------ Kafka 4.4 controllers
    def kafka_controller(self, i: int, *format_flags: str) -> KafkaServer:
        d = self.root / f"kafka{i}"
        extra = f"advertised.listeners=CONTROLLER://127.0.0.1:{self.ports[i]}\n{AUTO_JOIN}"
        k = KafkaServer(self.kafka, d, i, controller_properties(i, self.ports[i], d / "data", bootstrap=self.bootstrap,
                                                                  extra=extra), port=self.ports[i])
        k.format(CLUSTER_ID, *format_flags)
        self.servers[i] = k
        k.start()
        k.wait_started(120)
        return k

    # ------------------------------------------------------------------ kraftnode controllers
    def props(self, i: int) -> Path:
        return self.root / f"node{i}" / "server.properties"

    def kraftnode_controller(self, i: int) -> None:
        d = self.root / f"node{i}"
        d.mkdir(parents=True, exist_ok=True)
        self.props(i).write_text(
            f"node.id={i}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{self.ports[i]}\n"
            f"controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers={self.bootstrap}\n"
            f"log.dirs={d / 'metadata'}\n{AUTO_JOIN}")
        format_node(str(self.props(i)), CLUSTER_ID, *RELEASE, "--no-initial-controllers")
        self.start_kraftnode(i)

    def start_kraftnode(self, i: int) -> None:
        out = (self.root / f"node{i}" / "node.log").open("ab")
        self.procs[i] = subprocess.Popen([sys.executable, "-m", "kraftnode", "start", str(self.props(i))],
                                         stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def kraftnode_log(self, i: int) -> str:
        path = self.root / f"node{i}" / "node.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # ------------------------------------------------------------------ both kinds
    def running(self, i: int) -> bool:
        if i in self.servers:
            return self.servers[i].running
        p = self.procs.get(i)
        return p is not None and p.poll() is None

    def kill(self, i: int) -> None:
        if i in self.servers:
            self.servers[i].kill()
        else:
            p = self.procs[i]
            p.send_signal(signal.SIGKILL)
            p.wait()

    def close(self) -> None:
        for i in list(self.procs):
            if self.running(i):
                self.kill(i)
        for k in self.servers.values():
            k.close()

    def quorum(self) -> QuorumInfo | None:
        servers = [("127.0.0.1", p) for i, p in self.ports.items() if self.running(i)]
        try:
            info = fetch_quorum_info(servers, 2)
        except UsageError:
            return None
        return info if info.leader_id >= 0 else None

    def voters(self) -> set[int]:
        info = self.quorum()
        return {v.replica_id for v in info.voters} if info is not None else set()

    def wait_voters(self, want: set[int], timeout: float = 90) -> QuorumInfo:
        def got() -> QuorumInfo | None:
            info = self.quorum()
            return info if info is not None and {v.replica_id for v in info.voters} == want else None
        info: QuorumInfo = wait_until(f"voters {sorted(want)}", got, timeout,
                                      lambda: f"now {self.voters()}\n{self.logs()}")
        return info

    def directory_id(self, i: int) -> str:
        info = self.quorum()
        assert info is not None
        return next(uuid_to_base64(v.directory_id) for v in [*info.voters, *info.observers] if v.replica_id == i)

    def remove_controller(self, i: int, directory_id: str) -> str:
        """``kafka-metadata-quorum.sh remove-controller`` (the genuine 4.4 tool), sent to the leader."""
        info = self.quorum()
        assert info is not None
        r = self.kafka.tool("kafka-metadata-quorum", "--bootstrap-controller",
                            f"127.0.0.1:{self.ports[info.leader_id]}", "remove-controller", "--controller-id", str(i),
                            "--controller-directory-id", directory_id,
                            env={"LOG_DIR": str(self.root / "tool-logs")})
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    def logs(self) -> str:
        out = [f"--- kraftnode {i}\n" + self.kraftnode_log(i)[-2500:] for i in self.procs]
        out += [f"--- Kafka {i}\n" + "\n".join(ln for ln in k.log().splitlines()[-200:] if "Voter" in ln
                                                or "ERROR" in ln or "transition" in ln)[-2500:]
                for i, k in self.servers.items()]
        return "\n".join(out)


@pytest.fixture()
def q(kafka44: KafkaHome, tmp_path: Path) -> Iterator[Quorum]:
    quorum = Quorum(kafka44, tmp_path)
    try:
        yield quorum
    finally:
        quorum.close()


def rejoins(q: Quorum, i: int, voters: set[int]) -> float:
    """``remove-controller`` of running voter ``i``: it leaves the voter set, then -- auto-join
    on, as in Kafka 4.4 -- joins again by itself; how long it was out."""
    directory = q.directory_id(i)
    leader = q.quorum()
    assert leader is not None and leader.leader_id != i
    q.remove_controller(i, directory)
    t0 = time.monotonic()
    wait_until(f"{i} removed", lambda: i not in q.voters(), 30, q.logs)
    q.wait_voters(voters, 60)
    out = time.monotonic() - t0
    after = q.quorum()
    assert after is not None and q.directory_id(i) == directory  # the same node, same disk
    print(f"  {q.kind(i)} voter {i} removed under {q.kind(leader.leader_id)} leader {leader.leader_id}: "
          f"back as a voter by itself after {out:.1f}s")
    return out


def test_auto_join_both_ways_with_kafka44(q: Quorum) -> None:
    # 1. a Kafka 4.4 leader of a quorum of one
    q.kafka_controller(1, "--standalone")
    q.wait_voters({1}, 60)
    # 2. two kraftnode observers join the Kafka-led quorum by themselves
    for i in KRAFT_IDS:
        q.kraftnode_controller(i)
    info = q.wait_voters({1, 2, 3}, 120)
    assert info.leader_id == 1, info
    for i in KRAFT_IDS:
        assert "auto-join: AddRaftVoter of this node to leader 1: NONE" in q.kraftnode_log(i), q.kraftnode_log(i)
    print("kraftnode 2 and 3 auto-joined the Kafka 4.4 leader's quorum")
    # 3. a kraftnode voter leads
    q.kill(1)
    led = wait_until("a kraftnode leader", lambda: (x := q.quorum()) is not None and x.leader_id in KRAFT_IDS and x,
                     60, q.logs)
    q.servers[1].start()
    q.servers[1].wait_started(120)
    # 4. a Kafka 4.4 observer joins the kraftnode-led quorum by itself
    q.kafka_controller(4, "--no-initial-controllers")
    info = q.wait_voters({1, 2, 3, 4}, 120)
    assert info.leader_id == led.leader_id, (led, info)
    print(f"Kafka 4 auto-joined the kraftnode leader {led.leader_id}'s quorum")
    # 5. remove-controller of a running auto-join voter: as Kafka 4.4 (KAFKA-19850), it joins again
    rejoins(q, 4, {1, 2, 3, 4})  # a Kafka voter, under the kraftnode leader
    # under a Kafka leader: move leadership there (kill -9 of the kraftnode leader, restarted)
    now = q.quorum()
    assert now is not None
    while q.kind(now.leader_id) != "kafka":
        q.kill(now.leader_id)
        old = now.leader_id
        now = wait_until("a new leader", lambda o=old: (x := q.quorum()) is not None and x.leader_id != o and x,
                         60, q.logs)
        q.start_kraftnode(old)
    q.wait_voters({1, 2, 3, 4}, 60)
    follower = next(i for i in KRAFT_IDS if i != now.leader_id)
    rejoins(q, follower, {1, 2, 3, 4})  # a kraftnode voter, under a Kafka leader
    # the documented way to keep a voter out: stop it first, then remove it
    victim = next(i for i in KAFKA_IDS if i != now.leader_id)
    directory = q.directory_id(victim)
    q.kill(victim)
    q.remove_controller(victim, directory)
    q.wait_voters({1, 2, 3, 4} - {victim}, 30)
    time.sleep(3 * FETCH_TIMEOUT_MS / 1000 + 2)  # an update-voter period and more: still out
    assert q.voters() == {1, 2, 3, 4} - {victim}
    for i in KRAFT_IDS:
        assert "Traceback" not in q.kraftnode_log(i), q.kraftnode_log(i)[-3000:]
    faults = {i: k.faults(benign=(r"NotControllerException", r"Direct-to-controller communication is not supported"))
              for i, k in q.servers.items()}
    assert not any(faults.values()), faults
