"""The Spark kraft-log source reads generated snapshots; the audit does not report a replica
whose log was cleaned as diverging."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kraftnode.log.meta_properties import MetaProperties, write_meta_properties
from kraftnode.log.metadata_log import MetadataLog
from tests.kraftnode.commands.test_dump_log_snapshots import SMALL, replica


def test_spark_reads_generated_snapshots_and_a_cleaned_replica_is_not_diverging(spark: Any, tmp_path: Path) -> None:
    dirs = []
    for node, retention in ((1, -1), (2, 3000)):
        root = replica(tmp_path / f"n{node}", retention)
        write_meta_properties(root, MetaProperties(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=node,
                                                   directory_id=uuid.uuid4()))
        dirs.append(str(root))
    with MetadataLog(tmp_path / "n2", SMALL) as cleaned:
        assert cleaned.start_offset > 0
    df = spark.read.format("kraft-log").load(dirs)
    snaps = df.filter("file_type = 'snapshot' and replica = 2")
    types = {r["record_type"] for r in snaps.select("record_type").distinct().collect()}
    assert {"FEATURE_LEVEL_RECORD", "TOPIC_RECORD", "PARTITION_RECORD"} <= types
    assert df.filter("error is not null").count() == 0
    from kraftnode.spark.audit import run_audit

    res = run_audit(spark, dirs, tmp_path / "audit")
    assert res.ok and [p["verdict"] for p in res.pairs] == ["consistent"]
