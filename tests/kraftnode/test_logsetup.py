"""Logging an operator can tune: level, a rotated log file, a logging config file, the start
and shutdown lines, and client connections at DEBUG only."""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftnode import __version__, logsetup
from kraftnode.logsetup import LogSetupError, configure, resolve_level
from tests.support.node import running_node


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        if h not in handlers:
            h.close()
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def test_level_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(logsetup.ENV_LEVEL, raising=False)
    assert resolve_level(None) == logging.INFO
    monkeypatch.setenv(logsetup.ENV_LEVEL, "debug")
    assert resolve_level(None) == logging.DEBUG
    assert resolve_level("WARN") == logging.WARNING       # the flag wins; log4j names accepted
    assert resolve_level("ERROR") == logging.ERROR
    with pytest.raises(LogSetupError, match="--log-level='LOUD' is not a log level"):
        resolve_level("LOUD")


def test_log_file_rotates_by_size(tmp_path: Path, restore_logging: None) -> None:
    f = tmp_path / "logs" / "kraftnode.log"
    configure(logging.INFO, log_file=str(f), max_bytes=2048, backups=2)
    lg = logging.getLogger("kraftnode.test")
    for i in range(200):
        lg.info("line %d %s", i, "x" * 40)
    for h in logging.getLogger().handlers:
        h.flush()
    names = sorted(p.name for p in f.parent.iterdir())
    assert names == ["kraftnode.log", "kraftnode.log.1", "kraftnode.log.2"]
    assert all(p.stat().st_size <= 2048 for p in f.parent.iterdir())
    assert "line 199" in f.read_text()


def test_log_config_file(tmp_path: Path, restore_logging: None) -> None:
    out = tmp_path / "custom.log"
    cfg = tmp_path / "logging.json"
    cfg.write_text(json.dumps({
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"f": {"format": "CUSTOM %(levelname)s %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(out), "formatter": "f"}},
        "root": {"level": "WARNING", "handlers": ["file"]}}))
    configure(logging.DEBUG, log_config=str(cfg))
    logging.getLogger("kraftnode.x").info("not at INFO")
    logging.getLogger("kraftnode.x").warning("hello")
    for h in logging.getLogger().handlers:
        h.flush()
    assert out.read_text() == "CUSTOM WARNING hello\n"


def _connect_and_close(port: int) -> None:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_node_lines_at_info(tmp_path: Path) -> None:
    """One start line (version, cluster, node, listeners), one clean-shutdown line, and no
    line per client connection at the default level."""
    with running_node(tmp_path, extra=f"kraftnode.log.file={tmp_path / 'logs' / 'node.log'}\n",
                      env={"KRAFTNODE_LOG_LEVEL": ""}) as node:
        for _ in range(5):
            _connect_and_close(node.port)
        port = node.port
    text = node.log()
    started = [ln for ln in text.splitlines() if " started: " in ln]
    assert len(started) == 1, text
    assert re.search(rf"INFO \[kraftnode.node\] kraftnode {re.escape(__version__)} node 1 started: "
                     rf"cluster MkU3OEVBNTcwNTJENDM2Qg, static quorum on __cluster_metadata, "
                     rf"listeners CONTROLLER://127.0.0.1:{port}, ", started[0]), started[0]
    assert len([ln for ln in text.splitlines() if "node 1 shut down cleanly" in ln]) == 1, text
    assert "connection from" not in text and " DEBUG " not in text
    # the log file holds the same lines as the console
    file_text = (tmp_path / "logs" / "node.log").read_text()
    assert " started: " in file_text and "shut down cleanly" in file_text


@pytest.mark.parametrize("how", ["env", "flag"])
def test_connections_at_debug(tmp_path: Path, how: str) -> None:
    """KRAFTNODE_LOG_LEVEL=DEBUG (or --log-level DEBUG) logs each client connection's accept
    and close: what an operator (and the Spark live-source test) counts."""
    env = {"KRAFTNODE_LOG_LEVEL": "DEBUG"} if how == "env" else {"KRAFTNODE_LOG_LEVEL": "ERROR"}
    extra_args = [] if how == "env" else ["--log-level", "DEBUG"]
    with running_node(tmp_path, env=env, start_args=extra_args) as node:
        for _ in range(3):
            _connect_and_close(node.port)
    text = node.log()
    accepted = re.findall(r"DEBUG \[kraftnode.network\] accepted connection from 127\.0\.0\.1:\d+ "
                          rf"on 127\.0\.0\.1:{node.port}", text)
    closed = re.findall(r"DEBUG \[kraftnode.network\] closed connection from 127\.0\.0\.1:\d+", text)
    assert len(accepted) >= 3 and len(closed) >= 3, text


def test_levels_print_as_log4j_names(restore_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41: a warning printed as ``WARNING`` while the docs and ``--log-level`` say
    ``WARN``; the console now prints log4j's names (WARN, FATAL) as Kafka's logs do."""
    configure(resolve_level("WARN"))
    lg = logging.getLogger("kraftnode.test")
    lg.info("not shown")
    lg.warning("a warning")
    lg.critical("the end")
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(" ", 2)[2] for ln in lines] == ["WARN [kraftnode.test] a warning",
                                                      "FATAL [kraftnode.test] the end"], lines
    assert logging.getLevelName(logging.WARNING) == "WARNING"   # Python's own name untouched


def test_incarnation_ids_in_the_log_as_in_the_records(tmp_path: Path) -> None:
    """Issue 41: the log printed a controller's incarnation id as a hex UUID while its
    ControllerRegistrationRecord (dump-log, Kafka's tools) shows base64: one id, two
    spellings. The log now spells it as Kafka does, so the two can be matched by eye or grep."""
    import subprocess
    import sys
    import time

    with running_node(tmp_path) as node:
        deadline = time.monotonic() + 30
        while not (m := re.search(r"registered controller 1 \(incarnation (\S+)\)", node.log())):
            assert time.monotonic() < deadline, node.log()
            time.sleep(0.2)
    logged = m.group(1)
    dump = subprocess.run([sys.executable, "-m", "kraftnode", "dump-log", str(tmp_path / "meta-1")],
                          capture_output=True, text=True, check=True).stdout
    in_records = re.findall(r'"incarnationId":"([^"]+)"', dump)
    assert in_records and logged == in_records[-1], (logged, in_records)
