"""Requests from raft peers: Vote, BeginQuorumEpoch, EndQuorumEpoch, a replica's Fetch,
FetchSnapshot and UpdateRaftVoter. Each is converted with its entry of the one RPC table
(kraftnode.server.raft_io.rpcs), handed to the core, and its answer converted back."""

from __future__ import annotations

import logging

from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.registry import VOTE
from kraftnode.server.handlers.base import HandlerBase
from kraftnode.server.raft_io import rpcs
from kraftnode.server.raft_io.driver import RaftDriver
from kraftnode.server.raft_io.rpcs import CoreReq, CoreResp, RaftRpc, WireReq, WireResp
from recordbatch.wire import DecodeError, uuid_to_base64

log = logging.getLogger("kraftnode.handlers")


async def serve_raft(driver: RaftDriver, rpc: RaftRpc[CoreReq, CoreResp, WireReq, WireResp], q: WireReq,
                     v: int) -> WireResp:
    """A raft request through the core: INVALID_REQUEST when it is not about our topic
    partition (as Kafka), else the core's answer at version ``v``."""
    r = rpc.request_from_wire(q, v)
    if r is None:
        return rpc.invalid()
    resp = await driver.call(r)
    if not isinstance(resp, rpc.core_response):
        raise TypeError(f"the core answered {type(r).__name__} with {type(resp).__name__}")
    return rpc.response_to_wire(resp, v)


class RaftPeerHandlers(HandlerBase):
    """The raft peers' requests (uses the driver and the advertised API versions only)."""

    async def _serve_raft(self, rpc: RaftRpc[CoreReq, CoreResp, WireReq, WireResp], q: WireReq,
                          v: int) -> WireResp:
        return await serve_raft(self.driver, rpc, q, v)

    async def _vote(self, q: w.VoteRequest, v: int) -> w.VoteResponse:
        if v > self.features.api_max.get(VOTE, v):
            # Vote v2 is only spoken with pre-vote enabled (not advertised otherwise). Without it
            # this node is a Kafka 3.9 controller, which cannot parse v2 and closes the connection
            # (RequestContext.parseRequest -> InvalidRequestException -> SocketServer closes it).
            raise DecodeError(f"unsupported version {v} of Vote (we serve 0-{self.features.api_max[VOTE]}; "
                              "Vote v2 needs kraftnode.raft.pre.vote.enable=true)")
        resp = await self._serve_raft(rpcs.VOTE_RPC, q, v)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Vote v%d from %s: %s", v, q, resp)
        return resp

    async def _begin(self, q: w.BeginQuorumEpochRequest, v: int) -> w.BeginQuorumEpochResponse:
        return await self._serve_raft(rpcs.BEGIN_QUORUM_EPOCH_RPC, q, v)

    async def _end(self, q: w.EndQuorumEpochRequest, v: int) -> w.EndQuorumEpochResponse:
        return await self._serve_raft(rpcs.END_QUORUM_EPOCH_RPC, q, v)

    async def _fetch_snapshot(self, q: w.FetchSnapshotRequest, v: int) -> w.FetchSnapshotResponse:
        return await self._serve_raft(rpcs.FETCH_SNAPSHOT_RPC, q, v)

    async def _replica_fetch(self, q: w.FetchRequest, v: int) -> w.FetchResponse:
        """A raft replica's (voter's or observer's) Fetch."""
        return await self._serve_raft(rpcs.FETCH_RPC, q, v)

    async def _update_voter(self, q: w.UpdateRaftVoterRequest, v: int) -> w.UpdateRaftVoterResponse:
        """UpdateRaftVoter (KIP-853) comes from a voter to the leader it knows, and gets the
        core's answer."""
        resp = await self._serve_raft(rpcs.UPDATE_RAFT_VOTER_RPC, q, v)
        # every voter sends one as it starts: its success is DEBUG, a refusal INFO (issue 41)
        log.log(logging.INFO if resp.error_code else logging.DEBUG,
                "UpdateRaftVoter for voter %d (directory %s): %s", q.voter_id, uuid_to_base64(q.voter_directory_id),
                f"failed: {Errors(resp.error_code).name}" if resp.error_code else "succeeded")
        return resp
