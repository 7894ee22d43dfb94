"""`python -m codegen --check` passes on the committed tree and fails when either the
generated code or a schema changes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COPY = ["codegen", "schemas", "kraftnode/protocol/generated", "recordbatch/generated"]


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_committed_output_is_current() -> None:
    r = _run(REPO, "--check")
    assert r.returncode == 0, r.stderr


def _copy(tmp: Path) -> Path:
    for rel in COPY:
        shutil.copytree(REPO / rel, tmp / rel, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def test_check_fails_on_edited_output(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    assert _run(root, "--check").returncode == 0
    target = root / "kraftnode/protocol/generated/vote_request.py"
    target.write_text(target.read_text() + "# hand edit\n")
    r = _run(root, "--check")
    assert r.returncode == 1 and "vote_request.py" in r.stderr
    assert _run(root).returncode == 0  # regenerate repairs it
    assert _run(root, "--check").returncode == 0


def test_check_fails_on_schema_change(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    schema = root / "schemas/VoteRequest.json"
    schema.write_text(schema.read_text().replace('"validVersions": "0-2"', '"validVersions": "0-3"'))
    r = _run(root, "--check")
    assert r.returncode == 1 and "vote_request.py" in r.stderr


def test_bad_schema_is_a_clear_error(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "schemas/Broken.json").write_text('{"name": "Broken", "type": "data", '
                                              '"validVersions": "0", "fields": [{"name": "X"}]}')
    r = _run(root)
    assert r.returncode == 2
    assert "Broken.json" in r.stderr and "missing 'type'" in r.stderr
    assert "Traceback" not in r.stderr
