"""``kraftnode dump-log PATH...``: print segments and snapshots batch by batch and record by record.

The output follows ``kafka-dump-log.sh --cluster-metadata-decoder`` line for line:
a batch line (``baseOffset: ... isvalid: true``), then one ``| offset: ...`` line
per record with control records decoded (``SnapshotHeader {...}``,
``KRaftVoters {...}``) and metadata records as
``payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{...}}``.
``.index`` and ``.timeindex`` files print their entries.  Corrupt input is reported,
never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

from kraftnode.errors import UsageError
from kraftnode.log.bootstrap import BOOTSTRAP_FILE
from kraftnode.log.metadata_log import METADATA_PARTITION_DIR
from kraftnode.log.metadata_records import decode_metadata_record, record_type_name
from kraftnode.log.snapshot import parse_snapshot_file_name
from recordbatch import BatchView, CorruptBatchError, iter_batches
from recordbatch.control import ControlType, EndTransactionMarker, decode_control_record
from recordbatch.wire import DecodeError

NAME = "dump-log"
HELP = "Print log segments, snapshots and indexes (like kafka-dump-log.sh --cluster-metadata-decoder)"

_WINDOW = 16 * 1024 * 1024
_MAX_BATCH = 64 * 1024 * 1024
_CONTROL_LABEL = {
    ControlType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlType.KRAFT_VERSION: "KRaftVersion",
    ControlType.KRAFT_VOTERS: "KRaftVoters",
    ControlType.LEADER_CHANGE: "LeaderChange",
}
_CONTROL_NAMES = {t: t.name for t in ControlType}


EXAMPLES = """\
  kraftnode dump-log /tmp/dev/node1/metadata                 # every segment and snapshot of a node
  kraftnode dump-log /tmp/dev/node1                          # the same: its metadata/ log dir is found
  kraftnode dump-log /tmp/dev/node1/metadata/__cluster_metadata-0/00000000000000000000.log
  kraftnode dump-log --print-data-log DIR   # also key and payload of application records
  kraftnode dump-log --batches-only DIR     # one line per batch
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help=".log, .checkpoint, .index or .timeindex files, or a directory: a "
                             "metadata log dir (holding __cluster_metadata-0/), a directory "
                             "holding one (a dev-cluster node's), or a partition directory, "
                             "whose segments and snapshots are dumped in offset order")
    parser.add_argument("--skip-record-metadata", action="store_true", help="omit per-record metadata")
    parser.add_argument("--batches-only", action="store_true", help="print batch lines only (no records)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print the content of records that are not KRaft metadata records "
                             "(application records) as ' key: K payload: P', UTF-8, as "
                             "kafka-dump-log.sh --print-data-log does; metadata records are "
                             "decoded either way")


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _bool(b: bool) -> str:
    return "true" if b else "false"


def batch_line(v: BatchView, position: int) -> str:
    base_seq = v.base_sequence
    last_seq = -1 if base_seq < 0 else (base_seq + v.last_offset_delta) & 0x7FFFFFFF
    dh = v.delete_horizon_ms
    horizon = "OptionalLong.empty" if dh is None else f"OptionalLong[{dh}]"
    ts_type = "LogAppendTime" if v.timestamp_type == 1 else "CreateTime"
    return (
        f"baseOffset: {v.base_offset} lastOffset: {v.last_offset} count: {v.records_count}"
        f" baseSequence: {base_seq} lastSequence: {last_seq} producerId: {v.producer_id}"
        f" producerEpoch: {v.producer_epoch} partitionLeaderEpoch: {v.partition_leader_epoch}"
        f" isTransactional: {_bool(v.is_transactional)} isControl: {_bool(v.is_control)}"
        f" deleteHorizonMs: {horizon} position: {position} {ts_type}: {v.max_timestamp}"
        f" size: {v.size_in_bytes} magic: {v.magic} compresscodec: {v.compression}"
        f" crc: {v.crc} isvalid: {_bool(v.is_valid())}"
    )


def record_lines(v: BatchView, skip_metadata: bool, print_data: bool = False) -> list[str]:
    try:
        records = v.decode_records()
    except (CorruptBatchError, DecodeError) as e:
        return [f"| Error decoding records of batch at offset {v.base_offset}: {e}"]
    ts_type = "LogAppendTime" if v.timestamp_type == 1 else "CreateTime"
    out = []
    for i, r in enumerate(records):
        prefix = "| "
        parts = []
        if not skip_metadata:
            key_size = -1 if r.key is None else len(r.key)
            value_size = -1 if r.value is None else len(r.value)
            seq = -1 if v.base_sequence < 0 else (v.base_sequence + (r.offset - v.base_offset)) & 0x7FFFFFFF
            head_keys = "[" + ",".join(k for k, _ in r.headers) + "]"
            parts.append(
                f"{prefix}offset: {r.offset} {ts_type}: {r.timestamp} keySize: {key_size} valueSize: {value_size}"
                f" sequence: {seq} headerKeys: {head_keys}")
            prefix = " "
            if v.is_control:
                parts.append(_control_text(r))
        if not v.is_control:
            parts.append(_payload_text(r.key, r.value, r.offset, print_data, prefix))
        elif skip_metadata:
            parts.append(prefix.rstrip() + _control_text(r))
        del i
        out.append("".join(parts))
    return out


def _control_text(r: Any) -> str:
    try:
        ctype, value = decode_control_record(r)
    except (CorruptBatchError, DecodeError) as e:
        return f" Error decoding control record: {e}"
    if isinstance(value, EndTransactionMarker):
        name = "COMMIT" if ctype == ControlType.COMMIT else "ABORT"
        return f" endTxnMarker: {name} coordinatorEpoch: {value.coordinator_epoch}"
    label = _CONTROL_LABEL.get(ControlType(ctype)) if ctype in _CONTROL_NAMES else None
    if label is None or value is None or isinstance(value, bytes):
        return f" controlType: UNKNOWN({ctype})"
    if ctype == ControlType.LEADER_CHANGE:
        # Kafka 3.9 prints only the type for LeaderChange; we add the decoded value after it.
        return f" controlType: LEADER_CHANGE({ctype}) {label} {_json(value.to_json(0))}"
    return f" {label} {_json(value.to_json(0))}"


def _utf8(b: bytes) -> str:
    # Java's new String(bytes, UTF_8): malformed input becomes U+FFFD
    return bytes(b).decode("utf-8", errors="replace")


def _payload_text(key: bytes | None, value: bytes | None, offset: int, print_data: bool,
                  prefix: str = " ") -> str:
    """A metadata record decoded (``payload: {json}``); with --print-data-log, any other record
    as Kafka's default parser prints it: `` key: K`` when it has a key, `` payload: P``."""
    if print_data:
        try:
            if value is None:
                raise DecodeError("null value")
            decode_metadata_record(value)
        except DecodeError:
            # DumpLogSegments: key (after the line's prefix) when present, then " payload: "
            text = "" if key is None else f"{prefix}key: {_utf8(key)}"
            return text + ("" if value is None else f" payload: {_utf8(value)}")
    return " payload: " + _metadata_text(value, offset)


def _metadata_text(value: bytes | None, offset: int) -> str:
    if value is None:
        return f"Error at {offset}, skipping. null value"
    try:
        msg, version = decode_metadata_record(value)
    except DecodeError as e:
        return f"Error at {offset}, skipping. {e}"
    return _json({"type": record_type_name(msg), "version": version, "data": msg.to_json(version)})


def _base_offset(path: Path) -> int | None:
    """The base offset a segment file's name carries (NNNNNNNNNNNNNNNNNNNN.log/.index/
    .timeindex); None for a file named otherwise (a copy such as flip.log)."""
    stem = path.name.split(".")[0]
    return int(stem) if stem.isdigit() else None


def dump_index(path: Path, out: Any) -> None:
    base = _base_offset(path)
    if base is None:
        # an index stores offsets relative to its segment's base offset, which only the
        # name gives: without it every offset would be a guess
        raise UsageError(f"{path}: not named NNNNNNNNNNNNNNNNNNNN{path.suffix}: the base offset its "
                         "entries are relative to is unknown")
    data = path.read_bytes()
    entry = 8 if path.suffix == ".index" else 12
    if len(data) % entry:
        print(f"{path} has a size of {len(data)}, not a multiple of {entry}: corrupt index", file=out)
    n = len(data) // entry
    if n == 0:
        print(f"{path} is empty.", file=out)
    for i in range(n):
        if entry == 8:
            rel, pos = struct.unpack_from(">ii", data, i * 8)
            if rel == 0 and i > 0:
                return
            print(f"offset: {base + rel} position: {pos}", file=out)
        else:
            ts, rel = struct.unpack_from(">qi", data, i * 12)
            if rel == 0 and i > 0:
                return
            print(f"timestamp: {ts} offset: {base + rel}", file=out)


def dump_batches(path: Path, out: Any, *, skip_metadata: bool = False, batches_only: bool = False,
                 print_data: bool = False) -> None:
    name = path.name
    if name.endswith(".log"):
        base = _base_offset(path)
        if base is None:
            # a segment copied under another name: the batches carry their own offsets
            print(f"Log starting offset: unknown ({name} is not named NNNNNNNNNNNNNNNNNNNN.log; "
                  "the offsets below are the batches' own)", file=out)
        else:
            print(f"Log starting offset: {base}", file=out)
    elif name == BOOTSTRAP_FILE:
        print("KRaft bootstrap snapshot", file=out)
    else:
        sid = parse_snapshot_file_name(name)
        if sid is not None:
            print(f"Snapshot end offset: {sid.offset}, epoch: {sid.epoch}", file=out)
    size = path.stat().st_size
    valid = 0
    with open(path, "rb") as f:
        fd = f.fileno()
        while valid < size:
            buf = os.pread(fd, min(_WINDOW, size - valid), valid)
            it = iter_batches(buf, max_batch_bytes=_MAX_BATCH)
            moved = 0
            try:
                for v in it:
                    print(batch_line(v, valid + moved), file=out)
                    if not batches_only:
                        for line in record_lines(v, skip_metadata, print_data):
                            print(line, file=out)
                    moved += v.size_in_bytes
            except CorruptBatchError as e:
                print(f"Corrupt batch at position {valid + moved}: {e}", file=out)
                valid += moved
                break
            valid += moved
            if moved == 0:
                if it.incomplete and len(buf) >= 12:
                    need = struct.unpack_from(">i", buf, 8)[0] + 12
                    if len(buf) < need <= size - valid and need <= _MAX_BATCH and need > _WINDOW:
                        buf = os.pread(fd, need, valid)
                        v = next(iter_batches(buf, max_batch_bytes=_MAX_BATCH))
                        print(batch_line(v, valid), file=out)
                        if not batches_only:
                            for line in record_lines(v, skip_metadata, print_data):
                                print(line, file=out)
                        valid += v.size_in_bytes
                        continue
                break
    if size > valid:
        print(f"Found {size - valid} invalid bytes at the end of {name}", file=out)


def _child_log_dirs(path: Path) -> list[Path]:
    """The metadata log dirs (holding __cluster_metadata-0/) directly under ``path``."""
    try:
        children = sorted(path.iterdir())
    except OSError:
        return []
    return [c for c in children if (c / METADATA_PARTITION_DIR).is_dir()]


def _files_of(p: str) -> list[Path]:
    """The files to dump for one PATH argument: itself, or a directory's segments and snapshots."""
    path = Path(p)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(f"{p}: no such file or directory")
    part = path / METADATA_PARTITION_DIR
    if not part.is_dir():
        # a node's directory (tools/dev.sh prints DEVDIR/node1/; the log dir is its metadata/):
        # the metadata log dirs one level down, when there are any (issue 41)
        inner = _child_log_dirs(path)
        if inner:
            return [f for d in inner for f in _files_of(str(d))]
    search = part if part.is_dir() else path
    files = []
    try:
        names = sorted(os.listdir(search))
    except OSError as e:
        raise UsageError(f"{p}: {e.strerror}") from None
    if search is part and (path / BOOTSTRAP_FILE).is_file():
        files.append(path / BOOTSTRAP_FILE)
    logs = [n for n in names if n.endswith(".log") and n[:-4].isdigit()]
    snaps = [n for n in names if parse_snapshot_file_name(n) is not None]
    if not logs and not snaps:
        raise UsageError(f"{p}: no log segments (NNNNNNNNNNNNNNNNNNNN.log) or snapshots (.checkpoint) "
                         f"found: expected a metadata log dir (holding {METADATA_PARTITION_DIR}/) "
                         "or a partition directory")
    # snapshots first, then the segments, each in offset order (the names sort by offset)
    files += [search / n for n in snaps] + [search / n for n in logs]
    return files


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    for p in args.paths:
        for path in _files_of(p):
            print(f"Dumping {path}", file=out)
            try:
                if path.suffix in (".log", ".checkpoint"):
                    dump_batches(path, out, skip_metadata=args.skip_record_metadata,
                                 batches_only=args.batches_only, print_data=args.print_data_log)
                elif path.suffix in (".index", ".timeindex"):
                    dump_index(path, out)
                else:
                    print(f"Ignoring unknown file {path}", file=sys.stderr)
            except BrokenPipeError:
                raise
            except OSError as e:
                raise UsageError(f"{path}: {e.strerror or e}") from None
            except ValueError as e:
                raise UsageError(f"{path}: {e}") from None
    return 0
