"""``kraftnode quorum add-controller`` / ``remove-controller`` when the first try timed out
but took effect: the person sees success, not DUPLICATE_VOTER / VOTER_NOT_FOUND.

The leader appends the VotersRecord at once; when the new voter set's majority is not
there to commit it within controller.quorum.request.timeout.ms, the leader answers
REQUEST_TIMED_OUT and the record commits later. The CLI retries REQUEST_TIMED_OUT (as the
Admin client does); the retry meets "already a voter" / "not a voter" -- the work of its own
first try -- and must report the change made once DescribeQuorum confirms it.

Here the majority is held back by SIGSTOPping voters (real processes, real sockets) and
given back 4 s later; the fetch timeout is raised (8 s, check-quorum 12 s) so that no
election intervenes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cluster import log_lines, wait_for_hw
from tests.support.quorums import DynamicCluster

pytestmark = pytest.mark.timeout(240)


def _cli(dyn: DynamicCluster, leader: int, *args: str) -> subprocess.Popen[str]:
    """The CLI, bootstrapping from the leader (a stopped node would hold its connection)."""
    return subprocess.Popen([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                             f"127.0.0.1:{dyn.port(leader)}", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _held_back(dyn: DynamicCluster, stopped: list[int], cli: subprocess.Popen[str],
               resume: int) -> tuple[int, str, str]:
    """Keep ``stopped`` SIGSTOPped for 4 s while ``cli`` runs, then let ``resume`` go on."""
    try:
        time.sleep(4)
        proc = dyn.procs[resume]
        assert proc is not None
        proc.send_signal(signal.SIGCONT)
        out, err = cli.communicate(timeout=60)
    finally:
        for i in stopped:
            p = dyn.procs[i]
            if p is not None:
                p.send_signal(signal.SIGCONT)
    return cli.returncode, out, err


def _sigstop(dyn: DynamicCluster, ids: list[int]) -> None:
    for i in ids:
        p = dyn.procs[i]
        assert p is not None
        os.kill(p.pid, signal.SIGSTOP)


def _caught_up(dyn: DynamicCluster, ids: list[int]) -> None:
    deadline = time.monotonic() + 30
    while True:
        q = dyn.quorum()
        if q is not None and q.high_watermark > 0:
            ends = {r.replica_id: r.log_end_offset for r in [*q.voters, *q.observers]}
            if all(ends.get(i, -1) >= q.high_watermark for i in ids):
                return
        assert time.monotonic() < deadline, f"replicas {ids} never caught up: {q}"
        time.sleep(0.2)


def test_a_timed_out_try_that_took_effect_is_reported_as_success(tmp_path: Path) -> None:
    dyn = DynamicCluster(tmp_path, 3, extra="controller.quorum.fetch.timeout.ms=8000\n", observers=1)
    try:
        dyn.start_all()
        info = wait_for_hw(dyn, timeout=30)
        leader, epoch = info.leader_id, info.leader_epoch
        a, b = [v for v in dyn.voter_ids if v != leader]
        _caught_up(dyn, [a, b, 4])  # an observer that lags is refused as a new voter

        # add 4 to {L, a, b}: the new set of 4 needs 3; with a and b stopped only L and 4 fetch
        _sigstop(dyn, [a, b])
        rc, out, err = _held_back(dyn, [a, b], _cli(dyn, leader, "--command-config", dyn.properties(4),
                                                    "add-controller"), resume=a)
        assert rc == 0, err
        assert out.startswith(f"Added controller 4 with directory id {dyn.directory_id(4)}"), out
        answers = log_lines(dyn.log(leader), r"AddRaftVoter for voter 4 ")
        assert "REQUEST_TIMED_OUT" in answers[0] and any("DUPLICATE_VOTER" in x for x in answers), answers

        # every stopped replica has fetched again, before stopping two of them once more
        _caught_up(dyn, [a, b, 4])
        # remove a from {L, a, b, 4}: the new set {L, b, 4} needs 2; with b and 4 stopped, only L
        _sigstop(dyn, [b, 4])
        rc, out, err = _held_back(dyn, [b, 4], _cli(dyn, leader, "remove-controller", "--controller-id", str(a),
                                                    f"--controller-directory-id={dyn.directory_id(a)}"),
                                  resume=b)
        assert rc == 0, err
        assert out.startswith(f"Removed  KRaft controller {a} with directory id {dyn.directory_id(a)}"), out
        answers = log_lines(dyn.log(leader), rf"RemoveRaftVoter for voter {a} ")
        assert "REQUEST_TIMED_OUT" in answers[0] and any("VOTER_NOT_FOUND" in x for x in answers), answers

        final = dyn.wait_for_leader()
        assert (final.leader_id, final.leader_epoch) == (leader, epoch)
        assert sorted(v.replica_id for v in final.voters) == sorted([leader, b, 4])
    finally:
        dyn.close()
