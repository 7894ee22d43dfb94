"""Fixtures shared by the server tests that run real node processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A formatted 3-voter quorum on loopback (not started); every process stopped after."""
    cl = Cluster(tmp_path, 3)
    try:
        yield cl
    finally:
        cl.close()
