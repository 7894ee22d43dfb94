"""Shared test fixtures.

``reference_dir``: Apache Kafka 3.9's message definitions in ``../shared/reference``.
A user's clone does not have them, so tests that need them skip with a reason;
CI sets ``KRAFTNODE_REQUIRE_REFERENCE=1`` which turns the skip into a failure.

``kafka_home``: genuine Apache Kafka's Java code (``tests/support/kafka.py``), the same
way: ``KAFKA_HOME`` or ``../shared/kafka-3.9``; ``KRAFTNODE_REQUIRE_KAFKA=1`` in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.kafka import KafkaHome, require_kafka_home

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO.parent / "shared" / "reference" / "kafka-3.9"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    if not REFERENCE.is_dir():
        if os.environ.get("KRAFTNODE_REQUIRE_REFERENCE") == "1":
            pytest.fail(f"reference data required but missing: {REFERENCE}")
        pytest.skip(f"Kafka 3.9 reference data not present at {REFERENCE}")
    return REFERENCE


@pytest.fixture(scope="session")
def kafka_home() -> KafkaHome:
    """Genuine Apache Kafka 3.9+ (``KAFKA_HOME``, else ``../shared/kafka-3.9``); skips
    with a reason when absent, fails under ``KRAFTNODE_REQUIRE_KAFKA=1`` (CI)."""
    return require_kafka_home()
