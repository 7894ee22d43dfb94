"""Hostile input: any well-typed but nonsensical message leaves the node consistent.

Whatever peers send (wrong epochs, negative offsets, unknown ids, stale
correlation ids, records in the wrong place), the core must not raise, must not
move its high watermark past its log, and must never lower it.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftnode.raft.batches import Batch
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog
from kraftnode.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CurrentLeader,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraftnode.raft.voters import ReplicaKey
from tests.kraftnode.raft.rafttest_helpers import make_node

ints = st.integers(min_value=-3, max_value=12)
ids = st.integers(min_value=-2, max_value=5)
dirs = st.one_of(st.none(), st.just(uuid.UUID(int=1002)), st.just(uuid.UUID(int=9)))
clusters = st.sampled_from([None, "test-cluster", "other"])
codes = st.sampled_from([0, 6, 74, 75, 104, 125, 42])


@st.composite
def batches(draw: st.DrawFn) -> tuple[Batch, ...]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        base = draw(ints)
        out.append(Batch(base, base + draw(st.integers(-1, 2)), draw(ints), ("r",)))
    return tuple(out)


requests = st.one_of(
    st.builds(VoteRequest, clusters, ids, ints, ids, dirs, dirs, ints, ints),
    st.builds(BeginQuorumEpochRequest, clusters, ids, dirs, ids, ints),
    st.builds(EndQuorumEpochRequest, clusters, ids, ints,
              st.lists(st.builds(ReplicaKey, ids, dirs), max_size=3).map(tuple)),
    st.builds(FetchRequest, clusters, ids, dirs, st.integers(-5, 600), ints, ints, ints,
              max_bytes=st.integers(-1, 1000)),
    st.builds(FetchSnapshotRequest, clusters, ids, dirs, ints, st.builds(SnapshotId, ints, ints), ints),
)
responses = st.one_of(
    st.builds(VoteResponse, codes, codes, ids, ints, st.booleans()),
    st.builds(BeginQuorumEpochResponse, codes, codes, ids, ints),
    st.builds(EndQuorumEpochResponse, codes, codes, ids, ints),
    st.builds(FetchResponse, codes, codes, ints, st.builds(CurrentLeader, ids, ints), ints,
              st.one_of(st.none(), st.builds(DivergingEpoch, ints, ints)), st.none(), batches()),
)
events = st.lists(
    st.tuples(st.sampled_from(["req", "resp", "tick", "append"]), requests, responses, ids,
              st.integers(0, 6), st.integers(0, 400)),
    max_size=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.sampled_from(["unattached", "follower", "voted", "leader-ish"]), evs=events)
def test_nonsense_never_breaks_the_node(start: str, evs: list[tuple[str, object, object, int, int, int]]) -> None:
    log = MemoryRaftLog()
    log.append_as_leader(["a", "b"], 1)
    log.flush()
    election = {
        "unattached": ElectionState(2),
        "follower": ElectionState(2, 3, None),
        "voted": ElectionState(2, -1, ReplicaKey(2)),
        "leader-ish": ElectionState(2, 1, ReplicaKey(1)),  # restarts resigned, then campaigns
    }[start]
    node = make_node(1, log=log, election=election)
    now = 0
    node.tick(now)
    last_hw = node.high_watermark
    for kind, request, response, source, corr, dt in evs:
        now += dt
        if kind == "req":
            node.handle_request(corr, request, now)  # type: ignore[arg-type]
        elif kind == "resp":
            node.handle_response(source, corr, response, now)  # type: ignore[arg-type]
        elif kind == "tick":
            node.tick(now)
        else:
            node.append(["x"], now)
        node.take_actions()
        assert node.high_watermark <= node.log.end_offset
        assert node.high_watermark >= last_hw
        last_hw = node.high_watermark
        assert node.epoch >= 2
