"""`kraftnode dev-cluster`: the README's main job -- created, stopped, restarted with --dir
keeping its data, ids and ports; a temporary cluster says where it lives; the first status
is printed once the bootstrap records are committed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kraftnode.commands import dev_cluster as dev_cluster_mod
from kraftnode.log.meta_properties import read_meta_properties

pytestmark = pytest.mark.timeout(240)


def dev_cluster(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, "-m", "kraftnode", "dev-cluster", *args],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    return res


def field(out: str, name: str) -> str:
    m = re.search(rf"^{name}:\s+(\S+)$", out, re.M)
    assert m, out
    return m.group(1)


def ports(out: str) -> list[str]:
    return re.findall(r"node \d: CONTROLLER://127\.0\.0\.1:(\d+)", out)


def test_stop_and_restart_with_dir_keeps_the_data(tmp_path: Path) -> None:
    d = tmp_path / "dev"
    first = dev_cluster("--dir", str(d), "--for-seconds", "0.5").stdout
    assert f"created in {d}" in first
    cluster_id = field(first, "ClusterId")
    hw1 = int(field(first, "HighWatermark"))
    # the first status is printed once the bootstrap records are committed, not at -1
    assert hw1 >= 2
    assert f"dev cluster stopped; its data stays in {d}" in first
    dirs = sorted(p.name for p in d.iterdir())
    assert dirs == ["node1", "node2", "node3"]
    dir_ids = {i: read_meta_properties(d / f"node{i}" / "metadata").directory_id  # type: ignore[union-attr]
               for i in (1, 2, 3)}
    segments = {i: d / f"node{i}" / "metadata" / "__cluster_metadata-0" / "00000000000000000000.log"
                for i in (1, 2, 3)}
    size1 = {i: seg.stat().st_size for i, seg in segments.items()}

    second = dev_cluster("--dir", str(d), "--for-seconds", "0.5").stdout
    assert f"{cluster_id} restarted with its data in {d}" in second
    assert field(second, "ClusterId") == cluster_id
    assert ports(second) == ports(first)
    # the log kept what the first run committed and grew (a new epoch's LeaderChange, ...)
    assert int(field(second, "HighWatermark")) > hw1
    assert int(field(second, "LeaderEpoch")) > int(field(first, "LeaderEpoch"))
    # on the disks of a majority at least: the high watermark moved, and a node that started
    # after the election may not have heard from the leader within the half second (CI saw
    # node 1 still waiting for its BeginQuorumEpoch when the run ended)
    grew = [i for i, seg in segments.items() if seg.stat().st_size > size1[i]]
    assert len(grew) >= 2, (grew, size1)
    assert {i: read_meta_properties(d / f"node{i}" / "metadata").directory_id  # type: ignore[union-attr]
            for i in (1, 2, 3)} == dir_ids
    # each run appended to the node's log; both start lines are there
    assert (d / "node1" / "node.log").read_text().count(f"started: cluster {cluster_id}") == 2


def test_without_dir_it_says_where_the_data_is(tmp_path: Path) -> None:
    out = dev_cluster("--nodes", "1", "--for-seconds", "0.2",
                      env={"TMPDIR": str(tmp_path)}).stdout
    m = re.search(r"created in (\S+)\n  \(a new temporary directory: `kraftnode dev-cluster --dir "
                  r"(\S+)` restarts this cluster", out)
    assert m and m.group(1) == m.group(2), out
    where = Path(m.group(1))
    assert where.parent == tmp_path and (where / "node1" / "metadata" / "meta.properties").exists()
    shutil.rmtree(where)


def test_nodes_cannot_change_an_existing_cluster(tmp_path: Path) -> None:
    d = tmp_path / "dev"
    dev_cluster("--dir", str(d), "--nodes", "1", "--for-seconds", "0.1")
    res = subprocess.run([sys.executable, "-m", "kraftnode", "dev-cluster", "--dir", str(d),
                          "--nodes", "3"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        f"kraftnode dev-cluster: error: {d} holds a 1-node cluster; --nodes 3 cannot change it "
        "(use a new --dir)")


def test_log_level_reaches_the_nodes(tmp_path: Path) -> None:
    d = tmp_path / "dev"
    dev_cluster("--dir", str(d), "--nodes", "1", "--for-seconds", "0.2", "--log-level", "DEBUG")
    assert re.search(r"DEBUG \[kraftnode.network\] accepted connection from",
                     (d / "node1" / "node.log").read_text())
    # and KRAFTNODE_LOG_LEVEL, inherited by the node processes
    log = d / "node1" / "node.log"
    before = log.stat().st_size
    dev_cluster("--dir", str(d), "--for-seconds", "0.2", env={"KRAFTNODE_LOG_LEVEL": "WARN"})
    with log.open() as f:
        f.seek(before)
        second_run = f.read()
    assert "listening on" in second_run            # the node ran (its stdout line)
    assert " INFO " not in second_run and " DEBUG " not in second_run, second_run


def test_ctrl_c_always_stops_every_node_cleanly(tmp_path: Path) -> None:
    """Ctrl-C is the terminal's SIGINT to the whole foreground process group (killpg here).
    Four times over (each run restarts the same cluster): every node logs its clean
    shutdown, none is killed on the way (it was about 1 in 4 when the nodes shared the
    group and dev-cluster's follow-up SIGTERM met a node already shutting down)."""
    d = tmp_path / "dev"
    for run in range(1, 5):
        proc = subprocess.Popen([sys.executable, "-m", "kraftnode", "dev-cluster", "--dir", str(d)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("running; Ctrl-C stops the cluster"):
                    break
            else:
                raise AssertionError("".join(lines) + proc.stderr.read())  # type: ignore[union-attr]
            if run == 1:
                # progress as it goes: the first line before the (in-process) formats
                assert lines[0].startswith(f"formatting 3 nodes in {d} ..."), lines
                assert any(x.startswith("starting 3 nodes;") for x in lines), lines
            os.killpg(proc.pid, signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=90)
            except subprocess.TimeoutExpired as e:
                tails = "".join(f"\n--- node{i}/node.log\n" + (d / f"node{i}" / "node.log").read_text()[-1500:]
                                for i in (1, 2, 3))
                raise AssertionError(f"dev-cluster still running 90 s after Ctrl-C (run {run}); "
                                     f"its output: {e.output!r}; dev-cluster "
                                     f"{dev_cluster_mod.process_state(proc.pid)}; nodes left: "
                                     f"{_left_behind(d)}{tails}") from None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for pid, _ in _left_behind(d):  # a failed run leaves no node to the next test
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        assert proc.returncode == 0, err
        assert "dev cluster stopped" in out and "killed" not in out, out
        for i in (1, 2, 3):
            text = (d / f"node{i}" / "node.log").read_text()
            assert text.count(f"node {i} shut down cleanly") == run, (run, i, text[-1500:])


def _left_behind(d: Path) -> list[tuple[int, str]]:
    """The node processes of the dev cluster in ``d`` still running, with their state."""
    found = []
    for proc_dir in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc_dir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start" in cmdline and any(str(d).encode() in arg for arg in cmdline):
            found.append((int(proc_dir.name), dev_cluster_mod.process_state(int(proc_dir.name))))
    return found


def test_a_stuck_node_is_named_with_its_state(tmp_path: Path) -> None:
    """When dev-cluster has to kill a node it says what the node was doing, from /proc."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.2)
        state = dev_cluster_mod.process_state(sleeper.pid)
        assert state.startswith("state S (sleeping)"), state
    finally:
        sleeper.kill()
        sleeper.wait()
    assert dev_cluster_mod.process_state(sleeper.pid) == "state unknown"


def test_ctrl_c_while_running_is_a_flag_not_an_exception() -> None:
    """While dev-cluster polls its nodes, Ctrl-C sets a flag as SIGTERM does. As a
    KeyboardInterrupt it could be raised inside ``Popen.poll()`` between the acquire of
    its waitpid lock and the ``try`` that releases it; that node was then never reaped,
    dev-cluster killed it after 30 s and hung in the wait after (the CI failure of
    2026-11-28; with two copies of the Ctrl-C test at once, 1 run in 20)."""
    script = textwrap.dedent("""
        import os, signal, subprocess, threading
        from kraftnode.commands.dev_cluster import _wait
        child = subprocess.Popen(["sleep", "30"])
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        _wait([child], None)
        print("returned")
        child.kill()
        print("reaped", child.wait(timeout=5))
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert res.stdout.split("\n")[:2] == ["returned", f"reaped {-signal.SIGKILL}"], res.stdout
