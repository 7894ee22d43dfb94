"""Start real ``kraftnode`` processes on 127.0.0.1 for tests, and talk raw Kafka to them."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kraftnode.protocol.framing import encode_request, parse_response
from kraftnode.protocol.registry import SERVED
from recordbatch.message import Message
from tests.support.cluster import SUITE_RELEASE


@dataclass
class NodeProcess:
    proc: subprocess.Popen[str]
    port: int
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def running_node(tmp_path: Path, extra: str = "", node_id: int = 1,
                 env: dict[str, str] | None = None,
                 start_args: list[str] | None = None,
                 format_args: tuple[str, ...] = ()) -> Iterator[NodeProcess]:
    """A formatted single-voter quorum of one `kraftnode start` process (``env``: added to
    the environment, e.g. ``{"KRAFTNODE_LOG_LEVEL": "DEBUG"}``; ``format_args``: more
    `kraftnode format` arguments, e.g. --add-scram)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    free = s.getsockname()[1]
    s.close()
    props = tmp_path / f"server-{node_id}.properties"
    props.write_text(f"node.id={node_id}\nprocess.roles=controller\n"
                     f"listeners=CONTROLLER://127.0.0.1:{free}\ncontroller.listener.names=CONTROLLER\n"
                     f"controller.quorum.voters={node_id}@127.0.0.1:{free}\n"
                     f"log.dirs={tmp_path / f'meta-{node_id}'}\n{extra}")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(props),
                    "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--ignore-formatted", *format_args],
                   check=True, capture_output=True)
    log_path = tmp_path / f"node-{node_id}.log"
    with log_path.open("w") as logf:
        proc = subprocess.Popen([sys.executable, "-m", "kraftnode", "start", *(start_args or []),
                                 str(props)],
                                stdout=subprocess.PIPE, stderr=logf, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        port = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on \w+://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        assert port is not None, f"node did not start: {log_path.read_text()}"
        yield NodeProcess(proc, port, log_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def recv_frame(sock: socket.socket, timeout: float = 5.0) -> bytes | None:
    """One size-prefixed frame, or None if the peer closed the connection."""
    sock.settimeout(timeout)
    head = _recv_exactly(sock, 4)
    if head is None:
        return None
    size = int.from_bytes(head, "big", signed=True)
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def call(port: int, api_key: int, version: int, body: Message, correlation_id: int = 1,
         client_id: str | None = "kraftnode-tests", timeout: float = 5) -> tuple[int, Message]:
    spec = SERVED[api_key]
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(encode_request(spec, version, correlation_id, client_id, body))
        frame = recv_frame(s)
        assert frame is not None, "connection closed"
        return parse_response(spec, version, frame)


def frame_call(sock: socket.socket, api_key: int, version: int, body: Message, cid: int,
               client_id: str = "raft-client-3") -> Message:
    """One request on an open connection, answered on it (as a Kafka raft peer sends them:
    the connection stays open, so a node can tell peers apart by it)."""
    spec = SERVED[api_key]
    sock.sendall(encode_request(spec, version, cid, client_id, body))
    frame = recv_frame(sock)
    assert frame is not None
    return parse_response(spec, version, frame)[1]

