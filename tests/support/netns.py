"""Real multi-process quorums in Linux network namespaces, so a test can cut a node off
the network (a real partition: its packets are dropped, its TCP connections hang) and
heal it again.

Layout (every name prefixed ``kn-<pid>-``, so concurrent runs never collide and the
teardown removes only what this run created)::

    hub namespace:   bridge br0 (10.231.0.254/24, the tests' client vantage point)
                     veth v1 .. vN, ports of br0
    node namespace i: lo, eth0 = peer of v<i>, 10.231.0.<i>/24; one `kraftnode start`

The addresses exist only inside these namespaces (none is connected to the host's
namespace), so no traffic leaves them. ``isolate(i)`` sets ``v<i>`` down on the hub
side: node i keeps its address (it still listens and a client inside its own namespace
still reaches it) but nothing passes between it and the others. ``heal(i)`` sets it up.

The test process talks to the nodes without leaving its own namespace: ``in_netns``
runs a function in a fresh thread that first joins the target namespace (setns(2) is
per thread), so every socket that function creates lives there.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kraftnode.commands.quorum import QuorumInfo, ReplicaInfo
from kraftnode.protocol import DescribeQuorumRequest
from kraftnode.protocol.registry import DESCRIBE_QUORUM
from kraftnode.quorum_client import ClientError, call
from kraftnode.vocabulary import METADATA_TOPIC
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE

T = TypeVar("T")

SUBNET = "10.231.0"
HUB_ADDR = f"{SUBNET}.254"
PORT = 9093
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here (a skip reason), or None."""
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    probe = f"kn-{os.getpid()}-probe"
    r = ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"`ip netns add` failed (no CAP_SYS_ADMIN?): {r.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


def in_netns(ns: str, fn: Callable[[], T], timeout: float = 30) -> T:
    """``fn()`` run in a new thread inside namespace ``ns``; its sockets live there.
    ``fn`` must bound its own waits; ``timeout`` is a backstop."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({ns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 -- re-raised in the caller's thread
            out["error"] = e

    t = threading.Thread(target=run, name=f"in-netns-{ns}", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise AssertionError(f"call in namespace {ns} still running after {timeout}s")
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]  # type: ignore[return-value]


@dataclass
class NetnsQuorum:
    """N voters, one per namespace, static ``controller.quorum.voters``."""

    root: Path
    n: int
    extra: str = ""
    #: extra environment for the node processes (a test hook such as tests/support/plant_site)
    env: dict[str, str] = field(default_factory=dict)
    #: directories put first on the node processes' PYTHONPATH
    path_first: list[str] = field(default_factory=list)
    prefix: str = field(default_factory=lambda: f"kn-{os.getpid()}-")
    procs: dict[int, subprocess.Popen[bytes] | None] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return list(range(1, self.n + 1))

    @property
    def hub(self) -> str:
        return self.prefix + "hub"

    def ns(self, i: int) -> str:
        return f"{self.prefix}n{i}"

    @staticmethod
    def addr(i: int) -> str:
        return f"{SUBNET}.{i}"

    def _add_ns(self, name: str) -> None:
        ip("netns", "add", name)
        self.created.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def setup(self) -> None:
        """Namespaces, bridge and links, then format every node (nothing started)."""
        self._add_ns(self.hub)
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "addr", "add", f"{HUB_ADDR}/24", "dev", "br0")
        ip("-n", self.hub, "link", "set", "br0", "up")
        for i in self.ids:
            self._add_ns(self.ns(i))
            ip("-n", self.hub, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0",
               "netns", self.ns(i))
            ip("-n", self.hub, "link", "set", f"v{i}", "master", "br0", "up")
            ip("-n", self.ns(i), "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            ip("-n", self.ns(i), "link", "set", "eth0", "up")
        voters = ",".join(f"{i}@{self.addr(i)}:{PORT}" for i in self.ids)
        for i in self.ids:
            d = self.root / f"node{i}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "server.properties").write_text(
                f"node.id={i}\nprocess.roles=controller\n"
                f"listeners=CONTROLLER://{self.addr(i)}:{PORT}\ncontroller.listener.names=CONTROLLER\n"
                f"controller.quorum.voters={voters}\nlog.dirs={d / 'metadata'}\n{self.extra}")
            subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config",
                            str(d / "server.properties"), "--cluster-id", CLUSTER_ID],
                           check=True, capture_output=True, timeout=60)

    def start(self, i: int) -> None:
        d = self.root / f"node{i}"
        logf = (d / "node.log").open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env,
               "PYTHONPATH": os.pathsep.join([*self.path_first, *(p for p in sys.path if p)])}
        # `ip netns exec` execs the command: the Popen pid is the node's own pid
        self.procs[i] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(i), sys.executable, "-m", "kraftnode", "start",
             str(d / "server.properties")],
            stdout=logf, stderr=subprocess.STDOUT, env=env)
        logf.close()

    def start_all(self) -> None:
        for i in self.ids:
            self.start(i)

    def running(self) -> list[int]:
        return [i for i, p in self.procs.items() if p is not None and p.poll() is None]

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for i, p in self.procs.items():
            if p is not None:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    pass
            self.procs[i] = None

    def teardown(self) -> None:
        """Every process, then every namespace this run created (their links go with
        them), plus any namespace left with this run's prefix."""
        self.kill_all()
        listed = ip("netns", "list", check=False).stdout.split()
        names = set(self.created) | {n for n in listed if n.startswith(self.prefix)}
        for name in sorted(names):
            ip("netns", "del", name, check=False)
        self.created.clear()

    def isolate(self, i: int) -> None:
        ip("-n", self.hub, "link", "set", f"v{i}", "down")

    def heal(self, i: int) -> None:
        ip("-n", self.hub, "link", "set", f"v{i}", "up")

    def log(self, i: int) -> str:
        return (self.root / f"node{i}" / "node.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- node {i}\n{self.log(i)[-3000:]}" for i in self.ids)

    def quorum(self, among: list[int] | None = None) -> QuorumInfo | None:
        """The quorum as the leader describes it, asked from the hub: DescribeQuorum to
        each node of ``among`` (default: all) in turn, 1 s each, first leader's answer.
        (A follower forwards the question to the leader it knows; one cut off from it
        runs into the 1 s and the next node is asked.)"""
        servers = [(self.addr(i), PORT) for i in (among or self.ids)]
        req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name=METADATA_TOPIC, partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])

        def ask() -> QuorumInfo | None:
            for host, port in servers:
                try:
                    _, resp = call(host, port, DESCRIBE_QUORUM, 2, req, timeout=1.0)
                except ClientError:
                    continue
                part = resp.topics[0].partitions[0] if resp.topics else None  # type: ignore[attr-defined]
                if resp.error_code or part is None or part.error_code or part.leader_id < 0:  # type: ignore[attr-defined]
                    continue
                voters = [ReplicaInfo(v.replica_id, v.replica_directory_id, v.log_end_offset,
                                      v.last_fetch_timestamp, v.last_caught_up_timestamp)
                          for v in part.current_voters]
                return QuorumInfo("", part.leader_id, part.leader_epoch, part.high_watermark, voters, [])
            return None

        return in_netns(self.hub, ask, timeout=2.0 * len(servers) + 5)

    def wait_for(self, what: str, pred: Callable[[QuorumInfo], bool], timeout: float,
                 among: list[int] | None = None) -> QuorumInfo:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            info = self.quorum(among)
            if info is not None:
                last = info
                if pred(info):
                    return info
            time.sleep(0.05)
        raise AssertionError(f"{what}: not within {timeout}s (last seen {last}); logs:\n{self.logs()}")
