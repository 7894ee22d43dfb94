"""Dynamic (KIP-853, kraft.version 1) quorums of real processes, formatted as Kafka 3.9 does.

``DynamicCluster(root, voters, observers)``: nodes 1..voters are formatted with
``--initial-controllers`` naming every voter with its directory id; nodes voters+1..n with
``--no-initial-controllers``, so they start as observers. Every node has
``controller.quorum.bootstrap.servers`` listing the voters. The rest is ``Cluster``'s.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from dataclasses import dataclass

from kraftnode.log.meta_properties import read_meta_properties
from recordbatch.wire import uuid_to_base64
from tests.support.cluster import CLUSTER_ID, Cluster, free_ports


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
            subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config",
                            str(d / "server.properties"), "--cluster-id", CLUSTER_ID, *flag],
                           check=True, capture_output=True)
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
