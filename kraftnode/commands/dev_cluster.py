"""``kraftnode dev-cluster``: a local quorum on free loopback ports, until Ctrl-C.

This is the README's main job.  It writes one ``server.properties`` per node under
``--dir`` (a fresh temporary directory by default), starts each node as its own
``kraftnode start`` process, prints where each listens and what the quorum looks
like, and stops them all on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kraftnode import logsetup
from kraftnode.commands import format as format_command
from kraftnode.commands.quorum import format_replication, format_status
from kraftnode.config import ConfigError, ServerConfig
from kraftnode.errors import UsageError
from kraftnode.log.meta_properties import MetaPropertiesError, read_meta_properties
from kraftnode.log.uuids import random_uuid
from kraftnode.quorum_client import QuorumInfo, fetch_quorum_info
from recordbatch.wire import uuid_to_base64

NAME = "dev-cluster"
#: how long the nodes get to shut down cleanly after dev-cluster's SIGTERM
STOP_TIMEOUT_S = 30.0
#: how long dev-cluster waits for a node it had to kill before it gives up on it
KILL_TIMEOUT_S = 10.0
HELP = "format and start a local quorum on loopback, print its status, run until Ctrl-C"
EXAMPLES = """\
  kraftnode dev-cluster                          # 3 voters in a new temporary directory
  kraftnode dev-cluster --dir ./dev --nodes 5    # create ./dev; run it again to restart it
  kraftnode dev-cluster --dir ./dev --log-level DEBUG
  kraftnode dev-cluster --application-records    # Produce and groups may write to the log
A directory that already holds a dev cluster is restarted with its data, cluster id, node ids
and ports; an empty or missing one is created. Each node's log is DIR/nodeN/node.log.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=None,
                   help="number of voters when creating the cluster (default 3)")
    p.add_argument("--dir", help="the cluster's directory: restarted when it holds a dev cluster, "
                                 "created when empty or missing (default: a new temporary directory)")
    p.add_argument("--for-seconds", type=float, default=None,
                   help="stop by itself after this many seconds (for scripted runs)")
    p.add_argument("--application-records", action="store_true",
                   help="let applications write their own records to the log (Produce, consumer groups): "
                        "starts every node with kraftnode.application.records.enable=true, after which no "
                        "Kafka broker can register with the cluster (docs/server.md)")
    p.add_argument("--log-level", metavar="LEVEL", default=None,
                   help="the nodes' log level: DEBUG, INFO, WARN or ERROR "
                        "(default: $KRAFTNODE_LOG_LEVEL, else INFO)")


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (bound at once, then released). The test suite's
    clusters and the benchmarks pick theirs with this too."""
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


@dataclass
class DevCluster:
    root: Path
    cluster_id: str
    ports: list[int]
    reused: bool
    #: each node's kraftnode.metrics.listener port (None: that node has no metrics listener)
    metrics_ports: list[int | None]

    @property
    def voters(self) -> str:
        return ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(self.ports))

    def node_dir(self, node_id: int) -> Path:
        return self.root / f"node{node_id}"


def _existing(root: Path) -> DevCluster | None:
    """The dev cluster already in ``root`` (None when ``root`` is empty or missing)."""
    if root.exists() and not root.is_dir():
        raise UsageError(f"--dir {root} is not a directory")
    if not root.exists() or not any(root.iterdir()):
        return None
    n = 0
    while (root / f"node{n + 1}" / "server.properties").is_file():
        n += 1
    if n == 0:
        raise UsageError(f"--dir {root} is not empty and holds no dev cluster "
                         "(no node1/server.properties): give an empty or new directory")
    ports: list[int] = []
    cluster_ids = set()
    for node_id in range(1, n + 1):
        props = root / f"node{node_id}" / "server.properties"
        try:
            cfg = ServerConfig.load(props)
            ports.append(cfg.listeners[0].port)
            meta = read_meta_properties(cfg.metadata_log_dir)
        except (ConfigError, MetaPropertiesError, IndexError) as e:
            raise UsageError(f"{props}: {e}") from None
        if meta is None:
            raise UsageError(f"node {node_id} in {root} was never formatted "
                             f"({cfg.metadata_log_dir}/meta.properties is missing)")
        cluster_ids.add(meta.cluster_id)
    if len(cluster_ids) != 1:
        raise UsageError(f"the nodes in {root} belong to different clusters: {sorted(cluster_ids)}")
    return DevCluster(root, cluster_ids.pop(), ports, reused=True,
                      metrics_ports=[_metrics_port(root / f"node{i}" / "server.properties")
                                     for i in range(1, n + 1)])


def _metrics_port(props: Path) -> int | None:
    """The port of a node's kraftnode.metrics.listener (clusters made before metrics: None)."""
    m = re.search(r"^kraftnode\.metrics\.listener=.*:(\d+)\s*$", props.read_text(), re.M)
    return int(m.group(1)) if m else None


def _create(root: Path, nodes: int) -> DevCluster:
    ports = free_ports(2 * nodes)   # the raft listener and kraftnode.metrics.listener of each node
    cl = DevCluster(root, uuid_to_base64(random_uuid()), ports[:nodes], reused=False,
                    metrics_ports=list(ports[nodes:]))
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--dir {root}: cannot create: {e.strerror}") from None
    for i, port in enumerate(cl.ports):
        node_id = i + 1
        node_dir = cl.node_dir(node_id)
        node_dir.mkdir(exist_ok=True)
        props = node_dir / "server.properties"
        props.write_text(
            f"node.id={node_id}\nprocess.roles=controller\n"
            f"listeners=CONTROLLER://127.0.0.1:{port}\n"
            f"controller.listener.names=CONTROLLER\n"
            f"controller.quorum.voters={cl.voters}\n"
            f"log.dirs={node_dir / 'metadata'}\n"
            f"kraftnode.metrics.listener=127.0.0.1:{cl.metrics_ports[i]}\n"
        )
        _format(props, cl.cluster_id, node_id)
    return cl


def _format(props: Path, cluster_id: str, node_id: int) -> None:
    """``kraftnode format`` in this process: milliseconds, where a ``kraftnode format`` process
    per node costs an interpreter start and the codec imports each (seconds on a busy host)."""
    parser = argparse.ArgumentParser(prog=f"kraftnode {format_command.NAME}")
    format_command.add_arguments(parser)
    args = parser.parse_args(["--config", str(props), "--cluster-id", cluster_id, "--ignore-formatted"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = format_command.run(args)
        except UsageError as e:
            print(f"kraftnode {format_command.NAME}: error: {e}", file=sys.stderr)  # as cli.main says it
            rc = 2
    if rc != 0:
        raise UsageError(f"formatting node {node_id} failed: {out.getvalue().strip()}")


def run(args: argparse.Namespace) -> int:
    if args.nodes is not None and not 1 <= args.nodes <= 9:
        raise UsageError(f"--nodes must be between 1 and 9, not {args.nodes}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        logsetup.resolve_level(args.log_level)   # a bad level fails here, not in every node
    except logsetup.LogSetupError as e:
        raise UsageError(str(e)) from None
    if args.log_level:
        env[logsetup.ENV_LEVEL] = args.log_level
    root, cl = _cluster(args)
    for port in cl.ports:
        _check_port_free(port)
    overrides = ["--override", "kraftnode.application.records.enable=true"] if args.application_records else []
    procs: list[subprocess.Popen[str]] = []
    try:
        for i in range(len(cl.ports)):
            node_dir = cl.node_dir(i + 1)
            log = (node_dir / "node.log").open("a")
            # Each node in its own process group: Ctrl-C (the terminal's SIGINT to the
            # foreground group) reaches this process only, which then stops every node with
            # one SIGTERM. A node that also got the SIGINT could be hit by that SIGTERM
            # while already shutting down, and die without its clean shutdown.
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "kraftnode", "start", str(node_dir / "server.properties"), *overrides],
                stdout=log, stderr=subprocess.STDOUT, text=True, env=env, process_group=0))
        _print_cluster(args, root, cl)
        print(f"starting {len(procs)} nodes; waiting for a leader to commit the bootstrap records ...",
              flush=True)
        _wait_listening(cl.ports, root)
        _print_status(cl.ports)
        print("running; Ctrl-C stops the cluster", flush=True)
        deadline = None if args.for_seconds is None else time.monotonic() + args.for_seconds
        _wait(procs, deadline)
    except KeyboardInterrupt:
        pass
    finally:
        _stop(procs)
        print(f"dev cluster stopped; its data stays in {root}")
    return 0


def _cluster(args: argparse.Namespace) -> tuple[Path, DevCluster]:
    """(its directory, the cluster): the one in ``--dir`` (created there if none), else a new
    one in a temporary directory."""
    if args.dir:
        root = Path(args.dir).absolute()
        found = _existing(root)
        if found is not None and args.nodes is not None and args.nodes != len(found.ports):
            raise UsageError(f"{root} holds a {len(found.ports)}-node cluster; --nodes {args.nodes} "
                             "cannot change it (use a new --dir)")
        if found is None:
            print(f"formatting {args.nodes or 3} nodes in {root} ...", flush=True)
        return root, found or _create(root, args.nodes or 3)
    root = Path(tempfile.mkdtemp(prefix="kraftnode-dev-"))
    print(f"formatting {args.nodes or 3} nodes in {root} ...", flush=True)
    return root, _create(root, args.nodes or 3)


def _print_cluster(args: argparse.Namespace, root: Path, cl: DevCluster) -> None:
    how = "restarted with its data" if cl.reused else "created"
    print(f"kraftnode dev cluster {cl.cluster_id} {how} in {root}")
    if not args.dir:
        print(f"  (a new temporary directory: `kraftnode dev-cluster --dir {root}` restarts "
              "this cluster; delete the directory when done)")
    for i, port in enumerate(cl.ports):
        print(f"  node {i + 1}: CONTROLLER://127.0.0.1:{port}  "
              f"(config {cl.node_dir(i + 1) / 'server.properties'}, log node.log)")
    print(f"  controller.quorum.voters={cl.voters}")
    if args.application_records:
        print("  application records: on (kraftnode.application.records.enable=true): Produce and "
              "consumer groups write to the log; no Kafka broker can register")
    urls = [f"http://127.0.0.1:{p}/metrics" for p in cl.metrics_ports if p is not None]
    if urls:
        print("  metrics: " + "  ".join(urls) + "  (and /healthz, /readyz)", flush=True)


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    """Every node stopped with one SIGTERM, side by side; killed when it does not stop."""
    # a second Ctrl-C while the nodes shut down must not leave them behind half-stopped
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    # one deadline for all (they stop side by side): a node takes well under a second;
    # 30 s leaves room for a host stalled by other work before a node is killed
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for i, p in enumerate(procs):
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"node {i + 1} (pid {p.pid}) did not stop within {STOP_TIMEOUT_S:.0f} s of "
                  f"SIGTERM ({process_state(p.pid)}): killed", flush=True)
            p.kill()
            try:
                p.wait(timeout=KILL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                # only a process stuck in the kernel outlives SIGKILL; say so, do not hang
                print(f"node {i + 1} (pid {p.pid}) is still there {KILL_TIMEOUT_S:.0f} s after "
                      f"SIGKILL ({process_state(p.pid)})", flush=True)


def _check_port_free(port: int) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the node binds: TIME_WAIT is fine
    try:
        s.bind(("127.0.0.1", port))
    except OSError as e:
        raise UsageError(f"port 127.0.0.1:{port} of this dev cluster is in use ({e.strerror}): "
                         "is the cluster already running?") from None
    finally:
        s.close()


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
    servers = [("127.0.0.1", p) for p in ports]
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = fetch_quorum_info(servers, 2)
            if info.leader_id >= 0 and _committed(info):
                break
        except UsageError:
            pass
        if time.monotonic() > deadline:
            print("  no leader has committed the bootstrap records yet; see the node logs")
            return
        time.sleep(0.2)
    print()
    print(format_status(info), end="")
    print()
    print(format_replication(info), end="")
    print()


def _committed(info: QuorumInfo) -> bool:
    """The high watermark covers the bootstrap records (the first leader's LeaderChange at 0,
    metadata.version from 1) and everything the leader had appended when asked."""
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    return (leader is not None and info.high_watermark >= 2
            and info.high_watermark >= leader.log_end_offset)


def process_state(pid: int) -> str:
    """What a node that ignores the stop is doing, as Linux tells it (``/proc/PID``): its
    scheduler state and the kernel function it waits in, e.g. ``D (disk sleep) in
    fdatasync``. ``state unknown`` where there is no ``/proc``."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        state = next((line.split(":", 1)[1].strip() for line in status.splitlines()
                      if line.startswith("State:")), "?")
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return "state unknown"
    return f"state {state}" + (f" in {wchan}" if wchan not in ("", "0") else "")


def _wait(procs: list[subprocess.Popen[str]], deadline: float | None) -> None:
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    # the terminal closing: its SIGHUP reaches this process only (the nodes have their own
    # process groups), which stops them as Ctrl-C does
    signal.signal(signal.SIGHUP, on_term)
    # Ctrl-C too is a flag here, not a KeyboardInterrupt: raised inside Popen.poll() between
    # its waitpid lock's acquire and its try, it left the lock held, so that node was never
    # reaped (every later wait timed out, the wait after SIGKILL blocked for ever)
    signal.signal(signal.SIGINT, on_term)
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
