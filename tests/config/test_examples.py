"""config/: the example properties load without a warning, and real nodes format and start
from them (ports and log dirs moved to free loopback ports and tmp_path, nothing else)."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from kraftnode.config import node_config, parse_properties
from tests.support.cluster import SUITE_RELEASE, Cluster, free_ports

ROOT = Path(__file__).resolve().parents[2]
#: kraftnode's own examples; config/brokers/ holds a genuine Kafka broker's properties, which
#: docs/brokers.md's walkthrough starts a Kafka broker from (tests/docs/test_doc_blocks.py)
EXAMPLES = sorted(p for p in (ROOT / "config").rglob("*.properties")
                  if p.relative_to(ROOT / "config").parts[0] != "brokers")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def test_there_are_the_three_kinds() -> None:
    names = {str(p.relative_to(ROOT / "config")) for p in EXAMPLES}
    assert "single-node.properties" in names
    assert {f"static-quorum/controller-{i}.properties" for i in (1, 2, 3)} <= names
    assert {f"dynamic-quorum/controller-{i}.properties" for i in (1, 2, 3)} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "config")))
def test_each_example_loads_without_warnings(path: Path) -> None:
    cfg = node_config.load(str(path))
    assert cfg.warnings == ()
    assert all(ln.host == "127.0.0.1" for ln in cfg.listeners)
    assert cfg.is_dynamic == ("dynamic" in path.name or "dynamic" in str(path.parent))


def test_every_example_serves_metrics() -> None:
    """Issue 41: single-node and dynamic-quorum set no metrics listener, so a person who
    followed them found no /metrics. Every example serves them, on a port of its own within
    its quorum and apart from every controller listener."""
    listeners = {str(p.relative_to(ROOT / "config")): node_config.load(str(p)).metrics_listener
                 for p in EXAMPLES}
    assert all(ml is not None and ml[0] == "127.0.0.1" for ml in listeners.values()), listeners
    controller_ports = {ln.port for p in EXAMPLES for ln in node_config.load(str(p)).listeners}
    for kind in ("static-quorum", "dynamic-quorum"):
        ports = [ml[1] for name, ml in listeners.items() if name.startswith(kind) and ml]
        assert len(set(ports)) == 3 and not set(ports) & controller_ports, (kind, ports)


def _relocate(src: Path, dst: Path, ports: dict[int, int], log_dir: Path) -> Path:
    """The example with its ports mapped to free ones and log.dirs under tmp_path."""
    text = src.read_text()
    text = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{ports[int(m.group(1))]}", text)
    text = re.sub(r"^log\.dirs=.*$", f"log.dirs={log_dir}", text, flags=re.M)
    dst.write_text(text)
    # nothing but the ports and the directory changed
    a, b = parse_properties(src.read_text()), parse_properties(text)
    assert a.keys() == b.keys()
    return dst


def _port_map(paths: list[Path]) -> dict[int, int]:
    used = sorted({int(p) for path in paths for p in re.findall(r"127\.0\.0\.1:(\d+)", path.read_text())})
    return dict(zip(used, free_ports(len(used)), strict=True))


def _format(props: Path, *extra: str) -> None:
    r = subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(props),
                        "--cluster-id", CLUSTER_ID, *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["single-node", "static-quorum", "dynamic-quorum"])
def test_format_and_start_from_the_examples(tmp_path: Path, kind: str) -> None:
    if kind == "single-node":
        srcs = [ROOT / "config" / "single-node.properties"]
    elif kind == "static-quorum":
        srcs = [ROOT / "config" / kind / f"controller-{i}.properties" for i in (1, 2, 3)]
    else:
        # the first controller bootstraps the dynamic quorum (--standalone), as its comment says
        srcs = [ROOT / "config" / kind / "controller-1.properties"]
    ports = _port_map(srcs)
    cl = Cluster.__new__(Cluster)     # the Cluster helper's process handling, our own files
    cl.root, cl.n, cl.extra, cl.procs = tmp_path, len(srcs), "", {}
    cl.ports = []
    for i, src in enumerate(srcs, 1):
        d = tmp_path / f"node{i}"
        d.mkdir()
        props = _relocate(src, d / "server.properties", ports, d / "metadata")
        cl.ports.append(node_config.load(str(props)).listeners[0].port)
        _format(props, *(["--standalone"] if kind == "dynamic-quorum" else []))
    try:
        cl.start_all()
        info = cl.wait_for_leader(60)
        assert sorted(v.replica_id for v in info.voters) == list(range(1, len(srcs) + 1))
        assert info.cluster_id == CLUSTER_ID
        for i in range(1, len(srcs) + 1):  # the example's metrics listener serves (issue 41)
            ml = node_config.load(str(tmp_path / f"node{i}" / "server.properties")).metrics_listener
            assert ml is not None
            with urllib.request.urlopen(f"http://{ml[0]}:{ml[1]}/metrics", timeout=10) as r:
                assert b"kafka_server_raft_metrics_current_state" in r.read()
    finally:
        cl.close()
