"""Client quotas: Kafka's ClientQuotaControlManager.

An entity is a user, a client id, both, or an IP (``user``, ``client-id``, ``ip``; a null name
is the default entity). Its quotas are validated (known keys for the entity kind, positive,
integral where the key is an integer) and written as ClientQuotaRecords, only where they change.
"""

from __future__ import annotations

import ipaddress
import socket

from kraftnode.controller.context import ControllerContext
from kraftnode.controller.errors import ApiError
from kraftnode.controller.result import ControllerResult, Record
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import ClientQuotaRecord

__all__ = ["ClientQuotaControl", "Entity"]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
USER_AND_CLIENT_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG",
                        "request_percentage": "DOUBLE", "controller_mutation_rate": "DOUBLE"}
IP_KEYS = {"connection_creation_rate": "INT"}
LIMITS = {"SHORT": (32767, "a SHORT"), "INT": (2147483647, "an INT"), "LONG": (9223372036854775807, "a LONG")}

#: ((entity type, entity name or None), ...) in the request's order
Entity = tuple[tuple[str, str | None], ...]


def _valid_ip(name: str | None) -> bool:
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        try:
            socket.getaddrinfo(name, None)
            return True
        except OSError:
            return False


def _entity_text(entity: Entity) -> str:
    """ClientQuotaEntity.toString: ClientQuotaEntity(entries={user=alice})."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


class ClientQuotaControl:
    def __init__(self, ctl: ControllerContext) -> None:
        self.ctl = ctl

    def alter_client_quotas(self, alterations: list[tuple[Entity, list[tuple[str, float | None]]]],
                            validate_only: bool) -> ControllerResult[dict[Entity, ApiError]]:
        out: list[Record] = []
        results: dict[Entity, ApiError] = {}
        for entity, ops in alterations:
            wanted: dict[str, float | None] = {}
            for key, value in ops:
                if key in wanted:
                    results[entity] = ApiError(Errors.INVALID_REQUEST, f"Duplicate quota key {key} not updating "
                                                                       f"quota for this entity {_entity_text(entity)}")
                else:
                    wanted[key] = value
            if entity in results:
                results[entity] = ApiError(Errors.INVALID_REQUEST, f"Ignoring duplicate entity {_entity_text(entity)}")
                continue
            results[entity] = self._alter(entity, wanted, out)
        result = ControllerResult.atomic_of(out, results)
        return result.without_records() if validate_only else result

    def _alter(self, entity: Entity, wanted: dict[str, float | None], out: list[Record]) -> ApiError:
        if not entity:
            return ApiError(Errors.INVALID_REQUEST, "Invalid empty client quota entity")
        seen: dict[str, str | None] = {}
        for etype, ename in entity:
            if etype in seen:
                return ApiError(Errors.INVALID_REQUEST, f"Invalid client quota entity, duplicate entity entry {etype}")
            if etype not in (USER, CLIENT_ID, IP):
                return ApiError(Errors.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}")
            seen[etype] = ename
            if ename is not None and ename == "":
                return ApiError(Errors.INVALID_REQUEST, f"Empty {etype} not supported")
        if IP in seen:
            if USER in seen or CLIENT_ID in seen:
                return ApiError(Errors.INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be "
                                                        "combined with User or ClientId")
            if not _valid_ip(seen[IP]):
                return ApiError(Errors.INVALID_REQUEST, f"{seen[IP]} is not a valid IP or resolvable host.")
            keys = IP_KEYS
        else:
            keys = USER_AND_CLIENT_KEYS
        key_of_entity = tuple(sorted(seen.items(), key=lambda kv: kv[0]))
        current = {k: rec.value for k, (rec, _v) in self.ctl.view.image.client_quotas.get(key_of_entity, {}).items()}
        C = ClientQuotaRecord
        records: list[Record] = []
        for key, value in wanted.items():
            ents = [C.EntityData(entity_type=t, entity_name=n) for t, n in seen.items()]
            if value is None:
                if key in current:
                    records.append((C(entity=ents, key=key, value=0.0, remove=True), 0))
                continue
            err = self._validate(keys, key, value)
            if err is not None:
                return err
            if current.get(key) != value:
                records.append((C(entity=ents, key=key, value=float(value), remove=False), 0))
        out.extend(records)
        return ApiError(Errors.NONE, None)

    @staticmethod
    def _validate(keys: dict[str, str], key: str, value: float) -> ApiError | None:
        kind = keys.get(key)
        if kind is None:
            return ApiError(Errors.INVALID_REQUEST, f"Invalid configuration key {key}")
        if value <= 0.0:
            return ApiError(Errors.INVALID_REQUEST, f"Quota {key} must be greater than 0")
        if kind == "DOUBLE":
            return None
        limit, what = LIMITS[kind]
        if value > limit:
            return ApiError(Errors.INVALID_REQUEST, f"Proposed value for {key} is too large for {what}.")
        if abs(value % 1.0) > 1e-6:
            return ApiError(Errors.INVALID_REQUEST, f"{key} cannot be a fractional value.")
        return None
