"""A genuine Java ``Admin`` in one long-lived JVM (``tests/interop/java/admin/AdminDriver.java``):
commands on its stdin, one JSON line back for each."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any

from tests.support.kafka import KafkaHome, java_env


class JavaAdmin:
    def __init__(self, kafka: KafkaHome) -> None:
        classes = kafka.compile("admin")
        self.proc = subprocess.Popen(kafka.java(classes, "AdminDriver"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=java_env())
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        assert self._next(60) == {"ready": True}

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _next(self, timeout: float) -> Any:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer from the Java Admin in {timeout}s; stderr:\n"
                                 + "".join(self.stderr[-50:])) from None
        if line is None:
            raise AssertionError("the Java Admin exited; stderr:\n" + "".join(self.stderr[-50:]))
        return json.loads(line)

    def __call__(self, *words: object, timeout: float = 90) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        return self._next(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
