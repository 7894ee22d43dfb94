"""KIP-853's walkthrough, as config/dynamic-quorum/'s step comments tell it, at a person's pace.

The statements are read from the three files' comments (so the comments are what is tested):
node 1 formatted ``--standalone``, nodes 2 and 3 ``--no-initial-controllers``, all three
started; then, 10 s apart: add 2, add 3, remove 3, add 3 back -- once with kraftnode's CLI as
the comments write it, once with Kafka 3.9's ``kafka-metadata-quorum.sh`` given the same
arguments (the comments say it takes them). Every step succeeds on its first try (one
AddRaftVoter / RemoveRaftVoter on the leader per step, answered NONE), and no election
happens: the leader and epoch after each step are those before the first.

Before issue 23 this failed 3 times out of 3 with the genuine tool: a leader alone in its
voter set never renewed its check-quorum deadline, so it resigned 24 ms after adding voter 2.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.errors import UsageError
from kraftnode.log.meta_properties import read_meta_properties
from kraftnode.quorum_client import QuorumInfo, fetch_quorum_info
from recordbatch.wire import uuid_to_base64
from tests.support.doc_blocks import REPO, Block, Session, config_blocks, statements
from tests.support.kafka import require_kafka_home

pytestmark = pytest.mark.timeout(420)

CONFIGS = [REPO / "config" / "dynamic-quorum" / f"controller-{i}.properties" for i in (1, 2, 3)]
PERSON_PACE_S = 10.0


def walkthrough() -> tuple[list[tuple[Block, str]], list[tuple[Block, str]], list[tuple[Block, str]]]:
    """(set-up statements: the cluster id and the formats, starts, quorum steps), from the
    comments of the three files in their order."""
    steps = [(b, st) for p in CONFIGS for b in config_blocks(p) for st in statements(b.text)]
    setup = [(b, st) for b, st in steps if st.startswith("ID=") or st.startswith("kraftnode format")]
    starts = [(b, st) for b, st in steps if st.startswith("kraftnode start")]
    quorum = [(b, st) for b, st in steps if st.startswith("kraftnode quorum")]
    assert len(setup) + len(starts) + len(quorum) == len(steps), steps
    return setup, starts, quorum


def test_the_comments_tell_the_whole_walkthrough() -> None:
    setup, starts, quorum = walkthrough()
    assert [st.split()[-1] for _, st in setup[1:]] == ["--standalone", "--no-initial-controllers",
                                                       "--no-initial-controllers"]
    assert len(starts) == 3
    kinds = [(re.search(r"(add|remove)-controller", st).group(1),  # type: ignore[union-attr]
              re.search(r"controller-(\d)\.properties|--controller-id (\d)", st).group(0)[-12:])  # type: ignore[union-attr]
             for _, st in quorum]
    assert [k for k, _ in kinds] == ["add", "add", "remove", "add"], kinds


def _describe(s: Session) -> QuorumInfo:
    try:
        return fetch_quorum_info([("127.0.0.1", s.ports[9193])], 2)
    except UsageError as e:
        raise AssertionError(f"describe failed: {e}") from None


@pytest.fixture(params=["kraftnode", "kafka-metadata-quorum.sh"])
def tool(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def walk(tmp_path: Path, tool: str) -> Iterator[Session]:
    kafka = require_kafka_home().root if tool != "kraftnode" else None
    s = Session(tmp_path / "walk", kafka_home=kafka)
    try:
        yield s
    except BaseException:
        s.close(check=False)
        raise
    s.close()  # Ctrl-C to each node: each shuts down cleanly


def test_walkthrough_at_a_persons_pace(walk: Session, tool: str) -> None:
    setup, starts, quorum = walkthrough()
    for block, st in setup + starts:
        walk.run_statement(st, block.where)
    node_logs = {i: bg for i, bg in enumerate(walk.background, 1)}
    for i in (2, 3):  # item of issue 23: an empty --no-initial-controllers log is a dynamic quorum
        assert re.search(rf"node {i} started: cluster \S+, dynamic quorum on ", node_logs[i].text())
    meta = read_meta_properties(walk.work / "root" / "tmp" / "kraftnode-dynamic-3")
    assert meta is not None and meta.directory_id is not None
    walk.placeholders["DIRECTORY_ID"] = uuid_to_base64(meta.directory_id)

    walk.pause_s = PERSON_PACE_S
    walk.pace()  # started, then a person's pause before the first change
    first = _describe(walk)
    assert first.leader_id == 1 and [v.replica_id for v in first.voters] == [1]
    expected_voters = [[1, 2], [1, 2, 3], [1, 2], [1, 2, 3]]
    for (block, st), voters in zip(quorum, expected_voters, strict=True):
        if tool != "kraftnode":
            st = st.replace("kraftnode quorum", tool, 1)
        out = walk.run_statement(st, block.where, timeout=120)
        if "add-controller" in st:
            node = int(re.search(r"controller-(\d)\.properties", st).group(1))  # type: ignore[union-attr]
            assert re.search(rf"^Added controller {node} with directory id \S+ and endpoints: "
                             rf"CONTROLLER://127\.0\.0\.1:{walk.ports[9192 + node]}$", out, re.M), out
        else:
            assert f"Removed  KRaft controller 3 with directory id {walk.placeholders['DIRECTORY_ID']}" in out, out
        now = _describe(walk)
        assert (now.leader_id, now.leader_epoch) == (first.leader_id, first.leader_epoch), \
            f"after `{st}`: leader/epoch {now.leader_id}/{now.leader_epoch}, was {first.leader_id}/{first.leader_epoch}"
        assert sorted(v.replica_id for v in now.voters) == voters, (st, now.voters)

    leader_log = node_logs[1].text()
    changes = re.findall(r"(AddRaftVoter|RemoveRaftVoter) for voter (\d) \(directory (\S+)\): (succeeded|failed: \w+)", leader_log)
    # each step succeeded on its first try: one request per step reached the leader, answered
    # NONE, which the log says in words (issue 41: "...: NONE" read as a failure)
    assert [(k, int(n), code) for k, n, _, code in changes] == [
        ("AddRaftVoter", 2, "succeeded"), ("AddRaftVoter", 3, "succeeded"), ("RemoveRaftVoter", 3, "succeeded"),
        ("AddRaftVoter", 3, "succeeded")], changes
    # each node's own log says when it joined and left the voter set (issue 41: the added node's
    # last word was "became follower ... as an observer"); UpdateRaftVoter's success is DEBUG
    for i, joins, leaves in ((2, 1, 0), (3, 2, 1)):
        text = node_logs[i].text()
        assert len(re.findall(r"became a voter in epoch \d+ \(leader 1; voters \[", text)) == joins, text[-2000:]
        assert len(re.findall(r"is no longer a voter in epoch \d+ .*: it goes on as an observer", text)) == leaves, \
            text[-2000:]
    assert re.search(r"became a voter in epoch \d+ \(leader 1; voters \[1, 2, 3\]\)\s*$", node_logs[3].text(), re.M)
    assert not any("UpdateRaftVoter" in bg.text() for bg in node_logs.values())
    # the directory id as every tool shows it (base64), not a dashed UUID
    assert changes[2][2] == walk.placeholders["DIRECTORY_ID"]
    for i, bg in node_logs.items():  # no election but node 1's own, which made it the leader
        text = bg.text()
        elections = [(state, int(e)) for state, e in re.findall(r"became (candidate|prospective) in epoch (\d+)", text)]
        assert all(e <= first.leader_epoch for _, e in elections) and (i == 1 or not elections), (i, elections)
        assert len(re.findall(r"became leader in epoch", text)) == (1 if i == 1 else 0), text[-2000:]
        assert "resigned" not in text, text[-2000:]
