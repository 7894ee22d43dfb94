from __future__ import annotations

import pytest

from kraftnode.cli import main
from recordbatch.wire import uuid_from_base64


def test_prints_distinct_valid_uuids(capsys: pytest.CaptureFixture[str]) -> None:
    seen = set()
    for _ in range(20):
        assert main(["random-uuid"]) == 0
        text = capsys.readouterr().out.strip()
        assert len(text) == 22 and not text.startswith("-")
        assert uuid_from_base64(text).int > 1
        seen.add(text)
    assert len(seen) == 20
