"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks it.

Credentials are Kafka's ``UserScramCredentialRecord``: salt, stored key, server key and
iterations per (user, mechanism) -- never the password.  ``credential`` derives them from
a password as ``kafka-storage.sh format --add-scram`` and AlterUserScramCredentials do.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraftnode.errors import LocalError, RemoteError
from kraftnode.protocol.generated.metadata import UserScramCredentialRecord

#: mechanism name -> (Kafka's ScramMechanism type id, hash name)
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MECHANISM_BY_TYPE = {t: name for name, (t, _h) in MECHANISMS.items()}
MIN_ITERATIONS = 4096      # ScramMechanism.minIterations
MAX_ITERATIONS = 16384     # ScramMechanism.maxIterations (ScramFormatter / StorageTool bound)
DEFAULT_ITERATIONS = 4096


class ScramError(RemoteError):
    """The exchange failed; ``str`` is Kafka's message (logged, not sent for credentials)."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def secure_random_string() -> str:
    """As Kafka's ScramFormatter.secureRandomString: a 130-bit number in base 36."""
    n = int.from_bytes(os.urandom(17), "big") >> 6
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def credential(mechanism: str, password: str, salt: bytes | None = None,
               iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    h = MECHANISMS[mechanism][1]
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations)
    client_key = _hmac(h, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(h, client_key).digest(),
                           _hmac(h, salted, b"Server Key"), iterations)


def _attrs(msg: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"Invalid SCRAM message attribute {part[:20]!r}")
        out.setdefault(part[0], part[2:])
    return out


def _saslname(s: str) -> str:
    if "=" in s.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username")
    return s.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One server-side exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self.hash = MECHANISMS[mechanism][1]
        self.lookup = lookup
        self.state = "first"
        self.complete = False
        self.username = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        if self.state == "first":
            return self._first(text)
        if self.state == "final":
            return self._final(text)
        raise ScramError(f"Unexpected challenge in Sasl server state {self.state}")

    def _first(self, text: str) -> bytes:
        # gs2-header: cbind-flag "," [ authzid ] ","  then client-first-message-bare
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] != "n" or (parts[1] and not parts[1].startswith("a=")):
            raise ScramError("Invalid SCRAM client first message")
        self.gs2_header = f"{parts[0]},{parts[1]},"
        self.client_first_bare = parts[2]
        a = _attrs(parts[2])
        if "n" not in a or "r" not in a or not a["r"]:
            raise ScramError("Invalid SCRAM client first message")
        self.username = _saslname(a["n"])
        authzid = _saslname(parts[1][2:]) if parts[1] else ""
        cred = self.lookup(self.mechanism, self.username)
        if cred is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        if authzid and authzid != self.username:
            raise ScramError("Authentication failed: Client requested an authorization id that is "
                             "different from username")
        if cred.iterations < MIN_ITERATIONS:
            raise ScramError(f"Iterations {cred.iterations} is less than the minimum "
                             f"{MIN_ITERATIONS} for {self.mechanism}")
        self.cred = cred
        self.nonce = a["r"] + secure_random_string()
        self.server_first = (f"r={self.nonce},s={base64.b64encode(cred.salt).decode()},"
                             f"i={cred.iterations}")
        self.state = "final"
        return self.server_first.encode()

    def _final(self, text: str) -> bytes:
        self.state = "failed"
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("Authentication failed: Invalid client final message")
        a = _attrs(without_proof)
        # Kafka's ScramSaslServer checks endsWith, not equality (librdkafka 2.0 repeats the
        # client nonce in front)
        if not a.get("r", "").endswith(self.nonce):
            raise ScramError("Invalid client nonce in the final client message.")
        if "c" not in a:   # Kafka parses the channel binding but does not compare it
            raise ScramError("Authentication failed: Invalid client final message")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("Authentication failed: Invalid client final message") from None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        client_signature = _hmac(self.hash, self.cred.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(x ^ y for x, y in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), self.cred.stored_key):
            raise ScramError("Invalid client credentials")
        self.state = "complete"
        self.complete = True
        sig = _hmac(self.hash, self.cred.server_key, auth_message)
        return f"v={base64.b64encode(sig).decode()}".encode()


class ScramClient:
    """The client side (raft peers logging in with SCRAM)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.hash = MECHANISMS[mechanism][1]
        self.username = username
        self.password = password
        self.nonce = base64.b64encode(os.urandom(24)).decode()
        self.bare = f"n={username.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"

    def first(self) -> bytes:
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        sf = server_first.decode()
        a = _attrs(sf)
        if not a.get("r", "").startswith(self.nonce):
            raise ScramError("Invalid server nonce")
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), base64.b64decode(a["s"]),
                                     int(a["i"]))
        client_key = _hmac(self.hash, salted, b"Client Key")
        stored = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={a['r']}"
        auth_message = f"{self.bare},{sf},{without_proof}".encode()
        sig = _hmac(self.hash, stored, auth_message)
        proof = bytes(x ^ y for x, y in zip(client_key, sig, strict=True))
        self.expected = _hmac(self.hash, _hmac(self.hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        a = _attrs(server_final.decode())
        if "e" in a:
            raise ScramError(f"SCRAM server error: {a['e']}")
        if base64.b64decode(a.get("v", "")) != self.expected:
            raise ScramError("Invalid server signature")


# ------------------------------------------------------------------ kafka-storage.sh --add-scram
class ScramArgumentError(LocalError, ValueError):
    """A bad --add-scram argument; the message is Kafka's (ScramParser)."""


def _component(text: str) -> tuple[str, str]:
    i = text.find("=")
    if i < 0:
        raise ScramArgumentError(f"No equals sign found in SCRAM component: {text}")
    value = text[i + 1:]
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return text[:i], value


def parse_add_scram(argument: str) -> Any:
    """One ``--add-scram`` argument as Kafka 3.9's ScramParser reads it -> UserScramCredentialRecord."""
    text = argument.strip()
    eq = text.find("=")
    if eq < 0:
        raise ScramArgumentError(f"Failed to find equals sign in SCRAM argument '{text}'")
    mech, config = text[:eq], text[eq + 1:]
    if mech not in MECHANISMS:
        raise ScramArgumentError(f"The add-scram mechanism {mech} is not supported.")
    if not config.startswith("["):
        raise ScramArgumentError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ScramArgumentError("Expected configuration string to end with ]")
    comps = dict(_component(c) for c in config[1:-1].split(","))
    name = comps.pop("name", None)
    if name is None:
        raise ScramArgumentError("You must supply 'name' to add-scram")
    salt_s = comps.pop("salt", None)
    try:
        salt = base64.b64decode(salt_s, validate=True) if salt_s is not None else os.urandom(32)
    except ValueError:
        raise ScramArgumentError(f"Failed to decode given salt: {salt_s}") from None
    it_s = comps.pop("iterations", None)
    try:
        iterations = int(it_s) if it_s is not None else DEFAULT_ITERATIONS
    except ValueError:
        raise ScramArgumentError(f"Failed to parse iterations count: {it_s}") from None
    password = comps.pop("password", None)
    salted_s = comps.pop("saltedpassword", None)
    salted: bytes | None = None
    if password is None:
        if salted_s is None:
            raise ScramArgumentError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt_s is None:
            raise ScramArgumentError("You must supply 'salt' with 'saltedpassword' to add-scram")
        try:
            salted = base64.b64decode(salted_s, validate=True)
        except ValueError:
            raise ScramArgumentError(f"Failed to decode given saltedPassword: {salted_s}") from None
    if comps:
        raise ScramArgumentError("Unknown SCRAM configurations: " + ", ".join(sorted(comps)))
    java_name = mech.replace("-", "_")
    if iterations < MIN_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram "
                                 f"using {java_name}")
    if iterations > MAX_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram "
                                 f"using {java_name}")
    h = MECHANISMS[mech][1]
    if salted is None:
        assert password is not None
        salted = hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations)
    client_key = _hmac(h, salted, b"Client Key")
    return UserScramCredentialRecord(
        name=name, mechanism=MECHANISMS[mech][0], salt=salt,
        stored_key=hashlib.new(h, client_key).digest(), server_key=_hmac(h, salted, b"Server Key"),
        iterations=iterations)
