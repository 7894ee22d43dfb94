"""tools/hadoop_dist.py: the MiniDFSCluster the Spark cluster tests run is Hadoop's own, of the
version pyspark bundles (a client and a cluster of different Hadoop versions may not talk)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools import hadoop_dist


def test_the_minicluster_is_of_pyspark_s_hadoop_version() -> None:
    pyspark = pytest.importorskip("pyspark")
    version = hadoop_dist.pyspark_hadoop_version()
    assert (Path(pyspark.__file__).parent / "jars" / f"hadoop-client-api-{version}.jar").is_file()
    home = hadoop_dist.installed(version)
    if home is None:
        if os.environ.get("CI"):
            pytest.fail("the MiniDFSCluster is required in CI (tools/test.sh installs it)")
        pytest.skip("the MiniDFSCluster is not installed (python -m tools.hadoop_dist install)")
    assert home == hadoop_dist.cache_root() / version
    assert (home / "libs" / f"hadoop-client-minicluster-{version}.jar").is_file()
    assert {p.name for p in (home / "classes").glob("*.class")} >= {"MiniHdfs.class", "HdfsPut.class"}
