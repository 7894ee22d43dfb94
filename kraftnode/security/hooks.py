"""Small glue between the node and the security modules (kept out of node.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kraftnode.log.metadata_log import MetadataLog
from kraftnode.metadata.state import MetadataState
from kraftnode.security import scram
from kraftnode.security.authorizer import AuthorizerConfig, StandardAuthorizer, from_config
from kraftnode.security.credentials import ScramCredentials, bootstrap_scram, scan_log_tail
from kraftnode.security.credentials import check_controller_login as check_login
from kraftnode.security.listeners import ListenerSecurity
from kraftnode.security.sasl import Authenticator


def scram_credentials(security: Mapping[str, ListenerSecurity], metadata_dir: str | Path,
                      image: MetadataState | None, mlog: MetadataLog) -> ScramCredentials | None:
    """The node's SCRAM credential store (security.credentials) when a SASL listener enables
    a SCRAM mechanism, else None.  Built at start-up, after ``image`` (the metadata image;
    None when the node's state machine is an application's) was loaded from the latest
    snapshot: the local log above it is read once here.  ValueError when
    ``bootstrap.checkpoint`` cannot be read."""
    if not any(sec.sasl is not None and any(m in scram.MECHANISMS for m in sec.sasl.mechanisms)
               for sec in security.values()):
        return None
    bootstrap = bootstrap_scram(metadata_dir)
    if image is None:   # the log holds an application's records, never SCRAM users
        return ScramCredentials(bootstrap)
    start, end = image.next_offset, mlog.end_offset
    tail = scan_log_tail(mlog.batches(start, end), start, end) if end > start else None
    return ScramCredentials(bootstrap, lambda: image, tail)


def check_controller_login(credentials: ScramCredentials | None, controller: ListenerSecurity | None,
                           metadata_dir: str | Path, voters: int, is_voter: bool) -> str | None:
    """security.credentials.check_controller_login for the controller listener's own SCRAM
    login (sasl.mechanism.controller.protocol); ConfigError, or a warning to log, or None."""
    if credentials is None or controller is None or controller.client_login is None:
        return None
    mechanism = controller.client_login[0]
    jaas_key = f"listener.name.{controller.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    return check_login(credentials, controller.client_login, jaas_key, metadata_dir, voters, is_voter)


def authenticator(sec: ListenerSecurity | None,
                  credentials: ScramCredentials | None) -> Callable[[str], Authenticator] | None:
    """The per-connection authenticator factory of a SASL listener; None otherwise."""
    if sec is None or sec.sasl is None:
        return None
    cfg = sec.sasl
    if credentials is not None:
        cfg.scram_lookup = credentials.lookup
    return lambda peer: Authenticator(cfg, peer)


def authorizer(config: AuthorizerConfig, duties: Any) -> StandardAuthorizer | None:
    """The StandardAuthorizer ``authorizer.class.name`` asks for, over the replayed ACLs."""
    if duties is None:
        return from_config(config, lambda: (0, {}))
    driver = duties.driver

    def loaded() -> bool:
        # replayed up to a high watermark learned from the quorum (0: not known yet)
        hw = driver.high_watermark
        return bool(hw > 0 and duties.state.next_offset >= hw)

    return from_config(config, lambda: (duties.state.acl_generation, duties.state.image.acls), loaded)
