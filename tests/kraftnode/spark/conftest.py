"""One local Spark session for every Spark test in the run (a JVM start costs ~10 s),
and a real 3-node quorum (``kraftnode dev-cluster``) for the live-source tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    pytest.importorskip("pyspark")
    from kraftnode.spark import local_session

    session = local_session("local[2]", "kraftnode-tests", **{"spark.sql.shuffle.partitions": "2",
                                                              "spark.default.parallelism": "2"})
    yield session
    session.stop()


@dataclass
class DevCluster:
    root: Path
    bootstrap: str
    ports: dict[int, int]
    proc: subprocess.Popen[str]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_dev_cluster(root: Path, seconds: int = 150) -> DevCluster:
    """``kraftnode dev-cluster --dir root --for-seconds N --application-records``; returns once
    a leader is elected (the live source writes and reads application records: it opts in)."""
    proc = subprocess.Popen([sys.executable, "-m", "kraftnode", "dev-cluster", "--dir", str(root),
                             "--for-seconds", str(seconds), "--application-records"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    ports: dict[int, int] = {}
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"node (\d+): CONTROLLER://127\.0\.0\.1:(\d+)", line)
        if m:
            ports[int(m.group(1))] = int(m.group(2))
        if line.startswith("running"):
            break
    if not ports or proc.poll() is not None:
        proc.kill()
        pytest.fail("dev-cluster did not start:\n" + "".join(lines))
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    return DevCluster(root, bootstrap, ports, proc)


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[DevCluster]:
    pytest.importorskip("confluent_kafka")
    c = start_dev_cluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.stop()
