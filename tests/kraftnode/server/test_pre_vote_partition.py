"""KIP-996 pre-vote across a real network partition (Linux network namespaces, see
tests/support/netns.py): a follower cut off for 10 s and healed does not change the
epoch, and every write (acks=all, from the hub to the leader) succeeds before, during
and after."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.protocol import Errors
from tests.kraftnode.server.test_network_partition import produce
from tests.support.netns import NetnsQuorum, in_netns, netns_unavailable

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(params=[True, False], ids=["pre-vote", "kafka-3.9"])
def quorum(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[NetnsQuorum]:
    reason = netns_unavailable()
    if reason is not None:
        if os.environ.get("CI") and shutil.which("ip") is None:
            pytest.fail("iproute2 is required in CI (tools/test.sh installs it)")
        pytest.skip(reason)
    # pre-vote is on by default; the Kafka 3.9 case turns it off
    q = NetnsQuorum(tmp_path, 3, extra="" if request.param else "kraftnode.raft.pre.vote.enable=false\n")
    q.pre_vote = request.param  # type: ignore[attr-defined]
    try:
        q.setup()
        q.start_all()
        yield q
    finally:
        q.teardown()


def _write(q: NetnsQuorum, leader: int, tag: str) -> None:
    host = q.addr(leader)
    code, _ = in_netns(q.hub, lambda: produce(host, [tag.encode()], 10000))
    assert code == Errors.NONE, f"write {tag} failed with {code}"


def test_partitioned_follower_heals_without_changing_the_epoch(quorum: NetnsQuorum) -> None:
    q = quorum
    info = q.wait_for("a leader with a high watermark", lambda i: i.high_watermark >= 1, 30)
    leader, epoch = info.leader_id, info.leader_epoch
    follower = next(i for i in q.ids if i != leader)
    _write(q, leader, "before")
    q.isolate(follower)
    try:
        end = time.monotonic() + 10.0
        n = 0
        while time.monotonic() < end:  # the majority keeps committing
            _write(q, leader, f"during-{n}")
            n += 1
            time.sleep(0.5)
    finally:
        q.heal(follower)
    # The healed follower's pre-votes are refused; it follows the leader again.
    q.wait_for("the follower to catch up", lambda i: all(
        v.log_end_offset >= i.high_watermark for v in i.voters) and i.high_watermark > 0, 30)
    time.sleep(5.0)
    failed_after = 0
    for k in range(5):
        if q.pre_vote:  # type: ignore[attr-defined]
            _write(q, leader, f"after-{k}")
        else:
            host = q.addr(leader)
            code, _ = in_netns(q.hub, lambda h=host, k=k: produce(h, [f"after-{k}".encode()], 10000))
            failed_after += code != Errors.NONE
    now = q.wait_for("a leader", lambda i: True, 10)
    print(f"pre-vote {'on' if q.pre_vote else 'off'}: leader {leader} epoch {epoch} -> "  # type: ignore[attr-defined]
          f"leader {now.leader_id} epoch {now.leader_epoch}; writes to the old leader refused after "
          f"healing: {failed_after}")
    if q.pre_vote:  # type: ignore[attr-defined]
        assert (now.leader_id, now.leader_epoch) == (leader, epoch), (now, leader, epoch)
        assert "became prospective" in q.log(follower)
    else:  # Kafka 3.9's elections: the healed follower's higher epoch forces an election
        assert now.leader_epoch > epoch
