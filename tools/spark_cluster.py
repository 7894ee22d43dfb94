"""Real clusters for the Spark tests and benchmarks: Hadoop's single-process HDFS (``MiniDFSCluster``: a real
NameNode and DataNode on 127.0.0.1, run by ``tools/hadoop/MiniHdfs.java`` from the jars
``tools/hadoop_dist.py`` fetches from Maven Central) and a Spark standalone cluster (pyspark's
own ``spark-class`` Master and Worker on loopback). Each is a process the test starts and
stops by PID.

Missing pieces (no Java, no Maven, no pyspark) raise :class:`Unavailable` naming them
(``tests/support/spark_cluster.py`` turns that into a skip, or a failure under ``CI=true``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from tools import hadoop_dist


class Unavailable(Exception):
    """Something a cluster needs is not installed."""


def _unavailable(reason: str) -> NoReturn:
    raise Unavailable(reason)


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for(pred: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path,
              timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    _stop(proc)
    raise RuntimeError(f"{what} did not start within {timeout:.0f} s (exit {proc.poll()}):\n{tail}")


@dataclass
class MiniHdfs:
    uri: str  # hdfs://127.0.0.1:PORT
    proc: subprocess.Popen[bytes]
    libs: Path

    def put(self, local: Path, dest: str) -> str:
        """Copy the local directory or file ``local`` to ``dest`` (a path on this HDFS) through
        Hadoop's FileSystem (a JVM of our own: ``hdfs dfs -put`` is not in the jars). Returns
        the hdfs:// URI."""
        uri = self.uri + dest
        r = subprocess.run(["java", "-Xmx256m", "-cp", f"{self.libs}/libs/*:{self.libs}/classes",
                            "HdfsPut", self.uri, str(local), dest], capture_output=True, text=True,
                           timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"copying {local} to {uri} failed:\n{(r.stdout + r.stderr)[-3000:]}")
        return uri

    def stop(self) -> None:
        _stop(self.proc)


def start_mini_hdfs(root: Path, timeout: float = 180) -> MiniHdfs:
    if shutil.which("java") is None:
        _unavailable("java is not installed: Hadoop's MiniDFSCluster needs a JVM")
    try:
        home = hadoop_dist.install()
    except hadoop_dist.InstallError as e:
        _unavailable(f"Hadoop's MiniDFSCluster could not be installed: {e}")
    root.mkdir(parents=True, exist_ok=True)
    ready = root / "ready"
    log = root / "minihdfs.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["java", "-Xmx512m", "-cp", f"{home}/libs/*:{home}/classes", "MiniHdfs",
                                 str(root / "data"), str(ready)],
                                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    _wait_for(ready.exists, "MiniDFSCluster", proc, log, timeout)
    return MiniHdfs(ready.read_text().strip(), proc, home)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StandaloneSpark:
    master_url: str  # spark://127.0.0.1:PORT
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def stop(self) -> None:
        for p in reversed(self.procs):  # the worker first, then the master
            _stop(p)


def start_standalone(root: Path, cores: int = 2, memory: str = "2g", timeout: float = 180) -> StandaloneSpark:
    """pyspark's ``spark-class`` Master and one Worker (``cores`` cores) on 127.0.0.1; returns once
    the worker has registered with the master."""
    if shutil.which("java") is None:
        _unavailable("java is not installed: Spark's standalone cluster needs a JVM")
    try:
        import pyspark
    except ImportError:
        _unavailable("pyspark is not installed (the spark extra)")
    spark_home = Path(pyspark.__file__).parent
    spark_class = spark_home / "bin" / "spark-class"
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(root), "SPARK_WORKER_DIR": str(root / "work"),
           "PYSPARK_PYTHON": sys.executable, "SPARK_DAEMON_MEMORY": "384m",
           # the worker's executors import kraftnode from this checkout, as the driver does
           "PYTHONPATH": os.pathsep.join(p for p in [str(Path(__file__).resolve().parents[2]),
                                                     os.environ.get("PYTHONPATH", "")] if p)}
    port, ui = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    cluster = StandaloneSpark(url)
    mlog = root / "master.log"
    with open(mlog, "wb") as out:
        master = subprocess.Popen([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(ui)],
                                  stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    cluster.procs.append(master)
    _wait_for(lambda: "I have been elected leader" in mlog.read_text(errors="replace"), "Spark master",
              master, mlog, timeout)
    wlog = root / "worker.log"
    with open(wlog, "wb") as out:
        worker = subprocess.Popen([str(spark_class), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                   "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port()),
                                   "--work-dir", str(root / "work"), url],
                                  stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    cluster.procs.append(worker)
    try:
        _wait_for(lambda: re.search(r"Registering worker|Successfully registered with master",
                                    mlog.read_text(errors="replace") + wlog.read_text(errors="replace"))
                  is not None, "Spark worker", worker, wlog, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster
