"""docs/operations.md's bad-input table: each case gives one line naming the problem, exit 2.

Every case runs the real ``kraftnode`` command in a subprocess and asserts on its stderr:
the last line is ``kraftnode CMD: error: ...`` naming the problem, nothing on stderr is a
traceback, and the exit code is 2.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def kraftnode(*args: str, env: dict[str, str] | None = None, prefix: list[str] | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), sys.executable, "-m", "kraftnode", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def assert_one_line(res: subprocess.CompletedProcess[str], command: str, *needles: str) -> str:
    """Exit 2, no traceback, and a last stderr line `kraftnode COMMAND: error: ...` with needles."""
    err = res.stderr
    assert res.returncode == 2, f"exit {res.returncode}\nstdout: {res.stdout}\nstderr: {err}"
    assert "Traceback" not in err and "ExceptionGroup" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"kraftnode {command}: error: "), err
    for n in needles:
        assert n in last, f"{n!r} not in {last!r}"
    # the problem is named once: no other line of stderr is an error line
    assert sum(": error: " in ln for ln in err.splitlines()) == 1, err
    return last


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def write_props(path: Path, port: int, log_dir: Path, extra: str = "", host: str = "127.0.0.1") -> Path:
    path.write_text(f"node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://{host}:{port}\n"
                    f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
                    f"log.dirs={log_dir}\n{extra}")
    return path


def formatted(tmp_path: Path, port: int | None = None, extra: str = "", host: str = "127.0.0.1",
              log_dir: Path | None = None) -> Path:
    props = write_props(tmp_path / "server.properties", port or free_port(),
                        log_dir or tmp_path / "meta", extra, host)
    res = kraftnode("format", "--config", str(props), "--cluster-id", CLUSTER_ID)
    assert res.returncode == 0, res.stderr
    return props


def no_dac_override() -> list[str]:
    """A prefix that runs a command without root's permission bypass (CAP_DAC_OVERRIDE), so a
    mode-000 directory refuses it as it refuses any other user; empty for a non-root user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv (util-linux) is needed to test permission errors as root")
        pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted afterwards: a disk that fills up."""
    mnt = tmp_path / "small-fs"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs to test a full disk: {res.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs (needs root): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt: Path) -> None:
    """Fill the file system until a write fails with ENOSPC."""
    with open(mnt / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            pass


# ---------------------------------------------------------------------------------- start


def test_port_in_use(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        props = formatted(tmp_path, port)
        res = kraftnode("start", str(props))
    finally:
        holder.close()
    assert_one_line(res, "start", f"Socket server failed to bind to 127.0.0.1:{port}",
                    "Address already in use")


def test_unresolvable_listener_host(tmp_path: Path) -> None:
    props = formatted(tmp_path, host="no-such-host.invalid")
    res = kraftnode("start", str(props))
    assert_one_line(res, "start", "no-such-host.invalid", "cannot resolve host")


def test_permission_denied_on_the_log_dir(tmp_path: Path) -> None:
    props = formatted(tmp_path)
    prefix = no_dac_override()
    (tmp_path / "meta").chmod(0)
    try:
        res = kraftnode("start", str(props), prefix=prefix)
    finally:
        (tmp_path / "meta").chmod(0o755)
    assert_one_line(res, "start", str(tmp_path / "meta"), "Permission denied")


def test_permission_denied_on_the_log_file_dir(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    props = formatted(tmp_path, extra=f"kraftnode.log.file={logs / 'node.log'}\n")
    prefix = no_dac_override()
    logs.chmod(0)
    try:
        res = kraftnode("start", str(props), prefix=prefix)
    finally:
        logs.chmod(0o755)
    assert_one_line(res, "start", f"cannot open log file {logs / 'node.log'} (kraftnode.log.file)",
                    "Permission denied")


def test_full_disk_at_start(tmp_path: Path, small_fs: Path) -> None:
    props = formatted(tmp_path, log_dir=small_fs / "meta")
    fill(small_fs)
    res = kraftnode("start", str(props))
    assert_one_line(res, "start", "No space left on device (the disk is full)")


def test_full_disk_at_format(tmp_path: Path, small_fs: Path) -> None:
    fill(small_fs)
    props = write_props(tmp_path / "server.properties", free_port(), small_fs / "meta")
    res = kraftnode("format", "--config", str(props), "--cluster-id", CLUSTER_ID)
    assert_one_line(res, "format", str(small_fs / "meta"), "No space left on device")


def test_bad_log_level(tmp_path: Path) -> None:
    props = formatted(tmp_path)
    assert_one_line(kraftnode("start", "--log-level", "LOUD", str(props)), "start",
                    "--log-level='LOUD' is not a log level")
    assert_one_line(kraftnode("start", str(props), env={"KRAFTNODE_LOG_LEVEL": "chatty"}), "start",
                    "KRAFTNODE_LOG_LEVEL='chatty' is not a log level")


def test_bad_log_config(tmp_path: Path) -> None:
    props = formatted(tmp_path)
    assert_one_line(kraftnode("start", "--log-config", str(tmp_path / "nope.ini"), str(props)),
                    "start", "nope.ini", "No such file or directory")
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "handlers": {"h": {"class": "no.such.Handler"}}}')
    assert_one_line(kraftnode("start", "--log-config", str(bad), str(props)), "start",
                    "bad.json: not a valid logging configuration")


def test_invalid_config_value(tmp_path: Path) -> None:
    props = formatted(tmp_path, extra="controller.quorum.fetch.timeout.ms=soon\n")
    assert_one_line(kraftnode("start", str(props)), "start",
                    "Invalid value 'soon' for configuration controller.quorum.fetch.timeout.ms",
                    "Not a number of type INT")


def test_missing_config_file(tmp_path: Path) -> None:
    assert_one_line(kraftnode("start", str(tmp_path / "absent.properties")), "start",
                    "absent.properties does not exist")


def test_not_formatted(tmp_path: Path) -> None:
    props = write_props(tmp_path / "server.properties", free_port(), tmp_path / "meta")
    assert_one_line(kraftnode("start", str(props)), "start", "is not formatted",
                    "kraftnode format")


# ---------------------------------------------------------------------------------- others


def test_dump_log_on_a_directory_without_segments(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert_one_line(kraftnode("dump-log", str(tmp_path)), "dump-log", "no log segments",
                    "expected a metadata log dir")


def test_dump_log_missing_path(tmp_path: Path) -> None:
    assert_one_line(kraftnode("dump-log", str(tmp_path / "gone")), "dump-log",
                    "no such file or directory")


def test_dump_log_index_copied_under_another_name(tmp_path: Path) -> None:
    (tmp_path / "flip.index").write_bytes(bytes(8))
    assert_one_line(kraftnode("dump-log", str(tmp_path / "flip.index")), "dump-log",
                    "flip.index: not named NNNNNNNNNNNNNNNNNNNN.index: the base offset its entries are "
                    "relative to is unknown")


def test_quorum_unreachable(tmp_path: Path) -> None:
    port = free_port()
    assert_one_line(kraftnode("quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe",
                              "--status"), "quorum", f"127.0.0.1:{port}", "Connection refused")


def test_quorum_bootstrap_port_out_of_range() -> None:
    """Issue 41: port 99999 was tried, and reported as ``Connection refused``."""
    assert_one_line(kraftnode("quorum", "--bootstrap-controller", "127.0.0.1:99999", "describe",
                              "--status"), "quorum",
                    "invalid bootstrap address '127.0.0.1:99999': port 99999 is out of range (1-65535)")


def test_start_override_without_a_key(tmp_path: Path) -> None:
    """``--override`` is kafka-server-start.sh's (issue 41: it printed the top-level usage);
    a value without a key is bad input."""
    props = tmp_path / "p.properties"
    props.write_text("process.roles=controller\n")
    assert_one_line(kraftnode("start", str(props), "--override", "=2"), "start",
                    "--override '=2': expected KEY=VALUE, e.g. --override node.id=2")


def test_quorum_watch_unreachable(tmp_path: Path) -> None:
    port = free_port()
    res = kraftnode("quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe",
                    "--replication", "--watch", "0.2", timeout=30)
    assert_one_line(res, "quorum", f"127.0.0.1:{port}", "Connection refused")
    assert res.stdout == ""


def test_quorum_watch_needs_a_positive_interval() -> None:
    assert_one_line(kraftnode("quorum", "--bootstrap-controller", "127.0.0.1:1", "describe",
                              "--replication", "--watch", "0"), "quorum",
                    "the refresh interval must be positive")


def test_dev_cluster_dir_not_a_cluster(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    assert_one_line(kraftnode("dev-cluster", "--dir", str(tmp_path)), "dev-cluster",
                    "is not empty and holds no dev cluster")


def test_dev_cluster_bad_log_level(tmp_path: Path) -> None:
    assert_one_line(kraftnode("dev-cluster", "--dir", str(tmp_path / "d"), "--log-level", "x"),
                    "dev-cluster", "is not a log level")
    assert not (tmp_path / "d").exists()


def test_format_bad_cluster_id(tmp_path: Path) -> None:
    props = write_props(tmp_path / "server.properties", free_port(), tmp_path / "meta")
    assert_one_line(kraftnode("format", "-c", str(props), "-t", "not-a-uuid"), "format",
                    "Cluster ID string not-a-uuid does not appear to be a valid UUID")


def test_format_permission_denied(tmp_path: Path) -> None:
    parent = tmp_path / "locked"
    parent.mkdir()
    props = write_props(tmp_path / "server.properties", free_port(), parent / "meta")
    prefix = no_dac_override()
    parent.chmod(0o555)
    try:
        res = kraftnode("format", "-c", str(props), "-t", CLUSTER_ID,
                        prefix=prefix)
    finally:
        parent.chmod(0o755)
    assert_one_line(res, "format", "Permission denied")


def test_full_disk_while_running(tmp_path: Path, small_fs: Path) -> None:
    """The disk fills under a running leader: the next append stops the node with one line."""
    from kraftnode.protocol import generated as w
    from kraftnode.protocol.registry import PRODUCE
    from kraftnode.vocabulary import METADATA_TOPIC
    from recordbatch import Record, build_batch
    from tests.support.cluster import log_lines
    from tests.support.node import call

    port = free_port()
    # the append that fills the disk is an application record: the node opts in to them
    props = formatted(tmp_path, port, extra="kraftnode.application.records.enable=true\n", log_dir=small_fs / "meta")
    proc = subprocess.Popen([sys.executable, "-m", "kraftnode", "start", str(props)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            res = kraftnode("quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe",
                            "--status")
            if "HighWatermark:          " in res.stdout and "HighWatermark:          -1" not in res.stdout:
                break
            assert time.monotonic() < deadline, res.stderr
            time.sleep(0.2)
        fill(small_fs)
        batch = build_batch([Record(None, b"x" * 4096, (), None)])
        req = w.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            w.ProduceRequest.TopicProduceData(name=METADATA_TOPIC, partition_data=[
                w.ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        try:
            call(port, PRODUCE, 11, req)
        except (OSError, AssertionError):
            pass   # the node may close the connection as it stops
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(10)
            assert proc.stderr is not None
            raise AssertionError("the node kept running on a full disk:\n" + proc.stderr.read()) from None
        assert proc.stderr is not None
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    res = subprocess.CompletedProcess(proc.args, rc, "", err)
    assert_one_line(res, "start", "node 1 stopped", "No space left on device (the disk is full)")
    assert not log_lines(err, "internal error"), err


def test_the_table_lists_every_case() -> None:
    """docs/operations.md's bad-input table and this file name the same cases."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    table = doc.split("## Bad input", 1)[1]
    in_doc = set(re.findall(r"\| `(test_\w+)` \|", table))
    here = {name for name in globals() if name.startswith("test_") and name != "test_the_table_lists_every_case"}
    assert in_doc == here
