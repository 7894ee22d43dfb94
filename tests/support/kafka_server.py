"""Genuine Kafka 3.9 servers (``kafka.Kafka``: brokers, controllers, or both in one process) as
child processes for tests (shared/kafka-3.9/README.md: format, start, ready at "Kafka Server
started", stop by PID).

Each server gets its own directory (properties, data, ``LOG_DIR`` for its server log), is
formatted with ``kafka-storage.sh`` and started with ``kafka-server-start.sh``; it is ready when
its log says ``Kafka Server started``. Stop it by its PID (SIGTERM: a broker's controlled
shutdown; SIGKILL: a crash) -- never by name, other sessions run JVMs too. ``faults()`` lists
the ERROR lines and fault-handler lines a test should fail on.

The properties: ``broker_properties`` (a broker of a controller quorum), ``controller_properties``
(a controller of a static or dynamic quorum), ``combined_properties`` (one node that is its own
quorum, for comparing kraftnode's answers with a Kafka broker's: ``combined_server``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.cluster import free_ports
from tests.support.kafka import KafkaHome

__all__ = ["KafkaServer", "broker_properties", "combined_properties", "combined_server", "controller_properties",
           "server_env"]

# a small JVM: several servers and tools share a 2-core test host
SERVER_HEAP = "-Xmx384m -Xms128m"


def server_env(home: KafkaHome, log_dir: Path, heap: str = SERVER_HEAP) -> dict[str, str]:
    env = {**os.environ}
    env["LOG_DIR"] = str(log_dir)
    env["KAFKA_HEAP_OPTS"] = heap
    env["KAFKA_JVM_PERFORMANCE_OPTS"] = "-server -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"
    env.pop("KAFKA_OPTS", None)
    return env


def broker_properties(node_id: int, port: int, voters: str, data: Path, extra: str = "") -> str:
    """A broker of a static controller quorum (``voters``: ``id@host:port,...``)."""
    return (f"process.roles=broker\nnode.id={node_id}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{port}\nadvertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
            "inter.broker.listener.name=PLAINTEXT\ncontroller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"controller.quorum.voters={voters}\nlog.dirs={data}\n"
            "group.initial.rebalance.delay.ms=0\n"
            # the log cleaner's dedupe buffer (128 MiB by default) is reallocated on every dynamic
            # broker config change: keep it small beside a small heap
            "log.cleaner.dedupe.buffer.size=4194304\n"
            f"{extra}")


def controller_properties(node_id: int, port: int, data: Path, voters: str = "", bootstrap: str = "",
                          extra: str = "") -> str:
    """A controller (``process.roles=controller``) of a static quorum (``voters``:
    ``id@host:port,...``, ``controller.quorum.voters``) or a dynamic one (``bootstrap``:
    ``host:port,...``, ``controller.quorum.bootstrap.servers``)."""
    quorum = f"controller.quorum.voters={voters}\n" if voters else f"controller.quorum.bootstrap.servers={bootstrap}\n"
    return (f"process.roles=controller\nnode.id={node_id}\n"
            f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
            f"listener.security.protocol.map=CONTROLLER:PLAINTEXT\n{quorum}log.dirs={data}\n{extra}")


def combined_properties(node_id: int, port: int, controller_port: int, data: Path, extra: str = "") -> str:
    """A broker and controller in one process, the only voter of its quorum."""
    return (f"process.roles=broker,controller\nnode.id={node_id}\n"
            f"controller.quorum.voters={node_id}@127.0.0.1:{controller_port}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n"
            "controller.listener.names=CONTROLLER\ninter.broker.listener.name=PLAINTEXT\n"
            f"log.dirs={data}\nnum.partitions=1\noffsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n" + extra)


@dataclass
class KafkaServer:
    home: KafkaHome
    root: Path
    node_id: int
    properties: str
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    heap: str = SERVER_HEAP
    #: the client listener's port, when the test knows it (``bootstrap``)
    port: int = 0
    _log_offset: int = field(default=0)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def props_path(self) -> Path:
        return self.root / "server.properties"

    @property
    def out_path(self) -> Path:
        return self.root / "server.out"

    def format(self, cluster_id: str, *args: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.props_path.write_text(self.properties)
        r = subprocess.run([str(self.home.script("kafka-storage")), "format", "-t", cluster_id,
                            "-c", str(self.props_path), "--ignore-formatted", *args],
                           capture_output=True, text=True, timeout=120,
                           env=server_env(self.home, self.root / "logs", "-Xmx128m"))
        if r.returncode != 0:
            raise RuntimeError(f"kafka-storage.sh format failed:\n{r.stdout}\n{r.stderr}")

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        with self.out_path.open("ab") as out:
            out.write(f"\n===== start {self.starts} =====\n".encode())
            self._log_offset = out.tell()
            self.proc = subprocess.Popen([str(self.home.script("kafka-server-start")), str(self.props_path)],
                                         stdout=out, stderr=subprocess.STDOUT,
                                         env=server_env(self.home, self.root / "logs", self.heap),
                                         start_new_session=True)

    def log(self, since_start: bool = False) -> str:
        if not self.out_path.exists():
            return ""
        with self.out_path.open("rb") as f:
            if since_start:   # not the earlier starts' output (megabytes at a million partitions)
                f.seek(self._log_offset)
            return f.read().decode(errors="replace")

    def wait_started(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Kafka Server started" in self.log(since_start=True):
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"server {self.node_id} exited:\n{self.log()[-4000:]}")
            time.sleep(0.1)
        raise AssertionError(f"server {self.node_id} did not start in {timeout}s:\n{self.log()[-4000:]}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9."""
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 60) -> float:
        """SIGTERM (a broker's controlled shutdown); how long it took to exit."""
        if not self.running:
            return 0.0
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"server {self.node_id} did not stop within {timeout}s") from None
        return time.monotonic() - t0

    def close(self) -> None:
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def controller_log(self) -> str:
        """``controller.log``: Kafka's log4j configuration sends org.apache.kafka.controller (the
        QuorumController and its managers) there, not to the console."""
        path = self.root / "logs" / "controller.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def faults(self, benign: tuple[str, ...] = ()) -> list[str]:
        """ERROR lines and fault-handler lines of the server's whole output and controller.log,
        each with the line after it (where Kafka prints the exception, so that a failing test
        says what was thrown); ``benign``: patterns of errors a test expects, matched against
        the same two lines."""
        lines = (self.log() + "\n" + self.controller_log()).splitlines()
        out = []
        for i, ln in enumerate(lines):
            if not re.search(r"\] ERROR |[Ff]ault handler|FaultHandlerException", ln):
                continue
            context = ln + "\n" + (lines[i + 1] if i + 1 < len(lines) else "")
            if not any(re.search(b, context) for b in benign):
                out.append(context)
        return out


def combined_server(home: KafkaHome, root: Path, node_id: int = 1, extra: str = "",
                    cluster_id: str = "q1VXfFxQTP-jiWo7uSLPvw") -> KafkaServer:
    """A one-node Kafka cluster (broker and controller), formatted and started (wait with
    ``wait_started``; ``close`` kills it, ``stop`` is the graceful SIGTERM)."""
    port, controller_port = free_ports(2)
    server = KafkaServer(home, root, node_id, combined_properties(node_id, port, controller_port, root / "data", extra),
                         port=port)
    server.format(cluster_id)
    server.start()
    return server
