"""The ``kraft-log`` source and ``kraftnode audit`` on real clusters (issue 42): Hadoop's own
single-process HDFS (a real NameNode and DataNode, ``MiniDFSCluster`` from Maven Central) and
a Spark standalone cluster (pyspark's ``spark-class`` Master and a 2-core Worker on loopback),
one of each shared by the tests of this module, started and stopped by them.

The audit of the same three replicas -- by absolute local paths, by relative paths on the
standalone cluster (resolved on the driver, never in an executor's working directory), by
``hdfs://`` URI locally and on the standalone cluster -- writes the same ``summary.json`` and
the same tables; a damaged replica on HDFS is named as on local disk; a path no executor can
read is one line naming the path and its filesystem, exit 2, no traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from tests.support.spark_cluster import MiniHdfs, StandaloneSpark, start_mini_hdfs, start_standalone  # noqa: E402
from tools.pipelines.sample_quorum import SampleQuorum, flip_bytes, write_sample_quorum  # noqa: E402

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[3]
CLEAN = "No safety violation found; every replica can read its committed records."


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniHdfs]:
    h = start_mini_hdfs(tmp_path_factory.mktemp("hdfs"))
    yield h
    h.stop()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    c = start_standalone(tmp_path_factory.mktemp("standalone"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleQuorum:
    return write_sample_quorum(tmp_path_factory.mktemp("sample") / "q")


@pytest.fixture(scope="module")
def on_hdfs(hdfs: MiniHdfs, sample: SampleQuorum) -> str:
    """The sample quorum's three log dirs copied into the mini HDFS; its hdfs:// URI."""
    return hdfs.put(sample.root, "/quorums/q")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p)}


def _audit(paths: list[str], out: Path, master: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftnode", "audit", *paths, "--out", str(out), "--master", master],
                          capture_output=True, text=True, timeout=400, cwd=cwd, env=_env())


def _tables(out: Path, root: str = "") -> dict[str, list[str]]:
    """Every table the audit wrote, as sorted rows (Spark may write rows in any order/part files);
    ``root``, where the logs were (an error row names its file's full path), reads as ``ROOT``."""
    import pyarrow.parquet as pq

    tables = {}
    for d in sorted((out / "tables").iterdir()):
        rows = pq.read_table(d).to_pylist() if any(d.glob("*.parquet")) else []
        text = (json.dumps(r, sort_keys=True, default=str) for r in rows)
        tables[d.name] = sorted(t.replace(root, "ROOT") if root else t for t in text)
    return tables


def test_the_audit_is_the_same_from_local_relative_and_hdfs_paths_and_on_a_cluster(
        sample: SampleQuorum, on_hdfs: str, standalone: StandaloneSpark, tmp_path: Path) -> None:
    runs = {
        "local paths": (_audit([str(d) for d in sample.log_dirs.values()], tmp_path / "local", "local[2]"), "local"),
        # issue 42: relative paths were opened in the executor's working directory
        "relative paths, standalone": (_audit([f"node{i}/metadata" for i in (1, 2, 3)], tmp_path / "rel",
                                              standalone.master_url, cwd=sample.root), "rel"),
        "hdfs:// glob, standalone": (_audit([f"{on_hdfs}/node*/metadata"], tmp_path / "hdfs-cluster",
                                            standalone.master_url), "hdfs-cluster"),
    }
    for name, (r, _) in runs.items():
        assert r.returncode == 0, f"{name}:\n{r.stdout}\n{r.stderr[-4000:]}"
        assert r.stdout.splitlines()[0] == CLEAN, name
        assert "Traceback" not in r.stderr, name
    # the cluster runs read the files in the executors, not on the driver
    assert "kraft-log source" in runs["relative paths, standalone"][0].stderr
    assert "binaryFile source" in runs["hdfs:// glob, standalone"][0].stderr
    base = json.loads((tmp_path / "local" / "summary.json").read_text())
    assert base["replicas"] == [1, 2, 3] and base["committed_floor"] == sample.end_offsets[1]
    base_tables = _tables(tmp_path / "local")
    assert set(base_tables) >= {"replicas", "pair_divergence", "leadership", "invalid_rows",
                                     "lost_batches", "epoch_stats", "voters_history"} and base_tables["leadership"]
    for name, (_, out) in runs.items():
        assert json.loads((tmp_path / out / "summary.json").read_text()) == base, name
        assert _tables(tmp_path / out) == base_tables, name


def test_a_damaged_replica_on_hdfs_is_named_as_on_local_disk(spark: Any, sample: SampleQuorum, hdfs: MiniHdfs,
                                                              tmp_path: Path) -> None:
    """8 bytes flipped in a committed batch of replica 3, copied to HDFS: the audit by hdfs://
    URI (the CLI, a new process) says what the audit of the local copy says (this process's
    local session), headline, pairs and summary."""
    from kraftnode.spark.audit import run_audit

    root = tmp_path / "q"
    shutil.copytree(sample.root, root)
    base, last = flip_bytes(root / "node3" / "metadata", sample.epoch_start[2] - 2)
    uri = hdfs.put(root, "/quorums/damaged")
    local = run_audit(spark, [str(root)], tmp_path / "local")
    remote = _audit([uri], tmp_path / "hdfs", "local[2]")
    headline = (f"Replica 3 lost committed data: offsets {base}-{last} ({last - base + 1} records in batches that "
                "fail their CRC or cannot be read).")
    assert local.headline() == headline
    assert remote.returncode == 1, remote.stdout + remote.stderr[-3000:]
    assert remote.stdout.splitlines()[0] == headline
    assert "replicas 1 and 3: INCONSISTENT: LOST COMMITTED DATA: replica 3 cannot read committed offset " \
        f"{base} and after" in remote.stdout
    summary = json.loads((tmp_path / "hdfs" / "summary.json").read_text())
    assert summary == json.loads((tmp_path / "local" / "summary.json").read_text())
    assert summary["lost_committed"] == {"3": [[base, last]]}
    assert _tables(tmp_path / "hdfs", uri) == _tables(tmp_path / "local", str(root))
    assert any("ROOT/node3/metadata/__cluster_metadata-0/" in r for r in _tables(tmp_path / "hdfs", uri)["invalid_rows"])


def test_a_path_that_is_not_there_is_one_line_naming_it_and_its_filesystem(hdfs: MiniHdfs, tmp_path: Path) -> None:
    r = _audit([f"{hdfs.uri}/no/such/dir"], tmp_path / "out", "local[1]")
    assert r.returncode == 2, r.stdout + r.stderr
    err = [ln for ln in r.stderr.splitlines() if not ln.startswith("[")]
    assert err == [f"kraftnode audit: {hdfs.uri}/no/such/dir: no such file or directory on filesystem {hdfs.uri}"] \
        or (len(err) == 1 and f"{hdfs.uri}/no/such/dir" in err[0] and f"filesystem {hdfs.uri}" in err[0]), r.stderr
    assert "Traceback" not in r.stderr


_JOBS = r"""
import json, os, sys
from pyspark.sql import functions as F
from kraftnode.spark import local_session
from kraftnode.spark.fs_read import read_log, read_files, unreadable_path
from kraftnode.spark.paths import discover

master, jobs = sys.argv[1], json.loads(sys.argv[2])
spark = local_session(master, "kraft-log-cluster-test")
def digest(df):
    row = df.agg(F.count("*").alias("n"), F.sum(F.abs(F.xxhash64(*df.columns)) % 1000003).alias("h")).first()
    return [row["n"], row["h"]]
out = []
for kind, paths in jobs:
    if kind == "read":
        out.append({"digest": digest(read_log(spark, paths))})
        continue
    # unreadable: listed on the driver, then the file is gone when an executor opens it
    files = discover(paths, spark)
    victim = files[0].path
    if victim.startswith("hdfs://"):
        df = read_files(spark, files)  # Spark's file index lists the files here, on the driver
        p = spark._jvm.org.apache.hadoop.fs.Path(victim)
        p.getFileSystem(spark._jsc.hadoopConfiguration()).delete(p, False)
    else:
        df = spark.read.format("kraft-log").load([f.path for f in files])
        os.unlink(victim)
    try:
        df.count()
        error = None
    except Exception as e:
        bad = unreadable_path(e, files)
        error = "not recognised: " + str(e)[-2000:] if bad is None else str(bad)
    out.append({"error": error, "victim": victim})
spark.stop()
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def cluster_jobs(sample: SampleQuorum, on_hdfs: str, hdfs: MiniHdfs, standalone: StandaloneSpark,
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One driver on the standalone cluster (a JVM and executors start once) runs every
    kraft-log job of the tests below, from the sample's directory (relative paths)."""
    root = tmp_path_factory.mktemp("vanishing") / "q"
    shutil.copytree(sample.root, root)
    uri = hdfs.put(root, "/quorums/vanishing")
    jobs = [("read", ["node1/metadata", "node2/metadata", "node3/metadata"]), ("read", [on_hdfs]),
            ("unreadable", [uri]), ("unreadable", [str(root)])]
    r = subprocess.run([sys.executable, "-c", _JOBS, standalone.master_url, json.dumps(jobs)], capture_output=True,
                       text=True, timeout=400, cwd=sample.root, env=_env())
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    return {"relative": got[0], "hdfs": got[1], "hdfs gone": got[2], "local gone": got[3]}


def test_a_kraft_log_read_on_the_standalone_cluster_matches_local_mode(
        spark: Any, sample: SampleQuorum, cluster_jobs: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    df = spark.read.format("kraft-log").load(str(sample.root))
    row = df.agg(F.count("*").alias("n"), F.sum(F.abs(F.xxhash64(*df.columns)) % 1000003).alias("h")).first()
    local = [row["n"], row["h"]]
    assert local[0] > 300
    assert cluster_jobs["relative"]["digest"] == local  # relative paths, resolved on the driver
    assert cluster_jobs["hdfs"]["digest"] == local


def test_a_file_no_executor_can_read_is_one_line_naming_it_and_its_filesystem(
        hdfs: MiniHdfs, cluster_jobs: dict[str, Any]) -> None:
    """Listed on the driver, gone when the job reads it (e.g. a segment deleted by retention in
    between): on HDFS an executor finds it missing; one line either way, on the standalone cluster."""
    got = cluster_jobs["hdfs gone"]
    assert "\n" not in got["error"]
    assert got["error"].startswith(f"{got['victim']}: an executor cannot read it on filesystem {hdfs.uri} ("), got
    # a local file: the kraft-log source lists its files when the job runs, so the file is found
    # missing there (Spark wraps that in the planning worker's traceback; the line is kept alone)
    got = cluster_jobs["local gone"]
    assert "\n" not in got["error"]
    assert got["error"] == f"{got['victim']}: no such file or directory on the local filesystem", got
