"""The driver's network side: carrying the core's requests to its peers with the one raft
RPC table (kraftnode.server.raft_io.rpcs), and feeding their answers back.

A mixin of :class:`kraftnode.server.raft_io.driver.RaftDriver`, kept apart so that the
driver's action loop and its sending can each be read alone; the attributes it uses are
the driver's, declared here for the type checker.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio

from kraftnode.protocol import Errors
from kraftnode.protocol.registry import VOTE
from kraftnode.raft import RaftNode, errors
from kraftnode.raft import messages as m
from kraftnode.raft.actions import SendRequest
from kraftnode.raft.prevote import PRE_VOTE_VERSION
from kraftnode.raft.states import FollowerState
from kraftnode.server.metrics import latency_trace
from kraftnode.server.net.peer_client import PeerError, PeerPool
from kraftnode.server.raft_io.disk_log import DiskRaftLog
from kraftnode.server.raft_io.rpcs import RAFT_RPCS
from recordbatch.message import Message

if TYPE_CHECKING:
    from kraftnode.server.metrics.recording import RaftMetrics

log = logging.getLogger("kraftnode.raft")

# a peer's authorizer refused one of our raft requests
_CLUSTER_AUTHORIZATION_FAILED = int(Errors.CLUSTER_AUTHORIZATION_FAILED)


def now_ms() -> int:
    return int(time.time() * 1000)


class PeerSending:
    node: RaftNode
    log: DiskRaftLog
    pool: PeerPool
    metrics: RaftMetrics | None
    addresses: dict[int, tuple[str, int]]
    bootstrap: list[tuple[str, int]]
    request_timeout_s: float
    fatal: str | None
    _done: anyio.Event
    _claim_dest: int | None
    _claimed: SendRequest | None
    _stopped: bool
    _sleep_until_ms: float

    def _after_event(self) -> None:
        raise NotImplementedError

    def _on_timer(self) -> None:
        """Tick the core at the current time (the driver's timer callback)."""
        raise NotImplementedError

    def _start_send(self, a: SendRequest) -> None:
        """Carry ``a`` in a new task (:meth:`_send`)."""
        raise NotImplementedError

    # -------------------------------------------------------------- network
    def _address(self, a: SendRequest) -> tuple[str, int] | None:
        if a.destination < 0:
            i = -1 - a.destination
            return self.bootstrap[i] if i < len(self.bootstrap) else None
        # the endpoint of our own controller listener, as Kafka picks it; else the first
        listener = self.node.config.listener_name
        for ep in a.endpoints:
            if ep.name == listener:
                return ep.host, ep.port
        if a.endpoints:
            return a.endpoints[0].host, a.endpoints[0].port
        return self.addresses.get(a.destination)

    async def _send(self, first: SendRequest) -> None:
        """Carry requests to one peer.  When handling a response makes the core send
        the next request to the same peer (a follower's next Fetch), this task sends
        it itself instead of starting another: one task start less per round trip.
        A Fetch on an open connection leaves the task altogether (:meth:`_send_fetch_nowait`)."""
        a: SendRequest | None = first
        while a is not None and self.fatal is None:
            if isinstance(a.request, m.FetchRequest) and self._send_fetch_nowait(a):
                return
            addr = self._address(a)
            try:
                if addr is None:
                    raise PeerError(f"no address for node {a.destination}")
                if isinstance(a.request, m.VoteRequest) and log.isEnabledFor(logging.DEBUG):
                    log.debug("sending %s to %d (epoch %d)", "pre-vote" if a.request.pre_vote else "Vote",
                              a.destination, a.request.candidate_epoch)
                response = await self._roundtrip(a.destination, addr, a.request)
                if isinstance(response, m.VoteResponse) and log.isEnabledFor(logging.DEBUG):
                    log.debug("%s answered by %d: error %d/%d, granted %s, epoch %d",
                              "pre-vote" if getattr(a.request, "pre_vote", False) else "Vote", a.destination,
                              response.error_code, response.partition_error_code, response.vote_granted,
                              response.leader_epoch)
            except PeerError as e:
                log.debug("request to %d failed: %s", a.destination, e)
                self.node.request_failed(a.destination, a.correlation_id, now_ms())
                self._after_event()
                return
            a = self._answered(a, addr, response)

    def _answered(self, a: SendRequest, addr: tuple[str, int], response: m.Response) -> SendRequest | None:
        """Feed the core a peer's answer to ``a``; the next request it sends to the same peer
        (claimed: left to the caller to carry), or None."""
        if getattr(response, "error_code", 0) == _CLUSTER_AUTHORIZATION_FAILED:
            # KafkaRaftClient.handleTopLevelError throws ClusterAuthorizationException and
            # the raft thread's fault handler stops the node: its principal lacks
            # CLUSTER_ACTION on the cluster at the peer (super.users or an ACL)
            who = f"node {a.destination}" if a.destination >= 0 else "bootstrap server"
            self.fatal = (f"{who} {addr[0]}:{addr[1]} refused "
                          f"{type(a.request).__name__[:-7]} with CLUSTER_AUTHORIZATION_FAILED: this "
                          "node's principal needs CLUSTER_ACTION on the cluster (add it to "
                          "super.users, or grant it with an ACL)")
            log.error("fatal: %s; stopping", self.fatal)
            self._done.set()
            return None
        t = now_ms()
        if t >= self._sleep_until_ms:
            # The timer is overdue (the process was stalled: a long pause, SIGSTOP): fire it
            # before the answer, as Kafka's poll loop fires expired timers before it handles
            # the next message. Otherwise an answer read in the same loop iteration as the
            # timer would reset a follower's fetch timer that had run out during the stall.
            self._on_timer()
        # (no await between here and the reset: claims never overlap)
        self._claim_dest, self._claimed = a.destination, None
        try:
            if isinstance(response, m.FetchResponse) and log.isEnabledFor(logging.DEBUG):
                log.debug("fetch answer from %d: error %d/%d, high watermark %d, %d batches", a.destination,
                          response.error_code, response.partition_error_code, response.high_watermark,
                          len(response.records))
            if latency_trace.ON:
                latency_trace.mark("resp.start", a.destination, self.log.end_offset)
            self.node.handle_response(a.destination, a.correlation_id, response, t)
            if latency_trace.ON:
                latency_trace.mark("resp.core", a.destination, self.log.end_offset)
            if self.metrics is not None and isinstance(response, m.FetchResponse):
                self._note_caught_up(a.destination, response, t)
            self._after_event()
            if latency_trace.ON:
                latency_trace.mark("resp.done", a.destination, self.log.end_offset)
            return self._claimed
        finally:
            self._claim_dest, self._claimed = None, None

    def _send_fetch_nowait(self, a: SendRequest) -> bool:
        """Send a Fetch on the open connection to its destination with no task waiting for
        it: the answer is handled in the protocol callback that reads it (decode, core,
        append, fsync) and the next Fetch written from there, so a follower's round trip
        wakes no task. False when there is no open connection (or no common version): the
        task path connects and reports the failure."""
        addr = self._address(a)
        if addr is None:
            return False
        conn = self.pool.open_connection(a.destination, addr[0], addr[1])
        if conn is None:
            return False
        rpc = RAFT_RPCS[m.FetchRequest]

        def on_done(version: int, resp: Message | None, error: PeerError | None) -> None:
            self._fetch_answered(a, addr, version, resp, error)

        try:
            conn.request_nowait(rpc.api_key, rpc.build(a.request),
                                rpc.timeout_for(a.request, self.request_timeout_s), on_done)
        except PeerError:
            return False
        return True

    def _fetch_answered(self, a: SendRequest, addr: tuple[str, int], version: int,
                        resp: Message | None, error: PeerError | None) -> None:
        """A Fetch sent by :meth:`_send_fetch_nowait` was answered (or failed): in the
        protocol callback. A bug here stops the node, as it would the task. Once the driver is
        stopped (a graceful shutdown closes the log next) an answer still arriving is dropped."""
        if self.fatal is not None or self._stopped:
            return
        try:
            response: m.Response | None = None
            if resp is not None:
                try:
                    response = RAFT_RPCS[m.FetchRequest].parse(resp, version)
                except TypeError as e:
                    error = PeerError(str(e))
            if response is None:
                log.debug("request to %d failed: %s", a.destination, error)
                self.node.request_failed(a.destination, a.correlation_id, now_ms())
                self._after_event()
                return
            nxt = self._answered(a, addr, response)
            if nxt is not None and self.fatal is None and not (
                    isinstance(nxt.request, m.FetchRequest) and self._send_fetch_nowait(nxt)):
                self._start_send(nxt)
        except Exception as e:  # noqa: BLE001 - as an exception in the _send task would
            log.exception("fatal: handling a Fetch answer from %d failed; stopping", a.destination)
            self.fatal = f"Fetch answer handling failed: {e}"
            self._done.set()

    def _note_caught_up(self, source: int, r: m.FetchResponse, now: int) -> None:
        """/readyz: remember when a Fetch answer from our leader found our log at or past
        the high watermark it sent."""
        st = self.node.state
        if (self.metrics is not None and isinstance(st, FollowerState) and st.leader_id == source
                and r.error_code == 0 and r.partition_error_code == 0 and r.high_watermark >= 0
                and r.current_leader.leader_epoch == st.epoch
                and self.log.end_offset >= r.high_watermark):
            self.metrics.caught_up = (st.epoch, now)

    def _pre_vote_refused_locally(self, a: SendRequest) -> m.VoteResponse | None:
        """The answer to a pre-vote for a peer known not to advertise Vote v2 (a Kafka 3.9
        voter, alive or not), given at once, without a task: the core then stands as a
        candidate in the same pump, as soon as a Kafka 3.9 follower whose timer ran out at the
        same moment would. A peer never reached, or one that advertised v2, is left to
        ``_roundtrip``."""
        r = a.request
        if not (isinstance(r, m.VoteRequest) and r.pre_vote):
            return None
        addr = self._address(a)
        if addr is None:
            return None
        known = self.pool.last_versions(a.destination, addr[0], addr[1])
        if known is None or known.get(VOTE, (0, 0))[1] >= PRE_VOTE_VERSION:
            return None
        return m.VoteResponse(errors.UNSUPPORTED_VERSION, errors.NONE, -1, -1, False)

    async def _roundtrip(self, dest: int, addr: tuple[str, int], r: m.Request) -> m.Response:
        host, port = addr
        timeout = self.request_timeout_s
        if isinstance(r, m.VoteRequest):
            if r.pre_vote:
                # Vote v2 only to a peer whose ApiVersions advertise it. What a peer last
                # advertised still counts while it is down or paused: a dead Kafka 3.9 leader is
                # still a 3.9 voter, and with one in the quorum elections are 3.9's -- the core
                # must not wait for a pre-vote answer that peer could never give. A peer never
                # reached (at this address), or one that advertised v2, gets the pre-vote.
                known = self.pool.last_versions(dest, host, port)
                if known is None or known.get(VOTE, (0, 0))[1] >= PRE_VOTE_VERSION:
                    fresh = self.pool.open_connection(dest, host, port) is None
                    known = (await self.pool.connection(dest, host, port)).versions
                    if fresh:
                        log.debug("connected to %d (ApiVersions) for a pre-vote", dest)
                if known.get(VOTE, (0, 0))[1] < PRE_VOTE_VERSION:
                    # As Kafka 4.0's NetworkClient: the peer does not advertise Vote v2 (a 3.9
                    # voter), so the pre-vote fails locally and the core elects at once.
                    return m.VoteResponse(errors.UNSUPPORTED_VERSION, errors.NONE, -1, -1, False)
        rpc = RAFT_RPCS.get(type(r))
        if rpc is None:
            raise PeerError(f"cannot send {type(r).__name__}")
        v, resp = await self.pool.request(dest, host, port, rpc.api_key, rpc.build(r),
                                          rpc.timeout_for(r, timeout))
        try:
            answer = rpc.parse(resp, v)
        except TypeError as e:
            raise PeerError(str(e)) from e
        if isinstance(answer, m.AddRaftVoterResponse | m.RemoveRaftVoterResponse):
            # controller.quorum.auto.join.enable: an observer's AddRaftVoter of itself, or
            # RemoveRaftVoter of its old directory
            what = ("AddRaftVoter of this node" if isinstance(r, m.AddRaftVoterRequest) else
                    f"RemoveRaftVoter of this node's old directory {getattr(r, 'voter_directory_id', None)}")
            log.info("auto-join: %s to leader %d: %s%s", what, dest, errors.name(answer.error_code),
                     f" ({answer.error_message})" if answer.error_message else "")
        return answer

