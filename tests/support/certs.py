"""Certificates for TLS tests, made with the `openssl` command line as an operator makes them:
a CA, then server and client keys and certificates signed by it, in PEM and PKCS12."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Party:
    """One certified party: its key (PKCS#8 PEM, optionally encrypted), certificate, PKCS12 store."""

    key: Path          # unencrypted PKCS#8 PEM
    cert: Path
    p12: Path          # key + cert + CA, password PASSWORD
    pem_store: Path    # encrypted PKCS#8 key + cert chain in one file, key password PASSWORD


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca_cert: Path
    ca_key: Path
    trust_p12: Path    # the CA certificate alone, password PASSWORD

    def issue(self, name: str, *, days: int = 30, cn: str | None = None, san: str = "DNS:localhost,IP:127.0.0.1",
              ca: tuple[Path, Path] | None = None) -> Party:
        return _issue(self, name, days=days, cn=cn or name, san=san, ca=ca)


PASSWORD = "test-secret"


def _run(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)} failed: {r.stderr}")


def make_pki(directory: Path, ca_name: str = "kraftnode-test-ca") -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    d = directory.resolve()
    d.mkdir(parents=True, exist_ok=True)
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
         "-days", "30", "-subj", f"/CN={ca_name}/O=kraftnode tests", cwd=d)
    _run("pkcs12", "-export", "-nokeys", "-in", "ca.pem", "-out", "truststore.p12",
         "-passout", f"pass:{PASSWORD}", cwd=d)
    return Pki(d, d / "ca.pem", d / "ca.key", d / "truststore.p12")


def _issue(pki: Pki, name: str, *, days: int, cn: str, san: str, ca: tuple[Path, Path] | None) -> Party:
    d = pki.dir
    ca_cert, ca_key = ca or (pki.ca_cert, pki.ca_key)
    _run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f"{name}.key", cwd=d)
    _run("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr",
         "-subj", f"/CN={cn}/OU=test/O=kraftnode tests/C=US", cwd=d)
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n")
    sign = ["x509", "-req", "-in", f"{name}.csr", "-CA", str(ca_cert), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", f"{name}.pem", "-extfile", f"{name}.ext", "-days", str(days)]
    _run(*sign, cwd=d)
    _run("pkcs12", "-export", "-inkey", f"{name}.key", "-in", f"{name}.pem", "-certfile", str(ca_cert),
         "-name", name, "-out", f"{name}.p12", "-passout", f"pass:{PASSWORD}", cwd=d)
    _run("pkcs8", "-topk8", "-in", f"{name}.key", "-out", f"{name}.enc.key", "-passout", f"pass:{PASSWORD}",
         "-v2", "aes-256-cbc", cwd=d)
    store = d / f"{name}.store.pem"
    store.write_text((d / f"{name}.enc.key").read_text() + (d / f"{name}.pem").read_text()
                     + Path(ca_cert).read_text())
    return Party(d / f"{name}.key", d / f"{name}.pem", d / f"{name}.p12", store)
