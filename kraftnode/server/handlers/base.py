"""What every request handler shares: the node's identity, its driver (the typed read API
onto the raft core), the endpoints clients are told about, authorization helpers, and
forwarding to the leader.

The handlers are split by audience (raft_peers, applications, groups, admin; Kafka's
quirks in kafka_compat); each is a mixin over :class:`HandlerBase`, joined in
:class:`kraftnode.server.handlers.NodeHandlers` with the one dispatch table.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kraftnode.groups import GroupConfig
from kraftnode.protocol.generated import AddRaftVoterRequest
from kraftnode.protocol.registry import DESCRIBE_QUORUM
from kraftnode.security import api_checks
from kraftnode.security import authorizer as az
from kraftnode.security.listeners import CURRENT_LISTENER
from kraftnode.server.controller_io.controller_duties import ControllerDuties, voter_address
from kraftnode.server.handlers.acls import AclAdmin
from kraftnode.server.net import api_versions
from kraftnode.server.net.peer_client import SOFTWARE_NAME, PeerError
from kraftnode.server.raft_io.driver import RaftDriver
from recordbatch.message import Message

if TYPE_CHECKING:
    from kraftnode.protocol.framing import Request
    from kraftnode.server.controller_io.controller_shell import ControllerShell
    from kraftnode.server.net.listener import Reply

log = logging.getLogger("kraftnode.handlers")

# How long a node waits for the leader's answer to a voter change it forwards: the Java
# Admin's default request.timeout.ms, after which the client has given up anyway.
VOTER_CHANGE_FORWARD_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class NodeIdentity:
    node_id: int
    cluster_id: str
    listener_name: str


def _for_version(q: Message, version: int) -> Message:
    """``q`` as it can be sent at ``version``: an AddRaftVoter with AckWhenCommitted false
    (v1, Kafka 4.4) forwarded to a leader that speaks only v0 (Kafka 3.9) is sent as v0 means
    it -- answered once committed, later than asked for but never earlier -- where the
    generated encoder would refuse the non-default, non-ignorable field."""
    if isinstance(q, AddRaftVoterRequest) and version < 1 and not q.ack_when_committed:
        acked = copy.copy(q)
        acked.ack_when_committed = True
        return acked
    return q


class HandlerBase:
    """State and helpers the audience mixins share."""

    def __init__(self, ident: NodeIdentity, driver: RaftDriver,
                 features: api_versions.FeatureView, duties: ControllerDuties | None = None,
                 authz: az.StandardAuthorizer | None = None, group_config: GroupConfig | None = None) -> None:
        self.ident = ident
        self.driver = driver
        self.features = features
        self.producers = driver.producers
        self.duties = duties
        # client software per connection (from ApiVersions) and per fetching replica id:
        # the leader must know whether a Kafka controller replays this log (see _produce)
        self._conn_software: dict[str, str] = {}
        self.replica_software: dict[int, str] = {}
        #: the group coordinator's shell (handlers.groups.GroupService), made by NodeHandlers
        self.groups: Any = None
        self.group_config = group_config or GroupConfig()
        #: message.max.bytes: the largest batch a producer may write (Kafka's default)
        self.message_max_bytes = 1048588
        #: kraftnode.application.records.enable: Produce to the metadata topic and group
        #: records allowed; BrokerRegistration refused (docs/server.md, "Application records")
        self.application_records = False
        #: the node's properties file as read (DescribeConfigs of its broker resource)
        self.broker_properties: Mapping[str, str] = {}
        #: StandardAuthorizer (authorizer.class.name); None: every API allowed to everyone
        self.authz = authz
        self.acl_admin = AclAdmin(driver, duties, authz)
        #: the controller APIs' I/O shell (handlers/controller_apis.py); None: not a controller
        self.controller: ControllerShell | None = None

    # ---------------------------------------------------------------- helpers
    async def __call__(self, request: Request, peer: str) -> Reply | None:
        """Answer one request; :class:`~kraftnode.server.handlers.NodeHandlers` routes it by
        API key. Declared here so that a mixin can hand a request back to the whole node
        (the Envelope handler runs the request it unwraps)."""
        raise NotImplementedError

    def _voter_endpoints(self) -> dict[int, tuple[str, int]]:
        """Each voter's endpoint on our controller listener (the address clients use)."""
        out: dict[int, tuple[str, int]] = {}
        listener = self._listener()
        for node in self.driver.voters:
            addr = voter_address(self.driver, node.key.id, listener)
            if listener != self.ident.listener_name and node.endpoint(listener) is None:
                # a static voter set names only the default listener: the controller's
                # registration (RegisterControllerRecord) has its other listeners
                addr = self._registered_endpoint(node.key.id, listener) or addr
            if addr is not None:
                out[node.key.id] = addr
        return out

    def _registered_endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        reg = self.duties.state.controllers.get(node_id) if self.duties is not None else None
        if reg is not None:
            for e in reg.end_points:
                if e.name.upper() == listener.upper():
                    return e.host, e.port
        return None

    def _listener(self) -> str:
        """The listener the request came in on (security.listeners.OnListener), else ours."""
        return CURRENT_LISTENER.get() or self.ident.listener_name

    def _controller_endpoints(self) -> dict[int, tuple[str, int]]:
        """The controllers DescribeCluster lists: the voters, and every controller registered
        (RegisterControllerRecord) with an endpoint on our listener. A Kafka 3.9 controller
        lists its registered controllers (ControllerRegistrationsPublisher
        .describeClusterControllers), so a controller that is not a voter -- one waiting to
        be added, or one removed -- is listed too; the voters are listed even before their
        registrations commit, so that a client bootstrapping then finds the quorum."""
        eps = self._voter_endpoints()
        if self.duties is not None:
            listener = self._listener().upper()
            for cid, reg in self.duties.state.controllers.items():
                ep = next((e for e in reg.end_points if e.name.upper() == listener), None)
                if cid not in eps and ep is not None:
                    eps[cid] = (ep.host, ep.port)
        return eps

    def _leader(self) -> tuple[int, int]:
        return self.driver.leader_and_epoch()

    def _epoch_start_offset(self) -> int:
        """The offset at which this leader's epoch began (its log end when elected); -1
        when not the leader."""
        start = self.driver.epoch_start_offset()
        return -1 if start is None else start

    def denied(self, resource_type: int, name: str, op: int, api: int) -> bool:
        """True when the caller may not do ``op`` on the resource (security.api_checks)."""
        return self.authz is not None and api_checks.denied(self.authz, resource_type, name, op, api)

    def authorized_operations(self, resource_type: int, name: str, without_authorizer: int) -> int:
        """The caller's authorized-operations bit field on the resource (Metadata,
        DescribeCluster); ``without_authorizer`` when no authorizer is configured."""
        if self.authz is None:
            return without_authorizer
        return self.authz.authorized_operations(az.session(), resource_type, name)

    def _features(self) -> api_versions.FeatureView:
        """Finalized features as a Kafka 4.x controller reports them (ControllerServer's
        FeaturesPublisher): the levels of the committed FeatureLevelRecords and the offset at
        which they last changed, plus kraft.version at the raft client's latest level
        (KafkaRaftClient.kraftVersion, KAFKA-18979). kraft.version has no FeatureLevelRecord
        (BootstrapMetadata.fromVersions), so a 3.9 controller did not list it; 4.x sets it
        with FinalizedFeatures.setFinalizedLevel, which leaves a level of 0 out, so a static
        quorum still lists only metadata.version."""
        f = self.features
        f.finalized = {"metadata.version": api_versions.METADATA_VERSION_3_9}
        f.finalized_epoch = max(self.driver.high_watermark - 1, -1)
        if self.duties is not None and self.duties.state.metadata_version is not None:
            f.finalized = dict(self.duties.state.finalized)
            f.finalized_epoch = self.duties.state.features_epoch
        kraft = self.driver.current_kraft_version()
        if kraft > 0:
            f.finalized["kraft.version"] = kraft
        return f

    async def _forward_to_leader(self, leader: int, api_key: int, q: Message, v: int) -> Message | None:
        """Ask the leader on the client's behalf, as a Kafka broker forwards DescribeQuorum,
        AddRaftVoter and RemoveRaftVoter to the active controller (KafkaApis
        forwardToControllerOrFail): clients such as kafka-python, and the Java Admin with
        bootstrap.servers (KafkaAdminClient's LeastLoadedBrokerOrActiveKController picks the
        least loaded node), send them to any node. None when the leader cannot be asked."""
        ep = self._voter_endpoints().get(leader)
        if ep is None or leader == self.ident.node_id:
            return None
        if api_key == DESCRIBE_QUORUM:
            key: tuple[str, int] = ("forward", leader)
            timeout = self.driver.request_timeout_s
        else:
            # A voter change is answered once its VotersRecord commits (or after the leader's
            # own request timeout); its own connection, so that forwarded DescribeQuorums,
            # answered one at a time per connection, do not queue behind it.
            key = ("forward-voter-change", leader)
            timeout = max(VOTER_CHANGE_FORWARD_TIMEOUT_S, self.driver.request_timeout_s)
        try:
            _, resp = await self.driver.pool.request(key, ep[0], ep[1], api_key,
                                                     lambda nv: _for_version(q, nv), timeout, v)
        except PeerError as e:
            log.info("could not forward %s to leader %d: %s", type(q).__name__[:-7], leader, e)
            return None
        return resp
    def kafka_controllers(self) -> dict[int, str]:
        """Voters whose fetches come from software other than kraftnode: Kafka controllers,
        or Kafka's standalone raft server (TestRaftServer) in a ``__raft_performance_test``
        quorum."""
        voters = self.driver.voters.ids
        return {i: sw for i, sw in self.replica_software.items() if i in voters and sw != SOFTWARE_NAME}

    def registered_brokers(self) -> list[int]:
        """Brokers registered in the committed metadata: they replay every record of the log, so
        nothing a broker cannot replay may be written (docs/controller.md)."""
        return sorted(self.duties.state.image.brokers) if self.duties is not None else []

    def _activated(self) -> bool:
        """A controller leader takes writes once its activation records (the bootstrap
        records on an empty log, or the abort of an open transaction) are appended, so they
        come first in its epoch, as in Kafka's QuorumController (the activation is the new
        active controller's first write). A write accepted earlier would be replayed first:
        a log whose first metadata record is not the bootstrap's is "not empty", and the
        bootstrap records (metadata.version) would never be written."""
        return self.duties is None or self.duties.is_active
