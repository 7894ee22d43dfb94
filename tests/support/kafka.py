"""Genuine Apache Kafka (Java) for interop tests: where it is, and how to run its code.

A test names the Kafka release line it needs (``3.9``, ``4.0``, ``4.4``: fixtures
``kafka_home`` -- 3.9, the line the suite was built on --, ``kafka40`` and ``kafka44`` in
tests/conftest.py). That release is, in order: ``KAFKA_HOME`` when it is a distribution of that
line (a user's own: ``bin/`` and ``libs/``); else the release from Maven Central that
``tools/kafka_dist.py`` installs (on first use, cached under ``.cache/kafka/``); else, for 3.9
only, ``../shared/kafka-3.9`` beside the clone (Kafka 3.9.0 built from its sources); else the
test skips with a reason naming what was tried. CI sets ``KRAFTNODE_REQUIRE_KAFKA=1``, which
turns that skip into a failure.

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

from tools import kafka_dist

REPO = Path(__file__).resolve().parents[2]
SHARED_KAFKA = REPO.parent / "shared" / "kafka-3.9"
JAVA_SOURCES = REPO / "tests" / "interop" / "java"
CACHE = Path(os.environ.get("KRAFTNODE_JAVA_CACHE", REPO / ".cache" / "java"))


@dataclass(frozen=True)
class KafkaHome:
    """One Kafka installation: ``bin/`` scripts and ``libs/`` jars."""

    root: Path

    @property
    def version(self) -> str:
        """The release, e.g. ``4.4.0``: from ``VERSION`` (written by tools/kafka_dist.py), else
        from the name of its ``kafka_2.13-<version>.jar`` (a binary distribution, shared/)."""
        stamp = self.root / "VERSION"
        if stamp.is_file():
            return stamp.read_text().strip()
        for jar in self.libs.glob("kafka_2.13-*.jar"):
            rest = jar.name[len("kafka_2.13-"):-len(".jar")]
            if rest[:1].isdigit() and not rest.endswith(("-test", "-sources")):
                return rest
        return "0.0.0"

    @property
    def line(self) -> str:
        """``4.4.0`` -> ``4.4``."""
        return ".".join(self.version.split(".")[:2])

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def log4j_option(self, config: str = "tools") -> str:
        """The JVM option naming this release's log configuration (``tools`` or ``server``):
        Kafka 4.x logs through log4j 2 (KIP-653), 3.9 through log4j 1."""
        names = {"tools": ("tools-log4j2.yaml", "tools-log4j2.xml", "tools-log4j.properties"),
                 "server": ("log4j2.yaml", "log4j2.xml", "log4j.properties")}[config]
        for name in names:
            path = self.root / "config" / name
            if path.exists():
                if name.endswith(".properties"):
                    return f"-Dlog4j.configuration=file:{path}"
                return f"-Dlog4j2.configurationFile={path}"
        return ""

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
        argv = ["java", "-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp]
        log4j = self.log4j_option("tools")
        if log4j:
            argv.append(log4j)
        return [*argv, main, *args]


def java_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for Kafka's scripts: quick JVM start-up on a small machine."""
    env = {**os.environ}
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256M")
    env.setdefault("KAFKA_OPTS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    env.update(extra or {})
    return env


def _is_home(path: Path) -> bool:
    return (path / "bin").is_dir() and (path / "libs").is_dir()


def find_kafka_home(line: str = "3.9", install: bool = True) -> KafkaHome | None:
    """Kafka of release ``line`` (``3.9``, ``4.0``, ``4.4``, or an exact ``4.0.2``):
    ``KAFKA_HOME`` when it is of that line, else tools/kafka_dist.py's install (made now when
    ``install``), else ``../shared/kafka-3.9`` for 3.9; None when none is usable."""
    env = os.environ.get("KAFKA_HOME")
    if env and _is_home(Path(env)):
        home = KafkaHome(Path(env))
        if home.version == line or home.line == line:
            return home
    try:
        exact = kafka_dist.resolve(line)
        path = kafka_dist.install(exact) if install else kafka_dist.installed(exact)
        if path is not None:
            return KafkaHome(path)
    except kafka_dist.InstallError as e:
        _INSTALL_ERRORS[line] = str(e)
    if line == "3.9" and _is_home(SHARED_KAFKA):
        return KafkaHome(SHARED_KAFKA)
    return None


#: why an install failed, for the skip message
_INSTALL_ERRORS: dict[str, str] = {}


def require_kafka_home(line: str = "3.9") -> KafkaHome:
    """For fixtures: Kafka of release ``line``, or a skip naming what was tried (a failure
    under ``KRAFTNODE_REQUIRE_KAFKA=1``, as CI runs)."""
    problem = None
    if shutil.which("java") is None or shutil.which("javac") is None:
        problem = "genuine Apache Kafka tests need a JDK (java and javac) on PATH"
        home = None
    else:
        home = find_kafka_home(line)
    if problem is None and home is None:
        why = _INSTALL_ERRORS.get(line, "")
        problem = (f"genuine Apache Kafka {line} not found: KAFKA_HOME is not a {line} distribution, "
                   f"`python -m tools.kafka_dist install {line}` failed ({why or 'see its output'})"
                   + (f", and {SHARED_KAFKA} is absent" if line == "3.9" else ""))
    if problem is not None:
        if os.environ.get("KRAFTNODE_REQUIRE_KAFKA") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    assert home is not None
    return home
