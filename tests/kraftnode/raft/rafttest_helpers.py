"""Helpers for the Raft core unit tests: build a node, feed it events, inspect actions."""

from __future__ import annotations

import random
import uuid
from typing import TypeVar

from kraftnode.raft.actions import Action, SendRequest, SendResponse
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog
from kraftnode.raft.messages import FetchRequest, FetchResponse, VoteRequest
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet
from tests.simulation import plants

T = TypeVar("T")
CLUSTER = "test-cluster"
CONFIG = RaftConfig(cluster_id=CLUSTER)


def dir_id(n: int) -> uuid.UUID:
    return uuid.UUID(int=1000 + n)


def voters(*ids: int, directory_ids: bool = False) -> VoterSet:
    return VoterSet.of(
        VoterNode(ReplicaKey(i, dir_id(i) if directory_ids else None), (Endpoint("CONTROLLER", f"h{i}", 9000 + i),))
        for i in ids
    )


def make_node(
    local_id: int = 1,
    voter_set: VoterSet | None = None,
    log: MemoryRaftLog | None = None,
    election: ElectionState | None = None,
    now: int = 0,
    config: RaftConfig = CONFIG,
    plant: frozenset[str] = frozenset(),
    seed: int = 7,
) -> RaftNode:
    node = plants.node_class(plant)(
        local_id, dir_id(local_id), config, log if log is not None else MemoryRaftLog(),
        election if election is not None else ElectionState(0),
        voter_set if voter_set is not None else voters(1, 2, 3), random.Random(seed), now,
    )
    return node


def of_type(actions: list[Action], kind: type[T]) -> list[T]:
    return [a for a in actions if isinstance(a, kind)]


def vote_request(candidate: int, epoch: int, last_epoch: int = 0, last_offset: int = 0,
                 cluster: str | None = CLUSTER, voter_id: int = -1,
                 candidate_dir: uuid.UUID | None = None) -> VoteRequest:
    return VoteRequest(cluster, voter_id, epoch, candidate, candidate_dir, None, last_epoch, last_offset)


def fetch_request(replica: int, epoch: int, offset: int, last_epoch: int, max_wait: int = 0,
                  max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(CLUSTER, replica, dir_id(replica), max_wait, epoch, offset, last_epoch,
                        max_bytes=max_bytes)


def responses(actions: list[Action]) -> list[object]:
    return [a.response for a in actions if isinstance(a, SendResponse)]


def fetch_responses(actions: list[Action]) -> list[FetchResponse]:
    return [r for r in responses(actions) if isinstance(r, FetchResponse)]


def requests_to(actions: list[Action], kind: type[T]) -> dict[int, T]:
    return {a.destination: a.request for a in actions if isinstance(a, SendRequest) and isinstance(a.request, kind)}  # type: ignore[misc]


def sent(actions: list[Action], kind: type[T]) -> list[SendRequest]:
    return [a for a in actions if isinstance(a, SendRequest) and isinstance(a.request, kind)]


def elect(node: RaftNode, now: int) -> int:
    """Drive a 3-voter node (id 1) to leadership; returns the time after election."""
    deadline = node.next_deadline_ms()
    assert deadline is not None
    now = max(now, deadline)
    node.tick(now)
    actions = node.take_actions()
    from kraftnode.raft.messages import VoteResponse

    for a in sent(actions, VoteRequest):
        node.handle_response(a.destination, a.correlation_id,
                             VoteResponse(0, 0, -1, node.epoch, True), now)
    assert node.is_leader
    return now
