"""SASL on a listener as Kafka 3.9's SaslServerAuthenticator serves it.

A connection on a SASL_PLAINTEXT / SASL_SSL listener may send ApiVersions (once) and
must then send SaslHandshake (v0 or v1).  Any other API before authentication closes the
connection ("Unexpected Kafka request of type X during SASL handshake.").  A mechanism
not in ``sasl.enabled.mechanisms`` gets UNSUPPORTED_SASL_MECHANISM with the enabled list,
then the connection is closed.  After SaslHandshake v1 the tokens come in SaslAuthenticate
requests (v0-2); after v0 they are raw size-prefixed tokens.  A failed authentication is
answered SASL_AUTHENTICATION_FAILED with Kafka's message and the connection closed.

Mechanisms: PLAIN (users from the listener's JAAS ``user_<name>="<password>"`` options in
``listener.name.<l>.plain.sasl.jaas.config``) and SCRAM-SHA-256/512 (UserScramCredentialRecords
of the metadata log, or of bootstrap.checkpoint while the log is empty: security.credentials).  ``connections.max.reauth.ms`` is not
supported: sessions do not expire (session_lifetime_ms 0, Kafka's default).
"""

from __future__ import annotations

import hmac
import logging
import re
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kraftnode.errors import ConfigError, RemoteError
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.framing import encode_response, parse_request
from kraftnode.protocol.generated import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kraftnode.protocol.registry import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, SERVED
from kraftnode.security import scram
from kraftnode.security.listeners import ListenerProps

log = logging.getLogger("kraftnode.security")

_I32 = struct.Struct(">i")
_HH = struct.Struct(">hh")
SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_API_NAMES = {spec.key: spec.name for spec in SERVED.values()}


# ------------------------------------------------------------------ JAAS
@dataclass(frozen=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str]


_JAAS_TOKEN = re.compile(r'\s*(?:([A-Za-z0-9_.$-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))|([A-Za-z0-9_.$]+)|(;))')


def parse_jaas(text: str, key: str) -> JaasEntry:
    """One ``sasl.jaas.config`` value: ``LoginModule flag key="value" ... ;``."""
    pos = 0
    words: list[str] = []
    options: dict[str, str] = {}
    ended = False
    text = text.strip()
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if m is None or ended:
            raise ConfigError(f"Invalid value [hidden] for configuration {key}: JAAS config entry "
                              f"not terminated by semi-colon or malformed near position {pos}")
        if m.group(1):
            options[m.group(1)] = (m.group(2) if m.group(2) is not None else m.group(3)).replace('\\"', '"')
        elif m.group(4):
            words.append(m.group(4))
        else:
            ended = True
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if not ended or len(words) != 2 or words[1].lower() not in ("required", "requisite", "sufficient",
                                                                  "optional"):
        raise ConfigError(f"Invalid value [hidden] for configuration {key}: expected "
                          "'<LoginModule> required key=\"value\" ...;'")
    return JaasEntry(words[0], words[1].lower(), options)


# ------------------------------------------------------------------ mechanisms
class SaslFailure(RemoteError):
    """Authentication failed; ``str`` is the message sent to the client."""


class PlainServer:
    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.username = ""

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authz, user, password = parts
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self.users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authz and authz != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is "
                              "different from username")
        self.username = user
        self.complete = True
        return b""


ScramLookup = Callable[[str, str], scram.ScramCredential | None]


@dataclass
class ListenerSasl:
    """A SASL listener's mechanisms and where their credentials come from."""

    listener: str
    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)
    scram_lookup: ScramLookup = lambda mech, name: None   # noqa: E731 - replaced at start-up

    def server(self, mechanism: str) -> Any:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return scram.ScramServer(mechanism, lambda m, n: self.scram_lookup(m, n))


def listener_sasl(lp: ListenerProps) -> ListenerSasl:
    """Read and check a SASL listener's keys (start-up)."""
    key = lp.key("sasl.enabled.mechanisms")
    mechs = [m.upper() for m in lp.get_list("sasl.enabled.mechanisms", "GSSAPI")]
    if not mechs:
        raise ConfigError(f"Invalid value '' for configuration {key}: no SASL mechanism enabled")
    for m in mechs:
        if m not in SUPPORTED:
            raise ConfigError(f"Invalid value {','.join(mechs)!r} for configuration {key}: SASL mechanism "
                              f"{m} is not supported by kraftnode (supported: {', '.join(SUPPORTED)})")
    out = ListenerSasl(lp.name, mechs)
    for m in mechs:
        jkey = f"{lp.prefix}{m.lower()}.sasl.jaas.config"
        text = lp.props.get(jkey)
        if text is None:
            raise ConfigError(f"Missing required configuration {jkey}: listener {lp.name} enables SASL "
                              f"mechanism {m} (kraftnode reads no JAAS file)")
        entry = parse_jaas(text, jkey)
        if m == "PLAIN":
            if entry.module != "org.apache.kafka.common.security.plain.PlainLoginModule":
                raise ConfigError(f"Invalid value [hidden] for configuration {jkey}: expected "
                                  "org.apache.kafka.common.security.plain.PlainLoginModule")
            out.plain_users = {k[5:]: v for k, v in entry.options.items() if k.startswith("user_")}
        elif entry.module != "org.apache.kafka.common.security.scram.ScramLoginModule":
            raise ConfigError(f"Invalid value [hidden] for configuration {jkey}: expected "
                              "org.apache.kafka.common.security.scram.ScramLoginModule")
    return out


def client_login(lp: ListenerProps, mechanism: str) -> tuple[str, str]:
    """(username, password) from the listener's JAAS entry for ``mechanism``: the login the
    node uses towards other voters (sasl.mechanism.controller.protocol)."""
    jkey = f"{lp.prefix}{mechanism.lower()}.sasl.jaas.config"
    text = lp.props.get(jkey)
    if text is None:
        raise ConfigError(f"Missing required configuration {jkey}: the controller listener logs in "
                          f"to other voters with {mechanism}")
    return jaas_credentials(text, jkey, " for the controller's own login")


def jaas_credentials(text: str, key: str, purpose: str = "") -> tuple[str, str]:
    """(username, password) of a client login's JAAS entry (``key`` holds ``text``)."""
    entry = parse_jaas(text, key)
    user, password = entry.options.get("username"), entry.options.get("password")
    if not user or password is None:
        raise ConfigError(f"Invalid value [hidden] for configuration {key}: username and password "
                          f"are required{purpose}")
    return user, password


# ------------------------------------------------------------------ per connection
Handler = Callable[[Any, str], Awaitable[Any]]


class Authenticator:
    """One connection's SASL exchange.  ``on_frame`` returns the bytes to send and whether
    the connection stays open; once ``complete``, frames go to the node's handlers."""

    def __init__(self, cfg: ListenerSasl, peer: str) -> None:
        self.cfg = cfg
        self.peer = peer
        self.state = "handshake_or_versions"
        self.headers = True           # SaslHandshake v1: tokens in SaslAuthenticate requests
        self.mechanism = ""
        self.server: Any = None
        self.complete = False
        self.principal = "User:ANONYMOUS"

    def _close(self, why: str) -> tuple[list[bytes], bool]:
        log.warning("closing connection from %s on listener %s: %s", self.peer, self.cfg.listener, why)
        return [], False

    async def on_frame(self, frame: bytes, handler: Handler) -> tuple[list[bytes], bool]:
        if self.state == "authenticate" and not self.headers:
            return self._raw_token(frame)
        if len(frame) < 4:
            return self._close("request too short for a header")
        api_key, version = _HH.unpack_from(frame, 0)
        if self.state in ("handshake_or_versions", "handshake"):
            if api_key not in (API_VERSIONS, SASL_HANDSHAKE):
                return self._close(f"Unexpected Kafka request of type {_API_NAMES.get(api_key, api_key)} "
                                   "during SASL handshake.")
            request = parse_request(frame)
            if api_key == API_VERSIONS:
                if self.state != "handshake_or_versions":
                    return self._close("Unexpected ApiVersions request received during SASL "
                                       f"authentication state {self.state}")
                reply = await handler(request, self.peer)
                self.state = "handshake"
                return [encode_response(request.spec, version, request.correlation_id,
                                        reply.body, reply.version)], True
            body: Any = request.body
            mech = body.mechanism
            self.headers = version >= 1
            enabled = list(self.cfg.mechanisms)
            if mech not in enabled:
                resp = SaslHandshakeResponse(error_code=Errors.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
                log.warning("closing connection from %s on listener %s: Unsupported SASL mechanism %s "
                            "(enabled: %s)", self.peer, self.cfg.listener, mech, ", ".join(enabled))
                return [encode_response(request.spec, version, request.correlation_id, resp)], False
            self.mechanism = mech
            self.server = self.cfg.server(mech)
            self.state = "authenticate"
            resp = SaslHandshakeResponse(error_code=0, mechanisms=enabled)
            return [encode_response(request.spec, version, request.correlation_id, resp)], True
        # authenticate, with Kafka headers
        if api_key != SASL_AUTHENTICATE:
            return self._close(f"Unexpected Kafka request of type {_API_NAMES.get(api_key, api_key)} "
                               "during SASL authentication.")
        request = parse_request(frame)
        spec = request.spec
        try:
            auth_body: Any = request.body
            out = self.server.evaluate(bytes(auth_body.auth_bytes))
        except (SaslFailure, scram.ScramError) as e:
            msg = str(e) if isinstance(e, SaslFailure) or "authorization id" in str(e) else (
                "Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {self.mechanism}")
            log.warning("authentication of %s on listener %s with %s failed: %s; closing the connection",
                        self.peer, self.cfg.listener, self.mechanism, e)
            failed = SaslAuthenticateResponse(error_code=Errors.SASL_AUTHENTICATION_FAILED,
                                              error_message=msg, auth_bytes=b"", session_lifetime_ms=0)
            return [encode_response(spec, version, request.correlation_id, failed)], False
        ok = SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=out,
                                        session_lifetime_ms=0)
        self._maybe_done()
        return [encode_response(spec, version, request.correlation_id, ok)], True

    def _raw_token(self, frame: bytes) -> tuple[list[bytes], bool]:
        """After SaslHandshake v0: a bare token, answered with a bare size-prefixed token."""
        try:
            out = self.server.evaluate(frame)
        except (SaslFailure, scram.ScramError) as e:
            return self._close(f"authentication with {self.mechanism} failed: {e}")
        self._maybe_done()
        return [_I32.pack(len(out)) + out], True

    def _maybe_done(self) -> None:
        if self.server.complete:
            self.complete = True
            self.state = "complete"
            self.principal = f"User:{self.server.username}"
            log.info("%s authenticated as %s with %s on listener %s", self.peer, self.principal,
                     self.mechanism, self.cfg.listener)


# ------------------------------------------------------------------ client side (raft peers)
async def client_authenticate(request_at: Callable[[int, int, Any, float], Awaitable[Any]],
                              login: tuple[str, str, str], timeout_s: float, node: str) -> None:
    """Log in on a fresh connection as Kafka's SaslClientAuthenticator does (SaslHandshake v1,
    then SaslAuthenticate v2); raises PermissionError with the server's message on refusal."""
    mechanism, user, password = login
    hs = await request_at(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism), timeout_s)
    if hs.error_code != 0:
        raise PermissionError(f"{node}: SaslHandshake for {mechanism} failed with error "
                              f"{Errors(hs.error_code).name} (enabled: {', '.join(hs.mechanisms)})")

    async def step(token: bytes) -> bytes:
        r = await request_at(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token), timeout_s)
        if r.error_code != 0:
            raise PermissionError(f"{node}: {Errors(r.error_code).name}: {r.error_message}")
        return bytes(r.auth_bytes)

    if mechanism == "PLAIN":
        await step(b"\0" + user.encode() + b"\0" + password.encode())
        return
    client = scram.ScramClient(mechanism, user, password)
    server_first = await step(client.first())
    try:
        client.verify(await step(client.final(server_first)))
    except scram.ScramError as e:
        raise PermissionError(f"{node}: {e}") from None
