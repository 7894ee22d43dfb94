"""The quorum audit on a real local Spark session: logs of a known history (a legal
stale tail on a deposed leader), the same logs with a planted divergence (a modified
copy of one replica's segment, detected and located at the right offset), and the
logs of a real 3-node kraftnode quorum with a leader change."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import recordbatch as rb  # noqa: E402
from kraftnode.spark.audit import run_audit  # noqa: E402
from tools.pipelines.sample_quorum import (  # noqa: E402
    T0,
    SampleQuorum,
    flip_bytes,
    plant_divergence,
    write_sample_quorum,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from kraftnode.spark import local_session

    yield local_session("local[2]", "kraftnode-tests", **{"spark.sql.shuffle.partitions": "2",
                                                          "spark.default.parallelism": "2"})


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleQuorum:
    return write_sample_quorum(tmp_path_factory.mktemp("sample") / "q")


def _pair(res: Any, a: int, b: int) -> dict[str, Any]:
    return next(p for p in res.pairs if (p["replica_a"], p["replica_b"]) == (a, b))


def test_audit_of_a_known_history(spark: Any, sample: SampleQuorum, tmp_path: Path) -> None:
    res = run_audit(spark, [str(d) for d in sample.log_dirs.values()], tmp_path / "out")
    assert res.ok and res.violations == []
    assert res.replicas == [1, 2, 3]
    assert res.committed_floor == sample.end_offsets[1]  # replicas 1 and 3 agree up to 1's end
    p12 = _pair(res, 1, 2)
    assert p12["first_divergence"] == sample.stale_tail[0]
    assert (p12["epoch_a"], p12["epoch_b"]) == (3, 2)
    assert p12["verdict"] == "legal uncommitted tail"
    assert _pair(res, 1, 3)["verdict"] == "consistent" and _pair(res, 1, 3)["first_divergence"] is None
    assert _pair(res, 2, 3)["first_divergence"] == sample.stale_tail[0]

    lead = {r["epoch"]: r for r in res.leadership}
    assert {e: r["leader"] for e, r in lead.items()} == sample.leaders
    assert {e: r["granting_voters"] for e, r in lead.items()} == sample.granting
    assert {e: r["start_offset"] for e, r in lead.items()} == sample.epoch_start
    assert lead[1]["tenure_ms"] == lead[2]["start_time"] - lead[1]["start_time"] > 0
    # the last epoch has no end in the logs: its tenure runs to the newest record and says it is
    # a lower bound (issue 41: a leader that ran ~4 s showed "0 ms")
    assert [lead[e]["ongoing"] for e in (1, 2, 3)] == [False, False, True]
    assert lead[3]["end_time"] is None and lead[2]["end_time"] == lead[3]["start_time"]
    assert lead[3]["tenure_ms"] == max(r["last_time"] for r in res.epochs) - lead[3]["start_time"]

    voters = [v for v in res.voters if v["control_type"] == "KRAFT_VOTERS"]
    assert [v["offset"] for v in voters] == sample.voters_offsets
    assert voters[0]["endpoints"][2] == "3@127.0.0.1:9093" and voters[1]["endpoints"][2] == "3@127.0.0.1:19093"
    assert [v["kraft_version"] for v in res.voters if v["control_type"] == "KRAFT_VERSION"] == [1]

    stats = {r["epoch"]: r for r in res.epochs}
    assert set(stats) == {1, 2, 3}
    assert all(r["compression_ratio"] > 0 and r["disk_bytes"] > 0 for r in stats.values())
    assert sum(r["records"] for r in res.rate) == sum(r["records"] for r in stats.values())

    html = res.report.read_text()
    assert html.count("data:image/png;base64,") >= 3 and "legal uncommitted tail" in html
    # read as a person would: times in UTC, durations with units, nothing printed for null
    assert "<td>None</td>" not in html and "<td>nan</td>" not in html
    assert re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC</td>", html)
    assert str(lead[1]["start_time"]) not in html  # no raw epoch milliseconds
    assert re.search(r"<td>[\d.]+ (ms|s)</td>", html) and "<th>tenure</th>" in html
    assert re.search(r"<td>at least [\d.]+ (ms|s) \(its last record; no later epoch in the logs\)</td>", html)
    assert "<script" not in html and "http" not in html.split("<body>")[1]  # self-contained
    leadership = spark.read.parquet(str(res.tables["leadership"])).orderBy("epoch").collect()
    assert [r["leader"] for r in leadership] == [1, 2, 3]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["violations"] == 0
    # the tables docs/spark.md names are the ones written (issue 41: it named `lost_committed`,
    # written as tables/lost_batches)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text()
    named = re.search(r"Parquet\s+tables under `DIR/tables/`: (.*?) \(", doc, re.S)
    assert named is not None
    assert sorted(re.findall(r"`(\w+)`", named.group(1))) == sorted(
        q.name for q in (tmp_path / "out" / "tables").iterdir())


def test_planted_divergence_is_detected_at_its_offset(spark: Any, sample: SampleQuorum, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "q"
    shutil.copytree(sample.root, root)
    target = sample.epoch_start[2] - 2  # a committed epoch-1 record every replica holds
    plant_divergence(root / "node3" / "metadata", target)
    # through the kraft-log source in Spark's Python workers (small logs are read on the driver)
    res = run_audit(spark, [str(root)], tmp_path / "out", driver_read_max_bytes=0)
    assert not res.ok
    assert {(v["offset"], v["replica"]) for v in res.violations} >= {(target, 3)}
    assert min(v["offset"] for v in res.violations) == target
    for a in (1, 2):
        p = _pair(res, a, 3)
        assert p["first_divergence"] == target
        assert p["verdict"] == "SAFETY VIOLATION" and p["epoch_a"] == p["epoch_b"] == 1
    assert _pair(res, 1, 2)["verdict"] == "legal uncommitted tail"
    assert "SAFETY VIOLATION" in res.report.read_text()

    # the CLI command on the same logs: exit 1, the violation named on stdout
    import argparse

    from kraftnode.commands import audit

    rc = audit.run(argparse.Namespace(log_dirs=[str(root)], out=str(tmp_path / "cli"), master="local[2]"))
    assert rc == 1
    assert (tmp_path / "cli" / "report.html").is_file()
    out = capsys.readouterr().err   # progress on stderr: stdout starts with the headline
    stages = re.findall(r"^\[\s*[\d.]+ s\] (.*)$", out, re.M)  # one progress line per stage, timed
    assert [s.split(":")[0].split(" (")[0] for s in stages[2:]] == [
        "read", "committed floor and violations", "pairwise divergence", "epochs and leadership",
        "voter sets and write rate", "invalid rows", "report"], out
    assert "on the driver" in stages[2]


def _cli_audit(root: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """``kraftnode audit`` in this process (on the module's Spark session): exit code and the
    lines it printed after its progress lines."""
    import argparse

    from kraftnode.commands import audit

    capsys.readouterr()
    rc = audit.run(argparse.Namespace(log_dirs=[str(root)], out=str(out), master="local[2]"))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if not re.match(r"^\[\s*[\d.]+ s\]", ln)]
    return rc, lines


def test_a_clean_set_reports_clean(spark: Any, sample: SampleQuorum, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines = _cli_audit(sample.root, tmp_path / "out", capsys)
    assert rc == 0
    assert lines[0] == "No safety violation found; every replica can read its committed records."
    assert "0 safety violations; 0 replica(s) with lost data" in lines[1]
    assert "  replicas 1 and 3: consistent" in lines
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ok"] is True and summary["lost_committed"] == {}
    assert "No safety violation found" in (tmp_path / "out" / "report.html").read_text()


def test_a_damaged_replica_is_never_called_clean(spark: Any, sample: SampleQuorum, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """8 bytes flipped inside a committed batch of replica 3 (its CRC fails): replica 3 has
    lost committed data. The headline names it and the offsets, the exit code is 1, and the
    pairs with replica 3 are inconsistent -- though every offset they still have in common
    agrees."""
    root = tmp_path / "q"
    shutil.copytree(sample.root, root)
    target = sample.epoch_start[2] - 2  # a committed epoch-1 record every replica holds
    base, last = flip_bytes(root / "node3" / "metadata", target)
    res = run_audit(spark, [str(root)], tmp_path / "out")
    assert res.violations == [] and not res.ok
    assert res.committed_floor == sample.end_offsets[1]  # the other replicas still prove it
    assert res.lost_ranges() == {3: [(base, last)]} and res.lost_ranges(committed=False) == {}
    n = last - base + 1
    headline = (f"Replica 3 lost committed data: offsets {base}-{last} ({n} records in batches that fail "
                "their CRC or cannot be read).")
    assert res.headline() == headline
    for a in (1, 2):
        p = _pair(res, a, 3)
        assert p["verdict"] == "INCONSISTENT: LOST COMMITTED DATA", p
        assert p["reason"].startswith(f"replica 3 cannot read committed offset {base} and after"), p
        assert "does not match its bytes" in p["reason"]
    assert _pair(res, 1, 2)["verdict"] == "legal uncommitted tail"
    html = res.report.read_text()
    assert headline in html and "No safety violation found" not in html

    rc, lines = _cli_audit(root, tmp_path / "cli", capsys)
    assert rc == 1
    assert lines[0] == headline
    assert "0 safety violations; 1 replica(s) with lost data" in lines[1]
    assert f"  replicas 1 and 3: INCONSISTENT: LOST COMMITTED DATA: replica 3 cannot read committed offset {base} " \
        "and after" in "\n".join(lines), lines
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["ok"] is False and summary["lost_committed"] == {"3": [[base, last]]}


def test_a_damaged_batch_header_loses_the_rest_of_the_file(spark: Any, sample: SampleQuorum,
                                                           tmp_path: Path) -> None:
    """The length field of a committed batch of replica 3 flipped: nothing after it in that
    file can be read. The damage also hides the proof of commitment (only replicas 1 and 3
    held the newest epoch), so the audit says lost data the logs no longer prove committed --
    still named, still a failure, still inconsistent -- and never clean."""
    root = tmp_path / "q"
    shutil.copytree(sample.root, root)
    base, _ = flip_bytes(root / "node3" / "metadata", sample.epoch_start[2] - 2, at="length")
    res = run_audit(spark, [str(root)], tmp_path / "out")
    assert not res.ok and res.violations == []
    assert res.lost_ranges(committed=False) == {3: [(max(base, res.committed_floor), None)]}
    assert res.headline().startswith(f"Replica 3 lost data the logs no longer prove committed: offsets "
                                     f"{max(base, res.committed_floor)} and after")
    for a in (1, 2):
        assert _pair(res, a, 3)["verdict"].startswith("INCONSISTENT: LOST"), _pair(res, a, 3)
    assert "is below the minimum" in res.lost[0]["error"]


def test_cli_headline_first_and_no_spark_noise(sample: SampleQuorum, tmp_path: Path) -> None:
    """Issue 41: Spark's start-up noise (the JVM's incubator-module warning, log4j2's default
    profile and level lines, NativeCodeLoader's WARN) was mixed into the progress lines, and
    the headline came after ~13 lines. As a new process, the way a person runs it: stdout's
    first line is the headline; stderr holds the timed progress lines and nothing else."""
    r = subprocess.run([sys.executable, "-m", "kraftnode", "audit", str(sample.root), "--out", str(tmp_path / "out"),
                        "--master", "local[1]"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines()[0] == "No safety violation found; every replica can read its committed records.", \
        r.stdout
    noise = [ln for ln in r.stderr.splitlines() if not re.match(r"^\[\s*[\d.]+ s\] ", ln)]
    assert noise == [], r.stderr
    assert "report: " in r.stdout


def test_quiet_stderr_drops_only_the_noise() -> None:
    """The filter under the JVM's stderr drops the incubator line only, whole lines: an
    error that mentions it, or any other line, passes."""
    from kraftnode.spark.quiet import is_noise

    assert is_noise("WARNING: Using incubator modules: jdk.incubator.vector\n")
    for line in ["ERROR SparkContext: Error initializing SparkContext.",
                 "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
                 "x WARNING: Using incubator modules: jdk.incubator.vector",
                 "WARNING: Using incubator modules: jdk.incubator.vector; and then it failed"]:
        assert not is_noise(line), line


def test_cli_refuses_a_path_that_is_not_a_log_dir(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    r = subprocess.run([sys.executable, "-m", "kraftnode", "audit", str(tmp_path / "empty"), "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "not a metadata log dir" in r.stderr
    assert "Traceback" not in r.stderr


def test_audit_of_a_real_three_node_quorum_with_a_leader_change(spark: Any, tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import Producer

    from tests.support.cluster import Cluster

    def produce(bootstrap: str, n: int, tag: str) -> list[int]:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
        offsets: list[int] = []
        for i in range(n):
            p.produce("__cluster_metadata", value=f"{tag}-{i}".encode() * 5, partition=0,
                      on_delivery=lambda e, m: offsets.append(m.offset() or 0) if e is None else None)
        p.flush(25)
        assert len(offsets) == n
        return offsets

    cl = Cluster(tmp_path / "cluster", 3)
    try:
        cl.start_all()
        first = cl.wait_for_leader(30)
        before = produce(cl.bootstrap(), 30, "before")
        cl.kill(first.leader_id)  # kill -9 the leader: a new epoch, a new leader
        second = cl.wait_for_leader(20, exclude=first.leader_id, min_epoch=first.leader_epoch + 1)
        after = produce(cl.bootstrap(), 30, "after")
        cl.start(first.leader_id)  # the old leader rejoins and catches up
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            q = cl.quorum()
            if q is not None and all(v.log_end_offset > after[-1] for v in q.voters):
                break
            time.sleep(0.2)
    finally:
        for i in cl.ids:
            cl.stop(i)
    res = run_audit(spark, [str(tmp_path / "cluster")], tmp_path / "out")
    assert res.replicas == [1, 2, 3]
    assert res.ok, res.violations
    epochs = {r["epoch"]: r["leader"] for r in res.leadership}
    assert epochs[first.leader_epoch] == first.leader_id
    assert epochs[second.leader_epoch] == second.leader_id != first.leader_id
    assert res.committed_floor > after[-1]
    assert all(p["verdict"] in ("consistent", "legal uncommitted tail") for p in res.pairs)
    assert sum(r["records"] for r in res.epochs) >= len(before) + len(after)


def test_leadership_plot_has_node_ticks_and_epoch_labels() -> None:
    from kraftnode.spark.audit import _leadership_figure

    one = [dict(epoch=12, leader=1, start_time=1_700_000_000_000, tenure_ms=5000)]
    ax = _leadership_figure(one).axes[0]
    assert list(ax.get_yticks()) == [1] and [t.get_text() for t in ax.get_yticklabels()] == ["node 1"]
    assert [t.get_text() for t in ax.texts] == ["epoch 12"]
    three = [dict(epoch=e, leader=n, start_time=1_700_000_000_000 + 1000 * e, tenure_ms=1000)
             for e, n in ((1, 1), (2, 3), (3, 3), (4, 2))]
    ax = _leadership_figure(three).axes[0]
    assert list(ax.get_yticks()) == [1, 2, 3]
    assert [t.get_text() for t in ax.texts] == ["epoch 1", "epoch 2", "epoch 3", "epoch 4"]


@pytest.mark.parametrize(("col", "value", "shown"), [
    ("start_time", 1_700_000_000_123, "2023-11-14 22:13:20.123 UTC"),
    ("tenure_ms", 850, "850 ms"), ("tenure_ms", 12_340, "12.34 s"), ("tenure_ms", 185_000, "3 min 5 s"),
    ("first_divergence", None, ""), ("epoch_a", None, ""), ("voters", [1, 2, 3], "1, 2, 3"),
    ("compression_ratio", 1.23456, "1.23"),
])
def test_report_cells_read_as_a_person_reads_them(col: str, value: Any, shown: str) -> None:
    from kraftnode.spark.audit import _cell

    assert _cell(col, value) == shown


@pytest.mark.parametrize(("entry", "floor", "verdict"), [
    # same offset and epoch, different records: Log Matching violated, wherever it is
    (dict(epoch_a=4, epoch_b=4, hash_a=1, hash_b=2), 0, "SAFETY VIOLATION"),
    # at or above the committed floor: a legal uncommitted tail
    (dict(epoch_a=3, epoch_b=4, hash_a=1, hash_b=2), 10, "legal uncommitted tail"),
    # below it: the older-epoch side is a stale tail of a deposed leader
    (dict(epoch_a=3, epoch_b=4, hash_a=1, hash_b=2, c_epoch=4, c_hash=2), 20, "legal uncommitted tail"),
    # below it: a newer epoch over the committed entry means a committed entry was overwritten
    (dict(epoch_a=3, epoch_b=5, hash_a=1, hash_b=2, c_epoch=3, c_hash=1), 20, "SAFETY VIOLATION"),
    # below it with no majority entry at all
    (dict(epoch_a=3, epoch_b=4, hash_a=1, hash_b=2), 20, "SAFETY VIOLATION"),
])
def test_divergence_rule(entry: dict[str, int], floor: int, verdict: str) -> None:
    from kraftnode.spark.audit import _classify

    got, reason = _classify({"offset": 15, "replica_a": 1, "replica_b": 2, **entry}, floor)
    assert got == verdict, reason


def test_the_pipeline_job_fails_on_a_damaged_replica(sample: SampleQuorum, tmp_path: Path) -> None:
    """tools/pipelines/quorum_audit.py (the spark-submit job, its own Spark session): the same
    headline first, exit 1."""
    root = tmp_path / "q"
    shutil.copytree(sample.root, root)
    base, last = flip_bytes(root / "node3" / "metadata", sample.epoch_start[2] - 2)
    r = subprocess.run([sys.executable, "tools/pipelines/quorum_audit.py", str(root), "--out", str(tmp_path / "out"),
                        "--master", "local[1]"], capture_output=True, text=True, timeout=240,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    lines = r.stdout.splitlines()   # progress on stderr: the headline is the first line
    assert lines[0].startswith(f"Replica 3 lost committed data: offsets {base}-{last} "), lines
    assert "  1 vs 3: INCONSISTENT: LOST COMMITTED DATA" in r.stdout


def test_a_log_with_application_records_is_not_called_clean(spark: Any, sample: SampleQuorum, tmp_path: Path) -> None:
    """The README's old demo write (`echo hello | kcat ... -P`) left a record no Kafka broker can
    replay (a broker dies on it: "unknown frame version 104"); the audit says so in its
    headline instead of calling the log clean (issue 37)."""
    from kraftnode.log import MetadataLog
    from tools.pipelines.sample_quorum import CONFIG

    root = tmp_path / "q"
    shutil.copytree(sample.root, root)
    end = sample.end_offsets[3]
    with MetadataLog(root / "node3" / "metadata", CONFIG) as log:
        log.append_as_follower(rb.build_batch([rb.Record(None, b"hello", (), timestamp=T0)], base_offset=end,
                                              partition_leader_epoch=3))
        log.flush()
    res = run_audit(spark, [str(root)], tmp_path / "out")
    assert (res.application_records, res.first_application_offset) == (1, end)
    assert res.headline() == ("No safety violation found; every replica can read its committed records; but 1 "
                              f"application record(s) from offset {end} are not KRaft metadata records: no Kafka "
                              "broker or controller can replay this log (kraftnode.application.records.enable).")
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["application_records"] == 1
