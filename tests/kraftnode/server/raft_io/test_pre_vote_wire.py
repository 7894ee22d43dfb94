"""kraftnode answering a Kafka 4.x peer's pre-vote on the wire (KIP-996, Vote v2 with
PreVote=true), real processes. The request bytes are encoded here by hand from Kafka 4.0's
VoteRequest.json (flexible v2: compact strings and arrays, uuids, tagged fields), and the
answer decoded by hand from VoteResponse.json -- not with kraftnode's generated code, so a
schema mistake on our side cannot cancel itself out.

* The leader refuses; a follower that has fetched from its leader refuses (stickiness); the
  answer names the leader and the unchanged epoch.
* A voter without a leader grants an up-to-date pre-vote, and a stale one is refused;
  neither bumps its epoch nor records a vote in quorum-state.
* A node with pre-vote off (Kafka 3.9's range, Vote 0-1) closes the connection on a v2
  request, as a Kafka 3.9 controller does with a version it cannot parse."""

from __future__ import annotations

import json
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, wait_for_hw
from tests.support.node import recv_frame

pytestmark = pytest.mark.timeout(120)

VOTE = 52
ZERO_UUID = bytes(16)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _compact_str(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


def pre_vote_v2(cid: int, cluster_id: str, voter_id: int, epoch: int, candidate: int,
                last_epoch: int, last_offset: int) -> bytes:
    """A size-prefixed VoteRequest v2 with PreVote=true, as a Kafka 4.0 controller sends it."""
    header = struct.pack(">hhi", VOTE, 2, cid) + struct.pack(">h", 16) + b"raft-client-" + \
        str(candidate).encode().rjust(4, b"0") + b"\x00"  # client id (16 bytes), no tags
    partition = (struct.pack(">iii", 0, epoch, candidate) + ZERO_UUID + ZERO_UUID
                 + struct.pack(">iq", last_epoch, last_offset) + b"\x01" + b"\x00")
    topic = _compact_str("__cluster_metadata") + _uvarint(2) + partition + b"\x00"
    body = _compact_str(cluster_id) + struct.pack(">i", voter_id) + _uvarint(2) + topic + b"\x00"
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


@dataclass
class Answer:
    error: int
    partition_error: int
    leader_id: int
    leader_epoch: int
    granted: bool


def parse_vote_response_v2(frame: bytes, cid: int) -> Answer:
    (got_cid,) = struct.unpack_from(">i", frame, 0)
    assert got_cid == cid
    pos = 4
    assert frame[pos] == 0  # response header v1: no tagged fields
    pos += 1
    (error,) = struct.unpack_from(">h", frame, pos)
    pos += 2
    assert frame[pos] == 2  # one topic
    pos += 1
    name_len = frame[pos] - 1
    pos += 1
    assert frame[pos:pos + name_len] == b"__cluster_metadata"
    pos += name_len
    assert frame[pos] == 2  # one partition
    pos += 1
    index, perr, leader, lepoch = struct.unpack_from(">ihii", frame, pos)
    pos += 14
    granted = frame[pos]
    assert index == 0 and granted in (0, 1)
    return Answer(error, perr, leader, lepoch, bool(granted))


def ask(port: int, cid: int, **kw: int | str) -> Answer | None:
    """One pre-vote on a fresh connection; None when the node closed it unanswered."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(pre_vote_v2(cid, **kw))  # type: ignore[arg-type]
        frame = recv_frame(s)
    return None if frame is None else parse_vote_response_v2(frame, cid)


def quorum_state(cl: Cluster, i: int) -> dict[str, object]:
    path = cl.root / f"node{i}" / "metadata" / "__cluster_metadata-0" / "quorum-state"
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_a_kafka_4_pre_vote_is_answered_as_kafka_4_answers_it(tmp_path: Path) -> None:
    cl = Cluster(tmp_path / "q", 3, extra="kraftnode.raft.pre.vote.enable=true\n")
    try:
        cl.start_all()
        info = wait_for_hw(cl, 1, 30)
        leader, epoch = info.leader_id, info.leader_epoch
        follower, other = [i for i in cl.ids if i != leader]
        time.sleep(0.5)  # both followers have fetched since they started following
        end = info.high_watermark + 100  # an up-to-date log: at least everyone's
        cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"
        for cid, target in enumerate((leader, follower), start=1):
            a = ask(cl.port(target), cid, cluster_id=cluster_id, voter_id=target, epoch=epoch,
                    candidate=other, last_epoch=epoch, last_offset=end)
            assert a is not None, f"node {target} closed the connection"
            assert (a.error, a.partition_error, a.leader_id, a.leader_epoch, a.granted) == \
                (0, 0, leader, epoch, False), (target, a)
        assert cl.wait_for_leader(5).leader_epoch == epoch

        # a voter without a leader: only node 1 of the three runs
        cl.close()
        cl.start(1)
        deadline = time.monotonic() + 30
        while True:  # listening (an interpreter start takes seconds on a loaded host) ...
            try:
                socket.create_connection(("127.0.0.1", cl.port(1)), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, cl.log(1)[-2000:]
                time.sleep(0.1)
        time.sleep(2.5)  # ... and past its election timeout: unattached or prospective, no leader
        before = quorum_state(cl, 1)
        e = int(before["leaderEpoch"])  # type: ignore[call-overload]
        stale = ask(cl.port(1), 10, cluster_id=cluster_id, voter_id=1, epoch=e, candidate=2,
                    last_epoch=0, last_offset=0)
        assert stale is not None and stale.granted is False and stale.leader_epoch == e, stale
        a = ask(cl.port(1), 11, cluster_id=cluster_id, voter_id=1, epoch=e, candidate=2,
                last_epoch=e, last_offset=end)
        assert a is not None and (a.error, a.partition_error, a.granted) == (0, 0, True), a
        assert a.leader_epoch == e  # no epoch bump ...
        assert quorum_state(cl, 1) == before  # ... and nothing persisted
    finally:
        cl.close()


def test_a_node_without_pre_vote_refuses_vote_v2(tmp_path: Path) -> None:
    cl = Cluster(tmp_path / "q", 3, extra="kraftnode.raft.pre.vote.enable=false\n")
    try:
        cl.start_all()
        info = wait_for_hw(cl, 1, 30)
        i = info.leader_id
        a = ask(cl.port(i), 1, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", voter_id=i, epoch=info.leader_epoch,
                candidate=i % 3 + 1, last_epoch=info.leader_epoch, last_offset=10**6)
        # Kafka 3.9's range is Vote 0-1: as a 3.9 controller (RequestContext.parseRequest throws
        # InvalidRequestException, SocketServer closes the channel), the connection is closed
        # unanswered, with a log line
        assert a is None, a
        assert "unsupported version 2 of Vote" in cl.log(i), cl.log(i)[-2000:]
        assert cl.wait_for_leader(5).leader_epoch == info.leader_epoch
    finally:
        cl.close()
