"""What every handler shares: request validation (cluster id, voter key) and the
leader information every response carries (Kafka's KafkaRaftClient helpers).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kraftnode.raft.messages import CurrentLeader, NodeEndpoint
from kraftnode.raft.rules.port import RaftCore
from kraftnode.raft.states import FollowerState
from kraftnode.raft.voters import Endpoint, ReplicaKey


def current_leader(node: RaftCore) -> CurrentLeader:
    return CurrentLeader(node.leader_id, node.epoch)


def leader_node_endpoints(node: RaftCore) -> tuple[NodeEndpoint, ...]:
    leader = node.leader_id
    if leader < 0:
        return ()
    st = node.state
    if leader == node.local_key.id:
        eps: tuple[Endpoint, ...] = node.local_endpoints or node.voters.endpoints_of(leader)
    elif isinstance(st, FollowerState) and st.leader_endpoints:
        eps = st.leader_endpoints
    else:
        eps = node.voters.endpoints_of(leader)
    for ep in eps:
        if ep.name == node.config.listener_name:
            return (NodeEndpoint(leader, ep.host, ep.port),)
    return (NodeEndpoint(leader, eps[0].host, eps[0].port),) if eps else ()


def endpoints_from_nodes(node: RaftCore, leader_id: int, nodes: Sequence[NodeEndpoint]) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(node.config.listener_name, n.host, n.port) for n in nodes if n.node_id == leader_id)


def cluster_ok(node: RaftCore, cluster_id: str | None) -> bool:
    return cluster_id is None or node.config.cluster_id is None or cluster_id == node.config.cluster_id


def valid_voter_key(node: RaftCore, voter_id: int, voter_directory_id: uuid.UUID | None) -> bool:
    """KIP-853: a v1 request naming another replica as its target is refused."""
    if voter_id < 0:
        return True
    if voter_id != node.local_key.id:
        return False
    key = ReplicaKey.of(voter_id, voter_directory_id)
    return key.matches(node.local_key)
