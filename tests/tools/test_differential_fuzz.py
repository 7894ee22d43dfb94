"""A short seeded run of tools/fuzz/differential.py: the same mutated frames to a genuine Kafka
4.4 controller listener and to a kraftnode node get the same outcome (answered / closed /
silent), and the same error code where both answer, but for kraftnode's known choices. (Kafka
4.4, not 3.9: kraftnode speaks 4.4's versions since issue 36, and 3.9 answers a version it
lacks, e.g. ApiVersions v5, where 4.4 and kraftnode read it.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka import KafkaHome
from tests.support.kafka_server import KafkaServer, combined_server
from tests.support.node import NodeProcess, running_node
from tools.fuzz.differential import main, run

pytestmark = [pytest.mark.interop, pytest.mark.timeout(400)]
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"   # the node's (tests/support/node.py): the same for both


@pytest.fixture(scope="module")
def servers(kafka44: KafkaHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int, NodeProcess]]:
    """(a Kafka controller listener's port, the same server's broker listener port, a node)."""
    kafka: KafkaServer = combined_server(kafka44, tmp_path_factory.mktemp("kafka-diff"), cluster_id=CLUSTER_ID)
    try:
        with running_node(Path(tmp_path_factory.mktemp("node-diff"))) as node:
            kafka.wait_started()
            (voters,) = [ln for ln in kafka.properties.splitlines() if ln.startswith("controller.quorum.voters=")]
            yield int(voters.rsplit(":", 1)[1]), kafka.port, node
    finally:
        kafka.close()


def test_a_seeded_run_finds_no_difference(servers: tuple[int, int, NodeProcess]) -> None:
    kafka_port, _, node = servers
    r = run(("127.0.0.1", kafka_port), ("127.0.0.1", node.port), frames=80, seed=43, timeout=1.0)
    print(f"differential fuzz: {r.frames} frames, Kafka's outcomes {r.outcomes}, "
          f"{len(r.by_design)} code differences by design")
    assert r.frames == 80 and r.outcomes.get("answered", 0) > 10 and r.outcomes.get("closed", 0) > 10
    assert r.differences == []
    assert r.codes == []
    assert node.proc.poll() is None and "Traceback" not in node.log()


def test_against_a_broker_listener_the_outcomes_agree(servers: tuple[int, int, NodeProcess]) -> None:
    """The client and group APIs, against the Kafka server's broker listener: the same
    outcomes (error codes may differ with the state: a fresh Kafka broker has no
    ``__consumer_offsets`` yet, the node coordinates every group)."""
    _, broker_port, node = servers
    r = run(("127.0.0.1", broker_port), ("127.0.0.1", node.port), frames=60, seed=43, timeout=1.0,
            listener="broker")
    assert r.outcomes.get("answered", 0) > 10 and r.outcomes.get("closed", 0) > 10
    assert r.differences == []
    assert node.proc.poll() is None and "Traceback" not in node.log()


def test_the_command_reports_and_exits_zero(servers: tuple[int, int, NodeProcess],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    kafka_port, _, node = servers
    assert main(["--kafka", f"127.0.0.1:{kafka_port}", "--kraftnode", f"127.0.0.1:{node.port}",
                 "--frames", "10", "--seed", "5", "--timeout", "1"]) == 0
    assert "10 frames (seed 5)" in capsys.readouterr().out
