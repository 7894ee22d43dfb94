"""A genuine Kafka 3.9 ``KafkaRaftClient`` in its own JVM, as a quorum member beside
kraftnode nodes: the ``raftnode`` harness in ``tests/interop/java/raftnode/``.

The harness takes Kafka's config names as ``key=value`` arguments (``extra``: e.g. the
``listener.security.protocol.map``, ``ssl.*``, ``sasl.*`` and ``listener.name.<l>.*`` keys of
an SSL or SASL_SSL controller listener, read by Kafka's own config definitions), reports JSON
lines on stdout (``started`` with the listener's security protocol, ``leader``, ``commit``,
``status``, ``appended``, ``inbound`` with the principal Kafka's channel authenticated for a new
connection, ``vote_request`` with the version of every Vote received, ``registration``,
``fault`` ...) and reads commands on stdin (``status``, ``append N``, ``resign``,
``snapshot``, ``shutdown``). This class starts it, collects its events on a reader thread, and waits for
conditions on them.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.kafka import KafkaHome, java_env

MAIN = "raftnode.RaftNode"


def directory_id() -> str:
    """A random directory id in Kafka's base64url form (never a reserved one)."""
    import base64

    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if int.from_bytes(raw[:8], "big") != 0 and not text.startswith("-"):
            return text


class JavaRaftNode:
    """One ``raftnode.RaftNode`` JVM."""

    def __init__(self, kafka: KafkaHome, root: Path, *, node_id: int, port: int, cluster_id: str,
                 voters: str = "", bootstrap_servers: str = "", dir_id: str | None = None,
                 extra: dict[str, str] | None = None) -> None:
        self.node_id = node_id
        self.port = port
        self.directory_id = dir_id or directory_id()
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        args = {
            "node.id": str(node_id),
            "directory.id": self.directory_id,
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "cluster.id": cluster_id,
            "metadata.log.dir": str(root / "metadata"),
            "controller.quorum.voters": voters,
            "controller.quorum.bootstrap.servers": bootstrap_servers,
            **(extra or {}),
        }
        classes = kafka.compile("raftnode")
        argv = kafka.java(classes, MAIN, *(f"{k}={v}" for k, v in args.items()))
        # Kafka's raft at INFO (state transitions, refused requests) to stderr, the rest at WARN
        log4j = root / "log4j.properties"
        log4j.write_text("log4j.rootLogger=WARN, stderr\n"
                         "log4j.logger.org.apache.kafka.raft=INFO\n"
                         "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                         "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                         "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
                         "log4j.appender.stderr.Target=System.err\n")
        argv = [a for a in argv if not a.startswith("-Dlog4j.configuration=")]
        argv.insert(1, f"-Dlog4j.configuration=file:{log4j}")
        self.stderr_path = root / "raftnode.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, env=java_env())
        self.events: list[dict[str, Any]] = []
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for(lambda e: e["event"] == "started", 30, "the Java raft node to start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            ev = json.loads(line)
            with self._lock:
                self.events.append(ev)
            if ev["event"] in ("status", "appended", "resigned", "snapshot_requested", "error"):
                self._replies.put(ev)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def faults(self) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == "fault"]

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            with self._lock:
                new = self.events[seen:]
                seen = len(self.events)
            for ev in new:
                if pred(ev):
                    return ev
            if self.proc.poll() is not None:
                raise AssertionError(f"Java raft node exited ({self.proc.returncode}) waiting for {what}:\n"
                                     + self.stderr()[-3000:])
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}; stderr:\n{self.stderr()[-3000:]}")

    def command(self, text: str, timeout: float = 10) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        try:
            return self._replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to {text!r}; stderr:\n{self.stderr()[-3000:]}") from None

    def status(self) -> dict[str, Any]:
        return self.command("status")

    def append(self, n: int) -> dict[str, Any]:
        return self.command(f"append {n}")

    def resign(self) -> dict[str, Any]:
        return self.command("resign")

    def request_snapshot(self, **options: str) -> None:
        """``RaftClient.createSnapshot`` at the end of the next committed batch (then
        ``MockLog.deleteBeforeSnapshot`` unless ``clean="false"``); wait for it with
        :meth:`wait_snapshot_created`."""
        r = self.command(" ".join(["snapshot", *(f"{k}={v}" for k, v in options.items())]))
        assert r["event"] == "snapshot_requested", r

    def wait_snapshot_created(self, timeout: float = 20) -> dict[str, Any]:
        ev = self.wait_for(lambda e: e["event"] == "snapshot_created", timeout, "the Java snapshot")
        assert "error" not in ev, ev
        return ev

    def wait_status(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        st = self.status()
        while not pred(st):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; last status {st}")
            time.sleep(0.05)
            st = self.status()
        return st

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("shutdown\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
