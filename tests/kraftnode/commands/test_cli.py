"""The `kraftnode` command itself: --version, help with examples for every sub-command, and
`quorum describe --watch` (a live table, bounded here with --count)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kraftnode import __version__
from kraftnode.cli import build_parser
from tests.support.node import running_node


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftnode", *args], capture_output=True,
                          text=True, timeout=60)


def test_version() -> None:
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout == f"kraftnode {__version__}\n"


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    out: dict[str, argparse.ArgumentParser] = {}
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            out.update(a.choices)
    return out


def _every_command() -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for name, sp in _subparsers(build_parser()).items():
        found.append((name, sp))
        found += [(f"{name} {n}", ssp) for n, ssp in _subparsers(sp).items()]
    return found


@pytest.mark.parametrize(("name", "parser"), _every_command(), ids=lambda x: x if isinstance(x, str) else "")
def test_help_explains_every_option_with_an_example(name: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert re.search(r"^examples?", text, re.M | re.I), f"`kraftnode {name} --help` has no example"
    assert "kraftnode " in text.split("xample", 1)[1]
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            continue
        assert a.help, f"`kraftnode {name}`: {a.option_strings or a.dest} has no help text"


def test_help_runs_for_every_command() -> None:
    for name, _ in _every_command():
        args = name.split()
        if args[0] == "quorum" and len(args) > 1:
            args = ["quorum", "--bootstrap-controller", "127.0.0.1:1", args[1]]
        r = _cli(*args, "--help")
        assert r.returncode == 0 and "usage:" in r.stdout and not r.stderr, (name, r.stderr)


def test_help_examples_write_a_directory_id_with_equals() -> None:
    """A directory id is base64 and may start with '-': ``-d ID`` then reads it as an option,
    as docs/operations.md warns. Every help example writes ``-d=ID`` (issue 41)."""
    for name, parser in _every_command():
        examples = parser.format_help().split("xample", 1)[-1]
        assert not re.search(r"(-d|--controller-directory-id) [A-Z]", examples), (name, examples)
    assert "--controller-directory-id=DIRECTORY_ID" in _subparsers(_subparsers(build_parser())["quorum"])[
        "remove-controller"].format_help()


def test_start_override_as_kafka_server_start(tmp_path: Path) -> None:
    """``kraftnode start FILE --override KEY=VALUE`` as ``kafka-server-start.sh`` takes it
    (issue 41: it printed the top-level usage). The file has neither node.id nor log.dirs;
    the overrides give both, so the node gets as far as its storage check, which names the
    overridden directory."""
    props = tmp_path / "p.properties"
    props.write_text("process.roles=controller\nnode.id=1\ncontroller.quorum.voters=2@127.0.0.1:1\n"
                     "listeners=CONTROLLER://127.0.0.1:0\ncontroller.listener.names=CONTROLLER\n"
                     "log.dirs=/nonexistent-before-override\n")
    r = _cli("start", str(props), "--override", "node.id=2", "--override", f"log.dirs={tmp_path}/n2")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"kraftnode start: error: No readable meta.properties files found: {tmp_path}/n2 (log.dirs) is not "
        f"formatted: run `kraftnode format --config {props} --cluster-id ID` first"), r.stderr
    # both orders, as argparse reads them: the override before the file
    r = _cli("start", "--override", "node.id=3", str(props))
    assert "the node id 3 must be included in the set of voters" in r.stderr, r.stderr


def test_an_unknown_option_is_refused_by_its_command() -> None:
    """An option the command does not know is named with that command's usage, not the
    top-level one (issue 41: `start FILE --override ...` printed `usage: kraftnode [-h] ...`)."""
    r = _cli("start", "p.properties", "--no-such-option", "x")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("usage: kraftnode start "), r.stderr
    assert r.stderr.strip().splitlines()[-1] == \
        "kraftnode start: error: unrecognized arguments: --no-such-option x", r.stderr


def _wait_for_leader(port: int, timeout: float = 30) -> None:
    import time

    from kraftnode.commands.quorum import fetch_quorum_info
    from kraftnode.errors import UsageError

    deadline = time.monotonic() + timeout
    while True:
        try:
            if fetch_quorum_info([("127.0.0.1", port)], 2).high_watermark >= 1:
                return
        except UsageError:
            pass
        assert time.monotonic() < deadline, "no leader"
        time.sleep(0.1)


@pytest.mark.timeout(120)
def test_describe_replication_watch(tmp_path: Path) -> None:
    with running_node(tmp_path) as node:
        _wait_for_leader(node.port)
        r = _cli("quorum", "--bootstrap-controller", f"127.0.0.1:{node.port}", "describe",
                 "--replication", "--watch", "0.3", "--count", "3")
    assert r.returncode == 0, r.stderr
    frames = r.stdout.split("Every 0.3s: describe --replication")
    assert frames[0] == "" and len(frames) == 4, r.stdout
    for frame in frames[1:]:
        lines = [ln for ln in frame.strip().splitlines() if ln.strip()]
        assert re.search(r"LeaderId: 1  LeaderEpoch: \d+  HighWatermark: \d+", lines[0]), lines[0]
        assert lines[1].split() == ["NodeId", "DirectoryId", "LogEndOffset", "Lag",
                                    "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
        assert lines[2].split()[0] == "1" and lines[2].split()[3] == "0"   # the leader's lag
    # it refreshed: the leader's LastFetchTimestamp moves between frames
    stamps = [[ln for ln in f.splitlines() if ln.strip()][2].split()[4] for f in frames[1:]]
    assert len(set(stamps)) > 1, stamps


@pytest.mark.timeout(120)
def test_watch_survives_a_quorum_that_goes_away(tmp_path: Path) -> None:
    """A watch that has had an answer keeps going when the quorum stops answering, saying why
    (a first refresh without an answer is an error: test_bad_input.test_quorum_watch_unreachable)."""
    with running_node(tmp_path) as node:
        _wait_for_leader(node.port)
        watch = subprocess.Popen([sys.executable, "-m", "kraftnode", "quorum", "--bootstrap-controller",
                                  f"127.0.0.1:{node.port}", "describe", "--status", "--watch", "0.3",
                                  "--count", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert watch.stdout is not None
        for line in watch.stdout:
            if line.startswith("ClusterId:"):
                break
        node.proc.send_signal(signal.SIGTERM)
        node.proc.wait(timeout=20)
        rest, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    assert rest.count("no answer") >= 2 and "Connection refused" in rest, rest
