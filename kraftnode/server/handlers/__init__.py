"""Request handlers: turn parsed wire requests into core events or log reads, and back.

Split by audience, each a class constructed from the one frozen
:class:`~kraftnode.server.handlers.base.HandlerServices` ``server/node.py`` builds:
``raft_peers`` (Vote, BeginQuorumEpoch, EndQuorumEpoch, a replica's Fetch, FetchSnapshot,
UpdateRaftVoter: through the one RPC table, kraftnode.server.raft_io.rpcs), ``applications``
(Produce, consumer Fetch, ListOffsets, Metadata, InitProducerId), ``groups`` and
``consumer_groups`` (the group APIs, over the coordinator's shell in ``group_service``),
``admin`` (DescribeCluster, DescribeQuorum, DescribeConfigs, UpdateFeatures, voter changes,
SASL, and forwarding; the ACL and SCRAM APIs in ``acls`` and ``scram_credentials``),
``controller_apis`` (Kafka's ControllerApis), and ``kafka_compat`` (record shape checks and
Kafka's numbers). :class:`NodeHandlers` holds one of each and :attr:`NodeHandlers.table`, the
one dispatch table from API key (kraftnode.protocol.registry) to a bound handler method;
security.api_checks is the one per-API authorization table.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from kraftnode.java_order import java_hashmap_order, replica_key_hash
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol import registry as api
from kraftnode.protocol.framing import FrameError, Request
from kraftnode.security import api_checks
from kraftnode.security import authorizer as az
from kraftnode.server.handlers.admin import AdminHandlers
from kraftnode.server.handlers.applications import ApplicationHandlers
from kraftnode.server.handlers.base import (
    VOTER_CHANGE_FORWARD_TIMEOUT_S,
    ClientSoftware,
    HandlerServices,
    NodeIdentity,
    Sealed,
    finalized_features,
)
from kraftnode.server.handlers.consumer_groups import ConsumerGroupHandlers
from kraftnode.server.handlers.controller_apis import ControllerApiHandlers
from kraftnode.server.handlers.group_service import CLIENT
from kraftnode.server.handlers.groups import GroupHandlers
from kraftnode.server.handlers.kafka_compat import (
    CLUSTER_AUTHORIZED_OPERATIONS,
    TOPIC_AUTHORIZED_OPERATIONS,
    kraft_record_shape_error,
)
from kraftnode.server.handlers.raft_peers import RaftPeerHandlers
from kraftnode.server.net import api_versions
from kraftnode.server.net.listener import Reply
from kraftnode.server.net.peer_client import SOFTWARE_NAME
from kraftnode.server.raft_io import rpcs
from kraftnode.server.raft_io import wire as rw
from recordbatch.message import Message

__all__ = [
    "CLUSTER_AUTHORIZED_OPERATIONS", "TOPIC_AUTHORIZED_OPERATIONS",
    "VOTER_CHANGE_FORWARD_TIMEOUT_S", "Handler", "HandlerServices", "NodeHandlers", "NodeIdentity",
    "java_hashmap_order", "kraft_record_shape_error", "replica_key_hash",
]

#: A bound handler method: called with the parsed request body and its version; the answer
#: (None: no answer is due, a Produce with acks=0).
Handler = Callable[[Any, int], Awaitable[Message | None]]

log = logging.getLogger("kraftnode.handlers")


class NodeHandlers(Sealed):
    """Routes parsed requests to the code that answers them: one handler per audience, each
    constructed here from the services, and :attr:`table`, the one dispatch table."""

    def __init__(self, services: HandlerServices) -> None:
        self.services = services
        self.driver = services.driver
        self.authz = services.authorizer
        self.clients = clients = ClientSoftware()
        self.raft_peers = raft = RaftPeerHandlers(services, clients)
        self.applications = apps = ApplicationHandlers(services, clients)
        self.groups = groups = GroupHandlers(services, clients)
        self.consumer_groups = consumer = ConsumerGroupHandlers(services, clients, groups.service)
        self.admin = admin = AdminHandlers(services, clients)
        self.controller_apis = ctl = ControllerApiHandlers(services, clients, self.__call__)
        #: The one dispatch table: API key -> the bound method that answers it.
        self.table: Mapping[int, Handler] = MappingProxyType({
            # raft peers (a consumer's Fetch: applications, see _fetch)
            api.VOTE: raft._vote, api.BEGIN_QUORUM_EPOCH: raft._begin,
            api.END_QUORUM_EPOCH: raft._end, api.FETCH: self._fetch,
            api.FETCH_SNAPSHOT: raft._fetch_snapshot, api.UPDATE_RAFT_VOTER: raft._update_voter,
            # applications
            api.PRODUCE: apps._produce, api.LIST_OFFSETS: apps._list_offsets,
            api.METADATA: apps._metadata, api.INIT_PRODUCER_ID: apps._init_producer_id,
            api.CONTROLLER_REGISTRATION: apps._controller_registration,
            # groups: the classic protocol, then KIP-848's
            api.FIND_COORDINATOR: groups.find_coordinator, api.OFFSET_COMMIT: groups.offset_commit,
            api.OFFSET_FETCH: groups.offset_fetch, api.JOIN_GROUP: groups.join_group,
            api.SYNC_GROUP: groups.sync_group, api.HEARTBEAT: groups.heartbeat,
            api.LEAVE_GROUP: groups.leave_group, api.DESCRIBE_GROUPS: groups.describe_groups,
            api.LIST_GROUPS: groups.list_groups, api.DELETE_GROUPS: groups.delete_groups,
            api.OFFSET_DELETE: groups.offset_delete,
            api.CONSUMER_GROUP_HEARTBEAT: consumer.consumer_group_heartbeat,
            api.CONSUMER_GROUP_DESCRIBE: consumer.consumer_group_describe,
            # admin
            api.DESCRIBE_CLUSTER: admin._describe_cluster, api.DESCRIBE_QUORUM: admin._describe_quorum,
            api.DESCRIBE_CONFIGS: admin._describe_configs, api.UPDATE_FEATURES: admin._update_features,
            api.ADD_RAFT_VOTER: admin._voter_change, api.REMOVE_RAFT_VOTER: admin._voter_change,
            api.SASL_HANDSHAKE: admin._sasl_handshake, api.SASL_AUTHENTICATE: admin._sasl_authenticate,
            api.ALTER_USER_SCRAM_CREDENTIALS: admin._alter_scram,
            api.DESCRIBE_USER_SCRAM_CREDENTIALS: admin._describe_scram,
            api.DESCRIBE_ACLS: admin._describe_acls, api.CREATE_ACLS: admin._alter_acls,
            api.DELETE_ACLS: admin._alter_acls,
            # controller (handlers/controller_apis.py)
            api.BROKER_REGISTRATION: ctl._broker_registration, api.BROKER_HEARTBEAT: ctl._broker_heartbeat,
            api.UNREGISTER_BROKER: ctl._unregister_broker, api.UNREGISTER_CONTROLLER: ctl._unregister_controller,
            api.ALLOCATE_PRODUCER_IDS: ctl._allocate_producer_ids, api.ALTER_PARTITION: ctl._alter_partition,
            api.ASSIGN_REPLICAS_TO_DIRS: ctl._assign_replicas_to_dirs,
            api.CREATE_TOPICS: ctl._create_topics, api.DELETE_TOPICS: ctl._delete_topics,
            api.CREATE_PARTITIONS: ctl._create_partitions, api.ELECT_LEADERS: ctl._elect_leaders,
            api.ALTER_PARTITION_REASSIGNMENTS: ctl._alter_partition_reassignments,
            api.LIST_PARTITION_REASSIGNMENTS: ctl._list_partition_reassignments,
            api.INCREMENTAL_ALTER_CONFIGS: ctl._incremental_alter_configs,
            api.ALTER_CONFIGS: ctl._legacy_alter_configs, api.ALTER_CLIENT_QUOTAS: ctl._alter_client_quotas,
            api.CREATE_DELEGATION_TOKEN: ctl._create_delegation_token,
            api.RENEW_DELEGATION_TOKEN: ctl._renew_delegation_token,
            api.EXPIRE_DELEGATION_TOKEN: ctl._expire_delegation_token,
            api.DESCRIBE_DELEGATION_TOKEN: ctl._describe_delegation_token,
            api.ENVELOPE: ctl._envelope,
        })

    async def __call__(self, request: Request, peer: str) -> Reply | None:
        key = request.spec.key
        v = request.api_version
        body: Any = request.body
        if key == api.API_VERSIONS:
            ident = self.services.ident
            resp, rv = api_versions.answer(request, finalized_features(self.services), ident.cluster_id,
                                           ident.node_id)
            sw = ""
            if request.body is not None and v >= 3:
                sw = f" ({body.client_software_name} {body.client_software_version})"
                self.clients.by_connection[peer] = body.client_software_name
            log.debug("ApiVersions v%d from %s%s: answered v%d, error %d", v, peer, sw, rv,
                     resp.error_code)
            return Reply(resp, rv)
        if key == api.FETCH and peer in self.clients.by_connection:
            replica = rw.fetch_replica_id(body, v)
            if replica >= 0:
                self.clients.by_replica[replica] = self.clients.by_connection[peer]
        handler = self.table.get(key)
        CLIENT.set((request.header.client_id or "", "/" + peer.rpartition(":")[0]))
        if handler is None:
            raise FrameError(f"{request.spec.name} is not served")
        if self.authz is not None:
            try:
                refused = api_checks.refusal(self.authz, key, v, body)
                if refused is None and key not in (api.SASL_HANDSHAKE, api.SASL_AUTHENTICATE):
                    self.authz.check_ready(az.session())
            except az.AuthorizerNotReady:
                log.info("%s from %s before the ACLs are loaded: UNKNOWN_SERVER_ERROR (Kafka's "
                         "AuthorizerNotReadyException)", request.spec.name, az.session().principal)
                refused = api_checks.error_response(key, v, body, Errors.UNKNOWN_SERVER_ERROR)
            if refused is not None:
                return Reply(refused, v)
        result = await handler(body, v)
        return None if result is None else Reply(result, v)

    def fast(self, request: Request, peer: str, done: Callable[[Callable[[], Reply]], None]) -> bool:
        """Serve a raft replica's Fetch, or an acks=-1 Produce
        (:meth:`ApplicationHandlers.produce_nowait`, the one Produce core as the task path),
        without the connection's task, for the listener
        (:class:`~kraftnode.server.net.listener._Connection`): the request goes to the core
        at once (``RaftDriver.call_nowait``) and ``done`` gets the function that builds the
        answer when the core gives it -- at once, or from the append that ends a long poll,
        which then writes it before the leader's own fsync. False: not such a request, or an
        authorizer is on (its checks are the task path's); the task serves it as before.

        What it skips of :meth:`__call__` is nothing these requests need there: with no
        authorizer there is no check, the client software seen on the connection is
        recorded the same way, and neither reads the group coordinator's client context."""
        body: Any = request.body
        v = request.api_version
        if request.spec.key == api.PRODUCE:
            return self.applications.produce_nowait(body, v, lambda build: done(lambda: Reply(build(), v)))
        if request.spec.key != api.FETCH or self.authz is not None:
            return False
        replica = rw.fetch_replica_id(body, v)
        if replica < 0:
            return False       # a consumer: _consumer_fetch (a task, it may wait on the HW)
        software = self.clients.by_connection.get(peer)
        if software is not None:
            self.clients.by_replica[replica] = software
        rpc = rpcs.FETCH_RPC
        r = None if self.refuses_observer(replica) else rpc.request_from_wire(body, v)
        if r is None:
            done(lambda: Reply(rpc.invalid(), v))
            return True

        def answered(resp: Any) -> None:
            def build() -> Reply:
                if not isinstance(resp, rpc.core_response):
                    raise TypeError(f"the core answered FetchRequest with {type(resp).__name__}")
                return Reply(rpc.response_to_wire(resp, v), v)
            done(build)

        self.driver.call_nowait(r, answered)
        return True

    def refuses_observer(self, replica: int) -> bool:
        """An application log (kraftnode.application.records.enable) that holds application
        records is not fetched by Kafka replicas that do not vote -- brokers: such a record
        would stop one at once (MetadataParseException), before its registration is refused
        with a line naming the key (controller_apis). They get INVALID_REQUEST and retry."""
        duties = self.services.duties
        if not self.services.application_records or duties is None or not duties.state.foreign_records:
            return False
        software = self.clients.by_replica.get(replica)
        if software is None or software == SOFTWARE_NAME or replica in self.driver.voters.ids:
            return False
        self.controller_apis.refuse_broker_once(replica, "the fetches of broker")
        return True

    async def _fetch(self, q: w.FetchRequest, v: int) -> w.FetchResponse:
        """A raft replica's Fetch (ReplicaId >= 0) goes to the core; a consumer's reads."""
        replica = rw.fetch_replica_id(q, v)
        if replica >= 0:
            if self.refuses_observer(replica):
                return rpcs.FETCH_RPC.invalid()  # type: ignore[no-any-return]
            return await self.raft_peers._replica_fetch(q, v)
        return await self.applications._consumer_fetch(q, v)

