"""Dynamic configurations: Kafka's ConfigurationControlManager with the controller's validator.

Resources are topics (type 2), brokers (type 4; name "" is the cluster-wide default) and, as
Kafka 4.x has them, groups (type 32: :mod:`kraftnode.controller.group_configs`) and client metrics
subscriptions (type 16: :mod:`kraftnode.controller.client_metrics_configs`).
IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT per key; the legacy AlterConfigs
replaces a resource's whole config (keys not named are deleted). A change is validated on the
resource's resulting configs as ``ControllerConfigurationValidator`` does: a topic's by
``LogConfig.validate`` (:mod:`kraftnode.controller.topic_configs`), a broker's only by its name
(the forwarding broker validated the values); then the resource must exist (a topic, a registered
broker or controller). A broker config record is written even when the value is unchanged
(KAFKA-14136: brokers reload on it). One atomic batch per request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kraftnode.controller.client_metrics_configs import (
    ClientMetricsConfigError,
    validate_client_metrics,
)
from kraftnode.controller.context import ControllerContext
from kraftnode.controller.elr import MIN_INSYNC_REPLICAS, clear_elr_records, elr_enabled
from kraftnode.controller.errors import ApiError
from kraftnode.controller.group_configs import GroupConfigValueError, validate_group_configs
from kraftnode.controller.result import ControllerResult, Record
from kraftnode.controller.topic_configs import (
    TOPIC_CONFIGS,
    Effective,
    TopicConfigError,
    resolve,
    resolve_all,
    validate_topic_configs,
)
from kraftnode.controller.topic_names import topic_name_error
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import ConfigRecord

__all__ = ["BROKER", "BROKER_LOGGER", "CLIENT_METRICS", "ConfigurationControl", "GROUP", "OP_APPEND",
           "OP_DELETE", "OP_SET", "OP_SUBTRACT", "RESOURCE_TYPE_NAMES", "TOPIC"]

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
RESOURCE_TYPE_NAMES = {0: "UNKNOWN", TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER",
                       CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
CORDONED_LOG_DIRS = "cordoned.log.dirs"  # KIP-1066 (Kafka 4.3+)
_COMMA = re.compile(r"\s*,\s*")
OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

#: Broker configs of type LIST (KafkaConfig), the only broker keys APPEND/SUBTRACT may change.
BROKER_LIST_CONFIGS = frozenset({
    "log.cleanup.policy", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "sasl.enabled.mechanisms", "ssl.cipher.suites", "ssl.enabled.protocols", "super.users",
    "metric.reporters", "kafka.metrics.reporters", "log.dirs", "controller.listener.names",
    "process.roles", "sasl.kerberos.principal.to.local.rules", "ssl.principal.mapping.rules",
    "early.start.listeners", "config.providers", "remote.log.metadata.manager.listener.name",
})

Resource = tuple[int, str]


class ConfigurationControl:
    def __init__(self, ctl: ControllerContext) -> None:
        self.ctl = ctl

    # ------------------------------------------------------------------ effective topic configs
    def _layers(self) -> tuple[Mapping[str, str], dict[str, str], dict[str, str]]:
        view = self.ctl.view
        return (self.ctl.config.static_configs, view.config(BROKER, ""),
                view.config(BROKER, str(self.ctl.config.node_id)))

    def topic_config(self, topic: str, key: str) -> str | None:
        static, cluster, node = self._layers()
        return resolve(key, static, cluster, node, self.ctl.view.topic_config(topic)).value

    def effective_topic_configs(self, creation: dict[str, str]) -> dict[str, Effective]:
        static, cluster, node = self._layers()
        return resolve_all(static, cluster, node, creation)

    # ------------------------------------------------------------------ validation
    def _validate(self, resource: Resource, all_configs: dict[str, str | None], newly_created: bool) -> None:
        """ControllerConfigurationValidator.validate, then the existence check; ApiError."""
        rtype, name = resource
        if rtype == TOPIC:
            self._validate_topic_name(name)
            try:
                validate_topic_configs(all_configs)
            except TopicConfigError as e:
                raise ApiError(Errors.INVALID_CONFIG, str(e)) from None
        elif rtype == BROKER:
            self._validate_broker_name(name)
        elif rtype == GROUP:
            self._validate_group_name(name)
            try:
                validate_group_configs(all_configs)
            except GroupConfigValueError as e:
                raise ApiError(Errors.INVALID_CONFIG, str(e)) from None
        elif rtype == CLIENT_METRICS:
            try:
                validate_client_metrics(name, all_configs)
            except ClientMetricsConfigError as e:
                raise ApiError(Errors.INVALID_REQUEST if e.invalid_request else Errors.INVALID_CONFIG, str(e)) from None
        else:
            raise ApiError(Errors.INVALID_REQUEST, f"Unknown resource type {RESOURCE_TYPE_NAMES.get(rtype, rtype)}")
        if not newly_created:
            self._check_exists(resource)

    @staticmethod
    def _validate_topic_name(name: str) -> None:
        if name == "":
            raise ApiError(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
        why = topic_name_error(name)
        if why is not None:
            raise ApiError(Errors.INVALID_TOPIC_EXCEPTION, why)

    @staticmethod
    def _validate_group_name(name: str) -> None:
        if name == "":
            raise ApiError(Errors.INVALID_REQUEST, "Default group resources are not allowed.")

    @staticmethod
    def _validate_broker_name(name: str) -> None:
        if name == "":
            return
        try:
            broker_id = int(name, 10)
            if not name.lstrip("-").isdigit():
                raise ValueError
        except ValueError:
            raise ApiError(Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.") from None
        if broker_id < 0:
            raise ApiError(Errors.INVALID_REQUEST, "Invalid negative broker ID.")

    def _check_exists(self, resource: Resource) -> None:
        rtype, name = resource
        view = self.ctl.view
        if rtype == BROKER and name != "":
            node = int(name)
            if view.broker(node) is None and node not in self.ctl.controller_ids():
                raise ApiError(Errors.BROKER_ID_NOT_REGISTERED, f"No node with id {node} found.")
        elif rtype == TOPIC and view.topic_id(name) is None:
            raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")

    def describe_validate(self, resource: Resource) -> None:
        rtype, name = resource
        if rtype == TOPIC:
            self._validate_topic_name(name)
        elif rtype == BROKER:
            self._validate_broker_name(name)
        elif rtype in (GROUP, CLIENT_METRICS):
            if rtype == GROUP:
                self._validate_group_name(name)
        else:
            raise ApiError(Errors.INVALID_REQUEST, f"Unknown resource type {RESOURCE_TYPE_NAMES.get(rtype, rtype)}")

    # ------------------------------------------------------------------ changes
    def _list_default(self, rtype: int, key: str) -> str | None:
        if rtype == TOPIC and key in TOPIC_CONFIGS:
            return TOPIC_CONFIGS[key].default
        return None

    def _splittable(self, rtype: int, key: str) -> bool:
        if rtype == TOPIC:
            d = TOPIC_CONFIGS.get(key)
            return d is not None and d.type == "LIST"
        return rtype == BROKER and key in BROKER_LIST_CONFIGS

    def _incremental(self, resource: Resource, ops: dict[str, tuple[int, str | None]], newly_created: bool,
                     out: list[Record], forwarded: bool = False) -> ApiError:
        rtype, name = resource
        current = self.ctl.view.config(rtype, name)
        new_records: list[Record] = []
        for key, (op, value) in ops.items():
            cur = current.get(key)
            new = cur
            if op == OP_SET:
                new = value
            elif op == OP_DELETE:
                new = None
            elif op in (OP_APPEND, OP_SUBTRACT):
                if not self._splittable(rtype, key):
                    return ApiError(Errors.INVALID_CONFIG,
                                    f"Can't {OP_NAMES[op]} to key {key} because its type is not LIST.")
                base = new if new is not None else self._list_default(rtype, key)
                parts = [p for p in (base or "").split(",") if p] if base is not None else []
                for v in (value or "").split(","):
                    if op == OP_APPEND:
                        if v not in parts:
                            parts.append(v)
                    elif v in parts:
                        parts.remove(v)
                new = ",".join(parts)
            else:
                return ApiError(Errors.INVALID_REQUEST, f"Unknown alter config operation {op}")
            if cur != new or rtype == BROKER:
                new_records.append((ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=new), 0))
        err = self._check_cordoned_log_dirs(resource, new_records, [], forwarded)
        if err is None:
            err = self._check(resource, new_records, [], newly_created)
        if err.code == Errors.NONE:
            out.extend(new_records)
        return err

    def _check(self, resource: Resource, altered: list[Record], deleted: list[Record],
               newly_created: bool) -> ApiError:
        rtype, name = resource
        refused = self._elr_min_isr_refusal(altered + deleted)
        if refused is not None:
            return refused
        all_configs: dict[str, str | None] = dict(self.ctl.view.config(rtype, name))
        for rec, _v in altered:
            if rec.value is None:
                all_configs.pop(rec.name, None)
            else:
                all_configs[rec.name] = rec.value
        for rec, _v in deleted:
            all_configs.pop(rec.name, None)
        try:
            self._validate(resource, all_configs, newly_created)
        except ApiError as e:
            return ApiError.from_throwable(e)
        return ApiError(Errors.NONE, None)

    def _check_cordoned_log_dirs(self, resource: Resource, altered: list[Record], deleted: list[Record],
                                 forwarded: bool) -> ApiError | None:
        """ConfigurationControlManager.validateAlterConfig's KIP-1066 checks of a broker's
        ``cordoned.log.dirs``: none below metadata.version 4.3-IV0; sent to the controller
        directly (not forwarded by a broker, which knows its directories), a new value must be
        a subset of the current one."""
        if resource[0] != BROKER:
            return None
        current = self.ctl.view.config(*resource).get(CORDONED_LOG_DIRS)
        for rec, _v in [*altered, *deleted]:
            if rec.name != CORDONED_LOG_DIRS:
                continue
            if not self.ctl.view.mv.is_cordoned_log_dirs_supported():
                return ApiError(Errors.INVALID_CONFIG, "The cordoned.log.dirs configuration value cannot be set "
                                                       "because it requires metadata.version >= 4.3-IV0")
            if not forwarded and rec.value is not None and rec.value.strip():
                have = _COMMA.split(current.strip()) if current is not None else []
                if not set(_COMMA.split(rec.value.strip())) <= set(have):
                    return ApiError(Errors.INVALID_CONFIG, "When updating cordoned.log.dirs via controllers,  the "
                                                           "new value must be a subset of the current configuration "
                                                           "value.")
        return None

    def topic_config_records(self, topic: str, configs: dict[str, str]) -> tuple[ApiError | None, list[Record]]:
        """The ConfigRecords of a topic being created (CreateTopics), or the error."""
        out: list[Record] = []
        err = self._incremental((TOPIC, topic), {k: (OP_SET, v) for k, v in configs.items()}, True, out)
        out.extend(self._clear_elr(out))
        return (err if err.code else None), out

    # ------------------------------------------------------------------ KIP-966
    def _elr_enabled(self) -> bool:
        return elr_enabled(self.ctl.view.image.features)

    def _clear_elr(self, records: list[Record]) -> list[Record]:
        """createClearElrRecordsAsNeeded: ClearElrRecords after min.insync.replicas changes."""
        return clear_elr_records(records) if self._elr_enabled() else []

    def _elr_min_isr_refusal(self, records: list[Record]) -> ApiError | None:
        """isDisallowedBrokerMinIsrTransition / isDisallowedClusterMinIsrTransition."""
        for m, _v in records:
            if m.name != MIN_INSYNC_REPLICAS or m.resource_type != BROKER or not self._elr_enabled():
                continue
            if m.resource_name != "":
                return ApiError(Errors.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR "
                                                       "is enabled.")
            if m.value is None:
                return ApiError(Errors.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while "
                                                       "ELR is enabled.")
        return None

    def incremental_alter_configs(self, changes: dict[Resource, dict[str, tuple[int, str | None]]],
                                  validate_only: bool, forwarded: bool = False
                                  ) -> ControllerResult[dict[Resource, ApiError]]:
        """``forwarded``: the request came from a broker (an Envelope)."""
        out: list[Record] = []
        results: dict[Resource, ApiError] = {}
        for resource, ops in changes.items():
            results[resource] = self._incremental(resource, ops, False, out, forwarded)
        out.extend(self._clear_elr(out))
        result = ControllerResult.atomic_of(out, results)
        return result.without_records() if validate_only else result

    def legacy_alter_configs(self, changes: dict[Resource, dict[str, str | None]],
                             validate_only: bool, forwarded: bool = False
                             ) -> ControllerResult[dict[Resource, ApiError]]:
        out: list[Record] = []
        results: dict[Resource, ApiError] = {}
        for resource, configs in changes.items():
            rtype, name = resource
            current = self.ctl.view.config(rtype, name)
            altered: list[Record] = [
                (ConfigRecord(resource_type=rtype, resource_name=name, name=k, value=v), 0)
                for k, v in configs.items() if current.get(k) != v or rtype == BROKER]
            deleted: list[Record] = [
                (ConfigRecord(resource_type=rtype, resource_name=name, name=k, value=None), 0)
                for k in current if k not in configs]
            err = self._check_cordoned_log_dirs(resource, altered, deleted, forwarded)
            if err is None:
                err = self._check(resource, altered, deleted, False)
            results[resource] = err
            if err.code == Errors.NONE:
                out.extend(altered)
                out.extend(deleted)
        out.extend(self._clear_elr(out))
        result = ControllerResult.atomic_of(out, results)
        return result.without_records() if validate_only else result

    def describe_configs(self, resources: dict[Resource, list[str]]) -> dict[Resource, Any]:
        """ConfigurationControlManager.describeConfigs: the stored dynamic configs (or an ApiError)."""
        out: dict[Resource, Any] = {}
        for resource, keys in resources.items():
            try:
                self.describe_validate(resource)
            except ApiError as e:
                out[resource] = e
                continue
            stored = self.ctl.view.config(*resource)
            out[resource] = {k: v for k, v in stored.items() if not keys or k in keys}
        return out
