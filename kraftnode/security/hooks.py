"""Small glue between the node and the security modules (kept out of node.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kraftnode.security import scram
from kraftnode.security.authorizer import StandardAuthorizer, from_config
from kraftnode.security.listeners import ListenerSecurity
from kraftnode.security.sasl import Authenticator


def scram_lookup(duties: Any) -> Callable[[str, str], scram.ScramCredential | None]:
    """SCRAM credentials from the replayed metadata log (UserScramCredentialRecord)."""

    def lookup(mechanism: str, name: str) -> scram.ScramCredential | None:
        if duties is None:
            return None
        rec = duties.state.scram.get((name, scram.MECHANISMS[mechanism][0]))
        if rec is None:
            return None
        return scram.ScramCredential(bytes(rec.salt), bytes(rec.stored_key), bytes(rec.server_key),
                                     rec.iterations)

    return lookup


def authenticator(sec: ListenerSecurity | None, duties: Any) -> Callable[[str], Authenticator] | None:
    """The per-connection authenticator factory of a SASL listener; None otherwise."""
    if sec is None or sec.sasl is None:
        return None
    cfg = sec.sasl
    cfg.scram_lookup = scram_lookup(duties)
    return lambda peer: Authenticator(cfg, peer)


def authorizer(props: Mapping[str, str], duties: Any) -> StandardAuthorizer | None:
    """The StandardAuthorizer ``authorizer.class.name`` asks for, over the replayed ACLs."""
    if duties is None:
        return from_config(props, lambda: (0, {}))
    driver = duties.driver

    def loaded() -> bool:
        # replayed up to a high watermark learned from the quorum (0: not known yet)
        hw = driver.high_watermark
        return bool(hw > 0 and duties.state.next_offset >= hw)

    return from_config(props, lambda: (duties.state.acl_generation, duties.state.image.acls), loaded)
