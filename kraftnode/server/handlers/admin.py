"""Admin requests: DescribeCluster, DescribeQuorum, DescribeConfigs, UpdateFeatures, voter
changes (Add/RemoveRaftVoter), and the ACL and SCRAM admin APIs, with forwarding to the
leader where a Kafka broker forwards to the active controller."""

from __future__ import annotations

import logging
from typing import Any

from kraftnode.controller import ApiError, ControllerResult, feature_control
from kraftnode.java_order import java_hashmap_order, replica_key_hash
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.describe_quorum_response import (
    _DescribeQuorumResponse_ReplicaState as _ReplicaState,
)
from kraftnode.protocol.registry import (
    ADD_RAFT_VOTER,
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_CONFIGS,
    DESCRIBE_QUORUM,
    REMOVE_RAFT_VOTER,
)
from kraftnode.raft import messages as m
from kraftnode.security import api_checks
from kraftnode.security import authorizer as az
from kraftnode.server.controller_io.controller_shell import NotController
from kraftnode.server.handlers import scram_credentials
from kraftnode.server.handlers.broker_configs import describe_broker
from kraftnode.server.handlers.controller_apis import dynamic_configs
from kraftnode.server.handlers.kafka_compat import (
    _CONFIG_BROKER,
    _CONFIG_TOPIC,
    _CONFIG_TYPES,
    _ERROR_MESSAGES,
    _NOT_REQUESTED,
    _SAFE_DOWNGRADE,
    _UPGRADE,
    CLUSTER_AUTHORIZED_OPERATIONS,
    _invalid_topic_name,
)
from kraftnode.server.handlers.raft_peers import RaftPeerHandlers
from kraftnode.server.raft_io import rpcs
from kraftnode.server.raft_io import wire as rw
from recordbatch.message import Message
from recordbatch.wire import ZERO_UUID, uuid_to_base64

log = logging.getLogger("kraftnode.handlers")


# Errors.message() of the errors an UpdateFeatures can end with: the text Kafka 4.4 puts in
# each v0-1 per-feature result (an error without an exception prints its name: "NONE")
_GENERIC_MESSAGES: dict[int, str] = {
    Errors.NONE: "NONE",
    Errors.INVALID_UPDATE_VERSION: "The given update version was invalid.",
    Errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    Errors.REQUEST_TIMED_OUT: "The request timed out.",
    Errors.UNSUPPORTED_VERSION: "The version of API is not supported.",
}


class AdminHandlers(RaftPeerHandlers):
    async def _describe_cluster(self, q: w.DescribeClusterRequest, v: int) -> w.DescribeClusterResponse:
        et = q.endpoint_type if v >= 1 else 1
        if et not in (1, 2):
            # AuthHelper.computeDescribeClusterResponse: an otherwise empty response
            return w.DescribeClusterResponse(error_code=Errors.UNSUPPORTED_ENDPOINT_TYPE,
                                             error_message=f"Unsupported endpoint type {et}")
        eps = self._controller_endpoints()
        leader, _ = self._leader()
        if et == 2 and leader not in eps:
            # No known leader: list no controllers. The Java Admin (bootstrap.controllers)
            # ignores an empty list and asks again (AdminMetadataManager.update), as it does
            # when a Kafka quorum that is still electing has no controller registrations yet;
            # a list without a controller would make it wait for a node assignment
            # (LeastLoadedBrokerOrActiveKController) until its calls time out.
            eps = {}
        return w.DescribeClusterResponse(
            throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=et,
            # as Kafka's AuthHelper.computeDescribeClusterResponse: -1 unless listed
            cluster_id=self.ident.cluster_id, controller_id=leader if leader in eps else -1,
            brokers=[w.DescribeClusterResponse.DescribeClusterBroker(broker_id=i, host=h, port=p, rack=None)
                     for i, (h, p) in sorted(eps.items())],
            cluster_authorized_operations=self.authorized_operations(
                az.CLUSTER, az.CLUSTER_NAME, CLUSTER_AUTHORIZED_OPERATIONS)
            if q.include_cluster_authorized_operations else _NOT_REQUESTED)

    async def _describe_configs(self, q: w.DescribeConfigsRequest, v: int) -> w.DescribeConfigsResponse:
        """Configs of our one topic and of this node, as Kafka's ConfigHelper.describeConfigs
        answers them. ``kafka-topics.sh --describe`` asks for the topic's configs after its
        Metadata and fails the whole command if DescribeConfigs is not served.

        Nothing is overridden for the metadata topic, so it is answered with an empty list -- what
        Kafka lists as non-default, which is all kafka-topics.sh and kafka-configs.sh --describe
        print; the brokers' topics and the cluster default ("") are answered with the dynamic
        configs the metadata holds for them (handlers/controller_apis.dynamic_configs), this
        node with its dynamic configs and then every other config of the node with its source
        (handlers/broker_configs). For a topic Kafka would also list every default value; we do
        not invent a LogConfig we do not have. Other resource types (broker loggers, client metrics, groups) have nothing
        behind them here and get INVALID_REQUEST."""
        R = w.DescribeConfigsResponse.DescribeConfigsResult
        results = []
        for res in q.resources:
            # no message: Kafka's DescribeConfigsResult default, "" (a Kafka 3.9 and a 4.4
            # controller both send it, for a result and for UNKNOWN_TOPIC_OR_PARTITION:
            # tests/interop/test_go_clients.py)
            code, msg = 0, ""
            configs: list[Any] = []
            name = res.resource_name
            if res.resource_type == _CONFIG_TOPIC and self.denied(az.TOPIC, name, az.DESCRIBE_CONFIGS,
                                                                   DESCRIBE_CONFIGS):
                # ConfigHelper.handleDescribeConfigsRequest: Errors.message() as the message
                code = Errors.TOPIC_AUTHORIZATION_FAILED
                msg = api_checks.MESSAGES[code]
            elif res.resource_type in (_CONFIG_BROKER, 8) and self.denied(
                    az.CLUSTER, az.CLUSTER_NAME, az.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS):
                code = Errors.CLUSTER_AUTHORIZATION_FAILED
                msg = api_checks.MESSAGES[code]
            elif res.resource_type == _CONFIG_TOPIC:
                invalid = _invalid_topic_name(name)
                image = self.duties.state.image if self.duties is not None else None
                if invalid is not None:
                    code, msg = Errors.INVALID_TOPIC_EXCEPTION, invalid
                elif image is not None and any(t.name == name for t, _v in image.topics.values()):
                    # a brokers' topic (the controller, docs/controller.md): its dynamic configs
                    configs = dynamic_configs(image.configs.get((_CONFIG_TOPIC, name), {}), _CONFIG_TOPIC,
                                              res.configuration_keys, v >= 1 and q.include_synonyms)
                elif name != rw.METADATA_TOPIC:
                    code = Errors.UNKNOWN_TOPIC_OR_PARTITION  # Kafka sets no message here ("")
            elif res.resource_type == _CONFIG_BROKER:
                if name and name != str(self.ident.node_id):
                    code, msg = Errors.INVALID_REQUEST, (
                        f"Unexpected broker id, expected {self.ident.node_id} or empty string, "
                        f"but received {name}")
                else:
                    # dynamic configs set (by IncrementalAlterConfigs, docs/controller.md) for
                    # this node and the cluster default (""), then, for the node's own id, every
                    # config with its source (ConfigHelper; broker_configs)
                    synonyms = v >= 1 and bool(getattr(q, "include_synonyms", False))
                    stored = self.duties.state.image.configs if self.duties is not None else {}
                    configs = dynamic_configs(stored.get((_CONFIG_BROKER, name), {}), _CONFIG_BROKER,
                                              res.configuration_keys, synonyms, default=not name)
                    if name:
                        keys = None if res.configuration_keys is None else list(res.configuration_keys)
                        dynamic = {c.name for c in configs}
                        configs += [c for c in describe_broker(
                            self.broker_properties, keys, synonyms,
                            bool(getattr(q, "include_documentation", False)), v) if c.name not in dynamic]
            else:
                code, msg = Errors.INVALID_REQUEST, (
                    f"Unsupported resource type: {_CONFIG_TYPES.get(res.resource_type, 'UNKNOWN')}")
            results.append(R(error_code=code, error_message=msg, resource_type=res.resource_type,
                             resource_name=name, configs=configs if code == 0 else []))
        return w.DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def _describe_quorum(self, q: w.DescribeQuorumRequest, v: int) -> w.DescribeQuorumResponse:
        # admin tools always name __cluster_metadata; a node of a TestRaftServer quorum
        # (see raft.wire.use_topic) answers for its own topic under either name
        asked = q.topics[0].topic_name if len(q.topics) == 1 else None
        p = q.topics[0].partitions[0] if asked in (rw.METADATA_TOPIC, "__cluster_metadata") \
            and len(q.topics[0].partitions) == 1 else None
        if p is None or p.partition_index != 0:
            # as Kafka: UNKNOWN_TOPIC_OR_PARTITION for every partition asked about
            D = w.DescribeQuorumResponse
            return D(error_code=0, error_message=None, nodes=[], topics=[D.TopicData(
                topic_name=t.topic_name, partitions=[D.PartitionData(
                    partition_index=x.partition_index, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=None, leader_id=0, leader_epoch=0, high_watermark=0,
                    current_voters=[], observers=[]) for x in t.partitions]) for t in q.topics])
        d = self.driver.describe_quorum()
        if d.error_code == Errors.NOT_LEADER_OR_FOLLOWER and d.leader_id >= 0:
            # Ask for the quorum's own topic: the leader may be Kafka's TestRaftServer, which
            # answers UNKNOWN_TOPIC_OR_PARTITION for any other (KafkaRaftClient
            # .handleDescribeQuorumRequest); the answer goes back under the name asked,
            # which the Java Admin requires to be the one it sent.
            Q = w.DescribeQuorumRequest
            ask = Q(topics=[Q.TopicData(topic_name=rw.METADATA_TOPIC,
                                        partitions=[Q.PartitionData(partition_index=0)])])
            forwarded = await self._forward_to_leader(d.leader_id, DESCRIBE_QUORUM, ask, v)
            if isinstance(forwarded, w.DescribeQuorumResponse):
                for t in forwarded.topics:
                    if t.topic_name == rw.METADATA_TOPIC:
                        t.topic_name = asked or rw.METADATA_TOPIC
                return forwarded
        R = w.DescribeQuorumResponse.ReplicaState

        def rs(x: m.ReplicaStateView) -> _ReplicaState:
            # RaftUtil.toReplicaState: the directory id only from v2 (brokers fetch with theirs)
            return R(replica_id=x.replica_id,
                     replica_directory_id=(x.replica_directory_id or ZERO_UUID) if v >= 2 else ZERO_UUID,
                     log_end_offset=x.log_end_offset, last_fetch_timestamp=x.last_fetch_timestamp,
                     last_caught_up_timestamp=x.last_caught_up_timestamp)

        voters = java_hashmap_order(d.current_voters, lambda x: x.replica_id)
        observers = java_hashmap_order(
            d.observers, lambda x: replica_key_hash(x.replica_id, x.replica_directory_id))
        part = w.DescribeQuorumResponse.PartitionData(
            partition_index=0, error_code=d.error_code, leader_id=d.leader_id,
            leader_epoch=d.leader_epoch, high_watermark=d.high_watermark,
            current_voters=[rs(x) for x in voters], observers=[rs(x) for x in observers])
        if d.error_code and v >= 2:
            part.error_message = _ERROR_MESSAGES.get(Errors(d.error_code), Errors(d.error_code).name)
        nodes = []
        if v >= 2 and not d.error_code:
            for node_id, endpoints in sorted(d.nodes.items()):
                nodes.append(w.DescribeQuorumResponse.Node(node_id=node_id, listeners=[
                    w.DescribeQuorumResponse.Listener(name=e.name, host=e.host, port=e.port)
                    for e in endpoints]))
        return w.DescribeQuorumResponse(error_code=0, topics=[w.DescribeQuorumResponse.TopicData(
            topic_name=asked or rw.METADATA_TOPIC, partitions=[part])], nodes=nodes)
    async def _update_features(self, q: w.UpdateFeaturesRequest, v: int) -> w.UpdateFeaturesResponse:
        """kafka-features.sh upgrade/downgrade/disable, as Kafka 4.4's controller answers it
        (QuorumController.updateFeatures): Kafka's rules are kraftnode.controller.feature_control,
        judged on the active controller's view; the records (FeatureLevelRecords, and the ELR
        safety ConfigRecords) go through the controller's write path, one atomic batch, and the
        answer waits for their commit. The first refusal fails the whole request -- the
        top-level error, with "The update failed for all features since the following feature
        had an error: " before FeatureControlManager's message. v0-1 still carry a result per
        feature, in the request's order, with the request's error and that error's generic
        message (Errors.message(): "NONE" when it succeeded); v2 has none. kraft.version is
        upgraded through the raft as Kafka 4.1+ does (_kraft_version_upgrade), with the
        NoOpRecord Kafka writes after it."""
        R = w.UpdateFeaturesResponse
        shell = self.controller
        if not self.driver.is_leader or shell is None or not shell.is_active:
            return R(throttle_time_ms=0, error_code=Errors.NOT_CONTROLLER, error_message=None, results=[])
        updates: list[tuple[str, int, int]] = []
        for f in q.feature_updates:
            # v0 has AllowDowngrade instead of UpgradeType (UpdateFeaturesRequest.featureUpdates)
            kind = f.upgrade_type if v >= 1 else (_SAFE_DOWNGRADE if f.allow_downgrade else _UPGRADE)
            updates.append((f.feature, f.max_version_level, kind))
        supported = dict(self.features.supported)
        voters = shell.config.controller_ids

        def decide(c: Any) -> feature_control.FeatureDecision:
            return feature_control.update_features(c.view, shell.config, supported, voters, updates,
                                                   q.validate_only, self.driver.current_kraft_version())

        code, msg = 0, None
        try:
            d = shell.read(decide)
            if d.error_code == 0 and d.kraft_upgrade is not None:
                code, msg = await self._kraft_version_upgrade(d.kraft_upgrade, q.validate_only)
            if d.error_code:
                code, msg = d.error_code, d.message
            elif code == 0 and not q.validate_only:
                def write(c: Any, now: int) -> ControllerResult[None]:
                    d2 = decide(c)
                    if d2.error_code:
                        raise ApiError(d2.error_code, d2.message)
                    if d2.note:
                        log.info("%s", d2.note)
                    return ControllerResult.atomic_of(d2.records, None)
                await shell.write(write)
                log.info("UpdateFeatures %s: finalized", ", ".join(f"{n}={lv}" for n, lv, _k in updates))
        except NotController:
            code, msg = Errors.NOT_CONTROLLER, None
        except ApiError as e:
            code, msg = e.code, e.message
        if code and code != Errors.NOT_CONTROLLER:
            log.info("UpdateFeatures refused: %s", msg)
        top = (f"The update failed for all features since the following feature had an error: {msg}"
               if code and msg else msg)
        results = []
        if v <= 1:
            generic = _GENERIC_MESSAGES.get(code, Errors(code).name)
            results = [R.UpdatableFeatureResult(feature=f.feature, error_code=code, error_message=generic)
                       for f in q.feature_updates]
        return R(throttle_time_ms=0, error_code=code, error_message=top, results=results)

    async def _kraft_version_upgrade(self, level: int, validate_only: bool) -> tuple[int, str | None]:
        """kraft.version through the raft (KafkaRaftClient.upgradeKRaftVersion: KRaftVersionRecord
        and VotersRecord, answered once committed; its refusals are InvalidUpdateVersionException
        messages, unprefixed), once feature_control's checks passed. See docs/raft.md (static
        to dynamic upgrade)."""
        code, message = await self.driver.upgrade_kraft_version(level, validate_only)
        if code == Errors.NOT_LEADER_OR_FOLLOWER:
            return Errors.NOT_CONTROLLER, None
        if code:
            log.info("kraft.version upgrade to %d refused: %s", level, message)
        else:
            log.info("kraft.version %s %d", "upgrade validated for" if validate_only else "upgraded to", level)
        return code, message

    async def _alter_scram(self, q: w.AlterUserScramCredentialsRequest, v: int) -> Message:
        """The leader writes the records; a follower forwards the request to it, as a Kafka
        broker forwards it to the active controller (else NOT_CONTROLLER)."""
        if not self.driver.is_leader:
            leader, _ = self._leader()
            forwarded = await self._forward_to_leader(
                leader, ALTER_USER_SCRAM_CREDENTIALS, q, v) if leader >= 0 else None
            if forwarded is not None:
                log.info("AlterUserScramCredentials forwarded to leader %d", leader)
                return forwarded
        return await scram_credentials.alter(self.driver, self.duties, q)

    async def _describe_scram(self, q: w.DescribeUserScramCredentialsRequest,
                              v: int) -> w.DescribeUserScramCredentialsResponse:
        return scram_credentials.describe(self.duties, q)

    async def _describe_acls(self, q: w.DescribeAclsRequest, v: int) -> w.DescribeAclsResponse:
        return self.acl_admin.describe(q, v)

    async def _alter_acls(self, q: w.CreateAclsRequest | w.DeleteAclsRequest, v: int) -> Message:
        """CreateAcls / DeleteAcls: the leader writes the records; a follower forwards to it
        (as a Kafka broker forwards to the active controller), else NOT_CONTROLLER."""
        create = isinstance(q, w.CreateAclsRequest)
        if self.authz is not None and not self.driver.is_leader:
            leader, _ = self._leader()
            api_key = CREATE_ACLS if create else DELETE_ACLS
            forwarded = await self._forward_to_leader(leader, api_key, q, v) if leader >= 0 else None
            if forwarded is not None:
                log.info("%s forwarded to leader %d", type(q).__name__[:-7], leader)
                return forwarded
        if isinstance(q, w.CreateAclsRequest):
            return await self.acl_admin.create(q, v)
        return await self.acl_admin.delete(q, v)

    async def _sasl_handshake(self, q: w.SaslHandshakeRequest, v: int) -> w.SaslHandshakeResponse:
        return w.SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])

    async def _sasl_authenticate(self, q: w.SaslAuthenticateRequest, v: int) -> w.SaslAuthenticateResponse:
        return w.SaslAuthenticateResponse(
            error_code=Errors.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"")

    async def _voter_change(self, q: w.AddRaftVoterRequest | w.RemoveRaftVoterRequest,
                            v: int) -> w.AddRaftVoterResponse | w.RemoveRaftVoterResponse:
        """Add/RemoveRaftVoter (KIP-853): the core decides and answers (a pending add or
        remove answers when its VotersRecord commits, or after the request timeout). Reaching
        a node that is not the leader they are forwarded to it (see _forward_to_leader)."""
        if not self.driver.is_leader:
            leader, _ = self._leader()
            api_key = ADD_RAFT_VOTER if isinstance(q, w.AddRaftVoterRequest) else REMOVE_RAFT_VOTER
            forwarded = await self._forward_to_leader(leader, api_key, q, v) if leader >= 0 else None
            if isinstance(forwarded, w.AddRaftVoterResponse | w.RemoveRaftVoterResponse):
                log.info("%s for voter %d forwarded to leader %d: %s", type(q).__name__[:-7],
                         q.voter_id, leader, _outcome(forwarded.error_code))
                return forwarded
        resp: w.AddRaftVoterResponse | w.RemoveRaftVoterResponse
        if isinstance(q, w.AddRaftVoterRequest):
            resp = await self._serve_raft(rpcs.ADD_RAFT_VOTER_RPC, q, v)
        else:
            resp = await self._serve_raft(rpcs.REMOVE_RAFT_VOTER_RPC, q, v)
        log.info("%s for voter %d (directory %s): %s%s", type(q).__name__[:-7], q.voter_id,
                 uuid_to_base64(q.voter_directory_id), _outcome(resp.error_code),
                 f" ({resp.error_message})" if resp.error_message else "")
        return resp


def _outcome(error_code: int) -> str:
    """A voter change's answer in words: Kafka's name for success, NONE, read as a failure in
    the log (issue 41)."""
    return f"failed: {Errors(error_code).name}" if error_code else "succeeded"
