"""Genuine Kafka clients connect to a real kraftnode and complete ApiVersions negotiation.

Each client is asked to parse our ApiVersions answer with its own code, and the
assertion is on what the client concluded from it (the features/versions it
enabled), plus the server's record of what the client asked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kraftnode.protocol.registry import SERVED, VOTE
from tests.support.node import NodeProcess, running_node

pytestmark = pytest.mark.interop

# What a node advertises by default: everything it serves, Vote v2 included (KIP-996 pre-vote
# is on by default, as in Kafka 4.x; kraftnode.raft.pre.vote.enable=false advertises Vote 0-1).
OUR_VERSIONS = {s.key: (s.advertised_min_version, s.max_version) for s in SERVED.values()}
assert OUR_VERSIONS[VOTE] == (0, 2)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> NodeProcess:
    # the ApiVersions line of each client connection is DEBUG (connection chatter)
    with running_node(tmp_path_factory.mktemp("interop"), env={"KRAFTNODE_LOG_LEVEL": "DEBUG"}) as n:
        yield n  # type: ignore[misc]


def _wait_for_log(node: NodeProcess, needle: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = node.log()
        if needle in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not in node log:\n{node.log()}")


def test_kafka_python(node: NodeProcess) -> None:
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(bootstrap_servers=f"127.0.0.1:{node.port}", request_timeout_ms=2000)
    try:
        try:
            client.get_broker_version(timeout_ms=3000)
        except Exception:  # noqa: BLE001 - bootstrap continues with Metadata, not served yet
            pass
        # kafka-python infers the broker release from the API versions we advertised: the
        # newest release whose marker it finds. ListOffsets v11 (Kafka 4.4's range, issue 36)
        # marks 4.2; 4.3's marker is DescribeLogDirs v5, a broker API kraftnode does not serve
        # (kafka-python infers a genuine Kafka 4.4 broker as (4, 3))
        assert client._manager.broker_version == (4, 2)
    finally:
        client.close()
    _wait_for_log(node, "ApiVersions v4 from")
    _wait_for_log(node, "(kafka-python 3.0.12)")


def test_aiokafka(node: NodeProcess) -> None:
    import aiokafka.conn

    async def negotiate() -> dict[int, tuple[int, int]]:
        conn = await aiokafka.conn.create_conn("127.0.0.1", node.port)
        try:
            return dict(conn._versions)
        finally:
            conn.close()

    versions = asyncio.run(negotiate())
    assert versions == OUR_VERSIONS


def test_confluent_kafka(node: NodeProcess) -> None:
    from confluent_kafka.admin import AdminClient

    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("librdkafka-test")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Capture())
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.port}",
                         "debug": "broker,protocol,feature", "logger": logger})
    try:
        admin.list_topics(timeout=3)
    except Exception:  # noqa: BLE001 - Metadata is not served yet; negotiation is what we check
        pass
    admin.poll(0.5)
    text = "\n".join(lines)
    assert "Received ApiVersionResponse" in text, text[-3000:]
    assert "APIVERSION_QUERY -> UP" in text
    assert "MsgVer2" in text  # enabled because we advertise Produce/Fetch at v2-batch versions


def test_kcat(node: NodeProcess, tmp_path: Path) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        if os.environ.get("CI"):
            pytest.fail("kcat is required in CI (.ci/run installs it)")
        pytest.skip("kcat is not installed")
    r = subprocess.run([kcat, "-b", f"127.0.0.1:{node.port}", "-L", "-m", "3",
                        "-d", "broker,protocol,feature"], capture_output=True, text=True, timeout=30)
    err = r.stderr
    assert "Received ApiVersionResponse" in err, err[-3000:]
    assert "APIVERSION_QUERY -> UP" in err
