"""Genuine Apache Kafka (Java) for interop tests: where it is, and how to run its code.

Kafka is found through ``KAFKA_HOME`` (a user's own 3.9+ distribution: ``bin/`` and
``libs/``), else ``../shared/kafka-3.9`` beside the clone; else the tests that need it
skip with a reason naming both. CI sets ``KRAFTNODE_REQUIRE_KAFKA=1``, which turns that
skip into a failure.

Java helper programs are sources under ``tests/interop/java/`` (one directory per
helper set), compiled at test time with ``javac -cp "libs/*"`` into a cache directory
keyed by the hash of the sources and of the Kafka installation, so nothing compiled is
committed and a changed source is recompiled exactly once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_KAFKA = REPO.parent / "shared" / "kafka-3.9"
JAVA_SOURCES = REPO / "tests" / "interop" / "java"
CACHE = Path(os.environ.get("KRAFTNODE_JAVA_CACHE", REPO / ".cache" / "java"))


@dataclass(frozen=True)
class KafkaHome:
    """One Kafka installation: ``bin/`` scripts and ``libs/`` jars."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def libs(self) -> Path:
        return self.root / "libs"

    def script(self, name: str) -> Path:
        """``kafka-metadata-quorum`` -> ``<root>/bin/kafka-metadata-quorum.sh``."""
        return self.bin / (name if name.endswith(".sh") else name + ".sh")

    def tool(self, name: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's ``bin/`` scripts; stdout and stderr captured as text."""
        return subprocess.run([str(self.script(name)), *args], capture_output=True, text=True,
                              timeout=timeout, env=java_env(env), input=input)

    def compile(self, helper: str = "") -> Path:
        """Compile ``tests/interop/java/<helper>`` (all of it when empty); returns the
        classes directory to put on ``CLASSPATH``. Cached by content hash."""
        src_root = JAVA_SOURCES / helper if helper else JAVA_SOURCES
        sources = sorted(src_root.rglob("*.java"))
        if not sources:
            raise FileNotFoundError(f"no Java sources under {src_root}")
        h = hashlib.sha256()
        h.update(str(self.root.resolve()).encode())
        for jar in sorted(self.libs.glob("*.jar")):
            h.update(jar.name.encode())
        for src in sources:
            h.update(str(src.relative_to(JAVA_SOURCES)).encode())
            h.update(src.read_bytes())
        out = CACHE / h.hexdigest()[:20]
        done = out / ".compiled"
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / ".lock", "w") as lock:  # xdist / parallel sessions: compile once
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir(parents=True)
                r = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8",
                                    "-cp", str(self.libs / "*"), "-d", str(out),
                                    *map(str, sources)], capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"javac failed:\n{r.stdout}\n{r.stderr}")
                done.touch()
        return out

    def java(self, classes: Path, main: str, *args: str, env: dict[str, str] | None = None,
             **popen: object) -> list[str]:
        """The argv for running ``main`` from ``classes`` with Kafka's jars (Kafka's
        ``kafka-run-class.sh`` layout: its log4j config, heap default)."""
        cp = f"{classes}:{self.libs}/*"
        log4j = self.root / "config" / "tools-log4j.properties"
        argv = ["java", "-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp]
        if log4j.exists():
            argv.append(f"-Dlog4j.configuration=file:{log4j}")
        return [*argv, main, *args]


def java_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for Kafka's scripts: quick JVM start-up on a small machine."""
    env = {**os.environ}
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256M")
    env.setdefault("KAFKA_OPTS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    env.update(extra or {})
    return env


def find_kafka_home() -> KafkaHome | None:
    """``KAFKA_HOME`` wins, else ``../shared/kafka-3.9``; None when neither is usable."""
    env = os.environ.get("KAFKA_HOME")
    for candidate in ([Path(env)] if env else []) + [SHARED_KAFKA]:
        if (candidate / "bin").is_dir() and (candidate / "libs").is_dir():
            return KafkaHome(candidate)
    return None


def require_kafka_home() -> KafkaHome:
    """For fixtures: the installation, or a skip naming where we looked (a failure
    under ``KRAFTNODE_REQUIRE_KAFKA=1``, as CI runs)."""
    home = find_kafka_home()
    problem = None
    if home is None:
        problem = (f"genuine Apache Kafka not found: set KAFKA_HOME to a Kafka 3.9+ "
                   f"distribution (bin/, libs/) or provide {SHARED_KAFKA}")
    elif shutil.which("java") is None or shutil.which("javac") is None:
        problem = "genuine Apache Kafka tests need a JDK (java and javac) on PATH"
    if problem is not None:
        if os.environ.get("KRAFTNODE_REQUIRE_KAFKA") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    assert home is not None
    return home
