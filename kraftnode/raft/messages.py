"""RPC payloads exchanged by Raft cores, one partition's worth each (plus KIP-853's voter changes).

Field names are Kafka 3.9's (snake_case) so the server can translate them 1:1 to
the generated wire classes (``kraftnode.protocol.VoteRequest`` ...): top-level
fields and the single ``__cluster_metadata-0`` partition's fields are flattened
into one dataclass; topic name/id and partition index are the server's business.
Directory ids use ``None`` for "unknown" (ZERO_UUID on the wire).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from kraftnode.raft.batches import Batch
from kraftnode.raft.voters import Endpoint, ReplicaKey

#: FetchRequest.HighWatermark's default: the replica does not report its high watermark.
NO_REPLICA_HIGH_WATERMARK = 2**63 - 1


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A response's NodeEndpoints entry: where a leader named in the response listens."""

    node_id: int
    host: str
    port: int


# --------------------------------------------------------------------- Vote
@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    voter_id: int  # v1: the receiving voter's id (-1 when unknown)
    candidate_epoch: int
    candidate_id: int
    candidate_directory_id: uuid.UUID | None
    voter_directory_id: uuid.UUID | None
    last_offset_epoch: int
    last_offset: int
    #: KIP-996 (Vote v2): a pre-vote at the sender's current epoch; nothing is bumped or persisted.
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int  # top level
    partition_error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# --------------------------------------------------------- BeginQuorumEpoch
@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    voter_id: int
    voter_directory_id: uuid.UUID | None
    leader_id: int
    leader_epoch: int
    leader_endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    partition_error_code: int
    leader_id: int
    leader_epoch: int
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# ----------------------------------------------------------- EndQuorumEpoch
@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    #: v0 PreferredSuccessors; v1 PreferredCandidates (with directory ids).
    preferred_candidates: tuple[ReplicaKey, ...] = ()
    leader_endpoints: tuple[Endpoint, ...] = ()

    @property
    def preferred_successors(self) -> list[int]:
        return [c.id for c in self.preferred_candidates]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    partition_error_code: int
    leader_id: int
    leader_epoch: int
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# -------------------------------------------------------------------- Fetch
@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int  # ReplicaState.ReplicaId (v15+) or ReplicaId
    replica_directory_id: uuid.UUID | None
    max_wait_ms: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int = -1
    max_bytes: int = 8 * 1024 * 1024
    min_bytes: int = 0
    replica_epoch: int = -1
    #: Fetch v18 (KIP-1166): the high watermark the fetching replica knows; Long.MAX_VALUE,
    #: the wire default, when it does not send one (older versions, consumers)
    high_watermark: int = NO_REPLICA_HIGH_WATERMARK


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class CurrentLeader:
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotId:
    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int  # top level
    partition_error_code: int
    high_watermark: int
    current_leader: CurrentLeader
    log_start_offset: int = -1
    diverging_epoch: DivergingEpoch | None = None
    snapshot_id: SnapshotId | None = None
    records: Sequence[Batch] = ()
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# ------------------------------------------------------------ FetchSnapshot
@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    replica_directory_id: uuid.UUID | None
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    partition_error_code: int
    snapshot_id: SnapshotId
    current_leader: CurrentLeader
    size: int = -1
    position: int = -1
    unaligned_records: bytes = b""
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# ------------------------------------------------------------ DescribeQuorum
@dataclass(frozen=True, slots=True)
class ReplicaStateView:
    """DescribeQuorumResponse.ReplicaState (KIP-836 timestamps; -1 when unknown)."""

    replica_id: int
    replica_directory_id: uuid.UUID | None
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumData:
    """The leader's view for DescribeQuorumResponse (partition level plus Nodes)."""

    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaStateView, ...] = ()
    observers: tuple[ReplicaStateView, ...] = ()
    nodes: dict[int, tuple[Endpoint, ...]] = field(default_factory=dict)


# ------------------------------------------------- voter changes (KIP-853)
@dataclass(frozen=True, slots=True)
class AddRaftVoterRequest:
    """An admin client asks the leader to add an observer as a voter."""

    cluster_id: str | None
    timeout_ms: int
    voter_id: int
    voter_directory_id: uuid.UUID | None
    listeners: tuple[Endpoint, ...] = ()
    #: v1 (Kafka 4.4): False answers once the leader has appended the VotersRecord instead
    #: of once it commits; v0 means True
    ack_when_committed: bool = True


@dataclass(frozen=True, slots=True)
class AddRaftVoterResponse:
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class RemoveRaftVoterRequest:
    cluster_id: str | None
    voter_id: int
    voter_directory_id: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class RemoveRaftVoterResponse:
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateRaftVoterRequest:
    """A voter tells the leader its current endpoints and supported kraft.version range."""

    cluster_id: str | None
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: uuid.UUID | None
    listeners: tuple[Endpoint, ...]
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class UpdateRaftVoterResponse:
    """``leader_endpoint`` is the CurrentLeader's host/port on the request's listener (None: unknown)."""

    error_code: int
    current_leader: CurrentLeader
    leader_endpoint: NodeEndpoint | None = None


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    """The leader's probe of a voter-to-be (Kafka's AddVoterHandler sends ApiVersions)."""


@dataclass(frozen=True, slots=True)
class ApiVersionsResponse:
    """Only what the probe needs: the error and the kraft.version SupportedFeatures range."""

    error_code: int
    kraft_version_range: tuple[int, int] | None = None


Request = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
    | AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest | ApiVersionsRequest
)
Response = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
    | AddRaftVoterResponse | RemoveRaftVoterResponse | UpdateRaftVoterResponse | ApiVersionsResponse
)
