"""A genuine Apache Kafka 3.9 server (combined broker + controller, one node) for tests
that compare kraftnode's answers with a Kafka broker's (shared/kafka-3.9/README.md: format,
start as a child process, ready at "Kafka Server started", stop by PID)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.cluster import free_ports
from tests.support.kafka import KafkaHome, java_env

__all__ = ["KafkaBroker"]


class KafkaBroker:
    def __init__(self, kafka: KafkaHome, root: Path, node_id: int = 1, extra: str = "") -> None:
        self.kafka = kafka
        self.root = root
        self.node_id = node_id
        self.port, self.controller_port = free_ports(2)
        root.mkdir(parents=True, exist_ok=True)
        self.config = root / "server.properties"
        self.config.write_text(
            f"process.roles=broker,controller\nnode.id={node_id}\n"
            f"controller.quorum.voters={node_id}@127.0.0.1:{self.controller_port}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}\n"
            "controller.listener.names=CONTROLLER\ninter.broker.listener.name=PLAINTEXT\n"
            f"log.dirs={root / 'data'}\nnum.partitions=1\noffsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n" + extra)
        self.env = java_env({"LOG_DIR": str(root / "logs"), "KAFKA_HEAP_OPTS": "-Xmx384m"})
        fmt = subprocess.run([str(kafka.script("kafka-storage")), "format", "-t", "q1VXfFxQTP-jiWo7uSLPvw", "-c",
                              str(self.config)], capture_output=True, text=True, env=self.env, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {fmt.stderr[-2000:]}")
        self.out = (root / "server.out").open("w")
        self.proc = subprocess.Popen([str(kafka.script("kafka-server-start")), str(self.config)], stdout=self.out,
                                     stderr=subprocess.STDOUT, env=self.env, start_new_session=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return (self.root / "server.out").read_text(errors="replace")

    def wait_started(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Kafka Server started" in self.log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError("the genuine Kafka server did not start:\n" + self.log()[-4000:])

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.out.close()
