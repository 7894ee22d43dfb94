"""Decode one segment or snapshot file into Arrow record batches (``kraft-log`` rows).

This module knows nothing about Spark: the data source calls :func:`decode_file`
once per input partition (one file), and the benchmark calls it directly as the
single-process baseline.

How a file is read: it is ``mmap``-ed and its batch headers are walked in Python
(one ``struct.unpack_from`` and one CRC-32C per batch).  Consecutive data batches
of the same kind -- uncompressed, whose records are read in place in the mapped
file, or compressed, whose records are inflated into one chunk buffer -- form a
chunk that :mod:`kraftnode.spark.vectorized` decodes in bulk.  Control batches,
batches whose CRC does not match, records with headers, and anything the bulk
decoder refuses go through the reference decoder (:mod:`recordbatch`) one batch
at a time, which names every problem.

Nothing is skipped silently: a batch that cannot be decoded becomes one row with
``error`` set (its header fields filled in when readable); a header that cannot be
parsed or a torn tail becomes one row naming the byte position, and because a
v2 log cannot be re-synchronised after a bad length, that row also says how many
bytes after it were not read.
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

from kraftnode.spark import record_json
from kraftnode.spark.schema import ARROW_SCHEMA, COLUMNS, HEADER_TYPE
from kraftnode.spark.vectorized import binary_column, decode_chunk, record_starts
from recordbatch import layout as L
from recordbatch.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress
from recordbatch.errors import CorruptBatchError
from recordbatch.view import iter_batches
from recordbatch.wire import DecodeError, varint_size

__all__ = ["decode_file", "decode_bytes", "DecodeOptions"]

_CODECS: Final = pa.array(list(L.CODEC_NAMES) + ["unknown"], pa.string())
_EMPTY_HEADERS: Final = pa.array([], HEADER_TYPE)
_MAX_CHUNK_RECORDS: Final = 1 << 17
_MAX_CHUNK_BYTES: Final = 32 * 1024 * 1024


@dataclass(frozen=True)
class DecodeOptions:
    """``decode_records``: fill record_type/record_json (False: leave them null)."""

    decode_records: bool = True
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES


@dataclass
class _Batch:
    position: int
    size: int
    base_offset: int
    epoch: int
    crc: int
    crc_ok: bool
    attributes: int
    last_offset_delta: int
    base_ts: int
    max_ts: int
    producer_id: int
    count: int
    records_at: int = 0  # start of the records section (file or chunk buffer)


@dataclass
class _Run:
    kind: str  # "file" | "aux" | "slow"
    batches: list[_Batch] = field(default_factory=list)
    pieces: list[bytes] = field(default_factory=list)  # aux: inflated record sections
    records: int = 0
    nbytes: int = 0


class _Rows:
    """Column lists for rows built one by one (reference path and error rows)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}

    def add(self, **values: Any) -> None:
        for c, lst in self.cols.items():
            lst.append(values.get(c))

    def to_batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [pa.array(self.cols[f.name], f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)


def _record_size(r: Any, base_offset: int, base_ts: int) -> int:
    key, value = r.key, r.value
    body = 1 + varint_size(r.timestamp - base_ts) + varint_size(r.offset - base_offset)
    body += varint_size(-1) if key is None else varint_size(len(key)) + len(key)
    body += varint_size(-1) if value is None else varint_size(len(value)) + len(value)
    body += varint_size(len(r.headers))
    for hk, hv in r.headers:
        kb = len(hk.encode("utf-8"))
        body += varint_size(kb) + kb + (varint_size(-1) if hv is None else varint_size(len(hv)) + len(hv))
    return body + varint_size(body)


class _FileDecoder:
    def __init__(self, path: str, replica: int | None, file_type: str, options: DecodeOptions,
                 data: bytes | None = None) -> None:
        self.path = path
        self.data = data  # the file's bytes, read elsewhere (e.g. by Spark's binaryFile reader)
        # The file column: the file name when the replica is known (replica + name
        # identify a file; a full path repeated on millions of rows is most of the bytes
        # Spark has to move), the full path otherwise.  Errors always name the full path.
        self.label = os.path.basename(path) if replica is not None else path
        self.replica = replica
        self.file_type = file_type
        self.options = options

    # ------------------------------------------------------------ common columns
    def _batch_common(self, b: _Batch) -> dict[str, Any]:
        codec = b.attributes & L.COMPRESSION_MASK
        return dict(
            replica=self.replica, file=self.label, file_type=self.file_type, position=b.position,
            batch_base_offset=b.base_offset, batch_last_offset=b.base_offset + b.last_offset_delta,
            partition_leader_epoch=b.epoch, compression=_CODECS[min(codec, 5)].as_py(),
            is_control=bool(b.attributes & L.CONTROL_MASK), producer_id=b.producer_id,
            batch_crc=b.crc, batch_crc_valid=b.crc_ok, batch_size=b.size, batch_records=b.count,
        )

    def error_row(self, rows: _Rows, message: str, **known: Any) -> None:
        values = {"replica": self.replica, "file": self.label, "file_type": self.file_type,
                  **known, "error": f"{self.path}: {message}"}
        rows.add(**values)

    # ------------------------------------------------------------ reference path
    def slow(self, mv: memoryview, batches: list[_Batch]) -> pa.RecordBatch:
        rows = _Rows()
        decode_records = self.options.decode_records
        for b in batches:
            common = self._batch_common(b)
            problems = []
            if not b.crc_ok:
                problems.append(f"batch at byte {b.position} (offset {b.base_offset}): stored CRC "
                                f"0x{b.crc:08x} does not match its bytes")
            try:
                view = next(iter_batches(mv[b.position:b.position + b.size]))
                recs = view.decode_records(self.options.max_decompressed_bytes)
            except (CorruptBatchError, DecodeError, StopIteration) as e:
                problems.append(f"batch at byte {b.position} (offset {b.base_offset}) cannot be "
                                f"decoded: {e or 'truncated'}")
                self.error_row(rows, "; ".join(problems), **common)
                continue
            error = f"{self.path}: " + "; ".join(problems) if problems else None
            if not recs:  # a header-only batch (compaction leaves them): no record, no row
                if problems:
                    self.error_row(rows, "; ".join(problems), **common)
                continue
            for r in recs:
                rt: str | None = None
                rv: int | None = None
                rj: str | None = None
                rerr: str | None = None
                ctype = None
                if common["is_control"]:
                    rt, rv, rj, rerr = record_json.decode_control(r)
                    ctype = rt
                elif decode_records:
                    v = r.value
                    if r.key is None and v is not None and len(v) >= 3 and v[0] == 1:
                        rt, rv, rj, rerr = record_json.decode_metadata(bytes(v))
                    else:
                        rerr = record_json.NOT_METADATA
                rows.add(**common, offset=r.offset, timestamp=r.timestamp, control_type=ctype,
                         key=None if r.key is None else bytes(r.key),
                         value=None if r.value is None else bytes(r.value),
                         headers=[{"key": k, "value": None if hv is None else bytes(hv)} for k, hv in r.headers],
                         record_size=_record_size(r, b.base_offset, b.base_ts),
                         record_type=rt, record_version=rv, record_json=rj, record_error=rerr, error=error)
        return rows.to_batch()

    # ------------------------------------------------------------ bulk path
    def fast(self, run: _Run, mm: Any, file_np: np.ndarray, file_buf: pa.Buffer) -> pa.RecordBatch | None:
        batches = run.batches
        if run.kind == "file":
            data_py: Any = mm
            b_np = file_np
            data_buf = file_buf
        else:
            joined = b"".join(run.pieces)
            data_py = joined
            b_np = np.frombuffer(joined, dtype=np.uint8)
            data_buf = pa.py_buffer(joined)
        if run.kind == "file":
            sections = [(bt.records_at, bt.position + bt.size, bt.count) for bt in batches]
        else:
            sections = []
            at = 0
            for bt, piece in zip(batches, run.pieces, strict=True):
                sections.append((at, at + len(piece), bt.count))
                at += len(piece)
        starts_a: array[int] = array("q")
        if not record_starts(data_py, sections, starts_a):
            return None
        n = len(starts_a)
        if n == 0:
            return None
        starts = np.frombuffer(starts_a, dtype=np.int64)
        counts = np.fromiter((bt.count for bt in batches), np.int64, len(batches))
        base_offsets = np.fromiter((bt.base_offset for bt in batches), np.int64, len(batches))
        base_ts = np.fromiter((bt.base_ts for bt in batches), np.int64, len(batches))
        append_ts = np.fromiter((bt.max_ts if bt.attributes & L.TIMESTAMP_TYPE_MASK else -1 for bt in batches),
                                np.int64, len(batches))
        chunk = decode_chunk(b_np, starts, counts, base_offsets, base_ts, append_ts)
        if chunk is None:
            return None
        bi = chunk.batch_index

        def per_batch(values: Any, dtype: Any) -> pa.Array:
            arr = np.fromiter(values, dtype, len(batches))
            return pa.array(arr[bi])

        cols: dict[str, pa.Array] = {}
        cols["replica"] = (pa.nulls(n, pa.int32()) if self.replica is None
                           else pa.repeat(pa.scalar(self.replica, pa.int32()), n))
        cols["file"] = pa.repeat(pa.scalar(self.label, pa.string()), n)
        cols["file_type"] = pa.repeat(pa.scalar(self.file_type, pa.string()), n)
        cols["position"] = per_batch((bt.position for bt in batches), np.int64)
        cols["offset"] = pa.array(chunk.offset)
        cols["batch_base_offset"] = pa.array(base_offsets[bi])
        cols["batch_last_offset"] = per_batch((bt.base_offset + bt.last_offset_delta for bt in batches), np.int64)
        cols["partition_leader_epoch"] = per_batch((bt.epoch for bt in batches), np.int32)
        cols["timestamp"] = pa.array(chunk.timestamp)
        codec_ids = np.fromiter((min(bt.attributes & L.COMPRESSION_MASK, 5) for bt in batches), np.int32,
                                len(batches))
        cols["compression"] = pc.take(_CODECS, pa.array(codec_ids[bi]))
        cols["is_control"] = pa.repeat(pa.scalar(False), n)
        cols["control_type"] = pa.nulls(n, pa.string())
        cols["producer_id"] = per_batch((bt.producer_id for bt in batches), np.int64)
        cols["key"] = binary_column(data_buf, b_np, chunk.key_start, chunk.key_len)
        cols["value"] = binary_column(data_buf, b_np, chunk.value_start, chunk.value_len)
        cols["headers"] = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), _EMPTY_HEADERS)
        cols["batch_crc"] = per_batch((bt.crc for bt in batches), np.int64)
        cols["batch_crc_valid"] = pa.repeat(pa.scalar(True), n)
        cols["batch_size"] = per_batch((bt.size for bt in batches), np.int32)
        cols["batch_records"] = pa.array(counts.astype(np.int32)[bi])
        cols["record_size"] = pa.array(chunk.record_size.astype(np.int32))
        self._record_columns(cols, n, b_np, data_py, chunk.key_len, chunk.value_start, chunk.value_len)
        cols["error"] = pa.nulls(n, pa.string())
        return pa.RecordBatch.from_arrays([cols[c] for c in COLUMNS], schema=ARROW_SCHEMA)

    def _record_columns(self, cols: dict[str, pa.Array], n: int, b_np: np.ndarray, data: Any,
                        key_len: np.ndarray, vstart: np.ndarray, vlen: np.ndarray) -> None:
        if not self.options.decode_records:
            for c in ("record_type", "record_json", "record_error"):
                cols[c] = pa.nulls(n, pa.string())
            cols["record_version"] = pa.nulls(n, pa.int32())
            return
        first = b_np[np.minimum(vstart, len(b_np) - 1)]
        cand = (key_len == -1) & (vlen >= 3) & (first == 1)
        idx = np.nonzero(cand)[0]
        not_metadata = pa.repeat(pa.scalar(record_json.NOT_METADATA, pa.string()), n)
        if len(idx) == 0:
            cols["record_type"] = pa.nulls(n, pa.string())
            cols["record_version"] = pa.nulls(n, pa.int32())
            cols["record_json"] = pa.nulls(n, pa.string())
            cols["record_error"] = not_metadata
            return
        rt: list[str | None] = [None] * n
        rv: list[int | None] = [None] * n
        rj: list[str | None] = [None] * n
        re_: list[str | None] = [None] * n
        for i in idx.tolist():
            s = int(vstart[i])
            rt[i], rv[i], rj[i], re_[i] = record_json.decode_metadata(bytes(data[s:s + int(vlen[i])]))
        errors = pa.array(re_, pa.string())
        cols["record_type"] = pa.array(rt, pa.string())
        cols["record_version"] = pa.array(rv, pa.int32())
        cols["record_json"] = pa.array(rj, pa.string())
        cols["record_error"] = pc.if_else(pa.array(cand), errors, not_metadata)

    # ------------------------------------------------------------ the file walk
    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self.data is not None:
            if self.data:
                yield from self._walk(self.data, len(self.data))
            return
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, after the mmap
        except OSError as e:
            raise OSError(f"{self.path}: cannot open: {e.strerror}") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield from self._walk(mm, size)
        finally:
            try:
                mm.close()
            except BufferError:
                pass  # an Arrow buffer still maps it; the mapping goes with the last reference

    def _walk(self, mm: Any, size: int) -> Iterator[pa.RecordBatch]:
        mv = memoryview(mm)
        file_np = np.frombuffer(mm, dtype=np.uint8)
        file_buf = pa.py_buffer(mm)
        header = L.HEADER
        run = _Run("slow")
        max_inflate = self.options.max_decompressed_bytes

        def flush(r: _Run) -> Iterator[pa.RecordBatch]:
            if not r.batches:
                return
            out = None if r.kind == "slow" else self.fast(r, mm, file_np, file_buf)
            if out is None:
                out = self.slow(mv, r.batches)
            yield out

        pos = 0
        tail: str | None = None
        while pos < size:
            remaining = size - pos
            if remaining < L.HEADER_SIZE:
                tail = (f"incomplete batch at byte {pos}: the file ends {remaining} bytes later, "
                        f"before the end of a batch header")
                break
            (base_offset, length, epoch, magic, crc, attributes, lod, base_ts, max_ts, pid, _pep, _seq,
             count) = header.unpack_from(mm, pos)
            if magic != L.CURRENT_MAGIC:
                tail = (f"byte {pos}: magic {magic} is not a v2 record batch; "
                        f"{remaining} bytes from here are not read")
                break
            if length < L.MIN_BATCH_LENGTH:
                tail = (f"byte {pos}: batch length {length} is below the minimum {L.MIN_BATCH_LENGTH}; "
                        f"{remaining} bytes from here are not read")
                break
            bsize = length + L.LOG_OVERHEAD
            if bsize > remaining:
                tail = (f"incomplete batch at byte {pos} (offset {base_offset}): it states {bsize} bytes "
                        f"but the file ends {remaining} bytes later")
                break
            crc_ok = crc32c(mv[pos + L.ATTRIBUTES_OFFSET:pos + bsize]) == crc
            b = _Batch(pos, bsize, base_offset, epoch, crc, crc_ok, attributes, lod, base_ts, max_ts, pid,
                       count, pos + L.HEADER_SIZE)
            codec = attributes & L.COMPRESSION_MASK
            kind = "slow"
            piece = b""
            if crc_ok and not attributes & L.CONTROL_MASK and count > 0:
                if codec == L.CODEC_NONE:
                    kind = "file"
                elif codec < len(L.CODEC_NAMES):
                    try:
                        piece = decompress(codec, mv[pos + L.HEADER_SIZE:pos + bsize], max_inflate)
                        kind = "aux"
                    except (CorruptBatchError, DecodeError):
                        kind = "slow"
            grown = run.nbytes + (len(piece) if kind == "aux" else bsize)
            if run.kind != kind or run.records + count > _MAX_CHUNK_RECORDS or grown > _MAX_CHUNK_BYTES:
                yield from flush(run)
                run = _Run(kind)
            run.batches.append(b)
            run.records += max(count, 0)
            if kind == "aux":
                run.pieces.append(piece)
                run.nbytes += len(piece)
            else:
                run.nbytes += bsize
            pos += bsize
        yield from flush(run)
        if tail is not None:
            rows = _Rows()
            self.error_row(rows, tail, position=pos)
            yield rows.to_batch()


def decode_file(path: str, *, replica: int | None = None, file_type: str = "segment",
                options: DecodeOptions | None = None) -> Iterator[pa.RecordBatch]:
    """Arrow batches (schema :data:`kraftnode.spark.schema.ARROW_SCHEMA`) of every record in ``path``."""
    return iter(_FileDecoder(path, replica, file_type, options or DecodeOptions()))


def decode_bytes(data: bytes, path: str, *, replica: int | None = None, file_type: str = "segment",
                 options: DecodeOptions | None = None) -> Iterator[pa.RecordBatch]:
    """:func:`decode_file` of a file's bytes read elsewhere; ``path`` names it in rows and errors."""
    return iter(_FileDecoder(path, replica, file_type, options or DecodeOptions(), data))
