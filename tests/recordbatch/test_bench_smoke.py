"""The benchmark script runs end to end and prints every figure the issue asks for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench" / "records.py"


def test_bench_prints_scan_rate_and_ratios() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--reps", "1", "--records", "600", "--batch", "200",
         "--scan-batches", "2"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "GB/s" in out
    for codec in ("none", "lz4", "zstd"):
        for op in ("encode", "enc+rec", "decode"):
            assert any(line.split()[:2] == [codec, op] for line in out.splitlines()), out
    assert "kafka-python" in out and "aiokafka" in out
    # Same zstd level and the same record bytes as kafka-python: identical batches.
    (line,) = [x for x in out.splitlines() if "byte-identical to kafka-python's" in x]
    assert "none yes" in line and "zstd yes" in line, line
