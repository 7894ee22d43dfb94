"""Protocol codec benchmark: kraftnode's generated codec against kafka-python's, one run.

Rows (issue 2, "Must show" 4): encode and decode throughput of
  * FetchRequest v17 -- a raft follower's fetch: one topic by id, one partition,
    ReplicaState and ReplicaDirectoryId set (the message a voter sends most often);
  * FetchResponse v16 -- one topic, one partition, ~1 MiB of real v2 record batches
    (also reported in MB/s: the replication hot path is dominated by this message;
    our decoder keeps the records as a zero-copy view of the input, kafka-python's
    copies them, so that decode row measures the saved copy as much as the parser);
  * DescribeQuorumResponse v2 -- 5 voters and 3 observers with directory ids, and
    Nodes with endpoints for the 5 voters;
  * VoteRequest v1.
Target: ours >= 2x kafka-python on every row; rows that miss it are marked.

Fairness.  Both sides encode the same values and must produce byte-identical output
(checked before any timing: a faster codec that writes different bytes would prove
nothing), and each decodes the other's bytes back to the same message.  kafka-python
has no VoteRequest class, so one is built from *our* ``schemas/VoteRequest.json``
with kafka-python's own schema machinery (``class VoteRequest(ApiMessage,
load_json=...)``, the hook kafka-python itself uses for schemas outside its package):
its codec engine runs the same schema we do.

Measurement.  The machine is small and shared, so every figure is the median over
``--blocks`` timing blocks of about ``--block-ms`` each; within a block round the two
implementations run back to back, and the ratio is the median of the per-block ratios
so that a burst of load from other processes hits both sides alike.  The garbage
collector is paused inside a block, as ``timeit`` does.

Usage: python tools/bench/codec.py [--quick] [--json] [--blocks N] [--block-ms MS]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import platform
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

# Run as a file, sys.path[0] is tools/bench; make the checkout's packages importable.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.protocol import (  # noqa: E402
    DescribeQuorumResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
)
from recordbatch.message import Message  # noqa: E402

# Generated message classes add encode/decode to Message; typed loosely here.
Msg = Any

TARGET = 2.0
METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID (AAAAAAAAAAAAAAAAAAAAAQ)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
RECORDS_TARGET = 1 << 20


def _dir_id(n: int) -> uuid.UUID:
    """Deterministic, non-zero directory ids (Kafka writes them as random v4 uuids)."""
    return uuid.UUID(int=(0x5EED << 112) | (n * 0x9E3779B97F4A7C15))


# --------------------------------------------------------------------------- messages


def fetch_request() -> Msg:
    FR = FetchRequest
    return FR(
        cluster_id=CLUSTER_ID,
        replica_state=FR.ReplicaState(replica_id=2, replica_epoch=-1),
        max_wait_ms=500,
        min_bytes=0,
        max_bytes=8 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FR.FetchTopic(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    FR.FetchPartition(
                        partition=0,
                        current_leader_epoch=7,
                        fetch_offset=1_234_567,
                        last_fetched_epoch=7,
                        log_start_offset=-1,
                        partition_max_bytes=8 << 20,
                        replica_directory_id=_dir_id(2),
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def record_batches(target: int = RECORDS_TARGET) -> bytes:
    """About ``target`` bytes of real, uncompressed v2 batches with consecutive offsets
    (what a leader returns to a catching-up follower); random bytes if recordbatch is
    unavailable -- the codecs copy the records field opaquely either way."""
    try:
        from recordbatch import Record, build_batch
    except ImportError:  # pragma: no cover - recordbatch ships with kraftnode
        import random

        return random.Random(1).randbytes(target)
    per_batch = 100
    value = (b"metadata-record-payload " * 5)[:100]
    chunks: list[bytes] = []
    size = 0
    offset = 0
    while size < target:
        recs = [
            Record(b"key-%08d" % (offset + i), value, (), 1_700_000_000_000 + offset + i)
            for i in range(per_batch)
        ]
        batch = build_batch(recs, base_offset=offset, partition_leader_epoch=7, now_ms=1_700_000_000_000)
        chunks.append(batch)
        size += len(batch)
        offset += per_batch
    return b"".join(chunks)


def fetch_response(records: bytes) -> Msg:
    FR = FetchResponse
    return FR(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            FR.FetchableTopicResponse(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    FR.PartitionData(
                        partition_index=0,
                        error_code=0,
                        high_watermark=1_250_000,
                        last_stable_offset=1_250_000,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=records,
                    )
                ],
            )
        ],
        node_endpoints=[],
    )


def describe_quorum_response() -> Msg:
    DQ = DescribeQuorumResponse

    def replica(node: int, leo: int) -> Any:
        return DQ.ReplicaState(
            replica_id=node,
            replica_directory_id=_dir_id(node),
            log_end_offset=leo,
            last_fetch_timestamp=1_700_000_000_000 + node,
            last_caught_up_timestamp=1_700_000_000_000 + node,
        )

    return DQ(
        error_code=0,
        error_message=None,
        topics=[
            DQ.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    DQ.PartitionData(
                        partition_index=0,
                        error_code=0,
                        error_message=None,
                        leader_id=1,
                        leader_epoch=7,
                        high_watermark=1_250_000,
                        current_voters=[replica(n, 1_250_000 + n) for n in range(1, 6)],
                        observers=[replica(n, 1_249_000 + n) for n in range(100, 103)],
                    )
                ],
            )
        ],
        nodes=[
            DQ.Node(
                node_id=n,
                listeners=[DQ.Listener(name="CONTROLLER", host=f"controller-{n}.kraft.example", port=9093)],
            )
            for n in range(1, 6)
        ],
    )


def vote_request() -> Msg:
    VR = VoteRequest
    return VR(
        cluster_id=CLUSTER_ID,
        voter_id=2,
        topics=[
            VR.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    VR.PartitionData(
                        partition_index=0,
                        candidate_epoch=8,
                        candidate_id=1,
                        candidate_directory_id=_dir_id(1),
                        voter_directory_id=_dir_id(2),
                        last_offset_epoch=7,
                        last_offset=1_250_000,
                    )
                ],
            )
        ],
    )


# --------------------------------------------------------------------------- kafka-python side


def kafka_python_classes() -> dict[str, Any]:
    """kafka-python's message classes for the four rows (VoteRequest from our schema)."""
    import importlib

    from kafka.protocol.admin.cluster import DescribeQuorumResponse as KpDescribeQuorumResponse
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.consumer.fetch import FetchRequest as KpFetchRequest
    from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse

    # `schemas/` (no __init__.py) imports as a namespace package, which is what
    # kafka-python's load_json hook needs to read `schemas/VoteRequest.json`.
    schemas_pkg = importlib.import_module("schemas")
    if str(ROOT / "schemas") not in [str(Path(p)) for p in schemas_pkg.__path__]:
        raise RuntimeError(f"'schemas' resolves to {list(schemas_pkg.__path__)}, not {ROOT / 'schemas'}")

    # Equivalent of `class VoteRequest(ApiMessage, load_json="schemas"): pass` (the
    # metaclass loads the JSON file named after the class), without shadowing ours.
    with warnings.catch_warnings():  # kafka-python's load_json uses importlib.resources.read_text
        warnings.simplefilter("ignore", DeprecationWarning)
        KpVoteRequest = type(ApiMessage)(
            "VoteRequest", (ApiMessage,), {"__module__": __name__}, load_json="schemas"
        )
    return {
        "FetchRequest": KpFetchRequest,
        "FetchResponse": KpFetchResponse,
        "DescribeQuorumResponse": KpDescribeQuorumResponse,
        "VoteRequest": KpVoteRequest,
    }


def to_kafka_python(obj: Message, kp_cls: Any, version: int) -> Any:
    """kafka-python's object with the same values, field by field in schema order.

    Fields are matched by Kafka name (kafka-python renames a few attributes), falling
    back to schema position; tagged fields at their default are left out, since both
    encoders omit them and kafka-python encodes every tagged field it was given.
    """
    kp_fields = kp_cls._struct._fields
    by_name = {kf._json["name"].replace("_", "").lower(): kf for kf in kp_fields}
    kwargs: dict[str, Any] = {}
    for i, f in enumerate(obj.FIELDS):
        if not f.present_in(version):
            continue
        kf = by_name.get(f.name.lower()) or kp_fields[i]
        val = getattr(obj, f.attr)
        if f.tagged is not None and f.tagged[0] <= version <= f.tagged[1]:
            if val == getattr(type(obj)(), f.attr) or (isinstance(val, list) and not val):
                continue
        if f.struct is not None and val is not None:
            sub = getattr(kp_cls, kf.type_str, None) or kf.data_class
            if f.type.startswith("[]"):
                val = [to_kafka_python(e, sub, version) for e in val]
            else:
                val = to_kafka_python(val, sub, version)
        elif isinstance(val, memoryview):
            val = bytes(val)
        kwargs[kf.name] = val
    return kp_cls(version=version, **kwargs)


class GuardError(AssertionError):
    """The two codecs disagree: timing them would compare different work."""


def check_same_bytes(name: str, version: int, ours: Msg, kp: Any, kp_cls: Any) -> bytes:
    """Both encoders write identical bytes, and each decodes the other's bytes back."""
    ours_bytes: bytes = ours.encode(version)
    kp_bytes = bytes(kp.encode(version=version))
    if ours_bytes != kp_bytes:
        at = next((i for i, (a, b) in enumerate(zip(ours_bytes, kp_bytes, strict=False)) if a != b), None)
        raise GuardError(
            f"{name} v{version}: encodings differ (ours {len(ours_bytes)} bytes, "
            f"kafka-python {len(kp_bytes)} bytes, first difference at {at})"
        )
    if type(ours).decode(kp_bytes, version) != ours:
        raise GuardError(f"{name} v{version}: ours decodes kafka-python's bytes to a different message")
    theirs = kp_cls.decode(ours_bytes, version=version)
    theirs._header = None  # kafka-python's decode leaves this slot unset; encode reads it
    if bytes(theirs.encode(version=version)) != ours_bytes:
        raise GuardError(f"{name} v{version}: kafka-python does not round-trip our bytes")
    return ours_bytes


# --------------------------------------------------------------------------- timing


def _run(fn: Callable[[], Any], n: int) -> float:
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in itertools.repeat(None, n):
            fn()
        return time.perf_counter() - t0
    finally:
        if gc_was_on:
            gc.enable()


def calibrate(fn: Callable[[], Any], block_s: float) -> int:
    """Iterations per block so that one block lasts about ``block_s``."""
    n = 1
    while True:
        t = _run(fn, n)
        if t >= block_s / 5 or n >= 1 << 24:
            return max(1, round(n * block_s / max(t, 1e-9)))
        n *= 2 if t > block_s / 50 else 10


@dataclass
class Row:
    message: str
    version: int
    op: str
    size: int
    ours: float  # median ops/s
    kp: float
    ratio: float  # median of per-block ratios
    blocks: int
    mb_s: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.ratio >= TARGET

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "message": self.message,
            "version": self.version,
            "op": self.op,
            "bytes": self.size,
            "ours_ops_s": round(self.ours, 1),
            "kafka_python_ops_s": round(self.kp, 1),
            "ratio": round(self.ratio, 3),
            "target": TARGET,
            "meets_target": self.ok,
            "blocks": self.blocks,
        }
        if self.mb_s:
            out["ours_mb_s"] = round(self.ours * self.size / 1e6, 1)
            out["kafka_python_mb_s"] = round(self.kp * self.size / 1e6, 1)
        return out

    def line(self) -> str:
        label = f"{self.message} v{self.version}"
        ours = f"{self.ours:>11,.0f} ops/s"
        kp = f"{self.kp:>11,.0f} ops/s"
        if self.mb_s:
            ours += f" ({self.ours * self.size / 1e6:7.1f} MB/s)"
            kp += f" ({self.kp * self.size / 1e6:7.1f} MB/s)"
        mark = "ok" if self.ok else f"MISS (< {TARGET:g}x)"
        return f"{label:<28} {self.op:<6}  ours {ours}  kafka-python {kp}  ratio {self.ratio:6.2f}x  {mark}"


def measure(
    message: str, version: int, op: str, size: int,
    ours_fn: Callable[[], Any], kp_fn: Callable[[], Any],
    blocks: int, block_s: float, mb_s: bool = False,
) -> Row:
    n_ours = calibrate(ours_fn, block_s)
    n_kp = calibrate(kp_fn, block_s)
    ours_rates: list[float] = []
    kp_rates: list[float] = []
    for b in range(blocks):
        # alternate which side goes first, so neither always gets the warmer cache
        order = ((ours_fn, n_ours, ours_rates), (kp_fn, n_kp, kp_rates))
        for fn, n, rates in order if b % 2 == 0 else reversed(order):
            rates.append(n / _run(fn, n))
    ratios = [o / k for o, k in zip(ours_rates, kp_rates, strict=True)]
    return Row(
        message, version, op, size,
        statistics.median(ours_rates), statistics.median(kp_rates), statistics.median(ratios),
        blocks, mb_s,
    )


# --------------------------------------------------------------------------- main


def cases() -> list[tuple[str, int, Msg, bool]]:
    return [
        ("FetchRequest", 17, fetch_request(), False),
        ("FetchResponse", 16, fetch_response(record_batches()), True),
        ("DescribeQuorumResponse", 2, describe_quorum_response(), False),
        ("VoteRequest", 1, vote_request(), False),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--quick", action="store_true", help="fast, rough run: 5 blocks of ~10 ms")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of text")
    p.add_argument("--blocks", type=int, help="timing blocks per figure (default 15; 5 with --quick)")
    p.add_argument("--block-ms", type=float, help="length of one block in ms (default 50; 10 with --quick)")
    args = p.parse_args(argv)
    blocks = args.blocks if args.blocks is not None else (5 if args.quick else 15)
    block_ms = args.block_ms if args.block_ms is not None else (10.0 if args.quick else 50.0)
    if blocks < 1 or block_ms <= 0:
        p.error("--blocks and --block-ms must be positive")

    import kafka

    kp_version = getattr(kafka, "__version__", "?")
    py = f"{platform.python_implementation()} {platform.python_version()}"
    header = {
        "kind": "header",
        "python": py,
        "platform": f"{platform.system()} {platform.machine()}",
        "kafka_python": kp_version,
        "target": TARGET,
        "blocks": blocks,
        "block_ms": block_ms,
    }

    def emit(text: str, obj: dict[str, Any]) -> None:
        print(json.dumps(obj) if args.json else text, flush=True)

    emit(
        f"kraftnode protocol codec benchmark -- {py} on {header['platform']}, kafka-python {kp_version}\n"
        f"target: ours >= {TARGET:g}x kafka-python on every row; each figure is the median of {blocks} "
        f"timing blocks of ~{block_ms:g} ms\n(sides alternate within each block round; "
        "ratio = median of per-block ratios; MB/s = 10^6 bytes of encoded message per second)",
        header,
    )

    kp_classes = kafka_python_classes()
    prepared = []
    for name, version, ours, mb_s in cases():
        kp_cls = kp_classes[name]
        kp = to_kafka_python(ours, kp_cls, version)
        data = check_same_bytes(name, version, ours, kp, kp_cls)
        prepared.append((name, version, ours, kp, kp_cls, data, mb_s))
    emit(
        "correctness guard: both codecs write identical bytes for every message and decode each other's: OK",
        {"kind": "guard", "ok": True, "sizes": {f"{n} v{v}": len(d) for n, v, _, _, _, d, _ in prepared}},
    )

    rows: list[Row] = []
    block_s = block_ms / 1000
    for name, version, ours, kp, kp_cls, data, mb_s in prepared:
        ours_cls = type(ours)
        for op, ours_fn, kp_fn in (
            ("encode", partial(ours.encode, version), partial(kp.encode, version=version)),
            ("decode", partial(ours_cls.decode, data, version), partial(kp_cls.decode, data, version=version)),
        ):
            row = measure(name, version, op, len(data), ours_fn, kp_fn, blocks, block_s, mb_s)
            rows.append(row)
            emit(row.line(), {"kind": "row", **row.to_json()})

    misses = [r for r in rows if not r.ok]
    summary = {
        "kind": "summary",
        "rows": len(rows),
        "meeting_target": len(rows) - len(misses),
        "misses": [f"{r.message} v{r.version} {r.op}" for r in misses],
        "min_ratio": round(min(r.ratio for r in rows), 3),
    }
    if args.json:
        emit("", summary)
    else:
        print()
        print(f"{'message':<28} {'bytes':>9}  {'encode ours/kp':>14}  {'decode ours/kp':>14}")
        by_msg: dict[str, dict[str, Row]] = {}
        for r in rows:
            by_msg.setdefault(f"{r.message} v{r.version}", {})[r.op] = r
        for label, ops in by_msg.items():
            cells = []
            for op in ("encode", "decode"):
                r = ops[op]
                cells.append(f"{r.ratio:>8.2f}x {'ok  ' if r.ok else 'MISS'}")
            size = next(iter(ops.values())).size
            print(f"{label:<28} {size:>9,}  {cells[0]:>14}  {cells[1]:>14}")
        print(
            "note: FetchResponse decode MB/s is message size / time; ours returns the records field as a "
            "zero-copy memoryview of the input, kafka-python copies it into bytes"
        )
        verdict = "all rows meet" if not misses else f"{len(misses)} of {len(rows)} rows miss"
        print(f"{verdict} the {TARGET:g}x target (lowest ratio {summary['min_ratio']:.2f}x, {blocks} blocks per figure)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
