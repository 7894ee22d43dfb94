"""TLS contexts from Kafka's ``ssl.*`` keys (DefaultSslEngineFactory's rules and messages).

Keystores: ``ssl.keystore.type`` PEM (a file with the private key and certificate chain,
or inline ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain``; the key decrypted
with ``ssl.key.password``) and PKCS12 (``ssl.keystore.location`` + ``ssl.keystore.password``,
read with ``cryptography``).  JKS -- Kafka's default type -- is refused at start-up with a
message saying how to convert it: no maintained Python library reads JKS.  Truststores
likewise (PEM file, inline ``ssl.truststore.certificates``, or PKCS12); with none
configured the system's default CAs are trusted, as the JVM trusts its ``cacerts``.

``ssl.client.auth`` none/requested/required, ``ssl.enabled.protocols``,
``ssl.cipher.suites`` (Java/IANA names, translated to OpenSSL's), and on the client side
``ssl.endpoint.identification.algorithm`` (``https``, Kafka's default: the server's
certificate must name the host; empty: no host check).  ``ssl.principal.mapping.rules``
maps a client certificate's distinguished name to a principal (SslPrincipalMapper).

Every problem found is a :class:`ConfigError` naming the key, raised at start-up.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kraftnode.errors import ConfigError
from kraftnode.security.listeners import ListenerProps

log = logging.getLogger("kraftnode.security")

_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}


def _bad(key: str, value: str | None, why: str) -> ConfigError:
    shown = "[hidden]" if value is not None and "password" in key or key.endswith("ssl.keystore.key") \
        else repr(value)
    return ConfigError(f"Invalid value {shown} for configuration {key}: {why}")


# ------------------------------------------------------------------ key material
@dataclass(frozen=True)
class KeyMaterial:
    key_pem: bytes          # unencrypted PKCS#8
    chain_pem: bytes        # leaf first


def _pem_certs(data: bytes, key: str, value: str | None) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        raise _bad(key, value, "At least one certificate expected, but none found")
    return certs


def _pem_private_key(data: bytes, password: str | None, key: str, pw_key: str,
                     value: str | None) -> bytes:
    m = re.search(rb"-----BEGIN (ENCRYPTED )?PRIVATE KEY-----.*?-----END (ENCRYPTED )?PRIVATE KEY-----",
                  data, re.S)
    if m is None:
        m = re.search(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", data, re.S)
    if m is None:
        raise _bad(key, value, "Private key not provided")
    try:
        pk = serialization.load_pem_private_key(
            m.group(0), password.encode() if password else None)
    except TypeError:
        # encrypted key without a password, or a password for an unencrypted key
        if not password:
            raise ConfigError(f"Missing required configuration {pw_key}: the private key in {key} "
                              "is encrypted") from None
        pk = serialization.load_pem_private_key(m.group(0), None)
    except ValueError:
        raise _bad(pw_key, password, f"the private key in {key} could not be decrypted with it "
                   "(wrong key password, or not a private key)") from None
    return pk.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise _bad(key, path, f"cannot read the file: {e.strerror or e}") from None


def _jks_error(key: str, value: str) -> ConfigError:
    return _bad(key, value, "JKS stores are not supported by kraftnode (no maintained Python "
                "library reads them); convert with `keytool -importkeystore -srckeystore STORE.jks "
                "-destkeystore STORE.p12 -deststoretype PKCS12` and set the type to PKCS12, or use PEM")


def load_keystore(lp: ListenerProps) -> KeyMaterial | None:
    """The listener's key and certificate chain; None when no keystore is configured."""
    type_key = lp.key("ssl.keystore.type")
    ks_type = (lp.get("ssl.keystore.type", "JKS") or "JKS").upper()
    location = lp.get("ssl.keystore.location") or None
    password = lp.get("ssl.keystore.password") or None
    key_password = lp.get("ssl.key.password") or None
    inline_key = lp.get("ssl.keystore.key") or None
    inline_chain = lp.get("ssl.keystore.certificate.chain") or None
    loc_key = lp.key("ssl.keystore.location")
    if inline_key is not None:
        k = lp.key("ssl.keystore.key")
        if ks_type != "PEM":
            raise _bad(type_key, ks_type, "SSL private key can be specified only for PEM, but key store "
                       f"type is {ks_type}.")
        if inline_chain is None:
            raise ConfigError(f"Missing required configuration {lp.key('ssl.keystore.certificate.chain')}: "
                              "SSL private key is specified, but certificate chain is not specified.")
        if location is not None:
            raise _bad(loc_key, location, "Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise _bad(lp.key("ssl.keystore.password"), password, "SSL key store password cannot be "
                       "specified with PEM format, only key password may be specified.")
        chain = _pem_certs(inline_chain.encode(), lp.key("ssl.keystore.certificate.chain"), None)
        pkey = _pem_private_key(inline_key.encode(), key_password, k, lp.key("ssl.key.password"), None)
        return KeyMaterial(pkey, b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
    if inline_chain is not None:
        raise ConfigError(f"Missing required configuration {lp.key('ssl.keystore.key')}: SSL certificate "
                          "chain is specified, but private key is not specified")
    if location is None:
        if password is not None:
            raise _bad(lp.key("ssl.keystore.password"), password,
                       "SSL key store is not specified, but key store password is specified.")
        return None
    if ks_type == "PEM":
        if password is not None:
            raise _bad(lp.key("ssl.keystore.password"), password, "SSL key store password cannot be "
                       "specified with PEM format, only key password may be specified")
        data = _read(location, loc_key)
        chain = _pem_certs(data, loc_key, location)
        pkey = _pem_private_key(data, key_password, loc_key, lp.key("ssl.key.password"), location)
        return KeyMaterial(pkey, b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
    if ks_type in ("JKS", "JCEKS"):
        raise _jks_error(type_key, ks_type)
    if ks_type != "PKCS12":
        raise _bad(type_key, ks_type, "expected PKCS12 or PEM (JKS is not supported)")
    if password is None:
        raise ConfigError(f"Missing required configuration {lp.key('ssl.keystore.password')}: SSL key store "
                          "is specified, but key store password is not specified.")
    data = _read(location, loc_key)
    store = None
    for pw in dict.fromkeys(p for p in (password, key_password) if p is not None):
        try:
            store = pkcs12.load_pkcs12(data, pw.encode())
            break
        except ValueError:
            continue
    if store is None:
        raise _bad(lp.key("ssl.keystore.password"), password,
                   f"Failed to load SSL keystore {location} of type PKCS12 (wrong password, or not a "
                   "PKCS12 file)")
    if store.key is None or store.cert is None:
        raise _bad(loc_key, location, "Private key not provided (the PKCS12 store holds no key entry)")
    chain_certs = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
    return KeyMaterial(
        store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()),
        b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain_certs))


def load_truststore(lp: ListenerProps) -> str | None:
    """The trusted certificates as PEM text; None: none configured (system CAs)."""
    type_key = lp.key("ssl.truststore.type")
    ts_type = (lp.get("ssl.truststore.type", "JKS") or "JKS").upper()
    location = lp.get("ssl.truststore.location") or None
    password = lp.get("ssl.truststore.password") or None
    inline = lp.get("ssl.truststore.certificates") or None
    loc_key = lp.key("ssl.truststore.location")
    if inline is not None:
        if ts_type != "PEM":
            raise _bad(type_key, ts_type, "SSL trust store certs can be specified only for PEM, but trust "
                       f"store type is {ts_type}.")
        if location is not None:
            raise _bad(loc_key, location, "Both SSL trust store location and separate trust certificates "
                       "are specified.")
        certs = _pem_certs(inline.encode(), lp.key("ssl.truststore.certificates"), None)
    elif location is None:
        if password is not None:
            raise _bad(lp.key("ssl.truststore.password"), password,
                       "SSL trust store is not specified, but trust store password is specified.")
        return None
    elif ts_type == "PEM":
        if password is not None:
            raise _bad(lp.key("ssl.truststore.password"), password,
                       "SSL trust store password cannot be specified for PEM format.")
        certs = _pem_certs(_read(location, loc_key), loc_key, location)
    elif ts_type in ("JKS", "JCEKS"):
        raise _jks_error(type_key, ts_type)
    elif ts_type != "PKCS12":
        raise _bad(type_key, ts_type, "expected PKCS12 or PEM (JKS is not supported)")
    else:
        data = _read(location, loc_key)
        try:
            store = pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError:
            raise _bad(lp.key("ssl.truststore.password"), password,
                       f"Failed to load SSL truststore {location} of type PKCS12 (wrong password, or not "
                       "a PKCS12 file)") from None
        certs = ([store.cert.certificate] if store.cert else []) + [c.certificate for c in store.additional_certs]
        if not certs:
            raise _bad(loc_key, location, "At least one certificate expected, but none found")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


# ------------------------------------------------------------------ protocol / ciphers
def _set_protocols(ctx: ssl.SSLContext, lp: ListenerProps) -> None:
    key = lp.key("ssl.enabled.protocols")
    names = lp.get_list("ssl.enabled.protocols", DEFAULT_ENABLED_PROTOCOLS)
    versions = []
    for n in names:
        if n not in _PROTOCOLS:
            raise _bad(key, ",".join(names), f"unknown protocol {n} (expected TLSv1.2 or TLSv1.3)")
        versions.append(_PROTOCOLS[n])
    if not versions:
        raise _bad(key, "", "no protocol enabled")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)


_KX = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": "",
       "ECDHE_PSK": "ECDHE-PSK-", "DHE_DSS": "DHE-DSS-"}


def openssl_cipher_name(iana: str) -> str | None:
    """``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256`` (TLS 1.2
    suites; None for a name that is not of that form)."""
    m = re.fullmatch(r"TLS_(\w+?)_WITH_(\w+)", iana)
    if m is None or m.group(1) not in _KX:
        return None
    enc = m.group(2)
    e = re.fullmatch(r"AES_(128|256)_(GCM|CBC|CCM)_(SHA256|SHA384|SHA)", enc)
    if e is not None:
        bits, mode, mac = e.groups()
        body = f"AES{bits}-GCM-{mac}" if mode == "GCM" else (
            f"AES{bits}-CCM" if mode == "CCM" else f"AES{bits}-{mac}")
    elif enc == "CHACHA20_POLY1305_SHA256":
        body = "CHACHA20-POLY1305"
    else:
        return None
    return _KX[m.group(1)] + body


def _set_ciphers(ctx: ssl.SSLContext, lp: ListenerProps) -> None:
    suites = lp.get_list("ssl.cipher.suites")
    if not suites:
        return
    key = lp.key("ssl.cipher.suites")
    available = {c["name"] for c in ctx.get_ciphers()}
    tls12: list[str] = []
    tls13 = False
    for s in suites:
        if s in _TLS13_SUITES:
            tls13 = True
            continue
        name = openssl_cipher_name(s)
        if name is None or name not in available:
            raise _bad(key, ",".join(suites), f"unsupported cipher suite {s}")
        tls12.append(name)
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    elif ctx.minimum_version < ssl.TLSVersion.TLSv1_3:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if not tls13:
        # as the JVM: no TLS 1.3 suite listed, no TLS 1.3 handshake
        if ctx.minimum_version > ssl.TLSVersion.TLSv1_2:
            raise _bad(key, ",".join(suites), "no suite for the enabled protocols")
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2


# ------------------------------------------------------------------ contexts
def _load_chain(ctx: ssl.SSLContext, km: KeyMaterial) -> None:
    # ssl can only load a key and chain from a file: a private one, removed at once
    with tempfile.TemporaryDirectory(prefix="kraftnode-tls-") as d:
        p = os.path.join(d, "key.pem")
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(km.key_pem + km.chain_pem)
        ctx.load_cert_chain(p)


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(lp: ListenerProps, sasl_ssl: bool = False) -> ssl.SSLContext:
    """The TLS context an SSL / SASL_SSL listener serves with.

    On a SASL_SSL listener only a listener-prefixed ``ssl.client.auth`` applies (Kafka's
    ChannelBuilders: the broker-wide key is for SSL listeners only, with a warning)."""
    km = load_keystore(lp)
    if km is None:
        raise ConfigError(f"Missing required configuration {lp.prefix}ssl.keystore.location (or "
                          f"ssl.keystore.location / ssl.keystore.key): listener {lp.name} uses TLS")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, lp)
    _set_ciphers(ctx, lp)
    try:
        _load_chain(ctx, km)
    except ssl.SSLError as e:
        raise _bad(lp.key("ssl.keystore.location"), lp.get("ssl.keystore.location"),
                   f"the key does not match the certificate: {e.reason or e}") from None
    auth = (lp.get("ssl.client.auth", "none") or "none").lower()
    if sasl_ssl and lp.prefix + "ssl.client.auth" not in lp.props:
        if auth != "none":
            log.warning("Broker configuration 'ssl.client.auth' is applied only to SSL listeners. "
                        "Listener-prefixed configuration can be used to enable SSL client "
                        "authentication for SASL_SSL listeners (listener %s)", lp.name)
        auth = "none"
    if auth not in _CLIENT_AUTH:
        raise _bad(lp.key("ssl.client.auth"), auth, "String must be one of: required, requested, none")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        cadata = load_truststore(lp)
        if cadata is None:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        else:
            ctx.load_verify_locations(cadata=cadata)
    else:
        load_truststore(lp)  # still checked, as Kafka checks it
    return ctx


def client_context(lp: ListenerProps) -> ssl.SSLContext:
    """The TLS context for connections out to peers on this listener (raft voters)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, lp)
    _set_ciphers(ctx, lp)
    algo = lp.get("ssl.endpoint.identification.algorithm", "https") or ""
    if algo.lower() not in ("", "https"):
        raise _bad(lp.key("ssl.endpoint.identification.algorithm"), algo, "expected https or empty")
    ctx.check_hostname = algo.lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    cadata = load_truststore(lp)
    if cadata is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.load_verify_locations(cadata=cadata)
    km = load_keystore(lp)
    if km is not None:
        _load_chain(ctx, km)
    return ctx


# ------------------------------------------------------------------ principals
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


def _java_replacement(repl: str, groups: int) -> str:
    """A java.util.regex replacement ($1, \\$) as a Python one (\\g<1>)."""
    out = []
    i = 0
    while i < len(repl):
        c = repl[i]
        if c == "\\" and i + 1 < len(repl):
            out.append(repl[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and i + 1 < len(repl) and repl[i + 1].isdigit():
            j = i + 1
            while j < len(repl) and repl[j].isdigit():
                j += 1
            num = repl[i + 1:j]
            n = int(num)
            # SslPrincipalMapper.escapeLiteralBackReferences: truncate to a group that exists
            while n > groups and n >= 10:
                n //= 10
            if n > groups:
                out.append("$" + num)
            else:
                out.append(f"\\g<{n}>" + num[len(str(n)):])
            i = j
        else:
            out.append(c.replace("\\", "\\\\"))
            i += 1
    return "".join(out)


class PrincipalMapper:
    """Kafka's SslPrincipalMapper: ``ssl.principal.mapping.rules``."""

    def __init__(self, rules: str | None, key: str = "ssl.principal.mapping.rules") -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
        for m in _SPLITTER.finditer(text.strip()):
            rule = m.group(1)
            p = _PARSER.match(rule)
            if p is None or p.end() != len(rule):
                raise _bad(key, text, f"Invalid rule: {rule}")
            if p.group(1) is not None:
                self.rules.append(None)
            elif p.group(2) is not None:
                try:
                    pattern = re.compile(p.group(2))
                except re.error as e:
                    raise _bad(key, text, f"Invalid rule: {rule} ({e})") from None
                self.rules.append((pattern, _java_replacement(p.group(4), pattern.groups), p.group(6)))
            if m.end() >= len(text.strip()):
                break

    def name(self, dn: str) -> str | None:
        """The principal name for ``dn``; None when no rule applies (authentication fails)."""
        for r in self.rules:
            if r is None:
                return dn
            pattern, repl, case = r
            if pattern.fullmatch(dn):
                out = pattern.sub(repl, dn)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        return None


def certificate_dn(der: bytes) -> str:
    """The subject as Java's X500Principal.getName() prints it (RFC 2253)."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, mapper: PrincipalMapper) -> str:
    """``User:<name>`` for a TLS peer: its certificate's mapped DN, ``User:ANONYMOUS`` without one."""
    if ssl_object is None:
        return "User:ANONYMOUS"
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return "User:ANONYMOUS"
    name = mapper.name(certificate_dn(der))
    return "User:ANONYMOUS" if name is None else f"User:{name}"
