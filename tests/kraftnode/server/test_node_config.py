"""server.properties for a running node: Kafka's names and defaults, clear errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kraftnode.config import ConfigError
from kraftnode.server.node_config import load


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "server.properties"
    p.write_text(text)
    return str(p)


BASE = ("node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:9093\n"
        "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n")


def test_defaults_are_kafkas(tmp_path: Path) -> None:
    cfg = load(_write(tmp_path, BASE))
    assert (cfg.election_timeout_ms, cfg.fetch_timeout_ms, cfg.election_backoff_max_ms,
            cfg.request_timeout_ms, cfg.retry_backoff_ms, cfg.append_linger_ms) == (1000, 2000, 1000, 2000, 20, 25)
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


def test_unknown_keys_are_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kraftnode.config"):
        load(_write(tmp_path, BASE + "controler.quorum.voters=typo\n"))
    msgs = [r.getMessage() for r in caplog.records if "controler.quorum.voters" in r.getMessage()]
    assert len(msgs) == 1


def test_every_controller_listener_is_advertised_in_order(tmp_path: Path) -> None:
    """The voter entry lists all controller listeners (advertised.listeners first, then
    listeners), the default one first; a controller listener name without a listener is
    skipped, as Kafka's effectiveAdvertisedControllerListeners does."""
    cfg = load(_write(tmp_path, (
        "node.id=1\nprocess.roles=controller\n"
        "listeners=CONTROLLER://127.0.0.1:9093,second://:9094\n"
        "advertised.listeners=CONTROLLER://c1.example:19093\n"
        "controller.listener.names=CONTROLLER,SECOND,MISSING\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:9093\n")))
    assert cfg.controller_endpoints == (("CONTROLLER", "c1.example", 19093), ("SECOND", "localhost", 9094))
