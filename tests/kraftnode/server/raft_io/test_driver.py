"""The driver in-process over a real formatted log dir: the barriers hold now that
actions run synchronously and fsync runs inline -- a vote is on disk when its
answer is returned, and an append is acknowledged only once it is flushed."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from kraftnode.config import node_config
from kraftnode.log.quorum_state_store import QuorumStateStore
from kraftnode.raft import messages as m
from kraftnode.raft.actions import AppendCompleted
from kraftnode.raft.errors import UNSUPPORTED_VERSION
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import Endpoint, VoterSet
from kraftnode.server.net.peer_client import PeerError, PeerPool
from kraftnode.server.node import open_storage
from kraftnode.server.raft_io.disk_log import DiskRaftLog
from kraftnode.server.raft_io.driver import RaftDriver, now_ms, quorum_state_to_election
from tests.support.cluster import SUITE_RELEASE

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
pytestmark = pytest.mark.timeout(60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _formatted(tmp_path: Path, voters: int) -> node_config.NodeConfig:
    ports = [_free_port() for _ in range(voters)]
    props = tmp_path / "server.properties"
    props.write_text(
        "node.id=1\nprocess.roles=controller\n"
        f"listeners=CONTROLLER://127.0.0.1:{ports[0]}\ncontroller.listener.names=CONTROLLER\n"
        "controller.quorum.voters=" + ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
        + f"\nlog.dirs={tmp_path / 'meta'}\n")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(props),
                    "--cluster-id", CLUSTER], check=True, capture_output=True)
    return node_config.load(str(props))


def _driver(cfg: node_config.NodeConfig, tg: anyio.abc.TaskGroup) -> tuple[RaftDriver, object]:
    cluster_id, directory_id, mlog, store = open_storage(cfg)
    rlog = DiskRaftLog(mlog, mlog.dir)
    listener = cfg.controller_listener
    voters = VoterSet.static({v.node_id: [Endpoint(listener, v.host, v.port)]
                              for v in cfg.static_voters})
    raft_cfg = RaftConfig(cluster_id=cluster_id, election_timeout_ms=cfg.raft.election_timeout_ms,
                          election_backoff_max_ms=cfg.raft.election_backoff_max_ms,
                          fetch_timeout_ms=cfg.raft.fetch_timeout_ms,
                          request_timeout_ms=cfg.raft.request_timeout_ms,
                          retry_backoff_ms=cfg.raft.retry_backoff_ms, listener_name=listener)
    node = RaftNode(cfg.node_id, directory_id, raft_cfg, rlog,  # type: ignore[arg-type]
                    quorum_state_to_election(store.read()), voters, random.Random(1), now_ms(),
                    local_endpoints=(Endpoint(listener, cfg.advertised_host, cfg.advertised_port),))
    pool = PeerPool(tg, "test", 1.0)
    driver = RaftDriver(node, rlog, store, pool,
                        {v.node_id: (v.host, v.port) for v in cfg.static_voters}, [], 0, 1.0)
    return driver, mlog


def test_a_granted_vote_is_on_disk_when_the_answer_is_returned(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, voters=3)  # peers 2 and 3 never come up

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            driver, mlog = _driver(cfg, tg)
            tg.start_soon(driver.run, tg)
            resp = await driver.call(m.VoteRequest(CLUSTER, 1, 7, 2, None, None, 0, 0))
            assert isinstance(resp, m.VoteResponse) and resp.vote_granted
            # read back by another reader, before anything else runs on the loop
            on_disk = QuorumStateStore(Path(cfg.metadata_log_dir) / "__cluster_metadata-0").read()
            assert on_disk is not None
            assert (on_disk.leader_epoch, on_disk.voted_id) == (7, 2)
            driver.stop()
            tg.cancel_scope.cancel()
            mlog.close()  # type: ignore[attr-defined]

    anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def test_appends_are_acknowledged_only_once_flushed(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, voters=1)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            driver, mlog = _driver(cfg, tg)
            tg.start_soon(driver.run, tg)
            with anyio.fail_after(10):
                while not driver.node.is_leader or driver.high_watermark < 1:
                    await anyio.sleep(0.01)
            # what was durable at the moment each append was acknowledged
            acked: list[tuple[int, int]] = []
            execute = driver._execute

            def traced(a: object) -> bool:
                if isinstance(a, AppendCompleted):
                    acked.append((a.last_offset, mlog.flushed_offset))  # type: ignore[attr-defined]
                return execute(a)

            driver._execute = traced  # type: ignore[method-assign]
            waiters = [driver.append_nowait([b"record-%d" % i])[1] for i in range(50)]
            with anyio.fail_after(10):
                for w in waiters:
                    await w.done.wait()
            offsets = [w.value.last_offset for w in waiters]
            assert all(w.value.error_code == 0 for w in waiters)
            assert offsets == sorted(offsets) and len(set(offsets)) == 50
            assert [o for o, _ in acked] == offsets
            assert all(flushed > offset for offset, flushed in acked), acked
            assert driver.high_watermark > offsets[-1]
            driver.stop()
            tg.cancel_scope.cancel()
            mlog.close()  # type: ignore[attr-defined]

    anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def test_a_request_that_arrives_before_the_driver_runs_is_answered_once_it_does(
        tmp_path: Path) -> None:
    """The listener accepts before the driver task starts: a BeginQuorumEpoch then (whose
    handling also makes the core send its first Fetch) must be answered, not crash."""
    cfg = _formatted(tmp_path, voters=3)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            driver, mlog = _driver(cfg, tg)
            answers: list[m.Response] = []

            async def ask() -> None:
                answers.append(await driver.call(m.BeginQuorumEpochRequest(CLUSTER, 1, None, 2, 3)))

            tg.start_soon(ask)
            await anyio.sleep(0.05)
            tg.start_soon(driver.run, tg)
            with anyio.fail_after(5):
                while not answers:
                    await anyio.sleep(0.01)
            assert isinstance(answers[0], m.BeginQuorumEpochResponse)
            assert (answers[0].error_code, answers[0].partition_error_code) == (0, 0)
            await anyio.sleep(0.1)
            assert driver.fatal is None
            assert driver.node.leader_id == 2 and driver.node.epoch == 3
            driver.stop()
            tg.cancel_scope.cancel()
            mlog.close()  # type: ignore[attr-defined]

    anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def test_pre_votes_go_only_to_peers_that_advertise_vote_v2_even_when_they_are_gone(tmp_path: Path) -> None:
    """The pre-vote gate (KIP-996 with a Kafka 3.9 peer): a peer whose ApiVersions lack Vote v2
    gets no pre-vote -- the driver answers UNSUPPORTED_VERSION locally, and the core stands as a
    3.9 candidate at once. The peer's last ApiVersions answer still counts once it is down or
    paused (a dead 3.9 leader is still a 3.9 voter: 3.9's election must not wait on a pre-vote
    it can never get). A peer that advertised Vote v2, or one never reached, gets the pre-vote
    (which fails with it unreachable, as Kafka 4.0's does)."""
    from tests.support.node import running_node

    cfg = _formatted(tmp_path, voters=3)
    pre_vote = m.VoteRequest(CLUSTER, 2, 1, 1, None, None, 0, 0, pre_vote=True)
    gone = ("127.0.0.1", _free_port())
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()

    async def roundtrip(driver: RaftDriver, dest: int, addr: tuple[str, int]) -> m.Response:
        return await driver._roundtrip(dest, addr, pre_vote)  # noqa: SLF001 - the gate itself

    # v1 runs as a Kafka 3.9 voter would (pre-vote off: Vote 0-1), v2 with it on (the default)
    with running_node(tmp_path / "v1", "kraftnode.raft.pre.vote.enable=false\n", node_id=2) as v1_peer, \
            running_node(tmp_path / "v2", "kraftnode.raft.pre.vote.enable=true\n", node_id=3) as v2_peer:
        async def main() -> None:
            async with anyio.create_task_group() as tg:
                driver, mlog = _driver(cfg, tg)
                v1, v2 = ("127.0.0.1", v1_peer.port), ("127.0.0.1", v2_peer.port)
                # reachable: Vote 0-1 -> answered locally; Vote 0-2 -> sent (and answered)
                r = await roundtrip(driver, 2, v1)
                assert isinstance(r, m.VoteResponse) and r.error_code == UNSUPPORTED_VERSION
                r = await roundtrip(driver, 3, v2)
                assert isinstance(r, m.VoteResponse) and r.error_code != UNSUPPORTED_VERSION
                # both peers go away (connections closed, nothing listens any more)
                v1_peer.proc.kill()
                v2_peer.proc.kill()
                v1_peer.proc.wait()
                v2_peer.proc.wait()
                await driver.pool.close()
                with anyio.fail_after(0.5):
                    r = await roundtrip(driver, 2, v1)
                assert isinstance(r, m.VoteResponse) and r.error_code == UNSUPPORTED_VERSION
                # (a node id now at another address is a different process: nothing assumed)
                for dest, addr in ((3, v2), (4, gone), (2, gone)):
                    with pytest.raises(PeerError):
                        await roundtrip(driver, dest, addr)
                driver.stop()
                tg.cancel_scope.cancel()
                mlog.close()  # type: ignore[attr-defined]

        anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})
