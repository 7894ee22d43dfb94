"""Which security protocol each listener speaks, and its configuration as Kafka resolves it.

Kafka 3.9 (``KafkaConfig.effectiveListenerSecurityProtocolMap``): the map comes from
``listener.security.protocol.map`` (default ``PLAINTEXT:PLAINTEXT,SSL:SSL,
SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL``).  When the map is *not* set explicitly
and no listener or controller listener is named SSL or SASL_*, every controller
listener not in the map is PLAINTEXT -- the reason a plain ``CONTROLLER://`` works
without a map.  A listener with no protocol is refused at start-up.

A listener's value of ``key`` is ``listener.name.<listener in lower case>.<key>`` when
set, else ``key`` (``KafkaConfig.valuesWithPrefixOverride`` with the listener's
``ListenerName.configPrefix``).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kraftnode.errors import ConfigError


class SecurityProtocol(IntEnum):
    """Kafka's SecurityProtocol ids (as in ControllerRegistration and RegisterBroker)."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


MAP_KEY = "listener.security.protocol.map"
DEFAULT_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
_SSL_OR_SASL = {"SSL", "SASL_SSL", "SASL_PLAINTEXT"}

def _protocol(entry: str, text: str) -> SecurityProtocol:
    try:
        return SecurityProtocol[text.strip().upper()]
    except KeyError:
        raise ConfigError(f"Invalid value {entry!r} for configuration {MAP_KEY}: No enum constant "
                          f"org.apache.kafka.common.security.auth.SecurityProtocol.{text.strip()}") from None


def protocol_map(props: Mapping[str, str], listener_names: Iterable[str],
                 controller_names: Iterable[str]) -> dict[str, SecurityProtocol]:
    """Listener name (upper case) -> protocol, for every name in ``listener_names``."""
    explicit = MAP_KEY in props
    text = props.get(MAP_KEY, DEFAULT_MAP) if explicit else DEFAULT_MAP
    out: dict[str, SecurityProtocol] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, proto = entry.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"Invalid value {entry!r} for configuration {MAP_KEY}: "
                              "expected LISTENER_NAME:SECURITY_PROTOCOL")
        out[name.strip().upper()] = _protocol(entry, proto)
    names = [n.upper() for n in listener_names]
    ctrl = [n.upper() for n in controller_names]
    if not explicit and not any(n in _SSL_OR_SASL for n in (*names, *ctrl)):
        for n in ctrl:
            out.setdefault(n, SecurityProtocol.PLAINTEXT)
    missing = [n for n in names if n not in out]
    if missing:
        raise ConfigError(f"Invalid value {text!r} for configuration {MAP_KEY}: "
                          f"No security protocol defined for listener {missing[0]}")
    return {n: out[n] for n in names}


@dataclass(frozen=True)
class ListenerProps:
    """One listener's view of the configuration: listener-prefixed keys win."""

    name: str
    props: Mapping[str, str] = field(repr=False)

    @property
    def prefix(self) -> str:
        return f"listener.name.{self.name.lower()}."

    def key(self, key: str) -> str:
        """The key actually holding ``key``'s value for this listener (for messages)."""
        prefixed = self.prefix + key
        return prefixed if prefixed in self.props else key

    def get(self, key: str, default: str | None = None) -> str | None:
        v = self.props.get(self.prefix + key)
        if v is None:
            v = self.props.get(key)
        return default if v is None else v.strip()

    def get_list(self, key: str, default: str = "") -> list[str]:
        text = self.get(key, default) or ""
        return [p.strip() for p in text.split(",") if p.strip()]


@dataclass(frozen=True)
class ListenerSecurity:
    """A listener's protocol and what it needs at run time (built and checked at start-up)."""

    name: str
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None = None
    #: client-certificate DN -> principal name (ssl.principal.mapping.rules); None: no TLS
    principal_mapper: object | None = None
    #: for the default controller listener: the TLS context raft connections to the other
    #: voters use (Kafka's KafkaRaftManager builds its client from that listener's config)
    client_ssl_context: ssl.SSLContext | None = None
    #: a SASL listener's mechanisms and credentials (security.sasl.ListenerSasl)
    sasl: Any = None
    #: for the default controller listener over SASL: (mechanism, username, password) the
    #: node logs in to other voters with (sasl.mechanism.controller.protocol + JAAS)
    client_login: tuple[str, str, str] | None = None


#: The listener the request being answered came in on (set per request by
#: :class:`OnListener`): Metadata and DescribeCluster list endpoints on that listener, as
#: Kafka answers with the endpoints of the request's listener.
CURRENT_LISTENER: ContextVar[str | None] = ContextVar("kraftnode_listener", default=None)


class OnListener:
    """The request handler of one listener: records which listener a request came in on."""

    __slots__ = ("handler", "name")

    def __init__(self, handler: Callable[[Any, str], Awaitable[Any]], name: str) -> None:
        self.handler = handler
        self.name = name

    async def __call__(self, request: Any, peer: str) -> Any:
        CURRENT_LISTENER.set(self.name)
        return await self.handler(request, peer)

    def fast(self, request: Any, peer: str, done: Callable[[Callable[[], Any]], None]) -> bool:
        """The handler's synchronous path for raft replica Fetches (``NodeHandlers.fast``),
        when it has one: those answers do not depend on the listener they came in on."""
        inner = getattr(self.handler, "fast", None)
        return bool(inner is not None and inner(request, peer, done))
