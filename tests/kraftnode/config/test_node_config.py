"""server.properties for a running node: Kafka's names and defaults, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftnode.config import ConfigError
from kraftnode.config.node_config import load


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "server.properties"
    p.write_text(text)
    return str(p)


BASE = ("node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:9093\n"
        "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n")


def test_defaults_are_kafkas(tmp_path: Path) -> None:
    cfg = load(_write(tmp_path, BASE))
    assert (cfg.raft.election_timeout_ms, cfg.raft.fetch_timeout_ms, cfg.raft.election_backoff_max_ms,
            cfg.raft.request_timeout_ms, cfg.raft.retry_backoff_ms) == (1000, 2000, 1000, 2000, 20)
    assert cfg.socket_request_max_bytes == 100 * 1024 * 1024
    assert cfg.static_voters[0].port == 9093 and not cfg.is_dynamic
    assert cfg.log_config.segment_bytes == 1024 * 1024 * 1024


@pytest.mark.parametrize(("extra", "key"), [
    ("controller.quorum.election.timeout.ms=abc\n", "controller.quorum.election.timeout.ms"),
    ("controller.quorum.fetch.timeout.ms=0\n", "controller.quorum.fetch.timeout.ms"),
    ("socket.request.max.bytes=-5\n", "socket.request.max.bytes"),
    ("process.roles=broker\n", "process.roles"),
    ("listener.security.protocol.map=CONTROLLER:TLS\n", "listener.security.protocol.map"),
    ("listener.security.protocol.map=CONTROLLER:SSL\n", "listener.name.controller.ssl.keystore.location"),
])
def test_invalid_values_name_the_key(tmp_path: Path, extra: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load(_write(tmp_path, BASE + extra))


def test_bad_voters_and_missing_quorum(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="controller.quorum.voters"):
        load(_write(tmp_path, BASE.replace("1@127.0.0.1:9093", "x@host")))
    with pytest.raises(ConfigError, match="controller.quorum.bootstrap.servers"):
        load(_write(tmp_path, BASE.replace("controller.quorum.voters=1@127.0.0.1:9093\n", "")))


def test_unknown_keys_are_reported_once(tmp_path: Path) -> None:
    # load() returns the warnings; `kraftnode start` logs them once its logging (and
    # kraftnode.log.file) is set up -- tests/kraftnode/config/test_keys.py checks the node's log
    cfg = load(_write(tmp_path, BASE + "controler.quorum.voters=typo\n"))
    msgs = [m for m in cfg.warnings if "controler.quorum.voters" in m]
    assert msgs == ["The configuration 'controler.quorum.voters' was supplied but isn't a known config."]


def test_every_controller_listener_is_advertised_in_order(tmp_path: Path) -> None:
    """The voter entry lists all controller listeners (advertised.listeners first, then
    listeners), the default one first, as Kafka's effectiveAdvertisedControllerListeners does
    (a controller listener name without a listener is refused: tests/kraftnode/config/
    test_validation.py)."""
    cfg = load(_write(tmp_path, (
        "node.id=1\nprocess.roles=controller\n"
        "listeners=CONTROLLER://127.0.0.1:9093,second://:9094\n"
        "advertised.listeners=CONTROLLER://c1.example:19093\n"
        "controller.listener.names=CONTROLLER,SECOND\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:9093\n")))
    assert cfg.controller_endpoints == (("CONTROLLER", "c1.example", 19093), ("SECOND", "localhost", 9094))


def test_metrics_listener_is_off_by_default_and_parsed_when_set(tmp_path: Path) -> None:
    assert load(_write(tmp_path, BASE)).metrics_listener is None
    assert load(_write(tmp_path, BASE + "kraftnode.metrics.listener=\n")).metrics_listener is None
    cfg = load(_write(tmp_path, BASE + "kraftnode.metrics.listener=127.0.0.1:9404\n"))
    assert cfg.metrics_listener == ("127.0.0.1", 9404)
    assert load(_write(tmp_path, BASE + "kraftnode.metrics.listener=[::1]:0\n")).metrics_listener \
        == ("::1", 0)


@pytest.mark.parametrize("value", ["9404", "127.0.0.1", "127.0.0.1:x", "127.0.0.1:70000",
                                   "http://127.0.0.1:9404"])
def test_bad_metrics_listener_names_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"(?i)kraftnode\.metrics\.listener.*host:port"):
        load(_write(tmp_path, BASE + f"kraftnode.metrics.listener={value}\n"))


def test_bad_metrics_listener_at_start_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    props = _write(tmp_path, BASE + f"log.dirs={tmp_path / 'm'}\nkraftnode.metrics.listener=9404\n")
    r = subprocess.run([sys.executable, "-m", "kraftnode", "start", props],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "kraftnode.metrics.listener" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_snapshot_and_retention_keys_are_read_as_kafka_longs(tmp_path: Path) -> None:
    from kraftnode.config.node_config import load
    from kraftnode.server.controller_io.snapshot_manager import SnapshotConfig

    base = ("node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:9093\n"
            "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
            f"log.dirs={tmp_path / 'm'}\n")
    p = tmp_path / "a.properties"
    p.write_text(base)
    assert load(str(p)).snapshot_config == SnapshotConfig(20 * 1024 * 1024, 3_600_000, 100 * 1024 * 1024,
                                                          604_800_000, fork=True)
    p.write_text(base + "metadata.log.max.record.bytes.between.snapshots=100000000000\n"
                        "metadata.max.retention.bytes=-1\nmetadata.max.retention.ms=-1\n"
                        "metadata.log.max.snapshot.interval.ms=0\nkraftnode.snapshot.fork.enable=false\n")
    assert load(str(p)).snapshot_config == SnapshotConfig(100_000_000_000, 0, -1, -1, fork=False)
    p.write_text(base + "metadata.log.max.record.bytes.between.snapshots=0\n")
    with pytest.raises(ConfigError, match="metadata.log.max.record.bytes.between.snapshots"):
        load(str(p))
