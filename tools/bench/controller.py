"""Controller benchmark (issue 25, must-show 5): kraftnode controllers against an all-Kafka
controller quorum, with the same genuine Kafka 3.9 brokers, in one run.

For each system in turn: three controllers (three ``kraftnode start`` processes, or three
``kafka-server-start.sh`` controllers) and three genuine brokers on 127.0.0.1, then

* **topic creation**: CreateTopics of one topic (3 partitions, replication factor 3) sent to a
  broker on one open connection, the next one after the answer; latency = request to answer
  (the broker forwards it in an Envelope; the controller places, writes, commits, answers);
* **controller failover**: kill -9 of the active controller, then CreateTopics through a broker
  every 20 ms until one succeeds; time = kill to that success. The killed controller is started
  again before the next round.

Usage::

    .venv/bin/python tools/bench/controller.py [--creations N] [--failovers K] [--json] [--only kraftnode|kafka]

Needs genuine Kafka (``KAFKA_HOME`` or ``../shared/kafka-3.9``) and Java. Six JVMs run at once on
the Kafka side (small heaps); results are printed per system, then the ratios.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.protocol import generated as w  # noqa: E402
from kraftnode.protocol.registry import CREATE_TOPICS, DESCRIBE_QUORUM  # noqa: E402
from tests.support.cluster import CLUSTER_ID, Cluster, free_ports  # noqa: E402
from tests.support.kafka import KafkaHome, find_kafka_home  # noqa: E402
from tests.support.kafka_server import KafkaServer, broker_properties  # noqa: E402
from tests.support.node import call, frame_call  # noqa: E402

BROKERS = (101, 102, 103)
BROKER_EXTRA = "broker.heartbeat.interval.ms=500\nnum.network.threads=2\nnum.io.threads=2\n"
CONTROLLER_HEAP = "-Xmx256m -Xms128m"


def wait_until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


class Controllers:
    """Three controllers of one kind: start, find the active one, kill -9 and restart it."""

    def __init__(self, kind: str, kafka: KafkaHome, root: Path) -> None:
        self.kind = kind
        self.ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.kraft: Cluster | None = None
        self.kafka: dict[int, KafkaServer] = {}
        if kind == "kraftnode":
            self.kraft = Cluster(root / "controllers", 3)
            self.ports = {i: self.kraft.port(i) for i in self.kraft.ids}
            self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        else:
            for i, port in self.ports.items():
                s = KafkaServer(kafka, root / f"controller{i}", i,
                                f"process.roles=controller\nnode.id={i}\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                                f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters={self.voters}\n"
                                f"log.dirs={root / f'controller{i}' / 'data'}\n", heap=CONTROLLER_HEAP)
                s.format(CLUSTER_ID)
                self.kafka[i] = s

    def start(self, i: int) -> None:
        if self.kraft is not None:
            self.kraft.start(i)
        else:
            self.kafka[i].start()

    def start_all(self) -> None:
        for i in self.ports:
            self.start(i)

    def active(self) -> int:
        def leader() -> int | None:
            for port in self.ports.values():
                Q = w.DescribeQuorumRequest
                try:
                    _, resp = call(port, DESCRIBE_QUORUM, 1, Q(topics=[Q.TopicData(
                        topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
                except (OSError, AssertionError):  # not listening yet, or closed while starting
                    continue
                for t in resp.topics:  # type: ignore[attr-defined]
                    for p in t.partitions:
                        if p.error_code == 0 and p.leader_id > 0:
                            return int(p.leader_id)
            return None
        return int(wait_until("a controller leader", leader, 60))

    def kill(self, i: int) -> None:
        if self.kraft is not None:
            self.kraft.kill(i)
        else:
            self.kafka[i].kill()

    def close(self) -> None:
        if self.kraft is not None:
            self.kraft.close()
        for s in self.kafka.values():
            s.close()


@contextmanager
def system(kind: str, kafka: KafkaHome, root: Path) -> Iterator[tuple[Controllers, dict[int, int]]]:
    ctl = Controllers(kind, kafka, root)
    brokers: dict[int, KafkaServer] = {}
    try:
        if ctl.kafka:
            for s in ctl.kafka.values():
                s.start()
        else:
            ctl.start_all()
        ctl.active()
        ports = dict(zip(BROKERS, free_ports(len(BROKERS)), strict=True))
        for b in BROKERS:
            brokers[b] = KafkaServer(kafka, root / f"broker{b}", b, broker_properties(
                b, ports[b], ctl.voters, root / f"broker{b}" / "data", BROKER_EXTRA))
            brokers[b].format(CLUSTER_ID)
            brokers[b].start()
        for s in brokers.values():
            s.wait_started(180)
        wait_until("every broker unfenced", lambda: all("The broker has been unfenced" in s.log()
                                                         for s in brokers.values()), 60)
        yield ctl, ports
    finally:
        for s in brokers.values():
            s.close()
        ctl.close()


class Client:
    """One connection to a broker sending CreateTopics."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self.cid = 0

    def create(self, name: str) -> int:
        C = w.CreateTopicsRequest
        q = C(topics=[C.CreatableTopic(name=name, num_partitions=3, replication_factor=3, assignments=[], configs=[])],
              timeout_ms=30000, validate_only=False)
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=35)
        self.cid += 1
        try:
            resp = frame_call(self.sock, CREATE_TOPICS, 7, q, self.cid, client_id="bench")
        except OSError:
            self.close()
            return -1
        return int(resp.topics[0].error_code)  # type: ignore[attr-defined]

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def measure(kind: str, kafka: KafkaHome, root: Path, creations: int, failovers: int) -> dict[str, Any]:
    with system(kind, kafka, root) as (ctl, ports):
        client = Client(ports[BROKERS[0]])
        for i in range(3):  # warm-up: connections, the forwarding channel, JIT
            client.create(f"warm-{i}")
        lat = []
        for i in range(creations):
            t0 = time.perf_counter()
            code = client.create(f"t-{i}")
            lat.append((time.perf_counter() - t0) * 1000)
            if code != 0:
                raise RuntimeError(f"{kind}: CreateTopics failed with error {code}")
        lat.sort()
        fail = []
        for r in range(failovers):
            active = ctl.active()
            ctl.kill(active)
            t0 = time.perf_counter()
            n = 0
            while True:
                n += 1
                code = client.create(f"f-{r}-{n}")
                if code == 0:
                    break
                if code not in (-1, 41, 5, 7, 15):
                    raise RuntimeError(f"{kind}: CreateTopics failed with error {code} during failover")
                time.sleep(0.02)
                if time.perf_counter() - t0 > 60:
                    raise RuntimeError(f"{kind}: no CreateTopics succeeded within 60 s of the kill")
            fail.append((time.perf_counter() - t0) * 1000)
            ctl.start(active)
            time.sleep(3)  # the restarted controller catches up
        client.close()
        return {"system": kind, "creations": creations,
                "create_p50_ms": round(statistics.median(lat), 2),
                "create_p90_ms": round(lat[int(len(lat) * 0.9) - 1], 2),
                "failovers": failovers, "failover_ms": [round(x) for x in fail],
                "failover_median_ms": round(statistics.median(fail)) if fail else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--creations", type=int, default=40)
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--only", choices=("kraftnode", "kafka"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tmp", type=Path, default=None)
    args = ap.parse_args(argv)
    kafka = find_kafka_home()
    if kafka is None:
        print("controller bench: genuine Kafka not found (KAFKA_HOME or ../shared/kafka-3.9)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for kind in ("kraftnode", "kafka"):
            if args.only and kind != args.only:
                continue
            row = measure(kind, kafka, Path(tmp) / kind, args.creations, args.failovers)
            rows.append(row)
            print(json.dumps(row) if args.json else
                  f"{kind:10s} CreateTopics p50 {row['create_p50_ms']:7.2f} ms  p90 {row['create_p90_ms']:7.2f} ms"
                  f"   failover {row['failover_ms']} ms (median {row['failover_median_ms']})", flush=True)
    if len(rows) == 2:
        k, j = rows
        ratio = {"create_p50": round(k["create_p50_ms"] / j["create_p50_ms"], 2),
                 "failover_median": round(k["failover_median_ms"] / j["failover_median_ms"], 2)
                 if k["failover_median_ms"] and j["failover_median_ms"] else None}
        print(json.dumps({"ratio_kraftnode_to_kafka": ratio}) if args.json else
              f"kraftnode/kafka: CreateTopics p50 x{ratio['create_p50']}, failover median x{ratio['failover_median']}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
