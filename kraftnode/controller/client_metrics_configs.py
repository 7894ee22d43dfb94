"""Client metrics subscriptions (KIP-714: ``kafka-client-metrics.sh``, resource type
CLIENT_METRICS = 16): Kafka 4.4's ``ClientMetricsConfigs.validate``, as the controller's
``ControllerConfigurationValidator`` runs it before writing the ConfigRecords.

A subscription has a name (not empty), and three keys: ``metrics`` (a list of metric name
prefixes, ``*`` for all), ``interval.ms`` (100 to 3600000) and ``match`` (a list of
``selector=regex``, the selectors those of ``ALLOWED_MATCH_PARAMS``). Brokers read the
subscriptions from the metadata and push them to clients (GetTelemetrySubscriptions). The
``match`` regexes are Java regexes; kraftnode checks their shape (``selector=regex``), not
their Java syntax (docs/controller.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from kraftnode.errors import RemoteError

__all__ = ["CLIENT_METRICS_CONFIGS", "ClientMetricsConfigError", "validate_client_metrics"]

#: ClientMetricsConfigs.CONFIG: name -> type
CLIENT_METRICS_CONFIGS = {"metrics": "LIST", "interval.ms": "INT", "match": "LIST"}
MATCH_SELECTORS = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                             "client_source_address", "client_source_port"})


class ClientMetricsConfigError(RemoteError, ValueError):
    """Refused as Kafka refuses it: ``invalid_request`` says whether Kafka's exception is an
    InvalidRequestException (INVALID_REQUEST) rather than a configuration one (INVALID_CONFIG)."""

    def __init__(self, message: str, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def validate_client_metrics(name: str, configs: Mapping[str, str | None]) -> None:
    """ControllerConfigurationValidator's CLIENT_METRICS case: null values, then
    ClientMetricsConfigs.validate(name, configs)."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise ClientMetricsConfigError("Null value not supported for client metrics configs: " + ",".join(nulls))
    if name == "":
        raise ClientMetricsConfigError("Subscription name can't be empty", invalid_request=True)
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise ClientMetricsConfigError(f"Unknown client metrics configuration: {key}")
    interval = configs.get("interval.ms")
    if interval is not None:
        try:
            ms = int(interval.strip())
        except ValueError:
            raise ClientMetricsConfigError(f"Invalid value {interval} for configuration interval.ms: Not a number "
                                           f"of type INT") from None
        if not 100 <= ms <= 3_600_000:
            raise ClientMetricsConfigError(f"Invalid value {ms} for interval.ms, interval must be between 100 and "
                                           f"3600000 (1 hour)", invalid_request=True)
    match = configs.get("match")
    if match is not None and match.strip():
        for pattern in (p.strip() for p in match.split(",")):
            parts = pattern.split("=")
            while parts and parts[-1] == "":  # String.split drops trailing empty strings
                parts.pop()
            if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
                raise ClientMetricsConfigError(f"Illegal client matching pattern: {pattern}")
