"""kraftnode's ApiVersions answer against a genuine Kafka 4.4 server's, API by API (issue 36).

One genuine Kafka 4.4.0 process runs as broker and controller (a combined node): its
controller listener answers what a Kafka 4.4 controller advertises, its broker listener what a
4.4 broker advertises. kraftnode's answer must equal the controller's for every API the
controller serves, and the broker's for every client API kraftnode serves; every API where it
does not is a row of the table in docs/protocol.md ("ApiVersions against Kafka 4.4"), with
both ranges and the reason. The table is checked both ways: a difference not in it fails,
and so does a row whose difference is gone (the doc stays true).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kraftnode.protocol.generated import ApiVersionsRequest, ApiVersionsResponse
from kraftnode.protocol.registry import API_VERSIONS
from tests.support.kafka import KafkaHome
from tests.support.kafka_server import combined_server
from tests.support.node import call, running_node

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "protocol.md"
MARKER = "<!-- api-versions-vs-kafka-4.4:"
#: ApiVersions v3: the version every Kafka 4.x client sends first
VERSION = 3

Range = tuple[int, int] | None


def api_ranges(port: int) -> dict[int, tuple[int, int]]:
    body = ApiVersionsRequest(client_software_name="kraftnode-tests", client_software_version="1")
    _, response = call(port, API_VERSIONS, VERSION, body, timeout=20)
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def fmt(r: Range) -> str:
    return "-" if r is None else f"{r[0]}-{r[1]}"


def documented() -> dict[int, tuple[str, str, str]]:
    """API key -> (Kafka 4.4's range, kraftnode's range, reason) from the doc's table."""
    text = DOC.read_text()
    start = text.index(MARKER)
    rows: dict[int, tuple[str, str, str]] = {}
    table = False
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if table:
                break  # the table ends at its first line that is not a row
            continue
        table = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells[1].isdigit():  # the header and its rule
            continue
        _, key, kafka, ours, why = cells
        assert why, f"docs/protocol.md: the row of API {key} gives no reason"
        rows[int(key)] = (kafka.split(" ")[0], ours, why)
    return rows


def differences(controller: dict[int, tuple[int, int]], broker: dict[int, tuple[int, int]],
                ours: dict[int, tuple[int, int]]) -> dict[int, tuple[str, str]]:
    """API key -> (Kafka 4.4's range, kraftnode's) wherever they differ. The reference for an
    API is the controller's range where the controller serves it, else the broker's; an API
    kraftnode serves that neither serves is a difference too."""
    out: dict[int, tuple[str, str]] = {}
    for key in sorted(set(controller) | set(ours)):
        if key in controller:
            ref: Range = controller[key]
        elif key in broker:
            ref = broker[key]
        else:
            ref = None
        if ref != ours.get(key):
            out[key] = (fmt(ref), fmt(ours.get(key)))
    return out


def test_api_versions_equal_kafka_4_4_or_documented(kafka44: KafkaHome, tmp_path: Path) -> None:
    server = combined_server(kafka44, tmp_path / "kafka")
    try:
        server.wait_started(timeout=120)
        controller_port = int(re.search(r"CONTROLLER://127\.0\.0\.1:(\d+)", server.properties).group(1))  # type: ignore[union-attr]
        controller = api_ranges(controller_port)
        broker = api_ranges(server.port)
    finally:
        server.close()
    (tmp_path / "kraftnode").mkdir()
    with running_node(tmp_path / "kraftnode") as node:
        ours = api_ranges(node.port)

    # the reference is what it should be: a Kafka 4.4 controller serves the raft and
    # controller APIs, not the group APIs
    assert {52, 55, 62, 80} <= set(controller) and 11 not in controller and 11 in broker

    found = differences(controller, broker, ours)
    listed = {key: (kafka, ours_) for key, (kafka, ours_, _) in documented().items()}
    missing = {k: v for k, v in found.items() if listed.get(k) != v}
    stale = {k: v for k, v in listed.items() if k not in found}
    assert not missing, ("ApiVersions differs from Kafka 4.4's where docs/protocol.md does not say so "
                         "(key: Kafka 4.4, kraftnode): " + repr(missing))
    assert not stale, ("docs/protocol.md lists differences from Kafka 4.4 that are gone "
                       "(key: Kafka 4.4, kraftnode): " + repr(stale))
