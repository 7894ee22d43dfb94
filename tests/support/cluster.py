"""Real multi-process quorums on 127.0.0.1 for tests: format, start, kill -9, restart."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kraftnode.commands.dev_cluster import free_ports
from kraftnode.commands.quorum import QuorumInfo, fetch_quorum_info
from kraftnode.errors import UsageError

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
#: the opt-in of a quorum whose tests write application records (Produce, groups): most do;
#: a quorum genuine brokers register with must not have it (docs/server.md)
APPLICATION_RECORDS = "kraftnode.application.records.enable=true\n"
#: the metadata.version the suite's quorums are formatted at: Kafka 3.9's, as before
#: kraftnode's default became Kafka 4.4's (issue 37), so that genuine 3.9 brokers and 3.9
#: controllers keep joining them; tests of the 4.x levels format with their own
SUITE_RELEASE = ("--release-version", "3.9-IV0")


@dataclass
class Cluster:
    root: Path
    n: int
    extra: str = ""
    #: per-node additions to server.properties (node id -> lines), after ``extra``
    node_extra: dict[int, str] = field(default_factory=dict)
    #: voter ids (among 1..n) run by something else -- genuine Kafka controllers: their ports
    #: are in ``controller.quorum.voters``, but they are not formatted or started here
    foreign: tuple[int, ...] = ()
    ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes] | None] = field(default_factory=dict)
    #: kraftnode.application.records.enable=true (before ``extra``, which may say otherwise)
    application_records: bool = True
    #: the ``kraftnode format`` release flags; None: SUITE_RELEASE (read when formatting)
    release: tuple[str, ...] | None = None
    #: more ``kraftnode start`` options (``--log-config FILE``), before the properties file
    start_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.ports = free_ports(self.n)
        self.write_properties()
        release = SUITE_RELEASE if self.release is None else self.release
        for i in self.own_ids:
            subprocess.run([sys.executable, "-m", "kraftnode", "format", *release, "--config",
                            str(self.root / f"node{i}" / "server.properties"), "--cluster-id",
                            CLUSTER_ID], check=True, capture_output=True)

    def write_properties(self) -> None:
        """(Re)write every node's server.properties: after changing ``extra`` or
        ``node_extra`` of a formatted cluster, before its nodes start."""
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in zip(self.ids, self.ports, strict=True))
        for i, port in zip(self.ids, self.ports, strict=True):
            if i in self.foreign:
                continue
            d = self.root / f"node{i}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "server.properties").write_text(
                f"node.id={i}\nprocess.roles=controller\n"
                f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
                f"controller.quorum.voters={voters}\nlog.dirs={d / 'metadata'}\n{self.opt_in}{self.extra}\n"
                f"{self.node_extra.get(i, '')}\n")

    @property
    def opt_in(self) -> str:
        return APPLICATION_RECORDS if self.application_records else ""

    @property
    def ids(self) -> list[int]:
        return list(range(1, self.n + 1))

    @property
    def own_ids(self) -> list[int]:
        """The kraftnode nodes: every id but the foreign ones."""
        return [i for i in self.ids if i not in self.foreign]

    def port(self, i: int) -> int:
        return self.ports[i - 1]

    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self, i: int) -> None:
        d = self.root / f"node{i}"
        logf = (d / "node.log").open("ab")
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "kraftnode", "start", *self.start_args, str(d / "server.properties")],
            stdout=logf, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def start_all(self) -> None:
        for i in self.own_ids:
            self.start(i)

    def kill(self, i: int) -> None:
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
        self.procs[i] = None

    def stop(self, i: int, timeout: float = 10) -> None:
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs[i] = None

    def running(self) -> list[int]:
        return [i for i, p in self.procs.items() if p is not None and p.poll() is None]

    def close(self) -> None:
        for i in list(self.procs):
            self.kill(i)

    def log(self, i: int) -> str:
        path = self.root / f"node{i}" / "node.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def quorum(self, among: list[int] | None = None) -> QuorumInfo | None:
        servers = [("127.0.0.1", self.port(i)) for i in (among or self.running())]
        try:
            info = fetch_quorum_info(servers, 2)
        except UsageError:
            return None
        return info if info.leader_id >= 0 else None

    def wait_for_leader(self, timeout: float = 20, exclude: int | None = None,
                        min_epoch: int = 0) -> QuorumInfo:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.quorum()
            if info is not None and info.leader_id != exclude and info.leader_epoch >= min_epoch \
                    and info.leader_id in self.running():
                return info
            time.sleep(0.05)
        raise AssertionError(f"no leader within {timeout}s; logs:\n" +
                             "\n".join(self.log(i)[-2000:] for i in self.own_ids))


def wait_for_hw(cl: Cluster, at_least: int = 1, timeout: float = 20) -> QuorumInfo:
    """Wait until the leader knows a high watermark of at least ``at_least``
    (a new leader's is unknown, -1, until its LeaderChange commits)."""
    deadline = time.monotonic() + timeout
    while True:
        info = cl.wait_for_leader(timeout)
        if info.high_watermark >= at_least:
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"high watermark stuck at {info.high_watermark}")
        time.sleep(0.05)


def wait_serving(cl: Cluster, i: int, timeout: float = 30) -> None:
    """Wait until node i (just restarted) listens and knows a leader, so that a client
    bootstrapping from every node does not meet a refused connection."""
    deadline = time.monotonic() + timeout
    while cl.quorum(among=[i]) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"node {i} not serving within {timeout}s:\n{cl.log(i)[-2000:]}")
        time.sleep(0.05)


def log_lines(text: str, pattern: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.search(pattern, ln)]


def serving(cl: Cluster, timeout: float = 30) -> Iterator[Cluster]:
    """For module fixtures (``yield from serving(cl)``): start every node, wait until the
    bootstrap records are committed, hand the cluster over, and kill it afterwards."""
    cl.start_all()
    try:
        wait_for_hw(cl, 1, timeout)
        yield cl
    finally:
        cl.close()
