"""ACL authorization as Kafka 3.9's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``.

Enabled by ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``.
The ACLs are the ``AccessControlEntryRecord``s of the replayed metadata log (the metadata
image, :mod:`kraftnode.metadata.state`), so they replicate and survive restarts and
snapshots.  The decision is ``StandardAuthorizerData.authorize``'s:

* a principal named in ``super.users`` (``;``-separated, e.g. ``User:admin;User:ctrl``)
  may do anything;
* otherwise the ACLs of the resource's type whose pattern covers the resource -- LITERAL
  with the same name, PREFIXED with a prefix of it, or the LITERAL wildcard ``*`` -- and
  whose principal is the caller's or ``User:*`` and whose host is the caller's address
  or ``*`` decide: any DENY wins, else any ALLOW allows; an ALLOW of READ, WRITE, DELETE
  or ALTER implies DESCRIBE, an ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALL
  matches every operation;
* no ACL at all for the resource: ``allow.everyone.if.no.acl.found`` (default false);
  ACLs for the resource but none matching the caller: denied.

The principal of a connection is Kafka's DefaultKafkaPrincipalBuilder's: ``User:ANONYMOUS``
on PLAINTEXT, ``User:<mapped certificate subject>`` on SSL (``ssl.principal.mapping.rules``;
``User:ANONYMOUS`` without a client certificate), ``User:<SASL user>`` on SASL_*.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kraftnode.errors import ConfigError, LocalError

log = logging.getLogger("kraftnode.authorizer")

AUTHORIZER_CLASS_KEY = "authorizer.class.name"
CONFIG_KEYS = (AUTHORIZER_CLASS_KEY, "super.users", "allow.everyone.if.no.acl.found")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# org.apache.kafka.common.resource.ResourceType codes
R_UNKNOWN, R_ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = range(8)
RESOURCE_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER",
                  5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"}
# SecurityUtils.resourceTypeName (the audit log's names)
_RESOURCE_AUDIT = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId",
                   6: "DelegationToken", 7: "User"}
# PatternType codes
P_UNKNOWN, P_ANY, MATCH, LITERAL, PREFIXED = range(5)
PATTERN_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
# AclOperation codes
(O_UNKNOWN, O_ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION,
 DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS) = range(15)
OPERATION_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE",
                   6: "DELETE", 7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION",
                   10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE",
                   13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}
# AclPermissionType codes
A_UNKNOWN, A_ANY, DENY, ALLOW = range(4)
PERMISSION_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}

_IMPLIES_DESCRIBE = frozenset((DESCRIBE, READ, WRITE, DELETE, ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((DESCRIBE_CONFIGS, ALTER_CONFIGS))

# AclEntry.supportedOperations: what authorized-operations bit sets are made of
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
              DESCRIBE),
}


@dataclass(frozen=True)
class Acl:
    """A StandardAcl: one ACL binding as the records hold it."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    @classmethod
    def from_record(cls, r: Any) -> Acl:
        return cls(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                   r.operation, r.permission_type)

    def __str__(self) -> str:  # StandardAcl.toString
        return (f"StandardAcl(resourceType={RESOURCE_NAMES.get(self.resource_type)}, "
                f"resourceName={self.resource_name}, "
                f"patternType={PATTERN_NAMES.get(self.pattern_type)}, principal={self.principal}, "
                f"host={self.host}, operation={OPERATION_NAMES.get(self.operation)}, "
                f"permissionType={PERMISSION_NAMES.get(self.permission)})")


@dataclass(frozen=True)
class Session:
    """Who sent the request being answered: Kafka's principal string and client address; the
    listener's security protocol and whether the request came in an Envelope (Kafka's
    ``RequestContext.securityProtocol`` and ``isForwarded``, for ``allowTokenRequests``)."""

    principal: str
    host: str
    protocol: str = "PLAINTEXT"
    forwarded: bool = False


ANONYMOUS = "User:ANONYMOUS"

#: The session of the connection whose request is being answered (set once per
#: connection by the network layer, after authentication).
CURRENT_SESSION: ContextVar[Session | None] = ContextVar("kraftnode_session", default=None)


def session() -> Session:
    return CURRENT_SESSION.get() or Session(ANONYMOUS, "127.0.0.1")


def host_of(peer: str) -> str:
    """The client address of ``host:port`` (IPv6 peers print as ``addr:port`` too)."""
    return peer.rsplit(":", 1)[0] if ":" in peer else peer


def _principal_key(text: str) -> tuple[str, str] | None:
    """SecurityUtils.parseKafkaPrincipal: ``Type:name``; None when there is no ``:``."""
    kind, sep, name = text.partition(":")
    return (kind, name) if sep and kind else None


def parse_super_users(text: str | None) -> frozenset[str]:
    """StandardAuthorizer.getConfiguredSuperUsers: ``;``-separated principals."""
    out = set()
    for v in (text or "").split(";"):
        v = v.strip()
        if not v:
            continue
        if _principal_key(v) is None:
            raise ConfigError(f"Invalid value {text!r} for configuration super.users: expected a "
                              f"string in format principalType:principalName but got {v}")
        out.add(v)
    return frozenset(out)


class AuthorizerNotReady(LocalError):
    """Kafka's AuthorizerNotReadyException: the ACLs are not loaded yet (a request of a
    principal other than a super user is answered with UNKNOWN_SERVER_ERROR)."""


class StandardAuthorizer:
    """``StandardAuthorizerData.authorize`` over the ACLs ``acls()`` returns.

    ``ready()`` is Kafka's ``loadingComplete``: until the node has replayed its metadata log
    up to the quorum's high watermark, the ACLs it holds may lack some (a DENY among them),
    so only super users are authorized; others get :class:`AuthorizerNotReady`."""

    def __init__(self, super_users: frozenset[str], allow_if_no_acl: bool,
                 acls: Callable[[], tuple[int, Mapping[uuid.UUID, Any]]],
                 ready: Callable[[], bool] = lambda: True) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._acls = acls
        self._ready = ready
        self._loaded = False

    def check_ready(self, s: Session) -> None:
        """Raise AuthorizerNotReady for a non-super user before the initial load completes."""
        if self._loaded or s.principal in self.super_users:
            return
        if not self._ready():
            raise AuthorizerNotReady()
        self._loaded = True
        log.info("Completed initial ACL load: %d acl(s).", len(self._acls()[1]))
        self._cache_key = -1
        self._by_type: dict[int, list[Acl]] = {}

    def bindings(self) -> dict[uuid.UUID, Acl]:
        _, records = self._acls()
        return {i: Acl.from_record(r[0]) for i, r in records.items()}

    def _index(self) -> dict[int, list[Acl]]:
        gen, records = self._acls()
        if gen != self._cache_key:
            by_type: dict[int, list[Acl]] = {}
            for rec, _v in records.values():
                a = Acl.from_record(rec)
                by_type.setdefault(a.resource_type, []).append(a)
            self._by_type, self._cache_key = by_type, gen
        return self._by_type

    def authorize(self, s: Session, resource_type: int, name: str, op: int, *,
                  api: str = "", log_if_denied: bool = True) -> bool:
        if s.principal in self.super_users:
            return True
        self.check_ready(s)
        me = _principal_key(s.principal)
        has_resource_acls = False
        allow: Acl | None = None
        deny: Acl | None = None
        for a in self._index().get(resource_type, ()):
            if a.pattern_type == LITERAL:
                if a.resource_name != name and a.resource_name != WILDCARD:
                    continue
            elif a.pattern_type == PREFIXED:
                if not name.startswith(a.resource_name):
                    continue
            else:
                continue
            has_resource_acls = True
            result = _find_result(op, me, s.host, a)
            if result == DENY:
                deny = a
                break
            if result == ALLOW:
                allow = a
        if deny is not None:
            ok, rule = False, f"MatchingAcl(acl={deny})"
        elif allow is not None:
            ok, rule = True, f"MatchingAcl(acl={allow})"
        elif has_resource_acls:
            ok, rule = False, "DefaultDeny"
        else:
            ok = self.allow_if_no_acl
            rule = "DefaultAllow" if ok else "DefaultDeny"
        if not ok and log_if_denied:
            # StandardAuthorizerData.logAuditMessage (Kafka's kafka.authorizer.logger, INFO)
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = "
                     "%s:LITERAL:%s for request = %s with resourceRefCount = 1 based on rule %s",
                     s.principal, OPERATION_NAMES.get(op), s.host,
                     _RESOURCE_AUDIT.get(resource_type, resource_type), name, api, rule)
        return ok

    def authorize_by_resource_type(self, s: Session, op: int, resource_type: int) -> bool:
        """Kafka's Authorizer.authorizeByResourceType (default method): may ``op`` be done
        on at least one resource of the type?"""
        if self.authorize(s, resource_type, "hardcode", op, log_if_denied=False):
            return True
        me = _principal_key(s.principal)
        deny: dict[int, set[str]] = {LITERAL: set(), PREFIXED: set()}
        allow: dict[int, set[str]] = {LITERAL: set(), PREFIXED: set()}
        for a in self._index().get(resource_type, ()):
            if a.host != s.host and a.host != WILDCARD:
                continue
            if _principal_key(a.principal) != me and a.principal != WILDCARD_PRINCIPAL:
                continue
            if a.operation != op and a.operation != ALL:
                continue
            if a.pattern_type not in (LITERAL, PREFIXED):
                continue
            if a.permission == DENY:
                if a.pattern_type == LITERAL and a.resource_name == WILDCARD:
                    return False
                deny[a.pattern_type].add(a.resource_name)
            elif a.permission == ALLOW:
                if a.pattern_type == LITERAL and a.resource_name == WILDCARD:
                    return True
                allow[a.pattern_type].add(a.resource_name)
        for kind in (LITERAL, PREFIXED):
            for name in allow[kind]:
                if kind == LITERAL and name in deny[LITERAL]:
                    continue
                if not any(name[:i] in deny[PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, s: Session, resource_type: int, name: str) -> int:
        """AuthHelper.authorizedOperations: the bit set of the supported operations allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(s, resource_type, name, op, log_if_denied=False):
                bits |= 1 << op
        return bits


def _find_result(op: int, me: tuple[str, str] | None, host: str, a: Acl) -> int | None:
    """StandardAuthorizerData.findResult: ALLOW, DENY or None (the ACL does not apply)."""
    if me is None:
        return None
    ap = _principal_key(a.principal)
    if ap != me and ap != ("User", WILDCARD):
        return None
    if a.host != WILDCARD and a.host != host:
        return None
    if a.operation != ALL:
        if a.permission == ALLOW:
            if op == DESCRIBE:
                if a.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == DESCRIBE_CONFIGS:
                if a.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != a.operation:
                return None
        elif op != a.operation:
            return None
    return ALLOW if a.permission == ALLOW else DENY


@dataclass(frozen=True)
class AuthorizerConfig:
    """The authorizer's keys, checked (:func:`authorizer_config`); filled from the key table by
    :func:`kraftnode.config.consumers.authorizer_config`.  An empty ``class_name``: no
    authorizer, every API allowed to every client."""

    class_name: str = ""                            # authorizer.class.name
    super_users: frozenset[str] = frozenset()       # super.users
    allow_everyone_if_no_acl_found: bool = False    # allow.everyone.if.no.acl.found


def authorizer_config(class_name: str, super_users: str | None, allow_everyone: bool) -> AuthorizerConfig:
    """Kafka's checks of the authorizer keys (ConfigError naming the key): only the
    StandardAuthorizer, and with it ``super.users`` as principals (unchecked without one)."""
    cls = class_name.strip()
    if not cls:
        return AuthorizerConfig()
    if cls != STANDARD_AUTHORIZER:
        raise ConfigError(f"Invalid value {cls!r} for configuration {AUTHORIZER_CLASS_KEY}: "
                          f"kraftnode provides only {STANDARD_AUTHORIZER}")
    return AuthorizerConfig(cls, parse_super_users(super_users), allow_everyone)


def _of_text(props: Mapping[str, str]) -> AuthorizerConfig:
    allow_text = (props.get("allow.everyone.if.no.acl.found") or "false").strip().lower()
    return authorizer_config(props.get(AUTHORIZER_CLASS_KEY) or "", props.get("super.users"),
                             allow_text == "true")


def from_config(config: AuthorizerConfig | Mapping[str, str],
                acls: Callable[[], tuple[int, Mapping[uuid.UUID, Any]]],
                ready: Callable[[], bool] = lambda: True) -> StandardAuthorizer | None:
    """The authorizer the configuration asks for (its keys as text: checked first); None
    without ``authorizer.class.name``."""
    cfg = config if isinstance(config, AuthorizerConfig) else _of_text(config)
    if not cfg.class_name:
        return None
    return StandardAuthorizer(cfg.super_users, cfg.allow_everyone_if_no_acl_found, acls, ready)


def check_config(props: Mapping[str, str]) -> None:
    """Start-up check of the authorizer keys as text (a ConfigError naming the key)."""
    _of_text(props)


# ------------------------------------------------------------------ filters (Describe/DeleteAcls)
def filter_matches(f: Any, a: Acl) -> bool:
    """AclBindingFilter.matches: ResourcePatternFilter and AccessControlEntryFilter."""
    rt, name, pt = f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter
    if rt != R_ANY and rt != a.resource_type:
        return False
    if pt not in (P_ANY, MATCH) and pt != a.pattern_type:
        return False
    if name is not None:
        if pt in (P_ANY, a.pattern_type):
            if name != a.resource_name:
                return False
        elif a.pattern_type == LITERAL:
            if name != a.resource_name and a.resource_name != WILDCARD:
                return False
        elif a.pattern_type == PREFIXED:
            if not name.startswith(a.resource_name):
                return False
        else:
            return False
    if f.principal_filter is not None and f.principal_filter != a.principal:
        return False
    if f.host_filter is not None and f.host_filter != a.host:
        return False
    if f.operation != O_ANY and f.operation != a.operation:
        return False
    return bool(f.permission_type == A_ANY or f.permission_type == a.permission)


def unknown_elements(items: Iterable[Any]) -> bool:
    """True if a request names the UNKNOWN code (0) of a resource type, pattern type,
    operation or permission: Kafka's Create/Describe/DeleteAclsRequest constructors throw,
    and the server closes the connection. They compare the *raw* code with UNKNOWN's only; a
    code Kafka does not know is read later by ``fromCode`` as UNKNOWN, so here it becomes 0
    (in place), and the request is answered as Kafka answers it (SECURITY_DISABLED without an
    authorizer, INVALID_REQUEST for such a creation, no match for such a filter)."""
    found = False
    for x in items:
        for names, attrs in ((RESOURCE_NAMES, ("resource_type", "resource_type_filter")),
                             (PATTERN_NAMES, ("resource_pattern_type", "pattern_type_filter")),
                             (OPERATION_NAMES, ("operation",)), (PERMISSION_NAMES, ("permission_type",))):
            attr = next(a for a in attrs if hasattr(x, a))
            code = getattr(x, attr)
            if code == 0:
                found = True
            elif code not in names:
                setattr(x, attr, 0)
    return found
