"""Hadoop's single-process HDFS (``MiniDFSCluster``) from Maven Central, for the Spark tests.

    python -m tools.hadoop_dist install     # prints the directory (libs/ and classes/)
    python -m tools.hadoop_dist path        # the directory if installed, exit 1 if not

``org.apache.hadoop:hadoop-client-minicluster`` of the Hadoop version pyspark bundles (its
``jars/hadoop-client-api-<version>.jar``) and its runtime dependencies are copied by Maven
(a generated pom, ``mvn dependency:copy-dependencies``) into ``.cache/hadoop/<version>/libs``
of the checkout (``KRAFTNODE_HADOOP_CACHE`` moves it), and ``tools/hadoop/MiniHdfs.java`` --
a main that starts a real NameNode and DataNode on 127.0.0.1 and writes the NameNode's URI
into a file -- and ``HdfsPut.java`` (copies local files in through Hadoop's FileSystem) are
compiled into ``classes/``. The tests start it as a process
(``tests/support/hdfs.py``) and stop it by PID.

Stdlib only, like ``tools/kafka_dist.py``: it runs before the project's virtual environment
is complete.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = (REPO / "tools" / "hadoop" / "MiniHdfs.java", REPO / "tools" / "hadoop" / "HdfsPut.java")
#: bumped when the layout of an installed directory changes
LAYOUT = "1"


class InstallError(Exception):
    pass


def pyspark_hadoop_version() -> str:
    """The Hadoop version of the client jars pyspark ships (``jars/hadoop-client-api-X.jar``)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise InstallError("pyspark is not installed (the spark extra): it names the Hadoop version")
    jars = Path(spec.origin).parent / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        m = re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)
        if m:
            return m.group(1)
    raise InstallError(f"no hadoop-client-api-*.jar in {jars}")


def cache_root() -> Path:
    return Path(os.environ.get("KRAFTNODE_HADOOP_CACHE") or REPO / ".cache" / "hadoop")


def _stamp(version: str) -> str:
    import hashlib

    digest = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES)).hexdigest()[:16]
    return f"{LAYOUT} {version} {digest}\n"


def installed(version: str | None = None) -> Path | None:
    version = version or pyspark_hadoop_version()
    home = cache_root() / version
    try:
        ok = (home / ".installed").read_text() == _stamp(version)
    except OSError:
        return None
    return home if ok and (home / "classes" / "HdfsPut.class").is_file() else None


_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kraftnode.tests</groupId>
  <artifactId>minihdfs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-client-minicluster</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-client-runtime</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-client-api</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise InstallError(f"{what} failed:\n{tail}")


def install(version: str | None = None) -> Path:
    version = version or pyspark_hadoop_version()
    home = installed(version)
    if home is not None:
        return home
    for tool in ("mvn", "javac"):
        if shutil.which(tool) is None:
            raise InstallError(f"{tool} is not on PATH: it fetches/compiles Hadoop's MiniDFSCluster")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    home = root / version
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(version) is not None:
            return home
        staged = Path(tempfile.mkdtemp(prefix=f"{version}.", dir=root))
        try:
            (staged / "pom.xml").write_text(_POM.format(version=version))
            libs = staged / "libs"
            _run(["mvn", "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={libs}",
                  "-DincludeScope=runtime"], staged, f"Hadoop {version}: mvn dependency:copy-dependencies")
            classes = staged / "classes"
            classes.mkdir()
            _run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{libs}/*", *map(str, SOURCES)], staged,
                 "javac tools/hadoop/*.java")
            if home.exists():
                shutil.rmtree(home)
            staged.rename(home)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        (home / ".installed").write_text(_stamp(version))
    return home


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.hadoop_dist", description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["install", "path"])
    args = p.parse_args(argv)
    try:
        if args.command == "install":
            print(install())
            return 0
        home = installed()
    except InstallError as e:
        print(f"hadoop_dist: {e}", file=sys.stderr)
        return 1 if args.command == "path" else 2
    if home is None:
        return 1
    print(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
