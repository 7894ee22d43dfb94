"""Fuzz the SASL and TLS handshakes a listener serves; count the inputs tried.

SASL: sequences of one to four frames -- valid ApiVersions, SaslHandshake v0/v1,
SaslAuthenticate (PLAIN and SCRAM tokens), raw v0 tokens, random bytes, and those with
bytes overwritten, truncated or extended -- go through a fresh
:class:`kraftnode.security.sasl.Authenticator` each, exactly as a connection feeds
it.  Acceptable: an answer, a close, or ``DecodeError``/``FrameError`` (the listener closes
the connection on those).  Any other exception is a bug.

TLS: a genuine ClientHello, mutated the same ways, fed to a server ``SSLObject`` (the
listener's context, in memory): acceptable outcomes are ``SSLError`` or a handshake that
wants more bytes.  Usage::

    python -m tools.fuzz.handshake_fuzz [--inputs N] [--seed S] [--seconds T]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import ssl
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from kraftnode.protocol import ApiVersionsRequest
from kraftnode.protocol.framing import FrameError, Request, encode_request
from kraftnode.protocol.generated import SaslAuthenticateRequest, SaslHandshakeRequest
from kraftnode.protocol.registry import (
    API_VERSIONS,
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SERVED,
)
from kraftnode.security import scram
from kraftnode.security.sasl import Authenticator, ListenerSasl
from kraftnode.server.net import api_versions
from kraftnode.server.net.listener import Reply
from recordbatch.wire import DecodeError

_CRED = scram.credential("SCRAM-SHA-256", "pw", b"salt", 4096)


def _frame(api: int, v: int, body: Any, cid: int = 1) -> bytes:
    return encode_request(SERVED[api], v, cid, "fuzz", body)[4:]


def sasl_seeds() -> list[bytes]:
    c = scram.ScramClient("SCRAM-SHA-256", "alice", "pw")
    return [
        _frame(API_VERSIONS, 3, ApiVersionsRequest(client_software_name="f", client_software_version="1")),
        _frame(API_VERSIONS, 0, ApiVersionsRequest()),
        _frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")),
        _frame(SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN")),
        _frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")),
        _frame(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw")),
        _frame(SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=c.first())),
        _frame(SASL_AUTHENTICATE, 0, SaslAuthenticateRequest(
            auth_bytes=b"c=biws,r=x,p=" + b"A" * 44)),
        _frame(METADATA, 12, SERVED[METADATA].request(topics=None, allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False)),
        b"\0alice\0pw", c.first(), b"n,,n=alice,r=abc", b"c=biws,r=abc,p=AAAA",
    ]


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    b = bytearray(rng.choice(seeds))
    if kind == 1 and b:
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 2:
        del b[rng.randint(0, len(b)):]
    elif kind == 3:
        b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(b)


async def _api_versions_handler(request: Request, peer: str) -> Reply:
    resp, rv = api_versions.answer(request, api_versions.FeatureView())
    return Reply(resp, rv)


async def _sasl_run(rng: random.Random, seeds: list[bytes], n: int, deadline: float) -> int:
    cfg = ListenerSasl("FUZZ", ["PLAIN", "SCRAM-SHA-256"], {"alice": "pw"},
                       lambda m, u: _CRED if u == "alice" else None)
    done = 0
    while done < n and time.monotonic() < deadline:
        auth = Authenticator(cfg, "fuzz")
        for _ in range(rng.randint(1, 4)):
            frame = rng.choice(seeds) if rng.random() < 0.3 else mutate(rng, seeds)
            done += 1
            try:
                _out, keep = await auth.on_frame(frame, _api_versions_handler)
            except (DecodeError, FrameError):
                break
            except Exception:  # noqa: BLE001 - the point: report anything else
                raise AssertionError(f"SASL input {frame!r} raised:\n{traceback.format_exc()}") from None
            if not keep or auth.complete:
                break
    return done


def _tls_contexts(tmp: Path) -> tuple[ssl.SSLContext, bytes]:
    """A server context (self-signed key made by the cryptography package) and a ClientHello."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuzz")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    p = tmp / "key.pem"
    p.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()) + cert.public_bytes(serialization.Encoding.PEM))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(p))
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client.wrap_bio(inc, out, server_hostname="fuzz")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return server, out.read()


def _tls_run(rng: random.Random, n: int, deadline: float) -> int:
    with tempfile.TemporaryDirectory() as d:
        server, hello = _tls_contexts(Path(d))
    seeds = [hello, hello[:5], b"\x16\x03\x01\x00\x05hello", b"\x00\x00\x00\x10" + b"\0" * 16]
    done = 0
    while done < n and time.monotonic() < deadline:
        data = rng.choice(seeds) if rng.random() < 0.1 else mutate(rng, seeds)
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = server.wrap_bio(inc, out, server_side=True)
        inc.write(data)
        done += 1
        try:
            obj.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLError):
            continue
        except Exception:  # noqa: BLE001
            raise AssertionError(f"TLS input {data!r} raised:\n{traceback.format_exc()}") from None
    return done


def run(inputs: int = 100_000, seed: int = 0, seconds: float = 600.0) -> dict[str, int]:
    """Fuzz ``inputs`` inputs, split between SASL and TLS; returns the counts tried."""
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    sasl_n = inputs * 3 // 4
    quiet = logging.getLogger("kraftnode.security")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)   # every refused input logs a line by design
    try:
        sasl = asyncio.run(_sasl_run(rng, sasl_seeds(), sasl_n, deadline))
        tls = _tls_run(rng, inputs - sasl_n, deadline)
    finally:
        quiet.setLevel(level)
    return {"sasl": sasl, "tls": tls}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=600.0)
    a = ap.parse_args(argv)
    t = time.monotonic()
    counts = run(a.inputs, a.seed, a.seconds)
    total = sum(counts.values())
    print(f"{total} inputs ({counts['sasl']} SASL frames, {counts['tls']} TLS handshakes) in "
          f"{time.monotonic() - t:.1f}s: no crash, no hang")
    return 0 if total >= a.inputs else 1


if __name__ == "__main__":
    sys.exit(main())
