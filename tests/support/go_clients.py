"""Genuine Go Kafka clients for the interop tests: ``tests/interop/go/`` is one Go module
(``go.mod``/``go.sum`` pin franz-go, its kadm and sarama) building one program,
``goclients``, with a subcommand per job (its ``main.go`` lists them). It is built once,
with ``go build -mod=readonly`` into ``.cache/go/<hash>/`` keyed by the sources' hash (the
Go build cache under ``.cache/go/build``), as tests/support/kafka.py compiles the Java
helpers. No Go toolchain: the tests skip with the reason, or fail under
``KRAFTNODE_REQUIRE_KAFKA=1`` (CI)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
GO_SOURCES = REPO / "tests" / "interop" / "go"
CACHE = Path(os.environ.get("KRAFTNODE_GO_CACHE", REPO / ".cache" / "go"))


def _sources() -> list[Path]:
    return sorted(p for p in GO_SOURCES.iterdir() if p.suffix == ".go" or p.name in ("go.mod", "go.sum"))


def go_env() -> dict[str, str]:
    """The environment ``go build`` runs in: the pinned module versions only (readonly
    go.mod), the installed toolchain only, the build cache under ``.cache/go``."""
    return {**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false", "GOTOOLCHAIN": "local",
            "GOCACHE": str(CACHE / "build"), "CGO_ENABLED": "0"}


def build(go: str) -> Path:
    """``goclients`` built from the current sources (cached by their hash)."""
    h = hashlib.sha256()
    h.update(subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout.encode())
    for src in _sources():
        h.update(src.name.encode())
        h.update(src.read_bytes())
    out = CACHE / h.hexdigest()[:20]
    binary = out / "goclients"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:  # parallel sessions: build once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            out.mkdir(parents=True, exist_ok=True)
            r = subprocess.run(["nice", go, "build", "-o", str(binary) + ".tmp", "."], cwd=GO_SOURCES,
                               env=go_env(), capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                raise RuntimeError(f"go build of {GO_SOURCES} failed:\n{r.stdout}\n{r.stderr}")
            os.replace(str(binary) + ".tmp", binary)
    return binary


@dataclass
class GoClients:
    binary: Path

    def run(self, *args: object, timeout: float = 120) -> Any:
        """One subcommand; its JSON answer (the process must exit 0)."""
        r = subprocess.run([str(self.binary), *map(str, args)], capture_output=True, text=True,
                           timeout=timeout)
        assert r.returncode == 0, f"goclients {args}: exit {r.returncode}\n{r.stderr[-4000:]}"
        return json.loads(r.stdout)


def require_go_clients() -> GoClients:
    """For fixtures: the built programs, or a skip naming why (a failure under
    ``KRAFTNODE_REQUIRE_KAFKA=1``, as CI runs)."""
    go = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if Path(p).exists()), None)
    if go is None:
        problem = "the Go clients (franz-go, sarama) need a Go toolchain: `go` is not on PATH"
        if os.environ.get("KRAFTNODE_REQUIRE_KAFKA") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return GoClients(build(go))
