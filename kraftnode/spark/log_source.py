"""``spark.read.format("kraft-log")``: batch reads of KRaft metadata log files.

One input partition per segment or snapshot file, so Spark spreads files over
its cores (``local[*]``) or executors (``--master``); each partition yields Arrow
record batches built by :mod:`kraftnode.spark.decode` -- never Python rows.

A user-given ``.schema("offset BIGINT, value BINARY, ...")`` naming a subset of the
columns (same names and types) makes the source produce only those columns.

Options: ``path`` / ``paths`` (what ``.load()`` passes; globs allowed),
``decodeRecords`` (default true: fill record_type/record_json; false skips the
per-record JSON work for a pure scan), ``maxDecompressedBytes`` (per batch).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kraftnode.spark.decode import DecodeOptions, decode_file
from kraftnode.spark.paths import InputFile, discover
from kraftnode.spark.schema import ARROW_SCHEMA, COLUMNS, SPARK_DDL

# pyspark's type helpers are imported where used, on purpose: kraftnode.spark.decode and this
# module's pure parts work without Spark installed (see kraftnode/spark/__init__.py).

__all__ = ["KraftLogDataSource", "parse_paths", "decode_options"]


def parse_paths(options: Any) -> list[str]:
    paths: list[str] = []
    raw = options.get("paths")
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = [p for p in str(raw).split(",") if p]
        paths.extend(str(p) for p in (parsed if isinstance(parsed, list) else [parsed]))
    if options.get("path"):
        paths.append(str(options["path"]))
    return paths


def _bool(options: Any, name: str, default: bool) -> bool:
    v = options.get(name)
    if v is None:
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name}: expected true or false, not {v!r}")


def decode_options(options: Any) -> DecodeOptions:
    kw: dict[str, Any] = {"decode_records": _bool(options, "decodeRecords", True)}
    if options.get("maxDecompressedBytes"):
        kw["max_decompressed_bytes"] = int(options["maxDecompressedBytes"])
    return DecodeOptions(**kw)


class FilePartition(InputPartition):
    def __init__(self, file: InputFile) -> None:
        super().__init__(file)
        self.file = file


def projection(schema: StructType | None) -> list[str] | None:
    """Column names of a user-given ``.schema(...)`` that selects some of our columns, in its
    order; None for the full schema.  Why: Spark does not push column pruning into Python
    data sources, and every column costs the JVM a copy per row -- a read that needs three
    columns can say so and move a fraction of the bytes."""
    if schema is None:
        return None
    names = [f.name for f in schema.fields]
    if names == COLUMNS:
        return None
    from pyspark.sql.pandas.types import to_arrow_type

    for f in schema.fields:
        if f.name not in COLUMNS:
            raise ValueError(f"kraft-log has no column {f.name!r}; columns: {', '.join(COLUMNS)}")
        ours = ARROW_SCHEMA.field(f.name).type
        if to_arrow_type(f.dataType) != ours:
            raise ValueError(f"kraft-log column {f.name} is {ours}, not {f.dataType.simpleString()}")
    return names


_RECORD_COLUMNS = {"record_type", "record_version", "record_json", "record_error"}


class KraftLogReader(DataSourceReader):
    def __init__(self, options: Any, schema: StructType | None = None) -> None:
        self.paths = parse_paths(options)
        self.options = decode_options(options)
        self.columns = projection(schema)
        if self.columns is not None and not _RECORD_COLUMNS & set(self.columns):
            self.options = DecodeOptions(decode_records=False,
                                         max_decompressed_bytes=self.options.max_decompressed_bytes)
        self.files = discover(self.paths)  # fails here, on the driver, naming the bad path

    def partitions(self) -> Sequence[InputPartition]:
        return [FilePartition(f) for f in self.files]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        f: InputFile = partition.file  # type: ignore[attr-defined]
        batches = decode_file(f.path, replica=f.replica, file_type=f.file_type, options=self.options)
        if self.columns is None:
            yield from batches
        else:
            for b in batches:
                yield b.select(self.columns)


class KraftLogDataSource(DataSource):
    """KRaft metadata log segments and snapshots of one or many replicas."""

    @classmethod
    def name(cls) -> str:
        return "kraft-log"

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftLogReader(self.options, schema)
