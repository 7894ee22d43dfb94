"""A short run of tools/fuzz/handshake_fuzz.py (the full run is 100,000 inputs)."""

from __future__ import annotations

from tools.fuzz.handshake_fuzz import main, run


def test_a_short_fuzz_run_finds_no_crash_or_hang() -> None:
    counts = run(inputs=4000, seed=15, seconds=60)
    assert counts["sasl"] + counts["tls"] >= 4000
    assert counts["tls"] >= 1000


def test_the_command_reports_its_count(capsys: object) -> None:
    assert main(["--inputs", "400", "--seed", "1"]) == 0
