"""Real clusters for the Spark tests (``tools/spark_cluster.py``): Hadoop's single-process
HDFS (``MiniDFSCluster``, a real NameNode and DataNode on 127.0.0.1) and a Spark standalone
cluster (pyspark's ``spark-class`` Master and Worker on loopback), each a process the test
starts and stops by PID. What they need but is missing (Java, Maven, pyspark) skips the test
with the reason, and fails it under ``CI=true`` (``tools/test.sh`` installs them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from tools import spark_cluster
from tools.spark_cluster import MiniHdfs, StandaloneSpark

__all__ = ["MiniHdfs", "StandaloneSpark", "start_mini_hdfs", "start_standalone"]


def _unavailable(e: spark_cluster.Unavailable) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{e} (required in CI: tools/test.sh installs it)")
    pytest.skip(str(e))


def start_mini_hdfs(root: Path) -> MiniHdfs:
    try:
        return spark_cluster.start_mini_hdfs(root)
    except spark_cluster.Unavailable as e:
        _unavailable(e)


def start_standalone(root: Path, cores: int = 2) -> StandaloneSpark:
    try:
        return spark_cluster.start_standalone(root, cores=cores)
    except spark_cluster.Unavailable as e:
        _unavailable(e)
