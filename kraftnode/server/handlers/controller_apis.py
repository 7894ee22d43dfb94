"""The controller APIs (Kafka's ControllerApis): what brokers and admin clients ask the active
controller, turned into :class:`~kraftnode.controller.QuorumController` operations run by the
:class:`~kraftnode.server.controller_io.controller_shell.ControllerShell`.

Every node serves these APIs (and advertises them, so that a broker's channel never pins itself
to a node that does not), but only the active controller answers them; every other node answers
NOT_CONTROLLER and the client looks again. Authorization is ControllerApis': CLUSTER_ACTION for
what brokers send, per-topic CREATE / DELETE / ALTER / ALTER_CONFIGS / DESCRIBE_CONFIGS (or the
operation on the cluster) for admin requests, checked by the security layer's table for the
cluster-level ones (security/api_checks.py) and here per topic. A broker forwards admin requests
in an Envelope carrying the client's principal: the inner request is authorized as that principal.
"""

from __future__ import annotations

import ipaddress
import logging
import uuid
from typing import Any

from kraftnode.controller import ApiError
from kraftnode.controller.configs import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from kraftnode.controller.errors import default_message
from kraftnode.metadata.state import is_metadata_record
from kraftnode.protocol import error_responses
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.framing import FrameError, encode_response, parse_request
from kraftnode.security import authorizer as az
from kraftnode.server.handlers.base import HandlerBase
from kraftnode.server.handlers.kafka_compat import kraft_record_shape_error
from recordbatch import BatchView, CorruptBatchError
from recordbatch.wire import DecodeError, uuid_to_base64

__all__ = ["ControllerApiHandlers", "FORWARDABLE", "dynamic_configs", "broker_replay_error", "error_response"]

log = logging.getLogger("kraftnode.controller")

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
ZERO_UUID = uuid.UUID(int=0)

#: ApiKeys.forwardable: what a broker may send inside an Envelope
FORWARDABLE = frozenset({19, 20, 30, 31, 33, 37, 38, 39, 40, 43, 44, 45, 46, 49, 51, 55, 57, 64, 67, 80, 81})


def broker_replay_error(views: list[BatchView], brokers: list[int]) -> tuple[int, str] | None:
    """While brokers are registered, every record of the log must be one a broker can replay:
    a KRaft metadata record, in the shape Kafka's raft client reads (docs/controller.md)."""
    if not brokers:
        return None
    who = f"Kafka broker(s) {', '.join(map(str, brokers))} are registered and replay every record of the log"
    try:
        for b in views:
            shape = kraft_record_shape_error(b)
            if shape is not None:
                return Errors.INVALID_RECORD, f"batch at offset {b.base_offset}: {shape}; {who}"
            for r in b.records():
                if not is_metadata_record(r.value):
                    return (Errors.INVALID_RECORD,
                            f"record at batch offset {r.offset} is not a KRaft metadata record; {who}")
    except (CorruptBatchError, ValueError) as e:
        return Errors.CORRUPT_MESSAGE, str(e)
    return None


def error_response(key: int, v: int, q: Any, code: int, message: str | None = None) -> Any:
    """The API's error response; ``message`` defaults to Kafka's message for the code."""
    return error_responses.error_response(key, v, q, code, default_message(code) if message is None else message)


def _principal_of(data: bytes) -> tuple[str, bool]:
    """DefaultKafkaPrincipalBuilder.deserialize: version-prefixed DefaultPrincipalData."""
    if len(data) < 2:
        raise ValueError("principal too short")
    version = int.from_bytes(data[:2], "big", signed=True)
    p = w.DefaultPrincipalData.decode(memoryview(data)[2:], version)
    return f"{p.type_}:{p.name}", bool(p.token_authenticated)


def _address_of(data: bytes) -> str:
    if len(data) not in (4, 16):
        raise ValueError(f"address of {len(data)} bytes")
    return str(ipaddress.ip_address(bytes(data)))


class ControllerApiHandlers(HandlerBase):
    """The controller APIs; ``self.controller`` is the node's ControllerShell (None: a node
    without controller duties, which answers NOT_CONTROLLER)."""

    def _not_controller(self, key: int, v: int, q: Any) -> Any:
        return error_response(key, v, q, Errors.NOT_CONTROLLER)

    async def _run(self, key: int, v: int, q: Any, op: Any) -> Any:
        """Run a write on the active controller; (answer, None) or (None, error response)."""
        shell = self.controller
        if shell is None:
            return None, self._not_controller(key, v, q)
        try:
            return await shell.write(op, key), None
        except ApiError as e:
            return None, error_response(key, v, q, e.code, e.message)

    # ------------------------------------------------------------------ brokers
    def refuse_broker_once(self, broker_id: int, what: str) -> None:
        """The one line that says why a broker is refused by a quorum that takes application
        records: once per broker, whatever it retries (its fetches, its registration)."""
        warned: set[int] = self.__dict__.setdefault("_warned_brokers", set())
        if broker_id not in warned:
            warned.add(broker_id)
            log.warning("refusing %s %d: kraftnode.application.records.enable=true (this quorum's log takes "
                        "application records, which a Kafka broker cannot replay; docs/server.md)", what, broker_id)

    async def _broker_registration(self, q: w.BrokerRegistrationRequest, v: int) -> w.BrokerRegistrationResponse:
        R = w.BrokerRegistrationResponse
        drv = self.driver

        if self.application_records:
            # a log that takes application records is no log a broker can replay: refused before
            # anything is written, on every node (a broker looks for the active controller)
            if self.driver.is_leader:
                self.refuse_broker_once(q.broker_id, "the registration of broker")
                return R(throttle_time_ms=0, error_code=Errors.INVALID_REGISTRATION, broker_epoch=-1)
            return R(throttle_time_ms=0, error_code=Errors.NOT_CONTROLLER, broker_epoch=-1)

        def register(c: Any, now: int) -> Any:
            foreign = c.view.foreign_records
            if foreign:
                log.warning("refusing the registration of broker %d: the metadata log holds %d record(s) that are "
                            "not KRaft metadata records (application data written with Produce or OffsetCommit), "
                            "which a Kafka broker cannot replay (docs/controller.md)", q.broker_id, foreign)
                raise ApiError(Errors.INVALID_REGISTRATION)
            return c.register_broker(q, drv.log_end_offset(), drv.current_kraft_version(), now, v >= 3)
        epoch, err = await self._run(62, v, q, register)
        if err is not None:
            if err.error_code != Errors.NOT_CONTROLLER:
                log.info("broker %d registration refused: %s", q.broker_id, Errors(err.error_code).name)
            return R(throttle_time_ms=0, error_code=err.error_code, broker_epoch=-1)
        log.info("registered broker %d (incarnation %s) with broker epoch %d", q.broker_id, uuid_to_base64(q.incarnation_id), epoch)
        return R(throttle_time_ms=0, error_code=0, broker_epoch=epoch)

    async def _broker_heartbeat(self, q: w.BrokerHeartbeatRequest, v: int) -> w.BrokerHeartbeatResponse:
        R = w.BrokerHeartbeatResponse
        reply, err = await self._run(63, v, q, lambda c, now: c.broker_heartbeat(q, now))
        if err is not None:
            return R(throttle_time_ms=0, error_code=err.error_code)
        return R(throttle_time_ms=0, error_code=0, is_caught_up=reply.is_caught_up, is_fenced=reply.is_fenced,
                 should_shut_down=reply.should_shut_down)

    async def _unregister_controller(self, q: w.UnregisterControllerRequest, v: int) -> w.UnregisterControllerResponse:
        """Kafka 4.x's UnregisterController (drops a controller's registration): ALTER on
        the cluster (api_checks), then the active controller's answer (QuorumController
        .unregisterController); NOT_CONTROLLER elsewhere."""
        _, err = await self._run(94, v, q, lambda c, now: c.unregister_controller(q.controller_id, now))
        if err is not None:
            return err  # type: ignore[no-any-return]
        return w.UnregisterControllerResponse(throttle_time_ms=0, error_code=0, error_message=None)

    async def _unregister_broker(self, q: w.UnregisterBrokerRequest, v: int) -> w.UnregisterBrokerResponse:
        _, err = await self._run(64, v, q, lambda c, now: c.unregister_broker(q.broker_id, now))
        if err is not None:
            # ControllerApis sets only the code: ErrorMessage keeps its default, "" (not null)
            return w.UnregisterBrokerResponse(throttle_time_ms=0, error_code=err.error_code, error_message="")
        return w.UnregisterBrokerResponse(throttle_time_ms=0, error_code=0, error_message="")

    async def _allocate_producer_ids(self, q: w.AllocateProducerIdsRequest, v: int) -> Any:
        block, err = await self._run(67, v, q, lambda c, now: c.allocate_producer_ids(q, now))
        if err is not None:
            return err
        log.info("allocated producer id block %d-%d to broker %d", block.first_producer_id,
                 block.first_producer_id + block.size - 1, q.broker_id)
        return w.AllocateProducerIdsResponse(throttle_time_ms=0, error_code=0, producer_id_start=block.first_producer_id,
                                             producer_id_len=block.size)

    async def _alter_partition(self, q: w.AlterPartitionRequest, v: int) -> Any:
        if not q.topics:
            return w.AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=[])
        resp, err = await self._run(56, v, q, lambda c, now: c.alter_partition(q, v, now))
        return err if err is not None else resp

    async def _assign_replicas_to_dirs(self, q: w.AssignReplicasToDirsRequest, v: int) -> Any:
        resp, err = await self._run(73, v, q, lambda c, now: c.assign_replicas_to_dirs(q, now))
        return err if err is not None else resp

    # ------------------------------------------------------------------ topics
    async def _create_topics(self, q: w.CreateTopicsRequest, v: int) -> Any:
        R = w.CreateTopicsResponse
        if not q.topics:
            return R(throttle_time_ms=0, topics=[])
        seen: set[str] = set()
        dups: set[str] = set()
        for t in q.topics:
            (dups if t.name in seen else seen).add(t.name)
        names = seen - dups
        allowed = names - {CLUSTER_METADATA_TOPIC}
        cluster_create = not self.denied(az.CLUSTER, az.CLUSTER_NAME, az.CREATE, 19) if self.authz else True
        authorized = allowed if cluster_create else {n for n in allowed if not self.denied(az.TOPIC, n, az.CREATE, 19)}
        describable = {n for n in allowed if not self.denied(az.TOPIC, n, az.DESCRIBE_CONFIGS, 19)}
        effective = w.CreateTopicsRequest(topics=[t for t in q.topics if t.name in authorized and t.name not in dups],
                                          timeout_ms=q.timeout_ms, validate_only=q.validate_only)
        if effective.topics:
            resp, err = await self._run(19, v, q, lambda c, now: c.create_topics(effective, describable, now))
            if err is not None:
                return err
        else:
            resp = R(throttle_time_ms=0, topics=[])
        for name in sorted(dups):
            resp.topics.append(R.CreatableTopicResult(name=name, error_code=Errors.INVALID_REQUEST,
                                                      error_message="Duplicate topic name."))
        for name in sorted(names):
            if name == CLUSTER_METADATA_TOPIC:
                resp.topics.append(R.CreatableTopicResult(
                    name=name, error_code=Errors.INVALID_REQUEST,
                    error_message=f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."))
            elif name not in authorized:
                resp.topics.append(R.CreatableTopicResult(name=name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                                          error_message="Authorization failed."))
        return resp

    async def _delete_topics(self, q: w.DeleteTopicsRequest, v: int) -> Any:
        R = w.DeleteTopicsResponse
        shell = self.controller
        if shell is None or not shell.is_active:
            return error_response(20, v, q, Errors.NOT_CONTROLLER)
        if not shell.config.delete_topic_enable:
            if v < 3:
                return error_response(20, v, q, Errors.INVALID_REQUEST, "Topic deletion is disabled.")
            return error_response(20, v, q, Errors.TOPIC_DELETION_DISABLED)
        out: list[Any] = []

        def respond(name: str | None, tid: uuid.UUID, err: ApiError) -> None:
            out.append(R.DeletableTopicResult(name=name, topic_id=tid, error_code=err.code,
                                              error_message=err.message if err.code else None))
        names: dict[str, None] = {}
        dup_names: set[str] = set()
        ids: dict[uuid.UUID, None] = {}
        dup_ids: set[uuid.UUID] = set()

        def add_name(n: str) -> None:
            if n in dup_names or n in names:
                dup_names.add(n)
                names.pop(n, None)
            else:
                names[n] = None
        for n in q.topic_names:
            add_name(n)
        for t in q.topics:
            if t.name is None:
                if t.topic_id == ZERO_UUID:
                    respond(None, ZERO_UUID, ApiError(Errors.INVALID_REQUEST, "Neither topic name nor id were specified."))
                elif t.topic_id in dup_ids or t.topic_id in ids:
                    dup_ids.add(t.topic_id)
                    ids.pop(t.topic_id, None)
                else:
                    ids[t.topic_id] = None
            elif t.topic_id == ZERO_UUID:
                add_name(t.name)
            else:
                respond(t.name, t.topic_id, ApiError(Errors.INVALID_REQUEST,
                                                     "You may not specify both topic name and topic id."))
        for n in dup_names:
            respond(n, ZERO_UUID, ApiError(Errors.INVALID_REQUEST, "Duplicate topic name."))
        for i in dup_ids:
            respond(None, i, ApiError(Errors.INVALID_REQUEST, "Duplicate topic id."))
        try:
            view = shell.read(lambda c: c.view)
        except ApiError:
            return error_response(20, v, q, Errors.NOT_CONTROLLER)
        id_to_name: dict[uuid.UUID, str] = {}
        for i in ids:
            name = view.topic_name(i) if i != ZERO_UUID else None
            if name is None:
                respond(None, i, ApiError(Errors.UNKNOWN_TOPIC_ID))
            else:
                id_to_name[i] = name
        cluster_delete = self.authz is None or not self.denied(az.CLUSTER, az.CLUSTER_NAME, az.DELETE, 20)

        def deletable(n: str) -> bool:
            return cluster_delete or not self.denied(az.TOPIC, n, az.DELETE, 20)

        def describable(n: str) -> bool:
            return cluster_delete or not self.denied(az.TOPIC, n, az.DESCRIBE, 20)
        for i, n in list(id_to_name.items()):
            if not deletable(n):
                respond(n if describable(n) else None, i, ApiError(Errors.TOPIC_AUTHORIZATION_FAILED))
                del id_to_name[i]
        for n in names:
            tid = view.topic_id(n)
            if not describable(n):
                respond(n, ZERO_UUID, ApiError(Errors.TOPIC_AUTHORIZATION_FAILED))
            elif tid is None:
                respond(n, ZERO_UUID, ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION))
            elif deletable(n):
                if tid in dup_ids or tid in id_to_name:
                    dup_ids.add(tid)
                    id_to_name.pop(tid, None)
                    respond(n, tid, ApiError(Errors.INVALID_REQUEST,
                                             "The provided topic name maps to an ID that was already supplied."))
                else:
                    id_to_name[tid] = n
            else:
                respond(n, ZERO_UUID, ApiError(Errors.TOPIC_AUTHORIZATION_FAILED))
        if id_to_name:
            results, err = await self._run(20, v, q, lambda c, now: c.delete_topics(list(id_to_name), now))
            if err is not None:
                return err
            for i, e in results.items():
                respond(id_to_name.get(i), i, e)
        shell.rng.shuffle(out)  # Kafka shuffles: positions must not tell absent from forbidden topics
        return R(throttle_time_ms=0, responses=out)

    async def _create_partitions(self, q: w.CreatePartitionsRequest, v: int) -> Any:
        R = w.CreatePartitionsResponse
        if not q.topics:
            return R(throttle_time_ms=0, results=[])
        results: list[Any] = []
        seen: dict[str, Any] = {}
        dups: set[str] = set()
        for t in q.topics:
            if t.name in seen:
                dups.add(t.name)
            seen[t.name] = t
        for n in dups:
            results.append(R.CreatePartitionsTopicResult(name=n, error_code=Errors.INVALID_REQUEST,
                                                         error_message="Duplicate topic name."))
        topics = []
        for n, t in seen.items():
            if n in dups:
                continue
            if self.denied(az.TOPIC, n, az.ALTER, 37):
                results.append(R.CreatePartitionsTopicResult(name=n, error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                                             error_message=None))
            else:
                topics.append(t)
        if topics:
            out, err = await self._run(37, v, q, lambda c, now: c.create_partitions(topics, q.validate_only, now))
            if err is not None:
                return err
            results.extend(out)
        return R(throttle_time_ms=0, results=results)

    async def _elect_leaders(self, q: w.ElectLeadersRequest, v: int) -> Any:
        R = w.ElectLeadersResponse
        if q.topic_partitions is not None and not q.topic_partitions:
            return R(throttle_time_ms=0, error_code=0, replica_election_results=[])
        resp, err = await self._run(43, v, q, lambda c, now: c.elect_leaders(q, now))
        return err if err is not None else resp

    async def _alter_partition_reassignments(self, q: w.AlterPartitionReassignmentsRequest, v: int) -> Any:
        R = w.AlterPartitionReassignmentsResponse
        if not q.topics:
            return R(throttle_time_ms=0, error_code=0, error_message=None, responses=[],
                     allow_replication_factor_change=q.allow_replication_factor_change)
        resp, err = await self._run(45, v, q, lambda c, now: c.alter_partition_reassignments(q, now))
        return err if err is not None else resp

    async def _list_partition_reassignments(self, q: w.ListPartitionReassignmentsRequest, v: int) -> Any:
        R = w.ListPartitionReassignmentsResponse
        if q.topics is not None and not q.topics:
            return R(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
        shell = self.controller
        if shell is None:
            return self._not_controller(46, v, q)
        try:
            return shell.read(lambda c: c.replication.list_partition_reassignments(q.topics))
        except ApiError as e:
            return error_response(46, v, q, e.code, e.message)

    # ------------------------------------------------------------------ configs and quotas
    def _config_auth(self, rtype: int, name: str, api: int) -> ApiError | None:
        """ControllerApis.authorizeAlterResource."""
        if rtype == BROKER:
            if self.denied(az.CLUSTER, az.CLUSTER_NAME, az.ALTER_CONFIGS, api):
                return ApiError(Errors.CLUSTER_AUTHORIZATION_FAILED)
            return None
        if rtype == TOPIC:
            if self.denied(az.TOPIC, name, az.ALTER_CONFIGS, api):
                return ApiError(Errors.TOPIC_AUTHORIZATION_FAILED)
            return None
        if rtype == CLIENT_METRICS:  # KIP-714's subscriptions: ALTER_CONFIGS on the cluster
            if self.denied(az.CLUSTER, az.CLUSTER_NAME, az.ALTER_CONFIGS, api):
                return ApiError(Errors.CLUSTER_AUTHORIZATION_FAILED)
            return None
        if rtype == GROUP:  # Kafka 4.x: a group's dynamic configs
            if self.denied(az.GROUP, name, az.ALTER_CONFIGS, api):
                return ApiError(Errors.GROUP_AUTHORIZATION_FAILED)
            return None
        return ApiError(Errors.INVALID_REQUEST, f"Unexpected resource type {_type_name(rtype)}.")

    async def _alter_configs(self, q: Any, v: int, key: int) -> Any:
        R = w.IncrementalAlterConfigsResponse if key == 44 else w.AlterConfigsResponse
        out: list[Any] = []
        changes: dict[tuple[int, str], dict[str, Any]] = {}
        dups: set[tuple[int, str]] = set()
        for r in q.resources:
            res = (r.resource_type, r.resource_name)
            if r.resource_type not in (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP):
                out.append(R.AlterConfigsResourceResponse(error_code=Errors.UNSUPPORTED_VERSION,
                                                          error_message=f"Unknown resource type {r.resource_type}.",
                                                          resource_type=r.resource_type, resource_name=r.resource_name))
                continue
            if r.resource_type == BROKER_LOGGER:
                out.append(R.AlterConfigsResourceResponse(
                    error_code=Errors.INVALID_REQUEST, resource_type=r.resource_type, resource_name=r.resource_name,
                    error_message="kraftnode does not change its loggers through AlterConfigs"))
                continue
            if res in dups:
                continue
            if key == 44:
                ops = {c.name: (c.config_operation, c.value) for c in r.configs}
            else:
                ops = {c.name: c.value for c in r.configs}
            if res in changes:
                dups.add(res)
                del changes[res]
                out.append(R.AlterConfigsResourceResponse(error_code=Errors.INVALID_REQUEST,
                                                          error_message="Duplicate resource.",
                                                          resource_type=r.resource_type, resource_name=r.resource_name))
                continue
            changes[res] = ops
        for res in list(changes):
            err = self._config_auth(res[0], res[1], key)
            if err is not None:
                out.append(R.AlterConfigsResourceResponse(error_code=err.code, error_message=err.message,
                                                          resource_type=res[0], resource_name=res[1]))
                del changes[res]
        if changes:
            forwarded = az.session().forwarded  # from a broker (an Envelope): KIP-1066's check differs
            if key == 44:
                results, err = await self._run(key, v, q, lambda c, now: c.incremental_alter_configs(
                    changes, q.validate_only, now, forwarded))
            else:
                results, err = await self._run(key, v, q, lambda c, now: c.legacy_alter_configs(
                    changes, q.validate_only, now, forwarded))
            if err is not None:
                return err
            for (rtype, name), e in results.items():
                out.append(R.AlterConfigsResourceResponse(error_code=e.code, error_message=e.message if e.code else None,
                                                          resource_type=rtype, resource_name=name))
        return R(throttle_time_ms=0, responses=out)

    async def _incremental_alter_configs(self, q: w.IncrementalAlterConfigsRequest, v: int) -> Any:
        return await self._alter_configs(q, v, 44)

    async def _legacy_alter_configs(self, q: w.AlterConfigsRequest, v: int) -> Any:
        return await self._alter_configs(q, v, 33)

    async def _alter_client_quotas(self, q: w.AlterClientQuotasRequest, v: int) -> Any:
        R = w.AlterClientQuotasResponse
        alterations = []
        for e in q.entries:
            entity = tuple((x.entity_type, x.entity_name) for x in e.entity)
            alterations.append((entity, [(o.key, None if o.remove else o.value) for o in e.ops]))
        if not alterations:
            return R(throttle_time_ms=0, entries=[])
        results, err = await self._run(49, v, q, lambda c, now: c.alter_client_quotas(alterations, q.validate_only, now))
        if err is not None:
            return err
        return R(throttle_time_ms=0, entries=[
            R.EntryData(error_code=e.code, error_message=e.message if e.code else None,
                        entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity])
            for entity, e in results.items()])

    # ------------------------------------------------------------------ delegation tokens
    async def _delegation_token(self, q: Any, v: int, key: int) -> Any:
        """Delegation tokens need ``delegation.token.secret.key``, which kraftnode does not
        take: a 3.9 controller without it answers DELEGATION_TOKEN_AUTH_DISABLED, after
        refusing, as ``allowTokenRequests``, what comes unforwarded on a PLAINTEXT listener or
        from an anonymous client of an SSL one (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""
        code = Errors.DELEGATION_TOKEN_AUTH_DISABLED
        s = az.session()
        if not s.forwarded and (s.protocol == "PLAINTEXT" or (s.protocol == "SSL" and s.principal == az.ANONYMOUS)):
            code = Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        if key == 41:
            code = Errors.UNKNOWN_SERVER_ERROR  # not handled by ControllerApis
        resp = error_response(key, v, q, code, None)
        if key == 38:
            resp.principal_type, resp.principal_name = "User", az.session().principal.partition(":")[2]
            resp.token_requester_principal_type, resp.token_requester_principal_name = resp.principal_type, resp.principal_name
            resp.issue_timestamp_ms = resp.expiry_timestamp_ms = resp.max_timestamp_ms = -1
            resp.token_id, resp.hmac = "", b""
        return resp

    async def _create_delegation_token(self, q: Any, v: int) -> Any:
        return await self._delegation_token(q, v, 38)

    async def _renew_delegation_token(self, q: Any, v: int) -> Any:
        return await self._delegation_token(q, v, 39)

    async def _expire_delegation_token(self, q: Any, v: int) -> Any:
        return await self._delegation_token(q, v, 40)

    async def _describe_delegation_token(self, q: Any, v: int) -> Any:
        return await self._delegation_token(q, v, 41)

    # ------------------------------------------------------------------ Envelope
    async def _envelope(self, q: w.EnvelopeRequest, v: int) -> w.EnvelopeResponse:
        """EnvelopeUtils.handleEnvelopeRequest: run the forwarded request as the client's
        principal and wrap its response (header and body) in the EnvelopeResponse."""
        E = w.EnvelopeResponse
        try:
            principal, _token = _principal_of(bytes(q.request_principal or b""))
        except (ValueError, DecodeError, IndexError):
            return E(response_data=None, error_code=Errors.PRINCIPAL_DESERIALIZATION_FAILURE)
        try:
            host = _address_of(bytes(q.client_host_address))
        except ValueError:
            return E(response_data=None, error_code=Errors.INVALID_REQUEST)
        try:
            inner = parse_request(bytes(q.request_data))
        except (FrameError, DecodeError, ValueError, IndexError):
            return E(response_data=None, error_code=Errors.UNSUPPORTED_VERSION)
        if inner.spec.key not in FORWARDABLE:
            return E(response_data=None, error_code=Errors.INVALID_REQUEST)
        # EnvelopeUtils: the forwarded context keeps the envelope's security protocol
        token = az.CURRENT_SESSION.set(az.Session(principal, host, az.session().protocol, forwarded=True))
        try:
            reply = await self(inner, f"envelope:{host}")
        finally:
            az.CURRENT_SESSION.reset(token)
        if reply is None:
            return E(response_data=None, error_code=Errors.UNKNOWN_SERVER_ERROR)
        # RequestChannel.buildResponseSend: a forwarded request answered NOT_CONTROLLER (DescribeQuorum:
        # NOT_LEADER_OR_FOLLOWER) makes the whole envelope NOT_CONTROLLER, so that the broker's
        # forwarding channel looks for the active controller again instead of relaying the error
        stale = Errors.NOT_LEADER_OR_FOLLOWER if inner.spec.key == 55 else Errors.NOT_CONTROLLER
        if stale in _error_codes(reply.body):
            return E(response_data=None, error_code=Errors.NOT_CONTROLLER)
        frame = encode_response(inner.spec, inner.api_version, inner.correlation_id, reply.body,
                                reply.version if reply.version != inner.api_version else None)
        return E(response_data=frame[4:], error_code=0)


_CONFIG_TYPE_IDS = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7}


def dynamic_configs(stored: dict[str, str], resource_type: int, keys: list[str] | None,
                    include_synonyms: bool, default: bool = False) -> list[Any]:
    """DescribeConfigs entries for the dynamic configs the metadata holds for a topic or a broker
    (a broker's name "" is the cluster default: ``default``), in name order: what ``kafka-configs.sh
    --describe`` and ``kafka-topics.sh --describe`` print. Defaults are not listed (docs/server.md)."""
    from kraftnode.controller.topic_configs import TOPIC_CONFIGS, Source

    C = w.DescribeConfigsResponse.DescribeConfigsResourceResult
    S = w.DescribeConfigsResponse.DescribeConfigsSynonym
    if resource_type == TOPIC:
        source = Source.DYNAMIC_TOPIC_CONFIG
    else:  # a broker's own, or the cluster default's (the name "")
        source = Source.DYNAMIC_DEFAULT_BROKER_CONFIG if default else Source.DYNAMIC_BROKER_CONFIG
    out = []
    for name in sorted(stored):
        if keys and name not in keys:
            continue
        d = TOPIC_CONFIGS.get(name) if resource_type == TOPIC else None
        out.append(C(name=name, value=stored[name], read_only=False, config_source=source,
                     is_sensitive=False, synonyms=[S(name=name, value=stored[name], source=source)]
                     if include_synonyms else [],
                     config_type=_CONFIG_TYPE_IDS.get(d.type, 0) if d is not None else 0, documentation=None))
    return out


def _error_codes(m: Any) -> set[int]:
    """Every ``error_code`` in a response, nested ones included (AbstractResponse.errorCounts)."""
    out: set[int] = set()
    for name in getattr(m, "__slots__", ()):
        v = getattr(m, name, None)
        if name == "error_code" and isinstance(v, int):
            out.add(v)
        elif isinstance(v, list):
            for x in v:
                if hasattr(x, "__slots__"):
                    out |= _error_codes(x)
        elif hasattr(v, "__slots__") and not isinstance(v, (bytes, str)):
            out |= _error_codes(v)
    return out


def _type_name(rtype: int) -> str:
    from kraftnode.controller.configs import RESOURCE_TYPE_NAMES

    return RESOURCE_TYPE_NAMES.get(rtype, str(rtype))

