"""Request handlers: turn parsed wire requests into core events or log reads, and back.

Split by audience: ``raft_peers`` (Vote, BeginQuorumEpoch, EndQuorumEpoch, a replica's
Fetch, FetchSnapshot, UpdateRaftVoter: through the one RPC table, kraftnode.server.raft_io.rpcs),
``applications`` (Produce, consumer Fetch, ListOffsets, Metadata, InitProducerId),
``groups`` (FindCoordinator, OffsetCommit, OffsetFetch of simple groups), ``admin``
(DescribeCluster, DescribeQuorum, DescribeConfigs, UpdateFeatures, voter changes, SASL,
and forwarding; the ACL and SCRAM APIs in ``acls`` and ``scram_credentials``), and
``kafka_compat`` (record shape checks and Kafka's numbers). :class:`NodeHandlers` joins them; :data:`HANDLERS` is the one dispatch
table from API key to handler, and security.api_checks the one per-API authorization table.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kraftnode.java_order import java_hashmap_order, replica_key_hash
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol import registry as api
from kraftnode.protocol.framing import FrameError, Request
from kraftnode.protocol.registry import (
    ADD_RAFT_VOTER,
    ALTER_USER_SCRAM_CREDENTIALS,
    API_VERSIONS,
    BEGIN_QUORUM_EPOCH,
    CONTROLLER_REGISTRATION,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_QUORUM,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    REMOVE_RAFT_VOTER,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    UPDATE_FEATURES,
    UPDATE_RAFT_VOTER,
    VOTE,
)
from kraftnode.security import api_checks
from kraftnode.security import authorizer as az
from kraftnode.server.handlers import groups
from kraftnode.server.handlers.admin import AdminHandlers
from kraftnode.server.handlers.applications import ApplicationHandlers
from kraftnode.server.handlers.base import VOTER_CHANGE_FORWARD_TIMEOUT_S, NodeIdentity
from kraftnode.server.handlers.controller_apis import ControllerApiHandlers
from kraftnode.server.handlers.kafka_compat import (
    CLUSTER_AUTHORIZED_OPERATIONS,
    TOPIC_AUTHORIZED_OPERATIONS,
    kraft_record_shape_error,
)
from kraftnode.server.net import api_versions
from kraftnode.server.net.listener import Reply
from kraftnode.server.net.peer_client import SOFTWARE_NAME
from kraftnode.server.raft_io import rpcs
from kraftnode.server.raft_io import wire as rw

__all__ = [
    "CLUSTER_AUTHORIZED_OPERATIONS", "HANDLERS", "TOPIC_AUTHORIZED_OPERATIONS",
    "VOTER_CHANGE_FORWARD_TIMEOUT_S", "NodeHandlers", "NodeIdentity", "java_hashmap_order",
    "kraft_record_shape_error", "replica_key_hash",
]

log = logging.getLogger("kraftnode.handlers")


class NodeHandlers(ApplicationHandlers, AdminHandlers, ControllerApiHandlers):
    """Routes parsed requests to the code that answers them (:data:`HANDLERS`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups = groups.GroupService(self, self.group_config)   # the group coordinator

    async def __call__(self, request: Request, peer: str) -> Reply | None:
        key = request.spec.key
        v = request.api_version
        body: Any = request.body
        if key == API_VERSIONS:
            resp, rv = api_versions.answer(request, self._features(), self.ident.cluster_id,
                                           self.ident.node_id)
            sw = ""
            if request.body is not None and v >= 3:
                sw = f" ({body.client_software_name} {body.client_software_version})"
                self._conn_software[peer] = body.client_software_name
            log.debug("ApiVersions v%d from %s%s: answered v%d, error %d", v, peer, sw, rv,
                     resp.error_code)
            return Reply(resp, rv)
        if key == FETCH and peer in self._conn_software:
            replica = rw.fetch_replica_id(body, v)
            if replica >= 0:
                self.replica_software[replica] = self._conn_software[peer]
        handler = HANDLERS.get(key)
        groups.CLIENT.set((request.header.client_id or "", "/" + peer.rpartition(":")[0]))
        if handler is None:
            raise FrameError(f"{request.spec.name} is not served")
        if self.authz is not None:
            try:
                refused = api_checks.refusal(self.authz, key, v, body)
                if refused is None and key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    self.authz.check_ready(az.session())
            except az.AuthorizerNotReady:
                log.info("%s from %s before the ACLs are loaded: UNKNOWN_SERVER_ERROR (Kafka's "
                         "AuthorizerNotReadyException)", request.spec.name, az.session().principal)
                refused = api_checks.error_response(key, v, body, Errors.UNKNOWN_SERVER_ERROR)
            if refused is not None:
                return Reply(refused, v)
        result = await handler(self, body, v)
        return None if result is None else Reply(result, v)

    def fast(self, request: Request, peer: str, done: Callable[[Callable[[], Reply]], None]) -> bool:
        """Serve a raft replica's Fetch, or an acks=-1 Produce (:meth:`produce_nowait`),
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
        if request.spec.key == PRODUCE:
            return self.produce_nowait(body, v, lambda build: done(lambda: Reply(build(), v)))
        if request.spec.key != FETCH or self.authz is not None:
            return False
        replica = rw.fetch_replica_id(body, v)
        if replica < 0:
            return False       # a consumer: _consumer_fetch (a task, it may wait on the HW)
        software = self._conn_software.get(peer)
        if software is not None:
            self.replica_software[replica] = software
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
        if not self.application_records or self.duties is None or not self.duties.state.foreign_records:
            return False
        software = self.replica_software.get(replica)
        if software is None or software == SOFTWARE_NAME or replica in self.driver.voters.ids:
            return False
        self.refuse_broker_once(replica, "the fetches of broker")
        return True

    async def _fetch(self, q: w.FetchRequest, v: int) -> w.FetchResponse:
        """A raft replica's Fetch (ReplicaId >= 0) goes to the core; a consumer's reads."""
        replica = rw.fetch_replica_id(q, v)
        if replica >= 0:
            if self.refuses_observer(replica):
                return rpcs.FETCH_RPC.invalid()  # type: ignore[no-any-return]
            return await self._replica_fetch(q, v)
        return await self._consumer_fetch(q, v)


Handler = Callable[[NodeHandlers, Any, int], Awaitable[Any]]

#: The one dispatch table: API key -> handler (called with the parsed body and version).
HANDLERS: dict[int, Handler] = {
    # raft peers
    VOTE: NodeHandlers._vote, BEGIN_QUORUM_EPOCH: NodeHandlers._begin,
    END_QUORUM_EPOCH: NodeHandlers._end, FETCH: NodeHandlers._fetch,
    FETCH_SNAPSHOT: NodeHandlers._fetch_snapshot, UPDATE_RAFT_VOTER: NodeHandlers._update_voter,
    # applications
    PRODUCE: NodeHandlers._produce, LIST_OFFSETS: NodeHandlers._list_offsets,
    METADATA: NodeHandlers._metadata, INIT_PRODUCER_ID: NodeHandlers._init_producer_id,
    CONTROLLER_REGISTRATION: NodeHandlers._controller_registration,
    # groups (kraftnode.server.handlers.groups)
    **groups.HANDLERS,
    # admin
    DESCRIBE_CLUSTER: NodeHandlers._describe_cluster, DESCRIBE_QUORUM: NodeHandlers._describe_quorum,
    DESCRIBE_CONFIGS: NodeHandlers._describe_configs, UPDATE_FEATURES: NodeHandlers._update_features,
    ADD_RAFT_VOTER: NodeHandlers._voter_change, REMOVE_RAFT_VOTER: NodeHandlers._voter_change,
    SASL_HANDSHAKE: NodeHandlers._sasl_handshake, SASL_AUTHENTICATE: NodeHandlers._sasl_authenticate,
    ALTER_USER_SCRAM_CREDENTIALS: NodeHandlers._alter_scram,
    DESCRIBE_USER_SCRAM_CREDENTIALS: NodeHandlers._describe_scram,
    DESCRIBE_ACLS: NodeHandlers._describe_acls, CREATE_ACLS: NodeHandlers._alter_acls,
    DELETE_ACLS: NodeHandlers._alter_acls,
    # controller (handlers/controller_apis.py)
    api.BROKER_REGISTRATION: NodeHandlers._broker_registration,
    api.BROKER_HEARTBEAT: NodeHandlers._broker_heartbeat,
    api.UNREGISTER_BROKER: NodeHandlers._unregister_broker,
    api.UNREGISTER_CONTROLLER: NodeHandlers._unregister_controller,
    api.ALLOCATE_PRODUCER_IDS: NodeHandlers._allocate_producer_ids,
    api.ALTER_PARTITION: NodeHandlers._alter_partition,
    api.ASSIGN_REPLICAS_TO_DIRS: NodeHandlers._assign_replicas_to_dirs,
    api.CREATE_TOPICS: NodeHandlers._create_topics, api.DELETE_TOPICS: NodeHandlers._delete_topics,
    api.CREATE_PARTITIONS: NodeHandlers._create_partitions, api.ELECT_LEADERS: NodeHandlers._elect_leaders,
    api.ALTER_PARTITION_REASSIGNMENTS: NodeHandlers._alter_partition_reassignments,
    api.LIST_PARTITION_REASSIGNMENTS: NodeHandlers._list_partition_reassignments,
    api.INCREMENTAL_ALTER_CONFIGS: NodeHandlers._incremental_alter_configs,
    api.ALTER_CONFIGS: NodeHandlers._legacy_alter_configs,
    api.ALTER_CLIENT_QUOTAS: NodeHandlers._alter_client_quotas,
    api.CREATE_DELEGATION_TOKEN: NodeHandlers._create_delegation_token,
    api.RENEW_DELEGATION_TOKEN: NodeHandlers._renew_delegation_token,
    api.EXPIRE_DELEGATION_TOKEN: NodeHandlers._expire_delegation_token,
    api.DESCRIBE_DELEGATION_TOKEN: NodeHandlers._describe_delegation_token,
    api.ENVELOPE: NodeHandlers._envelope,
}
