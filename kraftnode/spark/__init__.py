"""PySpark data sources over KRaft logs, snapshots and live quorums.

``register(spark)`` adds to a session:

* ``spark.read.format("kraft-log").load(PATHS)`` -- segments/snapshots of one or
  many replicas (:mod:`kraftnode.spark.log_source`); for paths on any filesystem Spark
  reads (``hdfs://``, ``s3a://``...), ``kraftnode.spark.fs_read.read_log(spark, PATHS)``;
* ``spark.readStream.format("kraft")`` / ``spark.read.format("kraft")`` -- committed
  records of a live quorum through a Kafka client (:mod:`kraftnode.spark.live_source`);
* ``df.write.format("kraft")`` -- appends through the leader with acks=all.

Spark itself is imported lazily, so ``kraftnode.spark.decode`` works without it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["register", "local_session"]


def register(spark: Any) -> None:
    """Register the ``kraft-log`` and ``kraft`` data sources on ``spark``."""
    from kraftnode.spark.log_source import KraftLogDataSource

    spark.dataSource.register(KraftLogDataSource)
    try:
        from kraftnode.spark.live_source import KraftDataSource
    except ImportError:  # confluent-kafka missing: the file source still works
        return
    spark.dataSource.register(KraftDataSource)


def local_session(master: str = "local[*]", app: str = "kraftnode", **conf: str) -> Any:
    """A SparkSession whose Python workers run this interpreter, with kraftnode's sources registered.

    Why: Spark starts worker processes with ``python3`` from PATH unless told
    otherwise, and those must be able to import kraftnode; and a local session has no
    reason to listen on anything but 127.0.0.1.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Spark's driver listens for its executors and block manager: on loopback only
    # (otherwise it picks the first external interface and warns about the hostname)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(master).appName(app)
    defaults = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.driver.memory": "2g"}
    for k, v in {**defaults, **conf}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
