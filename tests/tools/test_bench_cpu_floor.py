"""tools/bench/cpu_floor.py runs its three-process skeleton, prints CPU per commit and latency,
cleans up its files and refuses bad counts with exit 2 (a tiny run: the figures themselves are
the bench's, not a test's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench import cpu_floor


def test_tiny_run_commits_every_record_and_prints_its_cpu(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert cpu_floor.main(["--ops", "200", "--warm", "20", "--dir", str(tmp_path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["ops"] == 200
    # every commit is a round of real socket writes and three fdatasyncs: never free
    assert r["cpu_us_per_commit"] > 0 and r["system_us_per_commit"] > 0
    assert r["cpu_us_per_commit"] == pytest.approx(r["user_us_per_commit"] + r["system_us_per_commit"])
    assert 0 < r["p50_ms"] <= r["p99_ms"]
    assert list(tmp_path.iterdir()) == []        # its log files removed

    assert cpu_floor.main(["--ops", "20", "--warm", "0", "--dir", str(tmp_path)]) == 0
    assert "servers' CPU" in capsys.readouterr().out


def test_bad_counts_are_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cpu_floor.main(["--ops", "0"])
    assert e.value.code == 2
    assert "--ops must be at least 1" in capsys.readouterr().err


def test_the_leader_answers_only_once_a_majority_has_the_record(tmp_path: Path) -> None:
    """The skeleton keeps raft's commit rule (2 of 3: the leader's flush and one follower's
    Fetch past the record), or its CPU would be that of a cheaper protocol."""
    class Sink:
        def __init__(self) -> None:
            self.frames: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.frames.append(data)

    state = cpu_floor._LeaderState(cpu_floor._Log(tmp_path / "log"))
    client, f1, f2 = (cpu_floor._LeaderConn(state) for _ in range(3))
    sinks = {c: Sink() for c in (client, f1, f2)}
    for c, sink in sinks.items():
        c.transport = sink  # type: ignore[assignment]
    f1.on_frame(cpu_floor._fetch(0)[4:])
    f2.on_frame(cpu_floor._fetch(0)[4:])
    client.on_frame(cpu_floor._frame(cpu_floor.PRODUCE)[4:])
    # both parked Fetches answered with the batch; only the leader has flushed it
    assert [len(sinks[f].frames) for f in (f1, f2)] == [1, 1]
    assert sinks[f1].frames[0].endswith(cpu_floor.BATCH) and sinks[client].frames == []
    f2.on_frame(cpu_floor._fetch(1)[4:])          # a follower has it too: 2 of 3
    assert len(sinks[client].frames) == 1 and state.waiting is None
    f1.on_frame(cpu_floor._fetch(1)[4:])          # the second acknowledgement answers nothing
    assert len(sinks[client].frames) == 1


def test_samples_are_put_in_their_layer() -> None:
    glue = "_Connection.data_received (/work/k/kraftnode/server/net/listener.py:260)"
    codec = "_r_FetchRequest_10 (/work/k/kraftnode/protocol/generated/fetch_request.py:1739)"
    core = "on_fetch_request (/work/k/kraftnode/raft/rules/replication.py:60)"
    # frames as py-spy --native --full-filenames writes them, outermost first
    assert cpu_floor.layer_of(";".join(["uv_run (core.c:464)", glue, codec])) == "codec"
    assert cpu_floor.layer_of(";".join([glue, core, "Py_DECREF (object.h:537)"])) == "raft core"
    # the write system call under the listener: a libc call, whoever made it
    assert cpu_floor.layer_of(";".join([glue, "0x7fe26bc4524a (libc.so.6)"])) == cpu_floor.LIBC
    # uvloop's C code called from Python (a transport write before its system call)
    assert cpu_floor.layer_of(";".join([glue, "UVStream.write (loop.c:123)"])) == cpu_floor.UVLOOP
    assert cpu_floor.layer_of("uv__io_poll (linux.c:1546)") == cpu_floor.UVLOOP
    assert cpu_floor.layer_of(glue) == "server glue"


def test_the_bound_takes_only_the_sans_io_share_of_the_user_cpu() -> None:
    kn = {"leader": 1, "nodes": {1: {"user_us_per_commit": 300.0, "system_us_per_commit": 100.0},
                                 2: {"user_us_per_commit": 150.0, "system_us_per_commit": 70.0}}}
    # the profiled quorum elected node 2: shares go by role, not by node id
    prof = {"leader": 2, "layers": {
        2: {cpu_floor.LIBC: 50.0, "codec": 20.0, "raft core": 10.0, "server glue": 20.0},
        1: {cpu_floor.LIBC: 60.0, "codec": 20.0, "log": 10.0, "server glue": 10.0}}}
    b = cpu_floor.sans_io_free_bound(kn, prof)
    # leader: 30 of 50 running samples are sans-IO -> 300 * 0.4 = 120 user left, + 100 system;
    # follower: 30 of 40 -> 150 * 0.25 = 37.5, + 70
    assert b["cpu_us_per_commit"] == pytest.approx(120 + 100 + 37.5 + 70)
    assert b["nodes"][1]["sans_io_share_of_running"] == 0.6
    assert "error" in cpu_floor.sans_io_free_bound(kn, {"leader": 2, "layers": {2: {}}})


def test_kraftnode_is_measured_beside_the_skeleton(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cpu_floor.main(["--ops", "100", "--warm", "20", "--kraftnode", "--dir", str(tmp_path),
                           "--json"]) == 0
    recs = {r["system"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    kn = recs["kraftnode"]
    assert kn["ops"] == 100 and kn["errors"] == 0 and sorted(kn["nodes"]) == ["1", "2", "3"]
    assert kn["cpu_us_per_commit"] > 0 and 0 < kn["p50_ms"] <= kn["p99_ms"]
    # with py-spy: the bound below kraftnode's own figure; without: it says what is missing
    bound = recs["bound"]
    assert ("py-spy not found" in bound["error"] if "error" in bound
            else 0 < bound["cpu_us_per_commit"] < kn["cpu_us_per_commit"])
    assert list(tmp_path.iterdir()) == []
