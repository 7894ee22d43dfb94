"""Start-up: each listener's security, built and checked from ``server.properties``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kraftnode.errors import ConfigError
from kraftnode.security import sasl, tls
from kraftnode.security.listeners import (
    ListenerProps,
    ListenerSecurity,
    SecurityProtocol,
    protocol_map,
)


def build(props: Mapping[str, str], listener_names: Sequence[str],
          controller_names: Sequence[str]) -> dict[str, ListenerSecurity]:
    """Listener name -> its security; a :class:`ConfigError` naming the key if anything is wrong."""
    out: dict[str, ListenerSecurity] = {}
    for name, proto in protocol_map(props, listener_names, controller_names).items():
        lp = ListenerProps(name, props)
        listener_sasl = sasl.listener_sasl(lp) if proto.uses_sasl else None
        ctx = tls.server_context(lp, proto.uses_sasl) if proto.uses_tls else None
        mapper = tls.PrincipalMapper(lp.get("ssl.principal.mapping.rules"),
                                     lp.key("ssl.principal.mapping.rules")) if ctx is not None else None
        client = tls.client_context(lp) if proto.uses_tls and controller_names \
            and name == controller_names[0].upper() else None
        login = None
        if proto.uses_sasl and controller_names and name == controller_names[0].upper():
            mech = (props.get("sasl.mechanism.controller.protocol") or "GSSAPI").strip().upper()
            if mech not in sasl.SUPPORTED:
                raise ConfigError(f"Invalid value {mech!r} for configuration "
                                  "sasl.mechanism.controller.protocol: kraftnode supports "
                                  f"{', '.join(sasl.SUPPORTED)}")
            login = (mech, *sasl.client_login(lp, mech))
        out[name] = ListenerSecurity(name, proto, ctx, mapper, client, listener_sasl, login)
    return out


def plaintext(listener_names: Sequence[str]) -> dict[str, ListenerSecurity]:
    return {n: ListenerSecurity(n, SecurityProtocol.PLAINTEXT) for n in listener_names}
