"""Run a blocking function in a child process forked from the node, and await its end.

Why a fork: a snapshot of a million-partition metadata image is seconds of pure-Python
encoding. In a worker thread it shares the interpreter lock with the event loop that answers
raft fetches and broker heartbeats, and its temporaries (a copy of the image, the records)
make the collector walk them from the loop's allocations. A child forked at the snapshot's
offset sees the state exactly as it is at that moment (copy-on-write pages), so nothing is
copied on the loop, and its CPU is its own. The loop pays the ``fork()`` itself (page tables:
some 15 ms per GiB of memory).

The child keeps nothing of the parent's but memory:

* every inherited descriptor but its result pipe is closed at once -- a listening socket or a
  peer connection must not outlive the node in a child (a restart could not bind its port, a
  killed leader's followers would not see its connections close);
* it dies with the node (``PR_SET_PDEATHSIG``: SIGKILL when the forking thread, the event
  loop's, ends -- a kill -9 of the node included), and SIGTERM/SIGINT are back to their
  defaults, so signalling the process group stops it too;
* it runs at a lower CPU priority (``nice``): on a busy host the scheduler runs the node's
  event loop first when it wakes, and the child takes what is left (at a million partitions,
  children at the node's own priority delayed 1 in 50 heartbeat answers by a 5 ms time slice);
* the cyclic collector is off (it would walk, and so copy, every page of the image);
* it leaves with ``os._exit``: no atexit hooks, no flushing of the parent's buffers.

Its outcome comes back as the exit status and, on failure, one line on the pipe. A
cancelled wait kills the child and reaps it.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import time
from collections.abc import Callable

import anyio

from kraftnode.errors import LocalError

__all__ = ["ChildFailed", "run_in_child"]

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.05


class ChildFailed(LocalError, OSError):
    """The child process failed: its one-line reason (or how it ended). An OSError: a snapshot
    writer's failure is handled as the write's own I/O errors are."""


def _die_with_parent(parent: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the wait below still reaps it
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _child(fn: Callable[[], object], parent: int, report_fd: int, nice: int) -> None:
    """In the child: never returns."""
    code = 1
    try:
        _die_with_parent(parent)
        os.nice(nice)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        os.closerange(3, report_fd)
        os.closerange(report_fd + 1, os.sysconf("SC_OPEN_MAX"))
        gc.disable()
        fn()
        code = 0
    except BaseException as e:  # noqa: BLE001 - the child reports every failure, then exits
        try:
            os.write(report_fd, f"{type(e).__name__}: {e}".encode(errors="replace")[:4000])
        except OSError:
            pass
    finally:
        os._exit(code)


async def run_in_child(fn: Callable[[], object], *, nice: int = 10) -> float:
    """Fork; the child runs ``fn`` (``nice`` steps below the node's CPU priority) and exits.
    Returns, once it succeeded, how long the ``fork()`` held this thread (ms); raises
    :class:`ChildFailed` with its reason otherwise."""
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(fn, parent, write_fd, nice)
    fork_ms = (time.perf_counter() - t0) * 1000
    os.close(write_fd)
    try:
        status = await _reap(pid)
        reason = b""
        while chunk := os.read(read_fd, 4096):
            reason += chunk
    finally:
        os.close(read_fd)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return fork_ms
    if reason:
        raise ChildFailed(reason.decode(errors="replace"))
    if os.WIFSIGNALED(status):
        raise ChildFailed(f"the child process was killed by signal {os.WTERMSIG(status)}")
    raise ChildFailed(f"the child process exited with status {os.waitstatus_to_exitcode(status)}")


async def _reap(pid: int) -> int:
    """Wait for ``pid`` to end (polled: no thread blocked in waitpid); killed if cancelled."""
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            await anyio.sleep(_POLL_S)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:  # already gone and reaped
            pass
        raise
