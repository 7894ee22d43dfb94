"""kraftnode and genuine Kafka 4.4 controllers in one static quorum, with genuine Kafka 4.4
brokers, at Kafka 4.4's default features (issue 38, must-show 1).

Two journeys, each on its own quorum of three voters and two Kafka 4.4 brokers (101, 102), every
node formatted at release 4.4-IV2 (``kafka-storage.sh format`` without ``--release-version``
formats there; kraftnode with ``--release-version 4.4-IV2``):
(a) 2 Kafka 4.4 controllers (2, 3) + 1 kraftnode controller (1), and
(b) 1 Kafka 4.4 controller (3) + 2 kraftnode controllers (1, 2).

The kraftnode voters run with ``kraftnode.raft.pre.vote.enable=true``, so they advertise Vote
v2 and speak pre-vote (KIP-996) with the 4.4 voters, which always do. Leadership moves across
implementations at least four times per journey (kraftnode -> Kafka: kraftnode's
``transfer-leadership``; Kafka -> either: kill -9 of the Kafka leader, which Kafka 4.4 cannot
hand over by command); the machinery is tests/support/mixed_controllers.py's, as for the 3.9
journeys. Throughout, an idempotent acks=-1 verifiable producer and a ``group.protocol=consumer``
(KIP-848) verifiable consumer run; in every term a topic is created through a broker, the
producer gets more acks, the brokers' heartbeat channel follows the new leader, and the leader
epochs the brokers report never go back.

In one term every follower voter in turn (one of each kind) is paused (SIGSTOP) for longer than
the quorum's fetch timeout and the brokers' session timeout, then resumed: the resumed voter's
fetch timer has expired, so it becomes a prospective and asks for pre-votes, which the others
refuse (they have heard from the leader) -- the term does not change, and no broker is fenced.

At the end: every acked record was read by the group consumer, each value at one offset only
(idempotence); no broker or Kafka controller logged an error, an unsupported version or a
metadata replay fault; no broker was fenced.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import wait_until
from tests.support.mixed_controllers import (
    CONTROLLER_EXTRA,
    SESSION_TIMEOUT_MS,
    Journey,
    check_clean,
    create_topic,
    finish,
    start,
)

pytestmark = pytest.mark.timeout(600)

RELEASE_4_4 = ("--release-version", "4.4-IV2")
PRE_VOTE = "kraftnode.raft.pre.vote.enable=true\n"
#: the quorum's fetch timeout (Kafka's default), which a paused voter outlasts
FETCH_TIMEOUT_MS = 2000
PAUSE_S = max(FETCH_TIMEOUT_MS, SESSION_TIMEOUT_MS) / 1000 + 2
#: what a 4.4 group consumer is: KIP-848's protocol
GROUP_CONSUMER = ("--group-protocol", "consumer")


def start44(kafka44: KafkaHome, tmp: pytest.TempPathFactory, name: str, kafka_voters: tuple[int, ...]) -> Journey:
    j = start(kafka44, tmp.mktemp(name), kafka_voters,
              controller_extra=CONTROLLER_EXTRA + f"controller.quorum.fetch.timeout.ms={FETCH_TIMEOUT_MS}\n" + PRE_VOTE,
              release=RELEASE_4_4, live_group=GROUP_CONSUMER)
    # every node at 4.4's default features: the Kafka controllers formatted at 4.4's default
    # release, kraftnode at 4.4-IV2 -- one finalized set
    r = j.s.cli("kafka-features", "describe")
    assert r.returncode == 0, r.stdout + r.stderr
    finalized = dict(re.findall(r"Feature: (\S+)\s.*FinalizedVersionLevel: (\S+)", r.stdout))
    print("finalized:", finalized)
    assert finalized.get("metadata.version") == "4.4-IV2", r.stdout
    assert finalized.get("group.version") == "1" and finalized.get("transaction.version") == "2", r.stdout
    return j


def pid_of(j: Journey, i: int) -> tuple[int, bool]:
    """(pid, is a process group leader) of controller ``i``."""
    if j.s.kind(i) == "kafka":
        proc = j.s.controllers[i].proc
        assert proc is not None
        return proc.pid, True
    p = j.s.cl.procs[i]
    assert p is not None
    return p.pid, False


#: what a voter of each kind logs when its fetch timer expires with pre-vote on
PROSPECTIVE = {"kafka": re.compile(r"Transitioning to Prospective state due to fetch timeout"),
               "kraftnode": re.compile(r"became prospective in epoch")}


def own_log(j: Journey, i: int) -> str:
    """Controller ``i``'s log (a Kafka controller's server output; kraftnode's node.log)."""
    return j.s.controllers[i].log() if j.s.kind(i) == "kafka" else j.s.cl.log(i)


def pause_followers(j: Journey) -> None:
    """Each follower voter of the current term in turn SIGSTOPped for ``PAUSE_S`` (longer than
    the fetch and session timeouts) and resumed: no term change, the voter back in the quorum
    (its fetches reach the leader's end) after it stood as a prospective and was refused, no
    broker fenced."""
    term = j.current()
    followers = [i for i in j.s.running_controllers() if i != term.leader]
    assert {j.s.kind(i) for i in followers} == {"kafka", "kraftnode"}, (term, followers)
    for i in followers:
        pid, group = pid_of(j, i)
        kill = os.killpg if group else os.kill
        offsets = {b: len(j.s.brokers[b].log()) for b in j.s.broker_ids}
        mine = len(own_log(j, i))
        kill(pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S)
        finally:
            kill(pid, signal.SIGCONT)
        print(f"  {j.s.kind(i)} follower {i} paused {PAUSE_S:.0f}s under epoch {term.epoch} ({term.kind} {term.leader})")

        def caught_up(i: int = i) -> bool:
            info = j.s.quorum()
            if info is None:
                return False
            end = max(v.log_end_offset for v in info.voters)
            return any(v.replica_id == i and v.log_end_offset >= end - 5 for v in info.voters)
        wait_until(f"voter {i} fetching again", caught_up, 30, j.s.logs)
        time.sleep(FETCH_TIMEOUT_MS / 1000 * 2)  # its prospective's pre-votes had every chance to disturb
        assert j.current() == term, ("the pause changed the term", term, j.current())
        # resumed past its fetch timeout, the voter stood as a prospective (pre-vote, Vote v2 to
        # both kinds of peer), was refused, and followed the same leader again
        went = PROSPECTIVE[j.s.kind(i)].search(own_log(j, i)[mine:])
        assert went, (i, own_log(j, i)[mine:][-3000:])
        for b in j.s.broker_ids:
            assert "Fencing" not in j.s.brokers[b].log()[offsets[b]:]


def journey(j: Journey) -> None:
    """Four handovers across kinds at least, starting under whichever kind leads first; the
    pause under the term that has a follower of each kind."""
    s = j.s
    try:
        x = j.lead(j.current().kind).kind
        y = "kraftnode" if x == "kafka" else "kafka"
        create_topic(j.broker_port(), f"born-{x}", 2)
        j.lead(y)  # handover 1
        j.lead(x)  # handover 2
        j.lead(y)  # handover 3
        j.lead(x)  # handover 4
        # a term led by the kind with two voters has a follower of each kind
        j.lead("kafka" if len(s.kafka_ids) == 2 else "kraftnode")
        pause_followers(j)
        assert sum(1 for a, b in zip(j.terms, j.terms[1:], strict=False) if a.kind != b.kind) >= 4, j.terms
        finish(j)
    finally:
        s.close()
    check_clean(s)


def test_two_kafka44_one_kraftnode_controller(kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> None:
    """(a) 2 Kafka 4.4 (2, 3) + 1 kraftnode (1)."""
    journey(start44(kafka44, tmp_path_factory, "mixed44-2k", (2, 3)))


def test_one_kafka44_two_kraftnode_controllers(kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> None:
    """(b) 1 Kafka 4.4 (3) + 2 kraftnode (1, 2)."""
    journey(start44(kafka44, tmp_path_factory, "mixed44-1k", (3,)))
