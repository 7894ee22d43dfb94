"""``open_log``: a MetadataLog on real files in tmp_path, closed after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from logtest_helpers import SMALL

from kraftnode.log import LogConfig, MetadataLog


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[Callable[..., MetadataLog]]:
    logs: list[MetadataLog] = []

    def opener(config: LogConfig = SMALL, **kw: object) -> MetadataLog:
        lg = MetadataLog(tmp_path, config, **kw)  # type: ignore[arg-type]
        logs.append(lg)
        return lg

    yield opener
    for lg in logs:
        try:
            lg.close()
        except Exception:
            pass
