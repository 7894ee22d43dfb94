"""Quorums of real processes for the interop suite, formatted in-process (``kraftnode format``
through its CLI entry point: no interpreter start-up per node, which counts on a loaded
2-core machine); started, killed and described by ``Cluster``.

``StaticCluster(root, n)``: ``controller.quorum.voters`` (kraft.version 0), as ``Cluster``.
``DynamicCluster(root, voters, observers)`` (KIP-853, kraft.version 1): nodes 1..voters are
formatted with ``--initial-controllers`` naming every voter with its directory id; nodes
voters+1..n with ``--no-initial-controllers``, so they start as observers. Every node has
``controller.quorum.bootstrap.servers`` listing the voters.
"""

from __future__ import annotations

import contextlib
import io
import uuid
from dataclasses import dataclass

from kraftnode import cli
from kraftnode.log.meta_properties import read_meta_properties
from recordbatch.wire import uuid_to_base64
from tests.support.cluster import CLUSTER_ID, SUITE_RELEASE, Cluster, free_ports


def format_node(properties: str, cluster_id: str, *flags: str) -> None:
    """``kraftnode format --config PROPERTIES --cluster-id ID FLAGS``, in this process; at the
    suite's metadata.version (SUITE_RELEASE) unless FLAGS name one."""
    if not any(f in ("-r", "--release-version") or f.startswith("--release-version=")
               or f.startswith("metadata.version=") for f in flags):
        flags = (*SUITE_RELEASE, *flags)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = cli.main(["format", "--config", properties, "--cluster-id", cluster_id, *flags])
    assert rc == 0, out.getvalue()


@dataclass
class StaticCluster(Cluster):
    #: more `kraftnode format` arguments for every node (e.g. --add-scram)
    format_flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.ports = free_ports(self.n)
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in zip(self.ids, self.ports, strict=True))
        for i, port in zip(self.ids, self.ports, strict=True):
            d = self.root / f"node{i}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "server.properties").write_text(
                f"node.id={i}\nprocess.roles=controller\n"
                f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
                f"controller.quorum.voters={voters}\nlog.dirs={d / 'metadata'}\n{self.extra}")
            format_node(str(d / "server.properties"), CLUSTER_ID, *self.format_flags)


@dataclass
class DynamicCluster(Cluster):
    observers: int = 0

    def __post_init__(self) -> None:
        self.n += self.observers
        self.ports = free_ports(self.n)
        self.dir_ids = {i: uuid.uuid4() for i in self.ids}
        voters = self.ids[: self.n - self.observers]
        initial = ",".join(f"{i}@127.0.0.1:{self.port(i)}:{uuid_to_base64(self.dir_ids[i])}" for i in voters)
        bootstrap = ",".join(f"127.0.0.1:{self.port(i)}" for i in voters)
        for i in self.ids:
            d = self.root / f"node{i}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "server.properties").write_text(
                f"node.id={i}\nprocess.roles=controller\n"
                f"listeners=CONTROLLER://127.0.0.1:{self.port(i)}\ncontroller.listener.names=CONTROLLER\n"
                f"controller.quorum.bootstrap.servers={bootstrap}\nlog.dirs={d / 'metadata'}\n{self.extra}")
            flag = ["--initial-controllers", initial] if i in voters else ["--no-initial-controllers"]
            format_node(str(d / "server.properties"), CLUSTER_ID, *flag)
            if i not in voters:  # --no-initial-controllers picks a random directory id
                meta = read_meta_properties(d / "metadata")
                assert meta is not None and meta.directory_id is not None
                self.dir_ids[i] = meta.directory_id

    @property
    def voter_ids(self) -> list[int]:
        return self.ids[: self.n - self.observers]

    def properties(self, i: int) -> str:
        return str(self.root / f"node{i}" / "server.properties")

    def directory_id(self, i: int) -> str:
        return uuid_to_base64(self.dir_ids[i])
