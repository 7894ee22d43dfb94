"""``kraftnode dev-cluster``: a local quorum on free loopback ports, until Ctrl-C.

This is the README's main job.  It writes one ``server.properties`` per node under
``--dir`` (a fresh temporary directory by default), starts each node as its own
``kraftnode start`` process, prints where each listens and what the quorum looks
like, and stops them all on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kraftnode.cli import UsageError

NAME = "dev-cluster"
HELP = "format and start a local quorum on loopback, print its status, run until Ctrl-C"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=3, help="number of voters (default 3)")
    p.add_argument("--dir", help="working directory (default: a new temporary directory)")
    p.add_argument("--for-seconds", type=float, default=None,
                   help="stop by itself after this many seconds (for scripted runs)")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.nodes <= 9:
        raise UsageError(f"--nodes must be between 1 and 9, not {args.nodes}")
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kraftnode-dev-"))
    root.mkdir(parents=True, exist_ok=True)
    ports = _free_ports(args.nodes)
    metrics_ports = _free_ports(args.nodes)   # kraftnode.metrics.listener of each node
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    procs: list[subprocess.Popen[str]] = []
    from kraftnode.log.uuids import random_uuid
    from recordbatch.wire import uuid_to_base64

    cluster_id = uuid_to_base64(random_uuid())
    try:
        for i, port in enumerate(ports):
            node_id = i + 1
            node_dir = root / f"node{node_id}"
            node_dir.mkdir(exist_ok=True)
            props = node_dir / "server.properties"
            props.write_text(
                f"node.id={node_id}\nprocess.roles=controller\n"
                f"listeners=CONTROLLER://127.0.0.1:{port}\n"
                f"controller.listener.names=CONTROLLER\n"
                f"controller.quorum.voters={voters}\n"
                f"log.dirs={node_dir / 'metadata'}\n"
                f"kraftnode.metrics.listener=127.0.0.1:{metrics_ports[i]}\n"
            )
            fmt = subprocess.run(
                [sys.executable, "-m", "kraftnode", "format", "--config", str(props),
                 "--cluster-id", cluster_id, "--ignore-formatted"],
                capture_output=True, text=True)
            if fmt.returncode != 0:
                raise UsageError(f"formatting node {node_id} failed: {fmt.stderr.strip()}")
            log = (node_dir / "node.log").open("w")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "kraftnode", "start", str(props)],
                stdout=log, stderr=subprocess.STDOUT, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}))
        print(f"kraftnode dev cluster {cluster_id} in {root}")
        for i, port in enumerate(ports):
            print(f"  node {i + 1}: CONTROLLER://127.0.0.1:{port}  "
                  f"(config {root / f'node{i + 1}' / 'server.properties'}, log node.log)")
        print(f"  controller.quorum.voters={voters}")
        print("  metrics: " + "  ".join(f"http://127.0.0.1:{p}/metrics" for p in metrics_ports)
              + "  (and /healthz, /readyz)")
        _wait_listening(ports, root)
        _print_status(ports)
        print("running; Ctrl-C stops the cluster", flush=True)
        deadline = None if args.for_seconds is None else time.monotonic() + args.for_seconds
        _wait(procs, deadline)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        print("dev cluster stopped")
    return 0


def _wait_listening(ports: list[int], root: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise UsageError(f"a node did not start listening on port {port}; "
                                     f"see the node logs under {root}") from None
                time.sleep(0.1)


def _print_status(ports: list[int], timeout: float = 30.0) -> None:
    """Wait for a leader, then print the quorum as kafka-metadata-quorum.sh would."""
    from kraftnode.commands.quorum import fetch_quorum_info, format_replication, format_status

    servers = [("127.0.0.1", p) for p in ports]
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = fetch_quorum_info(servers, 2)
            if info.leader_id >= 0:
                break
        except UsageError:
            pass
        if time.monotonic() > deadline:
            print("  no leader elected yet; see the node logs")
            return
        time.sleep(0.2)
    print()
    print(format_status(info), end="")
    print()
    print(format_replication(info), end="")
    print()


def _wait(procs: list[subprocess.Popen[str]], deadline: float | None) -> None:
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    reported: set[int] = set()
    while not stop:
        if deadline is not None and time.monotonic() > deadline:
            return
        for i, p in enumerate(procs):
            if p.poll() is not None and i not in reported:
                reported.add(i)
                print(f"node {i + 1} exited with code {p.returncode}; the others keep running",
                      flush=True)
        if len(reported) == len(procs):
            print("every node has exited")
            return
        time.sleep(0.2)
