"""Columns of the ``kraft-log`` source, as an Arrow schema and as Spark DDL.

Both views are kept side by side so the Arrow batches the decoder yields match
what Spark was told, column for column (Spark checks names and types when it
ingests Arrow).  Timestamps stay epoch milliseconds (``long``), as Kafka stores
them, so no time-zone conversion happens anywhere on the read path.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

__all__ = ["ARROW_SCHEMA", "SPARK_DDL", "HEADER_TYPE", "COLUMNS"]

HEADER_TYPE: Final = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])

# (name, arrow type, Spark DDL type, meaning)
_COLUMNS: Final = [
    ("replica", pa.int32(), "INT", "node.id of the replica (meta.properties, else the path)"),
    ("file", pa.string(), "STRING", "file name (full path when the replica is unknown)"),
    ("file_type", pa.string(), "STRING", "segment | snapshot | bootstrap"),
    ("position", pa.int64(), "BIGINT", "byte position of the batch in the file"),
    ("offset", pa.int64(), "BIGINT", "record offset"),
    ("batch_base_offset", pa.int64(), "BIGINT", ""),
    ("batch_last_offset", pa.int64(), "BIGINT", ""),
    ("partition_leader_epoch", pa.int32(), "INT", ""),
    ("timestamp", pa.int64(), "BIGINT", "epoch milliseconds (LogAppendTime batches: the batch max)"),
    ("compression", pa.string(), "STRING", "none | gzip | snappy | lz4 | zstd"),
    ("is_control", pa.bool_(), "BOOLEAN", ""),
    ("control_type", pa.string(), "STRING", "LEADER_CHANGE, KRAFT_VOTERS, ... (control records)"),
    ("producer_id", pa.int64(), "BIGINT", ""),
    ("key", pa.binary(), "BINARY", ""),
    ("value", pa.binary(), "BINARY", ""),
    ("headers", pa.list_(HEADER_TYPE), "ARRAY<STRUCT<key: STRING, value: BINARY>>", ""),
    ("batch_crc", pa.int64(), "BIGINT", "stored CRC-32C of the batch"),
    ("batch_crc_valid", pa.bool_(), "BOOLEAN", "stored CRC == computed CRC"),
    ("batch_size", pa.int32(), "INT", "bytes of the batch on disk (header included)"),
    ("batch_records", pa.int32(), "INT", "records in the batch"),
    ("record_size", pa.int32(), "INT", "uncompressed bytes of the encoded record"),
    ("record_type", pa.string(), "STRING", "FEATURE_LEVEL_RECORD, ..., or the control type"),
    ("record_version", pa.int32(), "INT", "metadata record version / control key version"),
    ("record_json", pa.string(), "STRING", "Kafka's JSON form of the decoded record"),
    ("record_error", pa.string(), "STRING", "why the value is not a decodable KRaft record"),
    ("error", pa.string(), "STRING", "corruption of the batch or file; the row's fields may be null"),
]

COLUMNS: Final = [c[0] for c in _COLUMNS]
ARROW_SCHEMA: Final = pa.schema([pa.field(n, t) for n, t, _, _ in _COLUMNS])
SPARK_DDL: Final = ", ".join(f"{n} {d}" for n, _, d, _ in _COLUMNS)
