"""Kafka 3.9's storage classes as a judge of our files: one JVM running
``tests/interop/java/storage/StorageCheck.java``, one command per line (see that file)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.kafka import KafkaHome, java_env


class StorageCheck:
    def __init__(self, kafka: KafkaHome) -> None:
        self.home = kafka
        classes = kafka.compile("storage")
        self.proc = subprocess.Popen(kafka.java(classes, "StorageCheck"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=java_env(), bufsize=1)

    def call(self, *words: object) -> dict[str, Any]:
        """Run one command; raises with Kafka's exception when it failed."""
        res = self.try_call(*words)
        if "error" in res:
            raise AssertionError(f"{words[0]} failed in Kafka's code: {res['error']}\n{res.get('trace', '')}")
        return res

    def try_call(self, *words: object) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        line = "\t".join(os.fspath(w) if isinstance(w, Path) else str(w) for w in words)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline()
        if not out:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"StorageCheck exited: {err[-3000:]}")
        result: dict[str, Any] = json.loads(out)
        return result

    def verify(self, logs: list[Path], *, closed: bool) -> list[str]:
        """Findings of Kafka's sanity checks and index verification over segment ``.log`` files."""
        if not logs:
            return []
        findings: list[str] = self.call("verify", "closed" if closed else "live", *logs)["findings"]
        return findings

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> StorageCheck:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def segment_logs(log_dir: Path) -> list[Path]:
    """Every segment ``.log`` of a node's metadata log dir, oldest first."""
    return sorted((log_dir / "__cluster_metadata-0").glob("*.log"))
