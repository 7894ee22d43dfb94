"""tools/kafka_dist.py: genuine Kafka releases from Maven Central laid out as Kafka homes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.kafka import KafkaHome, java_env
from tools import kafka_dist

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("fixture", ["kafka_home", "kafka40", "kafka44"])
def test_each_release_runs_its_tools_with_its_own_logging(fixture: str, request: pytest.FixtureRequest) -> None:
    home: KafkaHome = request.getfixturevalue(fixture)
    r = home.tool("kafka-topics", "--version", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == home.version, r.stdout
    # the slf4j binding the distribution ships is there: no "no providers" fallback warning
    assert "SLF4J" not in r.stderr, r.stderr
    uuid = home.tool("kafka-storage", "random-uuid", timeout=60)
    assert uuid.returncode == 0 and re.fullmatch(r"[A-Za-z0-9_-]{22}\n", uuid.stdout), uuid


def test_a_4x_home_has_the_4x_tools_and_kafkas_message_json(kafka44: KafkaHome) -> None:
    if (kafka44.root / "VERSION").is_file():  # installed by the script (not a user's KAFKA_HOME)
        for name in ("kafka-server-start", "kafka-storage", "kafka-metadata-quorum", "kafka-features",
                     "kafka-consumer-groups", "kafka-share-groups", "kafka-dump-log"):
            assert kafka44.script(name).is_file(), name
        ref = kafka44.root / "reference"
        assert (ref / "message" / "ConsumerGroupHeartbeatRequest.json").is_file()
        assert (ref / "metadata" / "ClearElrRecord.json").is_file()
        assert (ref / "raft" / "QuorumStateData.json").is_file()
    assert kafka44.log4j_option("server").startswith("-Dlog4j2.configurationFile=")


def test_versions_resolve_to_releases() -> None:
    assert kafka_dist.resolve("4.4") == "4.4.0"
    assert kafka_dist.resolve("4.0.1") == "4.0.1"
    with pytest.raises(kafka_dist.InstallError, match="not a Kafka version: 'four'"):
        kafka_dist.resolve("four")


def test_bad_input_is_one_line_and_exit_2() -> None:
    r = subprocess.run([sys.executable, "-m", "tools.kafka_dist", "install", "4.x"], cwd=REPO,
                       capture_output=True, text=True, env=java_env())
    assert r.returncode == 2
    assert r.stderr == "kafka_dist: not a Kafka version: '4.x' (give e.g. 4.4, 4.0.2 or 3.9)\n"
