"""What every request handler shares: the node's services (:class:`HandlerServices`, one
frozen object ``server/node.py`` builds), the client software seen on the connections
(:class:`ClientSoftware`), and the helpers every audience uses: the endpoints clients are
told about, authorization, and forwarding to the leader.

The handlers are split by audience (raft_peers, applications, groups, consumer_groups,
admin, controller_apis; Kafka's quirks in kafka_compat); each is a class over
:class:`HandlerBase`, constructed from the services, and
:class:`kraftnode.server.handlers.NodeHandlers` holds one of each with the one dispatch
table. A handler's attributes are set in its constructor only (:class:`Sealed`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kraftnode.groups import GroupConfig
from kraftnode.protocol.generated import AddRaftVoterRequest
from kraftnode.protocol.registry import DESCRIBE_QUORUM
from kraftnode.security import api_checks
from kraftnode.security import authorizer as az
from kraftnode.security.listeners import CURRENT_LISTENER
from kraftnode.server.controller_io.controller_duties import ControllerDuties, voter_address
from kraftnode.server.net import api_versions
from kraftnode.server.net.peer_client import SOFTWARE_NAME, PeerError
from kraftnode.server.raft_io.driver import RaftDriver
from recordbatch.message import Message

if TYPE_CHECKING:
    from kraftnode.server.controller_io.controller_shell import ControllerShell

log = logging.getLogger("kraftnode.handlers")

# How long a node waits for the leader's answer to a voter change it forwards: the Java
# Admin's default request.timeout.ms, after which the client has given up anyway.
VOTER_CHANGE_FORWARD_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class NodeIdentity:
    node_id: int
    cluster_id: str
    listener_name: str


@dataclass(frozen=True)
class HandlerServices:
    """Everything the request handlers use, built once by ``server/node.py`` (and nothing
    set on a handler afterwards): the node's identity, its driver (the typed read API onto
    the raft core), the controller duties and shell, the authorizer, and the limits and
    switches from the node's configuration."""

    ident: NodeIdentity
    driver: RaftDriver
    features: api_versions.FeatureView
    #: message.max.bytes: the largest batch a producer may write (NodeConfig, from the key table)
    message_max_bytes: int
    #: the metadata image's controller duties (None: not a KRaft metadata quorum)
    duties: ControllerDuties | None = None
    #: StandardAuthorizer (authorizer.class.name); None: every API allowed to everyone
    authorizer: az.StandardAuthorizer | None = None
    #: the controller APIs' I/O shell (handlers/controller_apis.py); None: not a controller
    controller: ControllerShell | None = None
    #: the group coordinator's configuration (group.* keys)
    group_config: GroupConfig = field(default_factory=GroupConfig)
    #: kraftnode.application.records.enable: Produce to the metadata topic and group
    #: records allowed; BrokerRegistration refused (docs/server.md, "Application records")
    application_records: bool = False
    #: the node's properties file as read (DescribeConfigs of its broker resource)
    broker_properties: Mapping[str, str] = field(default_factory=dict)


class ClientSoftware:
    """What the handlers learn from the connections, shared by every audience: the client
    software per connection (from ApiVersions) and per fetching replica id -- the leader
    must know whether a Kafka controller replays this log (see applications._produce) --
    and the brokers already told why they are refused."""

    __slots__ = ("by_connection", "by_replica", "warned_brokers")

    def __init__(self) -> None:
        self.by_connection: dict[str, str] = {}
        self.by_replica: dict[int, str] = {}
        self.warned_brokers: set[int] = set()


class _SealedAfterInit(type):
    """Seals an object once its constructor has returned (see :class:`Sealed`)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_sealed", True)
        return obj


class Sealed(metaclass=_SealedAfterInit):
    """An object whose attributes are set in its constructor only: assigning one afterwards
    raises AttributeError (tests/kraftnode/server/handlers/test_handler_structure.py checks
    the source as well)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_sealed"):
            raise AttributeError(f"{type(self).__name__}.{name}: a handler's attributes are set in its "
                                 "constructor only (from HandlerServices)")
        object.__setattr__(self, name, value)


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


class HandlerBase(Sealed):
    """What every audience's handler has from the services, and the helpers they share."""

    def __init__(self, services: HandlerServices, clients: ClientSoftware) -> None:
        self.ident = services.ident
        self.driver = services.driver
        self.features = services.features
        self.duties = services.duties
        self.authz = services.authorizer
        self.clients = clients

    # ---------------------------------------------------------------- helpers

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
        return {i: sw for i, sw in self.clients.by_replica.items() if i in voters and sw != SOFTWARE_NAME}

    def refuse_broker_once(self, broker_id: int, what: str) -> None:
        """The one line that says why a broker is refused by a quorum that takes application
        records: once per broker, whatever it retries (its fetches, its registration)."""
        warned = self.clients.warned_brokers
        if broker_id not in warned:
            warned.add(broker_id)
            logging.getLogger("kraftnode.controller").warning(
                "refusing %s %d: kraftnode.application.records.enable=true (this quorum's log takes "
                "application records, which a Kafka broker cannot replay; docs/server.md)", what, broker_id)

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


def finalized_features(services: HandlerServices) -> api_versions.FeatureView:
    """Finalized features as a Kafka 4.x controller reports them (ControllerServer's
    FeaturesPublisher): the levels of the committed FeatureLevelRecords and the offset at
    which they last changed, plus kraft.version at the raft client's latest level
    (KafkaRaftClient.kraftVersion, KAFKA-18979). kraft.version has no FeatureLevelRecord
    (BootstrapMetadata.fromVersions), so a 3.9 controller did not list it; 4.x sets it
    with FinalizedFeatures.setFinalizedLevel, which leaves a level of 0 out, so a static
    quorum still lists only metadata.version."""
    f, driver, duties = services.features, services.driver, services.duties
    f.finalized = {"metadata.version": api_versions.METADATA_VERSION_3_9}
    f.finalized_epoch = max(driver.high_watermark - 1, -1)
    if duties is not None and duties.state.metadata_version is not None:
        f.finalized = dict(duties.state.finalized)
        f.finalized_epoch = duties.state.features_epoch
    kraft = driver.current_kraft_version()
    if kraft > 0:
        f.finalized["kraft.version"] = kraft
    return f
