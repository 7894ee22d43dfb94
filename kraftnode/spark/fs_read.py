"""``kraft-log`` rows of files on any filesystem Spark reads, and the one-line error when an
executor cannot read one.

:func:`read_log` is the entry for paths and URIs alike: local paths (made absolute on the
driver) go to the ``kraft-log`` data source, whose Python workers ``mmap`` them; files of
any other filesystem (``hdfs://``, ``s3a://``, ``abfs://``, ``gs://``...) are listed on the
driver through Hadoop's ``FileSystem`` (:func:`kraftnode.spark.paths.discover`) and read on
the executors by Spark's own ``binaryFile`` source (Hadoop's ``FileSystem`` again, with the
session's configuration and credentials), whose bytes the same decoder turns into the same
Arrow batches in ``mapInArrow``. Why this split, measured, is in docs/spark.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from kraftnode.spark.paths import InputFile, PathError, discover, is_local, local_path

# pyspark (the spark extra) is imported inside the functions that use it, on purpose: this
# module is importable, and its callers' errors readable, where Spark is not installed.

__all__ = ["read_log", "read_files", "unreadable_path"]


def _schema(columns: str | None) -> Any:
    from pyspark.sql.types import StructType

    from kraftnode.spark.schema import SPARK_DDL

    st = StructType.fromDDL(columns or SPARK_DDL)
    assert isinstance(st, StructType)
    return st


def read_files(spark: Any, files: list[InputFile], columns: str | None = None,
               decode_records: bool = True) -> Any:
    """The ``kraft-log`` rows (``columns``: a DDL subset of them) of ``files``, read by Spark's
    ``binaryFile`` source on the executors and decoded there in ``mapInArrow``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from kraftnode.spark.decode import DecodeOptions, decode_bytes

    spark_schema = _schema(columns)
    arrow_schema = to_arrow_schema(spark_schema)
    names = spark_schema.fieldNames()
    meta = {f.path: (f.replica, f.file_type) for f in files}
    wants_records = bool({"record_type", "record_version", "record_json", "record_error"} & set(names))
    options = DecodeOptions(decode_records=decode_records and wants_records)

    def decode(batches: Iterable[Any]) -> Iterator[Any]:
        for b in batches:
            paths = b.column("path").to_pylist()
            contents = b.column("content")
            for i, p in enumerate(paths):
                replica, file_type = meta.get(p, (None, "segment"))
                data = contents[i].as_buffer()
                for out in decode_bytes(data if data is not None else b"", p, replica=replica,
                                        file_type=file_type, options=options):
                    yield out.select(names).cast(arrow_schema)

    raw = spark.read.format("binaryFile").load([f.path for f in files]).select("path", "content")
    return raw.mapInArrow(decode, spark_schema)


def read_log(spark: Any, paths: str | list[str], columns: str | None = None,
             decode_records: bool = True) -> Any:
    """``kraft-log`` rows of ``paths`` -- any path or URI Spark's file sources take, globs
    included; relative paths are resolved here, on the driver. ``columns``: a DDL subset of
    the source's columns (as ``.schema(...)`` on the source)."""
    if isinstance(paths, str):
        paths = [paths]
    if all(is_local(p) for p in paths):
        reader = spark.read.format("kraft-log").option("decodeRecords", str(decode_records).lower())
        if columns:
            reader = reader.schema(columns)
        return reader.load([local_path(p) for p in paths])
    return read_files(spark, discover(list(paths), spark), columns, decode_records)


_JAVA_LINE = re.compile(r"(java\.io\.\w+|org\.apache\.hadoop\.[\w.]+|OSError|FileNotFoundError|"
                        r"PermissionError)[:\s]+(.*)")


def unreadable_path(e: BaseException, files: list[InputFile]) -> PathError | None:
    """The one line for a Spark job that failed because an executor could not read one of
    ``files`` (the path and its filesystem, and the reason the executor gave); None when the
    failure is something else."""
    text = str(e)
    j = getattr(e, "java_exception", None)
    if j is not None:
        text += "\n" + str(j.toString())
    # kraftnode's own line from a Spark-side Python worker (the kraft-log source plans its files
    # when the job runs: a file gone by then is a PathError there), without the traceback around it
    m = re.search(r"(?:kraftnode\.spark\.paths\.)?PathError: (.+)", text)
    if m is not None:
        return PathError(m.group(1).strip())
    for f in files:
        where = f.path.split("://", 1)[-1] if not is_local(f.path) else f.path
        bare = "/" + where.split("/", 1)[1] if not is_local(f.path) and "/" in where else where
        for line in text.splitlines():
            if bare in line and re.search(r"cannot open|No such file|not exist|FileNotFound|Permission denied"
                                          r"|AccessControl|cannot be read|Is a directory", line, re.IGNORECASE):
                m = _JAVA_LINE.search(line)
                reason = (m.group(2) if m else line).strip()
                reason = reason.replace(f.path + ": ", "").replace(f.path, "").replace(bare, "").strip(" :.")
                if "cannot open: " in reason:
                    reason = reason.split("cannot open: ", 1)[1]
                fs = "the local filesystem" if is_local(f.path) else "filesystem " + f.path.split("/", 3)[0] \
                    + "//" + f.path.split("/", 3)[2]
                return PathError(f"{f.path}: an executor cannot read it on {fs} ({reason or 'unreadable'})")
    return None
