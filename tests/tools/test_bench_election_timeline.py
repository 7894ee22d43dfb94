"""tools/bench/election_timeline.py (issue 38, must-show 5) reads the debug logs that
``elections.py --trace`` keeps and rebuilds one timeline per leader kill.

The fixture (``testdata/election_timeline``) is an excerpt of a real run (2026-12-07, 2 Kafka 4.4 + 1
kraftnode, election 4 of that run): the Kafka leader 2 was killed; kraftnode voter 1's fetch timer ran
out 14 ms before Kafka voter 3's, its pre-vote reached 3 while 3 still followed the leader it had
fetched from (refused, KIP-996), and 3 -- prospective 14 ms later -- got 1's grant and won.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tools.bench import election_timeline as et

DATA = Path(__file__).resolve().parent / "testdata" / "election_timeline"
TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench" / "election_timeline.py"


def test_timeline_of_a_kafka_leader_kill() -> None:
    (tl,) = et.load(DATA)
    assert tl.killed == 2
    assert tl.last_fetch == {"K3": -244, "N1": -258}
    assert tl.timed_out == {"K3": 1756, "N1": 1742}
    assert (tl.first, tl.gap_ms, tl.winner) == ("N1", 14, "K3")
    assert tl.row()["first_won"] is False
    text = "\n".join(tl.lines)
    # the follower that still fetched from its leader refuses the early pre-vote ...
    assert "K3  answers pre-vote of 1 (epoch 4): error 0, granted false" in text
    # ... and the prospective grants the late one, whose Vote then wins
    assert "N1  answers pre-vote of 3 (epoch 4): error 0/0, granted True" in text
    assert text.index("K3  became candidate in epoch 5") < text.index("K3  became leader in epoch 5")
    assert tl.lines[-1].endswith("K3  became leader in epoch 5")


def test_summary_and_timer_lateness() -> None:
    tls = et.load(DATA)
    s = et.summary(tls)
    assert s["one_of_each"] == 1 and s["one_of_each_kraftnode_first"] == 1 and s["one_of_each_kraftnode_won"] == 0
    assert s["first_won_gap_gt_5ms"] == "0 of 1" and s["first_won_gap_le_5ms"] == "0 of 0"
    # both timed out exactly 2 s after their last Fetch answer here
    assert et.timer_lateness(tls) == {"K": [0], "N": [0]}


def test_kafka_lines_of_either_generation() -> None:
    cand = ("[2026-12-07 07:54:09,675] INFO [RaftManager id=2] Completed transition to CandidateState(localId=2, "
            "localDirectoryId=xI8tGrVUgdbTUCDcf2rSBQ, epoch=2, retries=1) from ProspectiveState(epoch=1) "
            "(org.apache.kafka.raft.QuorumState)")
    ev = et._kafka_event(0.0, "K2", cand)
    assert ev is not None and (ev.kind, ev.state, ev.text) == ("state", "candidate", "became candidate in epoch 2")
    failed = ("[2026-12-07 07:54:21,008] TRACE [RaftManager id=3] Received inbound message InboundResponse("
              "correlationId=9, data=FetchResponseData(throttleTimeMs=0, errorCode=0, sessionId=0, responses=["
              "FetchableTopicResponse(topic='', partitions=[PartitionData(partitionIndex=0, errorCode=6, "
              "highWatermark=-1)])]), source=127.0.0.1:1 (id: 2 rack: null isFenced: false))")
    assert et._kafka_event(0.0, "K3", failed) is None   # NOT_LEADER_OR_FOLLOWER restarts no fetch timer


def test_cli(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(TOOL), str(DATA), "--election", "1"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "election 1: killed 2; K3 last answer -244 ms, timed out +1756 ms; N1 last answer -258 ms" in r.stdout
    assert "first N1 by 14 ms; winner K3" in r.stdout
    assert json.loads(r.stdout.splitlines()[-3])["one_of_each"] == 1
    r = subprocess.run([sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "holds no kills.json" in r.stderr and "Traceback" not in r.stderr
