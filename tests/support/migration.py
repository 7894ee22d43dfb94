"""Migrating a dynamic quorum between kraftnode and genuine Kafka (3.9, 4.4) controllers under genuine
brokers (issue 26, must-shows 3 and 4): the runbooks of docs/operations.md ("Migrating between
Kafka and kraftnode controllers") run statement by statement, as a person types them.

:func:`runbook` reads the ``sh`` blocks of that section marked ``run-by`` the calling test, in
order; :class:`Runbook` runs one statement of them with its placeholders (``HOST:PORT``, ``N``,
``M``, ``DIRECTORY-ID``, ``CLUSTER_ID``, ``kafka-N.properties``, ``kraftnode-N.properties``)
filled, Kafka's ``bin/`` and the worktree's ``.venv/bin`` first on ``PATH``, pausing between
statements at a person's pace. Long-running statements (``kafka-server-start.sh FILE``,
``kraftnode start FILE``) are handed to the test's callback, which starts the server whose
properties FILE is (by PID, so that it can be killed).

:class:`Brokers` holds genuine brokers of a dynamic quorum (``controller.quorum.bootstrap.servers``)
and the verifiable producer / consumer that prove nothing acknowledged is lost.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from recordbatch import iter_batches
from tests.support.doc_blocks import REPO, Block, markdown_blocks, statements
from tests.support.kafka import KafkaHome, java_env
from tests.support.kafka_server import KafkaServer, broker_properties
from tests.support.kraft_brokers import Tool, idempotent_producer_config, wait_until

__all__ = ["Brokers", "KraftNodes", "Runbook", "dump_log", "replication_rows", "runbook"]

SECTION = "## Migrating between Kafka and kraftnode controllers"
#: longer than controller.quorum.fetch.timeout.ms (2 s, Kafka's default and the tests'): a person
#: reads the output of one step before typing the next
PERSON_PACE_S = 2.5


def runbook(test_file: str, section: str = SECTION) -> list[Block]:
    """The ``sh`` blocks of docs/operations.md's ``section`` (by default the migration runbooks)
    marked ``<!-- run-by: TEST_FILE -->``, in their order."""
    path = REPO / "docs" / "operations.md"
    text = path.read_text()
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    first = text[:start].count("\n") + 1
    last = text[:end].count("\n") + 1 if end >= 0 else 10**9
    return [b for b in markdown_blocks(path)
            if first <= b.line <= last and b.marker == "run-by" and b.marker_arg == test_file and b.kind == "sh"]


class Runbook:
    """Runs the documented statements with this run's values."""

    def __init__(self, kafka: KafkaHome, work: Path, cluster_id: str,
                 start: Callable[[str, Path], None]) -> None:
        self.kafka = kafka
        self.work = work
        self.cluster_id = cluster_id
        self.start = start
        self.transcript: list[str] = []
        self._last = 0.0
        work.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        env = java_env({"LOG_DIR": str(self.work / "tool-logs")})
        env["PATH"] = os.pathsep.join([str(REPO / ".venv" / "bin"), str(self.kafka.bin), env.get("PATH", "")])
        env["KAFKA_HEAP_OPTS"] = "-Xmx256m"
        env.pop("VIRTUAL_ENV", None)
        return env

    def run(self, block: Block, statement_index: int, values: dict[str, str], timeout: float = 120,
            pace: bool = True) -> str:
        """Statement ``statement_index`` of ``block``, placeholders filled from ``values`` (and
        CLUSTER_ID); its output. AssertionError naming the block when it fails."""
        st = statements(block.text)[statement_index]
        filled = st
        for word, value in sorted({"CLUSTER_ID": self.cluster_id, **values}.items(), key=lambda kv: -len(kv[0])):
            filled = re.sub(rf"(?<![\w$]){re.escape(word)}(?![\w])", lambda _m, v=value: v, filled)
        if pace:
            wait = self._last + PERSON_PACE_S - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        self._last = time.monotonic()
        m = re.match(r"^(kafka-server-start\.sh|kraftnode start)\s+(\S+)\s*$", filled)
        if m:
            self.transcript.append(f"$ {filled} &")
            self.start(m.group(1), Path(m.group(2)))
            return ""
        r = subprocess.run(["bash", "-c", filled], cwd=self.work, env=self.env(), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        out = r.stdout + r.stderr
        self.transcript.append(f"$ {filled}\n{out}")
        assert r.returncode == 0, f"{block.where}: `{filled}` (as written: `{st}`) exited {r.returncode}:\n{out[-3000:]}"
        return out


def replication_rows(describe_output: str) -> dict[tuple[int, str], dict[str, str]]:
    """``describe --replication``'s table: (node id, status) -> its row by column name."""
    lines = [ln for ln in describe_output.splitlines() if ln.strip()]
    head = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["NodeId"])
    cols = lines[head].split()
    out = {}
    for ln in lines[head + 1:]:
        cells = ln.split()
        if len(cells) < len(cols) or not cells[0].isdigit():
            continue
        row = dict(zip(cols, cells, strict=False))
        out[(int(row["NodeId"]), row["Status"])] = row
    return out


class Brokers:
    """Genuine brokers of a dynamic controller quorum, and the tools a test runs on them."""

    def __init__(self, kafka: KafkaHome, root: Path, bootstrap_controllers: str, ids: tuple[int, ...],
                 ports: list[int], extra: str) -> None:
        self.kafka = kafka
        self.root = root
        self.ports = dict(zip(ids, ports, strict=True))
        self.servers = {b: KafkaServer(kafka, root / f"broker{b}", b, broker_properties(
            b, self.ports[b], bootstrap_controllers, root / f"broker{b}" / "data", extra).replace(
            "controller.quorum.voters=", "controller.quorum.bootstrap.servers=")) for b in ids}
        self.tools: list[Tool] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def start(self, cluster_id: str) -> None:
        for s in self.servers.values():
            s.format(cluster_id)
            s.start()
        for s in self.servers.values():
            s.wait_started(120)
        wait_until("every broker unfenced", lambda: all(
            "The broker has been unfenced" in s.log() for s in self.servers.values()), 90, self.logs)

    def logs(self) -> str:
        return "\n".join(f"--- broker {b}\n" + s.log()[-3000:] for b, s in self.servers.items())

    def tool(self, name: str, *args: str) -> Tool:
        env = java_env({"LOG_DIR": str(self.root / "tool-logs")})
        proc = subprocess.Popen([str(self.kafka.script(name)), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
        t = Tool(proc)
        t.start_reading()
        self.tools.append(t)
        return t

    def cli(self, name: str, *args: str) -> str:
        r = self.kafka.tool(name, "--bootstrap-server", self.bootstrap, *args, timeout=120,
                            env={"LOG_DIR": str(self.root / "tool-logs")})
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    def producer(self, topic: str) -> Tool:
        """The verifiable producer, idempotent with acks -1, about 50 records a second."""
        return self.tool("kafka-verifiable-producer", "--bootstrap-server", self.bootstrap, "--topic", topic,
                         "--acks", "-1", "--throughput", "50", "--max-messages", "-1",
                         "--producer.config", str(idempotent_producer_config(self.root)))

    def check_every_acked_record_read_back(self, producer: Tool, topic: str, at_least: int) -> int:
        """Stop ``producer``; read the topic from the start with a verifiable consumer; every
        acknowledged (partition, offset) holds its value. The number of acknowledged records."""
        producer.stop()
        acked = {(e["partition"], e["offset"]): e["value"] for e in producer.named("producer_send_success")}
        assert len(acked) >= at_least, (len(acked), producer.named("producer_send_error")[:5])
        consumer = self.tool("kafka-verifiable-consumer", "--bootstrap-server", self.bootstrap, "--topic", topic,
                             "--group-id", f"readback-{time.monotonic_ns()}", "--reset-policy", "earliest",
                             "--verbose")

        def consumed() -> dict[tuple[int, int], str]:
            return {(e["partition"], e["offset"]): e["value"] for e in consumer.named("record_data")}
        wait_until("every acked record consumed", lambda: set(acked) <= set(consumed()), 120,
                   lambda: f"missing {sorted(set(acked) - set(consumed()))[:20]}\n" + self.logs())
        consumer.stop()
        got = consumed()
        wrong = {k: (v, got[k]) for k, v in acked.items() if got[k] != v}
        assert not wrong, list(wrong.items())[:10]
        return len(acked)

    def registrations(self) -> dict[int, list[str]]:
        """The broker epochs each broker has logged a registration with, in order."""
        return {b: re.findall(r"with broker epoch (\d+)", s.log()) for b, s in self.servers.items()}

    def check_serving_without_registering_again(self, topic: str, registered: dict[int, list[str]]) -> None:
        """A topic created through the brokers, and no broker registered since ``registered``."""
        assert f"Created topic {topic}." in self.cli(
            "kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "2")
        assert self.registrations() == registered, "a broker registered again"

    def check_clean(self) -> None:
        faults = {b: s.faults(benign=(r"OutOfOrderSequenceException",)) for b, s in self.servers.items()}
        assert not any(faults.values()), faults
        for b, s in self.servers.items():
            assert "UnsupportedVersionException" not in s.log(), (b, s.log()[-5000:])

    def close(self) -> None:
        for t in self.tools:
            t.stop()
        for s in self.servers.values():
            s.close()


def check_dump_log_reads_every_file(kafka: KafkaHome, files_by_node: dict[int, list[Path]], work: Path) -> None:
    """Each node's segments and snapshots (both kinds present) through :func:`dump_log`: it lists
    every batch the files hold (counted by our own reader; how many there are depends on when
    the journey's snapshots were taken and the log cleaned behind them; a snapshot holds two at
    least, its header and footer)."""
    for i, files in files_by_node.items():
        assert any(f.suffix == ".checkpoint" for f in files) and any(f.suffix == ".log" for f in files), files
        held = [sum(1 for _ in iter_batches(f.read_bytes())) for f in files]
        assert sum(held) >= 2, dict(zip(files, held, strict=True))
        batches, records = dump_log(kafka, files, work)
        assert batches == sum(held) and records >= batches, (batches, records, sum(held))
        print(f"kraftnode {i}: {len(files)} files, {batches} batches, {records} records decoded")


def dump_log(kafka: KafkaHome, files: list[Path], work: Path) -> tuple[int, int]:
    """``kafka-dump-log.sh --cluster-metadata-decoder`` over ``files``: exit 0, every file dumped,
    no exception and no record its decoder skipped (``Error at OFFSET, skipping.``), and as many
    records listed as the batches count, each a control record or a decoded metadata record;
    AssertionError otherwise. (batches, records)."""
    r = kafka.tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", ",".join(map(str, files)),
                   timeout=180, env={"LOG_DIR": str(work / "tool-logs")})
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-5000:]
    bad = [ln for ln in out.splitlines() if re.search(r"Exception|Error at \d+|rror:", ln)]
    assert not bad, bad[:20]
    for f in files:
        assert f"Dumping {f}" in out, (f, out[:2000])
    counts = [int(c) for c in re.findall(r"^baseOffset: \d+ lastOffset: \d+ count: (\d+) ", out, re.M)]
    records = re.findall(r"^\| offset: \d+ .*$", out, re.M)
    assert len(records) == sum(counts), (len(records), sum(counts))
    undecoded = [ln for ln in records if not re.search(
        r'payload: \{"type":"\w+","version":\d+,"data":|controlType: |'
        # a control record: Kafka 3.9 prints "LeaderChange {...}", 4.x "LeaderChange: {...}"
        r" (SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters|LeaderChange):? \{", ln)]
    assert not undecoded, undecoded[:10]
    return len(counts), len(records)

class KraftNodes:
    """kraftnode controllers this test formats itself (the runbook's ``kraftnode format``):
    properties, processes started and stopped by PID, logs."""

    def __init__(self, root: Path, ports: dict[int, int], bootstrap: str, extra: str) -> None:
        self.root = root
        self.ports = ports
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        for i, port in ports.items():
            d = root / f"node{i}"
            d.mkdir(parents=True, exist_ok=True)
            self.props(i).write_text(
                f"node.id={i}\nprocess.roles=controller\n"
                f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
                f"controller.quorum.bootstrap.servers={bootstrap}\nlog.dirs={self.log_dir(i)}\n{extra}\n")

    def props(self, i: int) -> Path:
        return self.root / f"node{i}" / "server.properties"

    def log_dir(self, i: int) -> Path:
        return self.root / f"node{i}" / "metadata"

    def node_of(self, props: Path) -> int:
        return next(i for i in self.ports if self.props(i) == props)

    def start(self, i: int, timeout: float = 60) -> None:
        out = (self.root / f"node{i}" / "node.log").open("ab")
        self.procs[i] = subprocess.Popen([str(REPO / ".venv" / "bin" / "python"), "-m", "kraftnode", "start",
                                          str(self.props(i))], stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wait_until(f"kraftnode {i} started", lambda: re.search(r"node \d+ started: cluster ", self.log(i)), timeout,
                   lambda: self.log(i)[-3000:])

    def kill(self, i: int) -> None:
        """kill -9."""
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def stop(self, i: int, timeout: float = 30) -> None:
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def log(self, i: int) -> str:
        path = self.root / f"node{i}" / "node.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def files(self, i: int) -> list[Path]:
        part = self.log_dir(i) / "__cluster_metadata-0"
        return sorted(part.glob("*.log")) + sorted(part.glob("*.checkpoint"))
