"""The one table of raft RPCs: for each request type of the core, its Kafka API key and the
converters between the core's dataclasses and Kafka's wire messages.

The handlers serve with it (wire request -> core request, core response -> wire response)
and the driver sends with it (core request -> wire request, wire response -> core
response), so an RPC's wire shape is named once. Each entry is a :class:`RaftRpc`, generic
in its four message types, so both directions type-check without casts; the driver looks an
entry up by the core request's type through the non-generic :class:`Sender` view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import (
    ADD_RAFT_VOTER,
    API_VERSIONS,
    BEGIN_QUORUM_EPOCH,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    REMOVE_RAFT_VOTER,
    UPDATE_RAFT_VOTER,
    VOTE,
)
from kraftnode.raft import messages as m
from kraftnode.server.net.peer_client import SOFTWARE_NAME, SOFTWARE_VERSION
from kraftnode.server.raft_io import wire as rw
from recordbatch.message import Message

CoreReq = TypeVar("CoreReq", bound=m.Request)
CoreResp = TypeVar("CoreResp", bound=m.Response)
WireReq = TypeVar("WireReq", bound=Message)
WireResp = TypeVar("WireResp", bound=Message)


def _same_timeout(_r: object, timeout_s: float) -> float:
    return timeout_s


@dataclass(frozen=True)
class RaftRpc(Generic[CoreReq, CoreResp, WireReq, WireResp]):
    """One raft RPC: API key, the four message types, and the converters (each takes the
    version spoken). ``from_wire`` answers None for a request not about our topic
    partition, which is refused with ``invalid()`` (INVALID_REQUEST, as Kafka)."""

    api_key: int
    core_request: type[CoreReq]
    core_response: type[CoreResp]
    wire_response: type[WireResp]
    request_to_wire: Callable[[CoreReq, int], WireReq]
    request_from_wire: Callable[[WireReq, int], CoreReq | None]
    response_to_wire: Callable[[CoreResp, int], WireResp]
    response_from_wire: Callable[[WireResp, int], CoreResp]
    invalid: Callable[[], WireResp]
    #: the timeout for sending ``r`` given the configured request timeout
    timeout_s: Callable[[CoreReq, float], float] = _same_timeout

    # ---- the Sender view (the driver's side), for a request of any type
    def build(self, r: m.Request) -> Callable[[int], Message]:
        """The wire request for ``r`` at a version (``r`` must be this RPC's request)."""
        if not isinstance(r, self.core_request):
            raise TypeError(f"{type(r).__name__} is not sent as API {self.api_key}")
        req = r
        return lambda version: self.request_to_wire(req, version)

    def parse(self, resp: Message, version: int) -> m.Response:
        """The core's view of the peer's answer."""
        if not isinstance(resp, self.wire_response):
            raise TypeError(f"API {self.api_key} answered with {type(resp).__name__}")
        return self.response_from_wire(resp, version)

    def timeout_for(self, r: m.Request, timeout_s: float) -> float:
        return self.timeout_s(r, timeout_s) if isinstance(r, self.core_request) else timeout_s


class Sender(Protocol):
    """What the driver needs of a table entry to send a request of the core."""

    @property
    def api_key(self) -> int: ...

    def build(self, r: m.Request) -> Callable[[int], Message]: ...

    def parse(self, resp: Message, version: int) -> m.Response: ...

    def timeout_for(self, r: m.Request, timeout_s: float) -> float: ...


VOTE_RPC = RaftRpc(
    VOTE, m.VoteRequest, m.VoteResponse, w.VoteResponse,
    rw.vote_request_to_wire, lambda q, _v: rw.vote_request_from_wire(q),
    rw.vote_response_to_wire, lambda q, _v: rw.vote_response_from_wire(q),
    lambda: w.VoteResponse(error_code=Errors.INVALID_REQUEST))

BEGIN_QUORUM_EPOCH_RPC = RaftRpc(
    BEGIN_QUORUM_EPOCH, m.BeginQuorumEpochRequest, m.BeginQuorumEpochResponse,
    w.BeginQuorumEpochResponse,
    rw.begin_request_to_wire, lambda q, _v: rw.begin_request_from_wire(q),
    rw.begin_response_to_wire, lambda q, _v: rw.begin_response_from_wire(q),
    lambda: w.BeginQuorumEpochResponse(error_code=Errors.INVALID_REQUEST))

END_QUORUM_EPOCH_RPC = RaftRpc(
    END_QUORUM_EPOCH, m.EndQuorumEpochRequest, m.EndQuorumEpochResponse, w.EndQuorumEpochResponse,
    rw.end_request_to_wire, rw.end_request_from_wire,
    rw.end_response_to_wire, lambda q, _v: rw.end_response_from_wire(q),
    lambda: w.EndQuorumEpochResponse(error_code=Errors.INVALID_REQUEST))

FETCH_RPC = RaftRpc(
    FETCH, m.FetchRequest, m.FetchResponse, w.FetchResponse,
    rw.fetch_request_to_wire, rw.fetch_request_from_wire,
    rw.fetch_response_to_wire, rw.fetch_response_from_wire,
    lambda: w.FetchResponse(error_code=Errors.INVALID_REQUEST),
    # a long poll: allow MaxWaitMs on top of the request timeout
    lambda r, timeout_s: timeout_s + r.max_wait_ms / 1000)

FETCH_SNAPSHOT_RPC = RaftRpc(
    FETCH_SNAPSHOT, m.FetchSnapshotRequest, m.FetchSnapshotResponse, w.FetchSnapshotResponse,
    rw.fetch_snapshot_request_to_wire, lambda q, _v: rw.fetch_snapshot_request_from_wire(q),
    rw.fetch_snapshot_response_to_wire, lambda q, _v: rw.fetch_snapshot_response_from_wire(q),
    lambda: w.FetchSnapshotResponse(error_code=Errors.INVALID_REQUEST))

# KIP-853. Add/Remove are sent only by an auto-joining observer about itself
# (controller.quorum.auto.join.enable); the leader answers once the VotersRecord commits,
# within its own request timeout: twice ours.
ADD_RAFT_VOTER_RPC = RaftRpc(
    ADD_RAFT_VOTER, m.AddRaftVoterRequest, m.AddRaftVoterResponse, w.AddRaftVoterResponse,
    lambda r, _v: rw.add_voter_request_to_wire(r), lambda q, _v: rw.add_voter_request_from_wire(q),
    lambda r, _v: rw.add_voter_response_to_wire(r), lambda q, _v: rw.add_voter_response_from_wire(q),
    lambda: w.AddRaftVoterResponse(error_code=Errors.INVALID_REQUEST),
    lambda _r, timeout_s: 2 * timeout_s)

REMOVE_RAFT_VOTER_RPC = RaftRpc(
    REMOVE_RAFT_VOTER, m.RemoveRaftVoterRequest, m.RemoveRaftVoterResponse,
    w.RemoveRaftVoterResponse,
    lambda r, _v: rw.remove_voter_request_to_wire(r),
    lambda q, _v: rw.remove_voter_request_from_wire(q),
    lambda r, _v: rw.remove_voter_response_to_wire(r),
    lambda q, _v: rw.remove_voter_response_from_wire(q),
    lambda: w.RemoveRaftVoterResponse(error_code=Errors.INVALID_REQUEST),
    lambda _r, timeout_s: 2 * timeout_s)

UPDATE_RAFT_VOTER_RPC = RaftRpc(
    UPDATE_RAFT_VOTER, m.UpdateRaftVoterRequest, m.UpdateRaftVoterResponse,
    w.UpdateRaftVoterResponse,
    rw.update_voter_request_to_wire, lambda q, _v: rw.update_voter_request_from_wire(q),
    lambda r, _v: rw.update_voter_response_to_wire(r),
    lambda q, _v: rw.update_voter_response_from_wire(q),
    lambda: w.UpdateRaftVoterResponse(error_code=Errors.INVALID_REQUEST))

# The leader's probe of a voter-to-be's kraft.version range (KIP-853). Only sent: ApiVersions
# is served by kraftnode.server.net.api_versions, for every client alike.
API_VERSIONS_RPC = RaftRpc(
    API_VERSIONS, m.ApiVersionsRequest, m.ApiVersionsResponse, w.ApiVersionsResponse,
    lambda _r, _v: w.ApiVersionsRequest(client_software_name=SOFTWARE_NAME,
                                        client_software_version=SOFTWARE_VERSION),
    lambda _q, _v: None,
    lambda r, _v: w.ApiVersionsResponse(error_code=r.error_code),
    lambda q, _v: m.ApiVersionsResponse(q.error_code, rw.kraft_version_range(q)),
    lambda: w.ApiVersionsResponse(error_code=Errors.INVALID_REQUEST))

#: The table: the core's request type -> its RPC (the driver sends by it).
RAFT_RPCS: dict[type[m.Request], Sender] = {
    rpc.core_request: rpc for rpc in (
        VOTE_RPC, BEGIN_QUORUM_EPOCH_RPC, END_QUORUM_EPOCH_RPC, FETCH_RPC, FETCH_SNAPSHOT_RPC,
        ADD_RAFT_VOTER_RPC, REMOVE_RAFT_VOTER_RPC, UPDATE_RAFT_VOTER_RPC, API_VERSIONS_RPC)
}
