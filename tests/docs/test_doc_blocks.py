"""The docs are executed: every block of README.md, docs/*.md and config/**'s step comments
that a person is meant to type is run here, in order, at a person's pace (at least the
fetch timeout between statements), with this run's ports and directories
(tests/support/doc_blocks.py says how blocks are found, marked and run).

Blocks are run in groups that share what a person would have running: the README's blocks
against the dev cluster its first block starts, config/static-quorum's steps and the
upgrade of docs/operations.md against that quorum, and so on. config/dynamic-quorum/'s
steps are the KIP-853 walkthrough of test_dynamic_quorum_walkthrough.py (run there, with both
tools). ``test_every_block_is_run_or_marked`` keeps the inventory honest: a new command block
that is neither in a group nor marked illustrative or run-by fails it, and so does a fence
without an info string.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode.errors import UsageError
from kraftnode.quorum_client import fetch_quorum_info
from tests.support.doc_blocks import REPO, Block, Session, all_blocks, statements
from tests.support.kafka import find_kafka_home, require_kafka_home

pytestmark = pytest.mark.timeout(600)

BLOCKS = all_blocks()
WALKTHROUGH = "tests/docs/test_dynamic_quorum_walkthrough.py"


def block(source: str, first_line: str) -> Block:
    """The block of ``source`` whose first line starts with ``first_line`` (exactly one)."""
    found = [b for b in BLOCKS if b.source == source and b.first_line().startswith(first_line)]
    assert len(found) == 1, (source, first_line, [b.where for b in found])
    return found[0]


#: group -> its blocks, in the order they run
GROUPS: dict[str, list[Block]] = {
    "single-node (config)": [block("config/single-node.properties", "kraftnode format")],
    "single-node (operations.md)": [block("docs/operations.md", "kraftnode format --config config/single-node")],
    "static quorum": [block("config/static-quorum/controller-1.properties", "ID="),
                      block("config/static-quorum/controller-2.properties", "kraftnode start"),
                      block("config/static-quorum/controller-3.properties", "kraftnode start"),
                      block("docs/operations.md", "kafka-features.sh --bootstrap-controller")],
    "readme": [block("README.md", "tools/dev.sh"),
               block("README.md", "kafka-metadata-quorum.sh"),
               *[b for b in BLOCKS if b.source == "README.md" and b.kind == "python"]],
    "embedding": [block("docs/embedding.md", "import anyio")],
    "security": [block("docs/security.md", "kraftnode format -c server.properties"),
                 block("docs/security.md", "openssl req")],
    "simulation": [block("docs/raft.md", "python -m tests.simulation")],
    "spark on hdfs": [block("docs/spark.md", "kraftnode audit 'hdfs://namenode:8020")],
    "first session": [block("docs/first-session.md", "tools/dev.sh"),
                      block("docs/first-session.md", ".venv/bin/kraftnode quorum"),
                      block("docs/first-session.md", "ID="),
                      block("docs/first-session.md", "kraftnode quorum --bootstrap-controller 127.0.0.1:9193"),
                      block("docs/first-session.md", "kraftnode audit")],
    "brokers": [block("docs/brokers.md", "ID=$(kraftnode random-uuid)"),
                block("docs/brokers.md", "kraftnode start config/static-quorum/controller-1"),
                block("docs/brokers.md", "kafka-storage.sh format"),
                block("docs/brokers.md", "kafka-topics.sh --bootstrap-server 127.0.0.1:9092 --create"),
                block("docs/brokers.md", "kraftnode quorum --bootstrap-controller 127.0.0.1:9093 describe"),
                block("docs/brokers.md", "kraftnode quorum --bootstrap-controller 127.0.0.1:9093,")],
}
#: blocks run by another test, which says so (config comments carry no markers)
DELEGATED = {b.where: WALKTHROUGH for b in BLOCKS if b.source.startswith("config/dynamic-quorum/")}


def test_every_block_is_run_or_marked(capsys: pytest.CaptureFixture[str]) -> None:
    unlabelled = [b.where for b in BLOCKS if not b.info]
    assert not unlabelled, f"fences without an info string (text for output, sh for commands): {unlabelled}"
    grouped = [b.where for g in GROUPS.values() for b in g]
    assert len(grouped) == len(set(grouped)), grouped
    runnable = [b for b in BLOCKS if b.kind is not None]
    unaccounted = [b.where for b in runnable if b.where not in grouped and b.where not in DELEGATED
                   and b.marker not in ("illustrative", "run-by")]
    assert not unaccounted, f"runnable blocks neither run nor marked: {unaccounted}"
    assert all(b.marker is None for g in GROUPS.values() for b in g if b.marker != "long-running")
    for b in BLOCKS:
        if b.marker == "illustrative":
            assert len(b.marker_arg) > 20, f"{b.where}: say why it is illustrative"
        if b.marker == "run-by":
            assert (REPO / b.marker_arg).is_file(), f"{b.where}: {b.marker_arg} does not exist"
    assert (REPO / WALKTHROUGH).is_file()
    with capsys.disabled():
        print(f"\n{len(BLOCKS)} blocks: {len(runnable)} runnable; {len(grouped)} run here, "
              f"{len(DELEGATED)} by {WALKTHROUGH}, "
              f"{sum(b.marker == 'run-by' for b in runnable)} by other tests (run-by), "
              f"{sum(b.marker == 'illustrative' for b in runnable)} illustrative:")
        for b in runnable:
            if b.marker in ("illustrative", "run-by"):
                print(f"  {b.where}: {b.marker}: {b.marker_arg}")


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    kafka = find_kafka_home()
    s = Session(tmp_path / "docs", kafka_home=kafka.root if kafka else None)
    try:
        yield s
    except BaseException:
        s.close(check=False)
        raise
    s.close()  # Ctrl-C to everything still running: each must stop cleanly


def _leader(s: Session, port: int, within_s: float = 15) -> int:
    """The quorum's leader, as a person asks a few seconds after starting it."""
    s.pace()
    deadline = time.monotonic() + within_s
    while True:
        try:
            return fetch_quorum_info([("127.0.0.1", port)], 2).leader_id
        except UsageError as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"no leader on port {port}: {e}") from None
        time.sleep(0.2)


def _needs(tool: str) -> None:
    if tool == "kafka":
        require_kafka_home()
    elif shutil.which(tool) is None:
        import os

        if os.environ.get("CI"):
            pytest.fail(f"{tool} is required in CI (tools/test.sh installs it)")
        pytest.skip(f"{tool} is not installed")


def test_single_node_from_config(session: Session) -> None:
    for b in GROUPS["single-node (config)"]:
        session.run_block(b)
    assert _leader(session, session.ports[9093]) == 1


def test_single_node_from_operations_md(session: Session) -> None:
    for b in GROUPS["single-node (operations.md)"]:
        session.run_block(b)
    assert _leader(session, session.ports[9093]) == 1


def test_static_quorum_metrics_and_upgrade(session: Session) -> None:
    _needs("kafka")
    *steps, upgrade = GROUPS["static quorum"]
    for b in steps:
        session.run_block(b)
    assert _leader(session, session.ports[9093]) in (1, 2, 3)
    # docs/metrics.md's scrape config names the ports config/static-quorum sets: each answers
    yaml = block("docs/metrics.md", "scrape_configs:")
    targets = re.findall(r"'(127\.0\.0\.1:\d+)'", session.substitute(yaml.text))
    assert len(targets) == 3
    for t in targets:
        with urllib.request.urlopen(f"http://{t}/metrics", timeout=10) as r:
            assert r.status == 200 and b"kafka_server_raft_metrics" in r.read()
    # "Every voter must be running first: each tells the leader its directory id ... a few fetch
    # timeouts after it starts following" -- a person reads that and waits that long
    session.pause_s = 3 * session.pause_s
    session.placeholders["HOST:PORT"] = f"127.0.0.1:{session.ports[9093]}"
    out = session.run_statement(upgrade.text.strip(), upgrade.where, timeout=120)
    assert "kraft.version was upgraded to 1." in out, out


def test_readme_against_the_dev_cluster(session: Session) -> None:
    _needs("kafka")
    _needs("kcat")
    dev, tools_block, batch, stream, codec = GROUPS["readme"]
    out = session.run_statement(dev.text.split("#")[0].strip(), dev.where)
    port = int(re.search(r"node 1: CONTROLLER://127\.0\.0\.1:(\d+)", out).group(1))  # type: ignore[union-attr]
    root = Path(re.search(r"created in (\S+)", out).group(1))  # type: ignore[union-attr]
    assert "HighWatermark:" in out
    session.placeholders["PORT"] = str(port)
    session.placeholders["/path/to/node*/metadata"] = f"{root}/node*/metadata"

    describe, write, read = [ln for ln in tools_block.text.splitlines() if ln.strip()]
    assert "LeaderId:" in session.run_statement(describe, tools_block.where)
    session.run_statement(write, tools_block.where)
    assert "hello" in session.run_statement(read, tools_block.where)

    assert batch.first_line().startswith("from kraftnode.spark") and "spark.read" in batch.text
    out = session.run_python(batch)
    assert re.search(r"\|replica\|partition_leader_epoch\|count\|", out), out
    assert stream.marker == "long-running" and "readStream" in stream.text
    session.run_python(stream)  # until its first (empty) batch: it follows from the latest offset
    session.run_statement(write, tools_block.where)  # a record appended is printed by the next batch
    bg = session.background[-1]
    deadline = time.monotonic() + 60
    while not re.search(r"Batch: [1-9].*\n.*\n.*\n.*\n\|\d+\s*\|", bg.text(), re.S):
        assert time.monotonic() < deadline, bg.text()[-3000:]
        time.sleep(0.5)
    session.stop(bg)
    session.run_python(codec)
    session.close()
    for i in (1, 2, 3):
        assert "shut down cleanly" in (root / f"node{i}" / "node.log").read_text()
    shutil.rmtree(root)


def test_embedding(session: Session) -> None:
    (py,) = GROUPS["embedding"]
    props = session.work / "server.properties"  # "server.properties": the reader's node
    shutil.copy(session.work / "config" / "single-node.properties", props)
    session.run_statement("kraftnode format --config server.properties --cluster-id $(kraftnode random-uuid)",
                          "docs/embedding.md (the format its text asks for)")
    out = session.run_python(py)
    assert re.search(r"^\d+ \d+ \{b'colour': b'blue'\}$", out, re.M), out


def test_security_commands(session: Session) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    scram, pki = GROUPS["security"]
    shutil.copy(session.work / "config" / "single-node.properties", session.work / "server.properties")
    session.run_statement("CLUSTER_ID=$(kraftnode random-uuid)", "the cluster id docs/security.md assumes")
    session.run_block(scram)
    assert "Formatting metadata directory" in session.transcript[-1]
    assert (session.work / "root" / "tmp" / "kraftnode-single-node" / "bootstrap.checkpoint").is_file()
    session.run_block(pki)
    for name in ("ca.pem", "node.p12", "client.p12", "client.pem", "client.key", "truststore.p12"):
        assert (session.work / name).is_file(), name


def test_simulation_commands(session: Session) -> None:
    (sim,) = GROUPS["simulation"]
    session.pause_s = 0  # no quorum is running: nothing to be paced against
    session.run_block(sim, timeout=300)
    assert "ok" in "".join(session.transcript)


#: longer than every timeout of the quorums the first session starts (fetch and request 2 s,
#: election 1 s): a person types slower than a quorum times out
PERSON_PACE_S = 5.0


def test_first_session(session: Session) -> None:
    """docs/first-session.md as a new user follows it on a fresh clone (issue 41): the README's
    main job, a dynamic quorum grown with add-controller, and the audit of its logs, whose first
    line is the headline with no Spark noise before it -- at a person's pace."""
    pytest.importorskip("pyspark")
    dev, status, dynamic, grow, audit = GROUPS["first session"]
    session.pause_s = PERSON_PACE_S

    # 1. the main job
    out = session.run_statement(dev.text.strip(), dev.where)
    port = int(re.search(r"node 1: CONTROLLER://127\.0\.0\.1:(\d+)", out).group(1))  # type: ignore[union-attr]
    root = Path(re.search(r"created in (\S+)", out).group(1))  # type: ignore[union-attr]
    session.placeholders["PORT"] = str(port)
    assert "LeaderId:" in session.run_statement(status.text.strip(), status.where)
    session.pace()
    session.stop(session.background[-1])  # Ctrl-C: "dev cluster stopped"

    # 2. the dynamic quorum, grown with add-controller
    session.run_block(dynamic)
    node1, node2 = session.background[-2:]
    add, describe = [ln for ln in grow.text.splitlines() if ln.strip()]
    out = session.run_statement(add, grow.where, timeout=120)
    assert re.search(rf"^Added controller 2 with directory id \S+ and endpoints: "
                     rf"CONTROLLER://127\.0\.0\.1:{session.ports[9194]}$", out, re.M), out
    out = session.run_statement(describe, grow.where)
    assert re.search(r"^2\s+\S+\s+\d+.*\bFollower\b", out, re.M), out
    session.pace()
    assert re.search(r"AddRaftVoter for voter 2 \(directory \S+\): succeeded", node1.text()), node1.text()[-2000:]
    assert re.search(r"became a voter in epoch 1 \(leader 1; voters \[1, 2\]\)", node2.text()), node2.text()[-2000:]
    for port_key in (9504, 9505):  # each controller serves its metrics (config/dynamic-quorum)
        with urllib.request.urlopen(f"http://127.0.0.1:{session.ports[port_key]}/metrics", timeout=10) as r:
            assert b"kafka_server_raft_metrics" in r.read()
    session.pace()
    session.stop(node2)   # Ctrl-C in each terminal
    session.stop(node1)

    # 3. the audit over the quorum's files: the headline first, no Spark noise
    session.pace()
    cmd = session.substitute(audit.text.strip())
    r = subprocess.run(["bash", "-c", cmd], cwd=session.work, env=session.env(), capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines()[0] == \
        "No safety violation found; every replica can read its committed records.", r.stdout
    assert "  replicas 1 and 2: consistent" in r.stdout.splitlines(), r.stdout
    noise = [ln for ln in r.stderr.splitlines() if not re.match(r"^\[\s*[\d.]+ s\] ", ln)]
    assert noise == [], r.stderr
    assert (session.work / "root" / "tmp" / "kraftnode-audit" / "report.html").is_file()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("line", ["3.9", "4.4"])
def test_brokers_walkthrough(tmp_path: Path, line: str) -> None:
    """docs/brokers.md as written, with a genuine Kafka broker of each line (issue 37): three
    kraftnode controllers, the broker formatted with their cluster id, a topic, a group, the
    active controller killed (kill -9, as the page allows), the describe outputs after the
    failover. Paced slower than the quorum's timeouts (election 1 s, fetch 2 s)."""
    kafka = require_kafka_home(line)
    fmt, start, broker, clients, status, after = GROUPS["brokers"]
    s = Session(tmp_path / "docs", kafka_home=kafka.root, pause_s=3.0)
    try:
        assert "RELEASE=4.4" in fmt.text  # the reader names the brokers' release ("RELEASE=3.9 for ...")
        for st in statements(fmt.text.replace("RELEASE=4.4", f"RELEASE={line}")):
            s.run_statement(st, fmt.where)
        s.run_block(start)
        _leader(s, s.ports[9093])
        s.run_block(broker)
        deadline = time.monotonic() + 60
        while "The broker has been unfenced" not in s.background[-1].text():
            assert time.monotonic() < deadline, s.background[-1].text()[-3000:]
            time.sleep(0.5)
        create, produce, consume = [ln for ln in clients.text.splitlines() if ln.strip()]
        s.run_statement(create, clients.where)
        s.run_statement(produce, clients.where)
        assert "first order" in s.run_statement(consume, clients.where, timeout=120)
        out = s.run_statement(status.text.strip(), status.where)
        old = int(re.search(r"LeaderId:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
        old_epoch = int(re.search(r"LeaderEpoch:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
        # "kill -9 of its process, as a crash would"
        victim = next(bg for bg in s.background if f"controller-{old}.properties" in bg.statement)
        s._kill(victim)
        s.background.remove(victim)
        quorum, broker_view, describe, produce2, consume2 = [ln for ln in after.text.splitlines() if ln.strip()]
        out = s.run_statement(quorum, after.where)
        new = int(re.search(r"LeaderId:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
        assert new != old and int(re.search(r"LeaderEpoch:\s+(\d+)", out).group(1)) > old_epoch, out  # type: ignore[union-attr]
        out = s.run_statement(broker_view, after.where)
        assert re.search(rf"LeaderId:\s+{new}\b", out), out
        out = s.run_statement(describe, after.where)
        assert "Topic: orders" in out and len(re.findall(r"Leader: 101\b", out)) == 3, out
        s.run_statement(produce2, after.where)
        out = s.run_statement(consume2, after.where, timeout=120)
        assert "second order" in out and "first order" not in out, out
        broker_bg = next(bg for bg in s.background if "kafka-server-start" in bg.statement)
        assert broker_bg.proc.poll() is None and "MetadataParseException" not in broker_bg.text()
    except BaseException:
        s.close(check=False)
        raise
    s.close()


def test_spark_audit_of_logs_on_hdfs(session: Session) -> None:
    """docs/spark.md's audit by hdfs:// URI (issue 42), against Hadoop's own single-process HDFS
    (a real NameNode and DataNode) holding a 3-replica quorum, for the NameNode it names."""
    pytest.importorskip("pyspark")
    from tests.support.spark_cluster import start_mini_hdfs
    from tools.pipelines.sample_quorum import write_sample_quorum

    sample = write_sample_quorum(session.work / "quorum")
    hdfs = start_mini_hdfs(session.work / "hdfs")
    try:
        hdfs.put(sample.root, "/kraft/quorum")
        session.placeholders["hdfs://namenode:8020"] = hdfs.uri
        (audit,) = GROUPS["spark on hdfs"]
        out = session.run_statement(audit.text.strip(), audit.where, timeout=400)
        assert "No safety violation found; every replica can read its committed records." in out, out
        assert "binaryFile source) of replicas [1, 2, 3]" in out, out
        assert (session.work / "root" / "tmp" / "kraftnode-audit-hdfs" / "summary.json").is_file()
    finally:
        hdfs.stop()
