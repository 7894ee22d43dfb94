"""tools/bench/fsync_modes.py runs, prints its medians and ratios, cleans up, and refuses bad
input with exit 2 (a tiny run: the figures themselves are the bench's, not a test's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench import fsync_modes


def test_tiny_run_prints_every_layout_and_the_ratios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fsync_modes.main(["--writes", "20", "--rounds", "1", "--dir", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for mode in fsync_modes.MODES:
        assert result[mode]["1_at_once_p50_ms"] > 0 and result[mode]["3_at_once_p50_ms"] > 0
    assert result["prezeroed_vs_append_1_at_once"] > 0 and result["prezeroed_vs_append_3_at_once"] > 0
    assert list(tmp_path.iterdir()) == []        # its files removed

    assert fsync_modes.main(["--writes", "10", "--rounds", "1", "--dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert all(mode in table for mode in fsync_modes.MODES) and "prezeroed / append" in table


def test_bad_counts_are_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        fsync_modes.main(["--writes", "0"])
    assert e.value.code == 2
    assert "--writes and --rounds must be at least 1" in capsys.readouterr().err
