"""Translation between Kafka's wire messages and the Raft core's RPC dataclasses.

The core speaks one partition (``__cluster_metadata-0``) in flattened dataclasses;
Kafka's RPCs wrap that partition in topic/partition arrays and add per-version
fields.  Each ``*_to_wire`` builds the message for a given version the way Kafka
3.9's ``RaftUtil`` does; each ``*_from_wire`` validates the topic partition and
returns ``None`` when the request is not for ``__cluster_metadata-0`` (answered
with INVALID_REQUEST, as Kafka does).
"""

from __future__ import annotations

import uuid
from typing import Any

from kraftnode import vocabulary
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.raft import messages as m
from kraftnode.raft.voters import Endpoint, ReplicaKey
from kraftnode.server.raft_io.disk_log import batches_from_records, records_from_batches
from recordbatch.wire import ZERO_UUID

# The quorum's topic as this process names it in raft RPCs: kraftnode.vocabulary's
# METADATA_TOPIC unless use_topic picks another of vocabulary.RAFT_TOPICS (Kafka's
# TestRaftServer topic, whose quorum always has the all-zero cluster id).
METADATA_TOPIC = vocabulary.METADATA_TOPIC
METADATA_TOPIC_ID = vocabulary.METADATA_TOPIC_ID
RAFT_TOPICS = vocabulary.RAFT_TOPICS
TEST_RAFT_SERVER_CLUSTER_ID = vocabulary.TEST_RAFT_SERVER_CLUSTER_ID


def use_topic(name: str) -> None:
    """Name the quorum's topic in every raft RPC this process sends and accepts.

    One node runs one quorum, so this is process-wide, set once at start-up.
    """
    global METADATA_TOPIC, METADATA_TOPIC_ID
    METADATA_TOPIC, METADATA_TOPIC_ID = name, RAFT_TOPICS[name]
METADATA_PARTITION = vocabulary.METADATA_PARTITION
INVALID_REQUEST = int(Errors.INVALID_REQUEST)


def _dir(u: uuid.UUID | None) -> uuid.UUID:
    return u if u is not None else ZERO_UUID


def _undir(u: uuid.UUID) -> uuid.UUID | None:
    return None if u == ZERO_UUID else u


def _single_partition(topics: list[Any]) -> Any | None:
    if len(topics) != 1 or topics[0].topic_name != METADATA_TOPIC:
        return None
    parts = topics[0].partitions
    if len(parts) != 1:
        return None
    return parts[0]


def _node_endpoints(cls: Any, eps: tuple[m.NodeEndpoint, ...]) -> list[Any]:
    return [cls(node_id=e.node_id, host=e.host, port=e.port) for e in eps]


def _from_node_endpoints(eps: list[Any]) -> tuple[m.NodeEndpoint, ...]:
    return tuple(m.NodeEndpoint(e.node_id, e.host, e.port) for e in eps)


def _epoch_response_to_wire(cls: Any, r: Any, version: int, **partition_fields: Any) -> Any:
    """The Vote/BeginQuorumEpoch/EndQuorumEpoch response: one partition carrying the
    leader id and epoch (plus ``partition_fields``), and the leader's endpoints from v1."""
    return cls(error_code=r.error_code, topics=[cls.TopicData(
        topic_name=METADATA_TOPIC, partitions=[cls.PartitionData(
            partition_index=METADATA_PARTITION, error_code=r.partition_error_code,
            leader_id=r.leader_id, leader_epoch=r.leader_epoch, **partition_fields)])],
        node_endpoints=_node_endpoints(cls.NodeEndpoint, r.node_endpoints) if version >= 1 else [])


def _epoch_response_from_wire(cls: Any, q: Any) -> Any:
    """BeginQuorumEpoch/EndQuorumEpoch responses (same shape) as the core's dataclass."""
    p = _single_partition(q.topics)
    if p is None:
        return cls(q.error_code or INVALID_REQUEST, 0, -1, -1)
    return cls(q.error_code, p.error_code, p.leader_id, p.leader_epoch, _from_node_endpoints(q.node_endpoints))


# -------------------------------------------------------------------- Vote
def vote_request_to_wire(r: m.VoteRequest, version: int) -> w.VoteRequest:
    return w.VoteRequest(cluster_id=r.cluster_id, voter_id=r.voter_id, topics=[
        w.VoteRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[w.VoteRequest.PartitionData(
            partition_index=METADATA_PARTITION, candidate_epoch=r.candidate_epoch,
            candidate_id=r.candidate_id, candidate_directory_id=_dir(r.candidate_directory_id),
            voter_directory_id=_dir(r.voter_directory_id), last_offset_epoch=r.last_offset_epoch,
            last_offset=r.last_offset, pre_vote=r.pre_vote and version >= 2)])])


def vote_request_from_wire(q: w.VoteRequest) -> m.VoteRequest | None:
    p = _single_partition(q.topics)
    if p is None or p.partition_index != METADATA_PARTITION:
        return None
    return m.VoteRequest(q.cluster_id, q.voter_id, p.candidate_epoch, p.candidate_id,
                         _undir(p.candidate_directory_id), _undir(p.voter_directory_id),
                         p.last_offset_epoch, p.last_offset, p.pre_vote)


def vote_response_to_wire(r: m.VoteResponse, version: int) -> w.VoteResponse:
    out: w.VoteResponse = _epoch_response_to_wire(w.VoteResponse, r, version, vote_granted=r.vote_granted)
    return out


def vote_response_from_wire(q: w.VoteResponse) -> m.VoteResponse:
    p = _single_partition(q.topics)
    if p is None:
        return m.VoteResponse(q.error_code or INVALID_REQUEST, 0, -1, -1, False)
    return m.VoteResponse(q.error_code, p.error_code, p.leader_id, p.leader_epoch, p.vote_granted,
                          _from_node_endpoints(q.node_endpoints))


# -------------------------------------------------------- BeginQuorumEpoch
def _leader_endpoints(cls: Any, eps: tuple[Endpoint, ...]) -> list[Any]:
    return [cls(name=e.name, host=e.host, port=e.port) for e in eps]


def begin_request_to_wire(r: m.BeginQuorumEpochRequest, version: int) -> w.BeginQuorumEpochRequest:
    return w.BeginQuorumEpochRequest(
        cluster_id=r.cluster_id, voter_id=r.voter_id, topics=[w.BeginQuorumEpochRequest.TopicData(
            topic_name=METADATA_TOPIC, partitions=[w.BeginQuorumEpochRequest.PartitionData(
                partition_index=METADATA_PARTITION, voter_directory_id=_dir(r.voter_directory_id),
                leader_id=r.leader_id, leader_epoch=r.leader_epoch)])],
        leader_endpoints=_leader_endpoints(w.BeginQuorumEpochRequest.LeaderEndpoint, r.leader_endpoints)
        if version >= 1 else [])


def begin_request_from_wire(q: w.BeginQuorumEpochRequest) -> m.BeginQuorumEpochRequest | None:
    p = _single_partition(q.topics)
    if p is None or p.partition_index != METADATA_PARTITION:
        return None
    return m.BeginQuorumEpochRequest(
        q.cluster_id, q.voter_id, _undir(p.voter_directory_id), p.leader_id, p.leader_epoch,
        tuple(Endpoint(e.name, e.host, e.port) for e in q.leader_endpoints))


def begin_response_to_wire(r: m.BeginQuorumEpochResponse, version: int) -> w.BeginQuorumEpochResponse:
    out: w.BeginQuorumEpochResponse = _epoch_response_to_wire(w.BeginQuorumEpochResponse, r, version)
    return out


def begin_response_from_wire(q: w.BeginQuorumEpochResponse) -> m.BeginQuorumEpochResponse:
    out: m.BeginQuorumEpochResponse = _epoch_response_from_wire(m.BeginQuorumEpochResponse, q)
    return out


# ---------------------------------------------------------- EndQuorumEpoch
def end_request_to_wire(r: m.EndQuorumEpochRequest, version: int) -> w.EndQuorumEpochRequest:
    part = w.EndQuorumEpochRequest.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=r.leader_id, leader_epoch=r.leader_epoch)
    if version == 0:
        part.preferred_successors = [k.id for k in r.preferred_candidates]
    else:
        part.preferred_candidates = [w.EndQuorumEpochRequest.ReplicaInfo(
            candidate_id=k.id, candidate_directory_id=k.wire_directory_id())
            for k in r.preferred_candidates]
    return w.EndQuorumEpochRequest(cluster_id=r.cluster_id, topics=[
        w.EndQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])],
        leader_endpoints=_leader_endpoints(w.EndQuorumEpochRequest.LeaderEndpoint, r.leader_endpoints)
        if version >= 1 else [])


def end_request_from_wire(q: w.EndQuorumEpochRequest, version: int) -> m.EndQuorumEpochRequest | None:
    p = _single_partition(q.topics)
    if p is None or p.partition_index != METADATA_PARTITION:
        return None
    if version == 0:
        cands = tuple(ReplicaKey(i) for i in p.preferred_successors)
    else:
        cands = tuple(ReplicaKey.of(c.candidate_id, c.candidate_directory_id)
                      for c in p.preferred_candidates)
    return m.EndQuorumEpochRequest(q.cluster_id, p.leader_id, p.leader_epoch, cands,
                                   tuple(Endpoint(e.name, e.host, e.port) for e in q.leader_endpoints))


def end_response_to_wire(r: m.EndQuorumEpochResponse, version: int) -> w.EndQuorumEpochResponse:
    out: w.EndQuorumEpochResponse = _epoch_response_to_wire(w.EndQuorumEpochResponse, r, version)
    return out


def end_response_from_wire(q: w.EndQuorumEpochResponse) -> m.EndQuorumEpochResponse:
    out: m.EndQuorumEpochResponse = _epoch_response_from_wire(m.EndQuorumEpochResponse, q)
    return out


# -------------------------------------------------------------------- Fetch
def fetch_request_to_wire(r: m.FetchRequest, version: int) -> w.FetchRequest:
    return w.FetchRequest(
        cluster_id=r.cluster_id if version >= 12 else None,
        replica_id=r.replica_id if version < 15 else -1,
        replica_state=w.FetchRequest.ReplicaState(replica_id=r.replica_id, replica_epoch=r.replica_epoch)
        if version >= 15 else w.FetchRequest.ReplicaState(),
        max_wait_ms=r.max_wait_ms, min_bytes=r.min_bytes, max_bytes=r.max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[w.FetchRequest.FetchTopic(
            topic=METADATA_TOPIC if version < 13 else "",
            topic_id=METADATA_TOPIC_ID if version >= 13 else ZERO_UUID,
            partitions=[w.FetchRequest.FetchPartition(
                partition=METADATA_PARTITION, current_leader_epoch=r.current_leader_epoch,
                fetch_offset=r.fetch_offset, last_fetched_epoch=r.last_fetched_epoch,
                log_start_offset=r.log_start_offset, partition_max_bytes=r.max_bytes,
                replica_directory_id=_dir(r.replica_directory_id) if version >= 17 else ZERO_UUID,
                high_watermark=r.high_watermark if version >= 18 else m.NO_REPLICA_HIGH_WATERMARK)])],
        forgotten_topics_data=[], rack_id="")


def fetch_replica_id(q: w.FetchRequest, version: int) -> int:
    return q.replica_state.replica_id if version >= 15 else q.replica_id


def fetch_partition(q: w.FetchRequest, version: int) -> Any | None:
    """The one FetchPartition of a request for ``__cluster_metadata-0``, else None."""
    if len(q.topics) != 1:
        return None
    t = q.topics[0]
    if (version >= 13 and t.topic_id != METADATA_TOPIC_ID) or (version < 13 and t.topic != METADATA_TOPIC):
        return None
    if len(t.partitions) != 1 or t.partitions[0].partition != METADATA_PARTITION:
        return None
    return t.partitions[0]


def fetch_request_from_wire(q: w.FetchRequest, version: int) -> m.FetchRequest | None:
    p = fetch_partition(q, version)
    if p is None:
        return None
    return m.FetchRequest(
        q.cluster_id, fetch_replica_id(q, version), _undir(p.replica_directory_id), q.max_wait_ms,
        p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset,
        min(q.max_bytes, p.partition_max_bytes) if p.partition_max_bytes > 0 else q.max_bytes,
        q.min_bytes, q.replica_state.replica_epoch if version >= 15 else -1,
        p.high_watermark if version >= 18 else m.NO_REPLICA_HIGH_WATERMARK)


def fetch_response_to_wire(r: m.FetchResponse, version: int) -> w.FetchResponse:
    part = w.FetchResponse.PartitionData(
        partition_index=METADATA_PARTITION, error_code=r.partition_error_code,
        high_watermark=r.high_watermark, last_stable_offset=-1, log_start_offset=r.log_start_offset,
        preferred_read_replica=-1, aborted_transactions=None,
        records=records_from_batches(r.records))
    if version >= 12:
        if r.diverging_epoch is not None:
            part.diverging_epoch = w.FetchResponse.EpochEndOffset(
                epoch=r.diverging_epoch.epoch, end_offset=r.diverging_epoch.end_offset)
        part.current_leader = w.FetchResponse.LeaderIdAndEpoch(
            leader_id=r.current_leader.leader_id, leader_epoch=r.current_leader.leader_epoch)
        if r.snapshot_id is not None:
            part.snapshot_id = w.FetchResponse.SnapshotId(
                end_offset=r.snapshot_id.end_offset, epoch=r.snapshot_id.epoch)
    return w.FetchResponse(
        throttle_time_ms=0, error_code=r.error_code, session_id=0,
        responses=[w.FetchResponse.FetchableTopicResponse(
            topic=METADATA_TOPIC if version < 13 else "",
            topic_id=METADATA_TOPIC_ID if version >= 13 else ZERO_UUID, partitions=[part])],
        node_endpoints=[w.FetchResponse.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port)
                        for e in r.node_endpoints] if version >= 16 else [])


def fetch_response_from_wire(q: w.FetchResponse, version: int) -> m.FetchResponse:
    if len(q.responses) != 1 or len(q.responses[0].partitions) != 1:
        return m.FetchResponse(q.error_code or INVALID_REQUEST, 0, -1, m.CurrentLeader(-1, -1))
    p = q.responses[0].partitions[0]
    de = p.diverging_epoch
    sid = p.snapshot_id
    return m.FetchResponse(
        q.error_code, p.error_code, p.high_watermark,
        m.CurrentLeader(p.current_leader.leader_id, p.current_leader.leader_epoch),
        p.log_start_offset,
        m.DivergingEpoch(de.epoch, de.end_offset) if de.epoch >= 0 and de.end_offset >= 0 else None,
        m.SnapshotId(sid.end_offset, sid.epoch) if sid.end_offset >= 0 and sid.epoch >= 0 else None,
        batches_from_records(p.records),
        _from_node_endpoints(q.node_endpoints))


# ------------------------------------------------------------ FetchSnapshot
def fetch_snapshot_request_to_wire(r: m.FetchSnapshotRequest, version: int) -> w.FetchSnapshotRequest:
    return w.FetchSnapshotRequest(
        cluster_id=r.cluster_id, replica_id=r.replica_id, max_bytes=r.max_bytes, topics=[
            w.FetchSnapshotRequest.TopicSnapshot(name=METADATA_TOPIC, partitions=[
                w.FetchSnapshotRequest.PartitionSnapshot(
                    partition=METADATA_PARTITION, current_leader_epoch=r.current_leader_epoch,
                    snapshot_id=w.FetchSnapshotRequest.SnapshotId(
                        end_offset=r.snapshot_id.end_offset, epoch=r.snapshot_id.epoch),
                    position=r.position,
                    replica_directory_id=_dir(r.replica_directory_id) if version >= 1 else ZERO_UUID)])])


def fetch_snapshot_request_from_wire(q: w.FetchSnapshotRequest) -> m.FetchSnapshotRequest | None:
    if len(q.topics) != 1 or q.topics[0].name != METADATA_TOPIC or len(q.topics[0].partitions) != 1:
        return None
    p = q.topics[0].partitions[0]
    if p.partition != METADATA_PARTITION:
        return None
    return m.FetchSnapshotRequest(q.cluster_id, q.replica_id, _undir(p.replica_directory_id),
                                  p.current_leader_epoch,
                                  m.SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
                                  p.position, q.max_bytes)


def fetch_snapshot_response_to_wire(r: m.FetchSnapshotResponse, version: int) -> w.FetchSnapshotResponse:
    return w.FetchSnapshotResponse(throttle_time_ms=0, error_code=r.error_code, topics=[
        w.FetchSnapshotResponse.TopicSnapshot(name=METADATA_TOPIC, partitions=[
            w.FetchSnapshotResponse.PartitionSnapshot(
                index=METADATA_PARTITION, error_code=r.partition_error_code,
                snapshot_id=w.FetchSnapshotResponse.SnapshotId(
                    end_offset=r.snapshot_id.end_offset, epoch=r.snapshot_id.epoch),
                current_leader=w.FetchSnapshotResponse.LeaderIdAndEpoch(
                    leader_id=r.current_leader.leader_id, leader_epoch=r.current_leader.leader_epoch),
                size=r.size, position=r.position, unaligned_records=r.unaligned_records)])],
        node_endpoints=_node_endpoints(w.FetchSnapshotResponse.NodeEndpoint, r.node_endpoints)
        if version >= 1 else [])


def fetch_snapshot_response_from_wire(q: w.FetchSnapshotResponse) -> m.FetchSnapshotResponse:
    if len(q.topics) != 1 or len(q.topics[0].partitions) != 1:
        return m.FetchSnapshotResponse(q.error_code or INVALID_REQUEST, 0, m.SnapshotId(-1, -1),
                                       m.CurrentLeader(-1, -1))
    p = q.topics[0].partitions[0]
    return m.FetchSnapshotResponse(
        q.error_code, p.error_code, m.SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
        m.CurrentLeader(p.current_leader.leader_id, p.current_leader.leader_epoch),
        p.size, p.position, bytes(p.unaligned_records or b""), _from_node_endpoints(q.node_endpoints))


# ---------------------------------------------------- voter changes (KIP-853)
def _endpoints_from_listeners(listeners: list[Any]) -> tuple[Endpoint, ...]:
    """Kafka's Endpoints.fromAddVoterRequest/fromUpdateVoterRequest: listener names normalised
    (upper case), as the configured controller listener names are."""
    return tuple(Endpoint(x.name.upper(), x.host, x.port) for x in listeners)


def add_voter_request_from_wire(q: w.AddRaftVoterRequest) -> m.AddRaftVoterRequest:
    return m.AddRaftVoterRequest(q.cluster_id, q.timeout_ms, q.voter_id, _undir(q.voter_directory_id),
                                 _endpoints_from_listeners(q.listeners), q.ack_when_committed)


def add_voter_response_to_wire(r: m.AddRaftVoterResponse) -> w.AddRaftVoterResponse:
    return w.AddRaftVoterResponse(throttle_time_ms=0, error_code=r.error_code, error_message=r.error_message)


def add_voter_request_to_wire(r: m.AddRaftVoterRequest) -> w.AddRaftVoterRequest:
    """An auto-joining observer's own AddRaftVoter (controller.quorum.auto.join.enable)."""
    return w.AddRaftVoterRequest(
        cluster_id=r.cluster_id, timeout_ms=r.timeout_ms, voter_id=r.voter_id,
        voter_directory_id=_dir(r.voter_directory_id),
        listeners=[w.AddRaftVoterRequest.Listener(name=e.name, host=e.host, port=e.port) for e in r.listeners])


def add_voter_response_from_wire(q: w.AddRaftVoterResponse) -> m.AddRaftVoterResponse:
    return m.AddRaftVoterResponse(q.error_code, q.error_message)


def remove_voter_request_to_wire(r: m.RemoveRaftVoterRequest) -> w.RemoveRaftVoterRequest:
    return w.RemoveRaftVoterRequest(cluster_id=r.cluster_id, voter_id=r.voter_id,
                                    voter_directory_id=_dir(r.voter_directory_id))


def remove_voter_response_from_wire(q: w.RemoveRaftVoterResponse) -> m.RemoveRaftVoterResponse:
    return m.RemoveRaftVoterResponse(q.error_code, q.error_message)


def remove_voter_request_from_wire(q: w.RemoveRaftVoterRequest) -> m.RemoveRaftVoterRequest:
    return m.RemoveRaftVoterRequest(q.cluster_id, q.voter_id, _undir(q.voter_directory_id))


def remove_voter_response_to_wire(r: m.RemoveRaftVoterResponse) -> w.RemoveRaftVoterResponse:
    return w.RemoveRaftVoterResponse(throttle_time_ms=0, error_code=r.error_code, error_message=r.error_message)


def update_voter_request_to_wire(r: m.UpdateRaftVoterRequest, version: int) -> w.UpdateRaftVoterRequest:
    return w.UpdateRaftVoterRequest(
        cluster_id=r.cluster_id, current_leader_epoch=r.current_leader_epoch, voter_id=r.voter_id,
        voter_directory_id=_dir(r.voter_directory_id),
        listeners=[w.UpdateRaftVoterRequest.Listener(name=e.name, host=e.host, port=e.port) for e in r.listeners],
        kraft_version_feature=w.UpdateRaftVoterRequest.KRaftVersionFeature(
            min_supported_version=r.min_supported_version, max_supported_version=r.max_supported_version))


def update_voter_request_from_wire(q: w.UpdateRaftVoterRequest) -> m.UpdateRaftVoterRequest:
    f = q.kraft_version_feature
    return m.UpdateRaftVoterRequest(q.cluster_id, q.current_leader_epoch, q.voter_id,
                                    _undir(q.voter_directory_id), _endpoints_from_listeners(q.listeners),
                                    f.min_supported_version, f.max_supported_version)


def update_voter_response_to_wire(r: m.UpdateRaftVoterResponse) -> w.UpdateRaftVoterResponse:
    """RaftUtil.updateVoterResponse: CurrentLeader with the leader's host/port on our listener."""
    cl = w.UpdateRaftVoterResponse.CurrentLeader(leader_id=r.current_leader.leader_id,
                                                 leader_epoch=r.current_leader.leader_epoch)
    if r.leader_endpoint is not None:
        cl.host, cl.port = r.leader_endpoint.host, r.leader_endpoint.port
    return w.UpdateRaftVoterResponse(throttle_time_ms=0, error_code=r.error_code, current_leader=cl)


def update_voter_response_from_wire(q: w.UpdateRaftVoterResponse) -> m.UpdateRaftVoterResponse:
    cl = q.current_leader
    endpoint = m.NodeEndpoint(cl.leader_id, cl.host, cl.port) if cl.host and cl.port > 0 else None
    return m.UpdateRaftVoterResponse(q.error_code, m.CurrentLeader(cl.leader_id, cl.leader_epoch), endpoint)


def kraft_version_range(q: w.ApiVersionsResponse) -> tuple[int, int] | None:
    """The kraft.version SupportedFeatures range of an ApiVersions answer (None if absent)."""
    for f in q.supported_features or []:
        if f.name == "kraft.version":
            return f.min_version, f.max_version
    return None

