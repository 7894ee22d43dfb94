"""tools/bench/codec.py runs end to end, prints every row issue 2 asks for, and refuses
to time two codecs that do not write the same bytes."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "codec.py"
ROWS = [
    ("FetchRequest", 17),
    ("FetchResponse", 16),
    ("DescribeQuorumResponse", 2),
    ("VoteRequest", 1),
]
TINY = ["--quick", "--blocks", "2", "--block-ms", "2"]


def _run(*extra: str) -> str:
    return subprocess.run(
        [sys.executable, str(BENCH), *TINY, *extra],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout


def test_text_output_has_every_row_and_the_summary() -> None:
    out = _run()
    lines = out.splitlines()
    assert platform.python_version() in lines[0]
    assert ">= 2x kafka-python" in out
    assert "median of 2 timing blocks" in out
    assert "correctness guard" in out and "OK" in out
    for name, version in ROWS:
        for op in ("encode", "decode"):
            row = [ln for ln in lines if ln.split()[:3] == [name, f"v{version}", op]]
            assert len(row) == 1, out
            assert "ops/s" in row[0] and "ratio" in row[0]
            assert row[0].rstrip().endswith(("ok", "MISS (< 2x)"))
            if name == "FetchResponse":
                assert "MB/s" in row[0]
        # the final summary table has one line per message
        assert any(ln.split()[:2] == [name, f"v{version}"] and ln.count("x ") >= 2 for ln in lines), out
    assert "zero-copy" in out
    assert "target" in lines[-1] and "2 blocks per figure" in lines[-1]


def test_json_output_is_one_object_per_line() -> None:
    objs = [json.loads(ln) for ln in _run("--json").splitlines()]
    kinds = [o["kind"] for o in objs]
    assert kinds[0] == "header" and kinds[-1] == "summary" and "guard" in kinds
    assert objs[0]["python"].endswith(platform.python_version())
    rows = [o for o in objs if o["kind"] == "row"]
    assert {(r["message"], r["version"], r["op"]) for r in rows} == {
        (n, v, op) for n, v in ROWS for op in ("encode", "decode")
    }
    for r in rows:
        assert r["blocks"] == 2
        assert r["ours_ops_s"] > 0 and r["kafka_python_ops_s"] > 0
        assert r["meets_target"] == (r["ratio"] >= 2.0)
    fetch = [r for r in rows if r["message"] == "FetchResponse"]
    assert all(r["bytes"] >= 1 << 20 and "ours_mb_s" in r for r in fetch)
    assert objs[-1]["rows"] == 8


def test_guard_rejects_codecs_that_disagree() -> None:
    pytest.importorskip("kafka.protocol")
    from tools.bench import codec

    kp_classes = codec.kafka_python_classes()
    ours = codec.vote_request()
    kp_cls = kp_classes["VoteRequest"]
    good = codec.to_kafka_python(ours, kp_cls, 1)
    assert codec.check_same_bytes("VoteRequest", 1, ours, good, kp_cls) == ours.encode(1)

    ours.topics[0].partitions[0].last_offset += 1  # kafka-python's copy now differs
    with pytest.raises(codec.GuardError, match="encodings differ"):
        codec.check_same_bytes("VoteRequest", 1, ours, good, kp_cls)


def test_bad_arguments_are_refused() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--blocks", "0"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "--blocks" in proc.stderr
