"""run_in_child: a real fork; what the child inherits, how its failure and a cancel come back."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import anyio
import pytest

from kraftnode.server.controller_io.forked import ChildFailed, run_in_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the platform cannot fork")


def test_the_child_sees_the_memory_of_the_fork_and_none_of_the_parents_descriptors(tmp_path: Path) -> None:
    state = {"value": "at the fork"}
    out = tmp_path / "out"
    listener = socket.create_server(("127.0.0.1", 0))

    def child() -> None:
        time.sleep(0.3)   # the parent changes its state meanwhile
        fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
        out.write_text(f"{state['value']}\n{' '.join(map(str, fds))}")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_in_child, child)
            await anyio.sleep(0.05)
            state["value"] = "changed later"
    try:
        anyio.run(main)
        value, listed = out.read_text().splitlines()
        fds = [int(n) for n in listed.split()]
        assert listener.fileno() not in fds
    finally:
        listener.close()
    assert value == "at the fork"
    # stdin/out/err, its result pipe, and the one listdir opens
    assert len(fds) <= 5, fds


def test_a_failure_in_the_child_comes_back_with_its_reason() -> None:
    def child() -> None:
        raise ValueError("no space left for the snapshot")

    with pytest.raises(ChildFailed, match="ValueError: no space left for the snapshot"):
        anyio.run(run_in_child, child)


def test_a_child_that_dies_is_reported_by_its_signal() -> None:
    def child() -> None:
        os.kill(os.getpid(), 9)

    with pytest.raises(ChildFailed, match="killed by signal 9"):
        anyio.run(run_in_child, child)


def test_a_cancelled_wait_kills_the_child_and_reaps_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def child() -> None:
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)

    async def main() -> None:
        with anyio.move_on_after(1.0):
            await run_in_child(child)
    t0 = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - t0 < 10
    pid = int(pid_file.read_text())
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)   # already reaped: not our child any more
    assert not Path(f"/proc/{pid}").exists()


def test_the_child_runs_at_a_lower_cpu_priority(tmp_path: Path) -> None:
    out = tmp_path / "nice"

    def child() -> None:
        out.write_text(str(os.nice(0)))

    anyio.run(run_in_child, child)
    assert int(out.read_text()) == min(19, os.nice(0) + 10)
