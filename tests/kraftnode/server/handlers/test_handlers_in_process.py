"""The request handlers in-process: a real RaftNode over a real log directory, driven by the
real RaftDriver on this test's event loop, and NodeHandlers answering requests that went
through Kafka's wire encoding (encode_request -> parse_request, and the answer through
encode_response -> parse_response). No node process is started (the log directory is
formatted with ``kraftnode format``); a second in-process node with a real listener stands
in for the leader where a request is forwarded."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from kraftnode.config import node_config
from kraftnode.log.metadata_log import MAX_BATCH_SIZE_BYTES
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.framing import (
    encode_request,
    encode_response,
    parse_request,
    parse_response,
)
from kraftnode.protocol.registry import (
    ADD_RAFT_VOTER,
    BEGIN_QUORUM_EPOCH,
    DESCRIBE_CLUSTER,
    DESCRIBE_QUORUM,
    FETCH,
    PRODUCE,
    REMOVE_RAFT_VOTER,
    SERVED,
    UPDATE_FEATURES,
)
from kraftnode.raft import messages as m
from kraftnode.raft.actions import HighWatermarkAdvanced
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import Endpoint, VoterSet
from kraftnode.server.handlers import HandlerServices, NodeHandlers, NodeIdentity
from kraftnode.server.handlers.applications import ApplicationHandlers
from kraftnode.server.net import api_versions
from kraftnode.server.net.listener import KafkaListener
from kraftnode.server.net.peer_client import PeerPool
from kraftnode.server.node import open_storage
from kraftnode.server.raft_io import wire as rw
from kraftnode.server.raft_io.disk_log import DiskRaftLog
from kraftnode.server.raft_io.driver import RaftDriver, now_ms, quorum_state_to_election
from recordbatch import Record, build_batch
from recordbatch.wire import ZERO_UUID
from tests.support.cluster import SUITE_RELEASE

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
pytestmark = pytest.mark.timeout(60)
# For a node that must not time out into an election during a test: as a candidate its Vote
# to another test node would teach it that node's leadership before a "no leader known" question.
NO_ELECTION = "controller.quorum.election.timeout.ms=600000\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _formatted(d: Path, node_id: int, ports: dict[int, int], extra: str = "") -> node_config.NodeConfig:
    d.mkdir(parents=True, exist_ok=True)
    props = d / "server.properties"
    props.write_text(
        f"node.id={node_id}\nprocess.roles=controller\n"
        f"listeners=CONTROLLER://127.0.0.1:{ports[node_id]}\ncontroller.listener.names=CONTROLLER\n"
        "controller.quorum.voters=" + ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(ports.items()))
        + f"\nlog.dirs={d / 'meta'}\n{extra}")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", *SUITE_RELEASE, "--config", str(props),
                    "--cluster-id", CLUSTER], check=True, capture_output=True)
    return node_config.load(str(props))


@dataclass
class Served:
    driver: RaftDriver
    handlers: NodeHandlers

    async def ask(self, key: int, version: int, body: Any) -> Any:
        """One request through the wire encoding and the handlers; the parsed answer, or
        None when there is none (acks=0)."""
        reply = await self.handlers(_as_parsed(key, version, body), "client-1")
        return None if reply is None else _answer(key, reply)

    async def ask_fast(self, key: int, version: int, body: Any) -> Any:
        """One request through the listener's fast path (``NodeHandlers.fast``, no task): the
        parsed answer once its builder is handed over; None if the fast path declined it."""
        answered = anyio.Event()
        built: list[Any] = []

        def done(build: Callable[[], Any]) -> None:
            built.append(build())
            answered.set()

        if not self.handlers.fast(_as_parsed(key, version, body), "client-1", done):
            assert not built
            return None
        await answered.wait()
        return _answer(key, built[0])


def _as_parsed(key: int, version: int, body: Any) -> Any:
    """``body`` as the listener hands it over: encoded to a request frame and parsed back."""
    return parse_request(encode_request(SERVED[key], version, 7, "in-process-test", body)[4:])


def _answer(key: int, reply: Any) -> Any:
    """A handler's reply as a client reads it: encoded to a response frame and parsed back."""
    out = encode_response(SERVED[key], reply.version, 7, reply.body)
    return parse_response(SERVED[key], reply.version, out[4:])[1]


@asynccontextmanager
async def serving(cfg: node_config.NodeConfig, listen: bool = False) -> AsyncIterator[Served]:
    """A node's core, driver and handlers on this event loop (and its listener if asked)."""
    cluster_id, directory_id, mlog, store = open_storage(cfg)
    rlog = DiskRaftLog(mlog, mlog.dir)
    listener = cfg.controller_listener
    voters = VoterSet.static({v.node_id: [Endpoint(listener, v.host, v.port)] for v in cfg.static_voters})
    raft_cfg = RaftConfig(cluster_id=cluster_id, election_timeout_ms=cfg.raft.election_timeout_ms,
                          election_backoff_max_ms=cfg.raft.election_backoff_max_ms,
                          fetch_timeout_ms=cfg.raft.fetch_timeout_ms, request_timeout_ms=cfg.raft.request_timeout_ms,
                          retry_backoff_ms=cfg.raft.retry_backoff_ms, listener_name=listener)
    core = RaftNode(cfg.node_id, directory_id, raft_cfg, rlog,
                    quorum_state_to_election(store.read()), voters, random.Random(1), now_ms(),
                    local_endpoints=(Endpoint(listener, cfg.advertised_host, cfg.advertised_port),))
    async with anyio.create_task_group() as tg:
        pool = PeerPool(tg, "test", 1.0)
        driver = RaftDriver(core, rlog, store, pool, {v.node_id: (v.host, v.port) for v in cfg.static_voters},
                            [], 0, 1.0)
        driver.start()
        handlers = NodeHandlers(HandlerServices(
            NodeIdentity(cfg.node_id, cluster_id, listener), driver, api_versions.FeatureView(),
            message_max_bytes=cfg.message_max_bytes,
            application_records=True))  # the tests write application records (opted in)
        tg.start_soon(driver.run, tg)
        if listen:
            await tg.start(KafkaListener("127.0.0.1", cfg.advertised_port, handlers).serve)
        try:
            yield Served(driver, handlers)
        finally:
            driver.stop()
            tg.cancel_scope.cancel()
    mlog.close()


async def _until(cond: Callable[[], bool], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not cond():
            await anyio.sleep(0.01)


def _run(main: Callable[[], Any]) -> None:
    anyio.run(main, backend="asyncio")


def _produce(values: list[bytes], acks: int, topic: str | None = None) -> w.ProduceRequest:
    return _produce_batch(build_batch([Record(None, v) for v in values], now_ms=0), acks, topic)


def _produce_batch(batch: bytes, acks: int = -1, topic: str | None = None) -> w.ProduceRequest:
    return w.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        w.ProduceRequest.TopicProduceData(name=topic or rw.METADATA_TOPIC, partition_data=[
            w.ProduceRequest.PartitionProduceData(index=0, records=batch)])])


def _fetch(offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> w.FetchRequest:
    F = w.FetchRequest
    return F(replica_id=-1, replica_state=F.ReplicaState(replica_id=-1), max_wait_ms=max_wait_ms,
             min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=1, session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic=rw.METADATA_TOPIC, topic_id=rw.METADATA_TOPIC_ID, partitions=[
                 F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                  log_start_offset=-1, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")


def _part(resp: w.ProduceResponse) -> Any:
    return resp.responses[0].partition_responses[0]


def _describe_quorum() -> w.DescribeQuorumRequest:
    Q = w.DescribeQuorumRequest
    return Q(topics=[Q.TopicData(topic_name=rw.METADATA_TOPIC, partitions=[Q.PartitionData(partition_index=0)])])


def _begin_epoch(leader: int, epoch: int, voter: int = 1) -> w.BeginQuorumEpochRequest:
    return rw.begin_request_to_wire(m.BeginQuorumEpochRequest(CLUSTER, voter, None, leader, epoch, ()), 0)


# ------------------------------------------------------------------ Produce
def test_produce_acks_all_one_and_zero_answer_the_base_offset_the_log_assigned(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, 1, {1: _free_port()})

    async def main() -> None:
        async with serving(cfg) as s:
            await _until(lambda: s.driver.is_leader and s.driver.high_watermark >= 1)
            end = s.driver.log_end_offset()
            r_all = _part(await s.ask(PRODUCE, 9, _produce([b"a", b"b"], acks=-1)))
            assert (r_all.error_code, r_all.base_offset) == (0, end)
            assert s.driver.high_watermark >= end + 2  # acks=all: answered once committed
            r_one = _part(await s.ask(PRODUCE, 9, _produce([b"c"], acks=1)))
            assert (r_one.error_code, r_one.base_offset) == (0, end + 2)
            assert await s.ask(PRODUCE, 9, _produce([b"d"], acks=0)) is None
            await _until(lambda: s.driver.high_watermark >= end + 4)
            read = s.driver.read(end, 1 << 20, s.driver.high_watermark, True)
            values = [r.value for b in _batches(read) for r in b.records()]
            assert values == [b"a", b"b", b"c", b"d"]

    _run(main)


def test_acks_all_produce_on_the_fast_path_is_answered_at_commit(tmp_path: Path) -> None:
    """An acks=-1 Produce of one partition on the leader is served without the connection's
    task and answered when its append commits; what the fast path declines (acks=1, a retry
    of a batch already written) is left to the task, having written nothing."""
    cfg = _formatted(tmp_path, 1, {1: _free_port()})

    async def main() -> None:
        async with serving(cfg) as s:
            await _until(lambda: s.driver.is_leader and s.driver.high_watermark >= 1)
            end = s.driver.log_end_offset()
            r = _part(await s.ask_fast(PRODUCE, 9, _produce([b"a", b"b"], acks=-1)))
            assert (r.error_code, r.base_offset) == (0, end)
            assert s.driver.high_watermark >= end + 2
            refused = _part(await s.ask_fast(PRODUCE, 9, _produce([b"x"], acks=-1, topic="other")))
            assert refused.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
            assert await s.ask_fast(PRODUCE, 9, _produce([b"c"], acks=1)) is None
            idempotent = build_batch([Record(None, b"i")], now_ms=0, producer_id=7, producer_epoch=0,
                                     base_sequence=0)
            first = _part(await s.ask_fast(PRODUCE, 9, _produce_batch(idempotent)))
            assert first.error_code == 0
            assert await s.ask_fast(PRODUCE, 9, _produce_batch(idempotent)) is None  # a retry
            assert s.driver.log_end_offset() == first.base_offset + 1

    _run(main)


def test_one_core_serves_produce_on_the_fast_path_and_the_task_path(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: the fast path (NodeHandlers.fast -> produce_nowait) and the task path
    (__call__ -> _produce) both run ApplicationHandlers._produce_core, once per request, and
    nothing else appends a Produce's records: every record written went through it."""
    cfg = _formatted(tmp_path, 1, {1: _free_port()})
    cores: list[str] = []
    core = ApplicationHandlers._produce_core

    def counted(self: ApplicationHandlers, q: w.ProduceRequest, v: int, leader: int) -> Any:
        cores.append("core")
        return core(self, q, v, leader)

    monkeypatch.setattr(ApplicationHandlers, "_produce_core", counted)

    async def main() -> None:
        async with serving(cfg) as s:
            await _until(lambda: s.driver.is_leader and s.driver.high_watermark >= 1)
            end = s.driver.log_end_offset()
            fast = _part(await s.ask_fast(PRODUCE, 9, _produce([b"fast"], acks=-1)))
            assert fast.error_code == 0 and cores == ["core"]
            task_all = _part(await s.ask(PRODUCE, 9, _produce([b"task-all"], acks=-1)))
            assert task_all.error_code == 0 and len(cores) == 2
            task_one = _part(await s.ask(PRODUCE, 9, _produce([b"task-one"], acks=1)))
            assert task_one.error_code == 0 and len(cores) == 3
            assert await s.ask_fast(PRODUCE, 9, _produce([b"declined"], acks=1)) is None
            assert len(cores) == 3     # declined before the core: the task serves it
            assert (fast.base_offset, task_all.base_offset, task_one.base_offset) == (end, end + 1, end + 2)
            assert s.driver.log_end_offset() == end + 3

    _run(main)


def test_handlers_take_no_attribute_after_construction(tmp_path: Path) -> None:
    """Issue 40: what a handler uses comes from HandlerServices at construction; setting an
    attribute afterwards (as node.py once set message_max_bytes) raises."""
    cfg = _formatted(tmp_path, 1, {1: _free_port()})

    async def main() -> None:
        async with serving(cfg) as s:
            h = s.handlers
            for obj, name in [(h, "table"), (h, "authz"), (h.applications, "message_max_bytes"),
                              (h.applications, "application_records"), (h.admin, "broker_properties"),
                              (h.controller_apis, "controller"), (h.groups, "service"),
                              (h.consumer_groups, "service"), (h.raft_peers, "driver"), (h.admin, "new")]:
                with pytest.raises(AttributeError, match="constructor only"):
                    setattr(obj, name, None)
            assert h.applications.message_max_bytes == cfg.message_max_bytes
            with pytest.raises(TypeError):
                h.table[PRODUCE] = h.applications._produce  # type: ignore[index]

    _run(main)


def test_acks_all_produce_on_the_fast_path_times_out_without_a_quorum(tmp_path: Path) -> None:
    """The fast path's own timer answers REQUEST_TIMED_OUT at the request's timeout when the
    append cannot commit (the only follower is gone), as the task's wait does."""
    ports = {1: _free_port(), 2: _free_port(), 3: _free_port()}
    leader_cfg = _formatted(tmp_path / "n1", 1, ports)
    follower_cfg = _formatted(tmp_path / "n2", 2, ports, NO_ELECTION)

    async def main() -> None:
        async with serving(leader_cfg, listen=True) as s:
            async with serving(follower_cfg, listen=True):
                await _until(lambda: s.driver.is_leader and s.driver.high_watermark >= 1, 30)
                ok = _part(await s.ask_fast(PRODUCE, 9, _produce([b"a"], acks=-1)))
                assert ok.error_code == 0
            end = s.driver.log_end_offset()
            req = _produce([b"b"], acks=-1)
            req.timeout_ms = 300
            t0 = anyio.current_time()
            late = _part(await s.ask_fast(PRODUCE, 9, req))
            assert late.error_code == Errors.REQUEST_TIMED_OUT
            assert anyio.current_time() - t0 >= 0.29
            assert s.driver.log_end_offset() == end + 1 and s.driver.high_watermark <= end

    _run(main)


def _batches(raw: bytes) -> list[Any]:
    from recordbatch import iter_batches
    return list(iter_batches(raw))


def test_produce_to_a_node_that_is_not_leader_names_the_leader_it_knows(tmp_path: Path) -> None:
    ports = {1: _free_port(), 2: _free_port(), 3: _free_port()}
    cfg = _formatted(tmp_path, 1, ports)  # peers 2 and 3 never come up

    async def main() -> None:
        async with serving(cfg) as s:
            begin = await s.ask(BEGIN_QUORUM_EPOCH, 0, _begin_epoch(leader=2, epoch=5))
            assert begin.error_code == 0
            assert s.driver.leader_and_epoch() == (2, 5)
            pr = _part(await s.ask(PRODUCE, 10, _produce([b"x"], acks=-1)))
            assert pr.error_code == Errors.NOT_LEADER_OR_FOLLOWER and pr.base_offset == -1
            assert (pr.current_leader.leader_id, pr.current_leader.leader_epoch) == (2, 5)
            unknown = _part(await s.ask(PRODUCE, 9, _produce([b"x"], acks=1, topic="other")))
            assert unknown.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION

    _run(main)


def test_produce_of_a_batch_over_the_raft_limit_is_message_too_large(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, 1, {1: _free_port()})

    async def main() -> None:
        async with serving(cfg) as s:
            await _until(lambda: s.driver.is_leader and s.driver.high_watermark >= 1)
            end = s.driver.log_end_offset()
            big = [random.Random(3).randbytes(64 * 1024) for _ in range(MAX_BATCH_SIZE_BYTES // (64 * 1024) + 1)]
            pr = _part(await s.ask(PRODUCE, 9, _produce(big, acks=-1)))
            assert pr.error_code == Errors.MESSAGE_TOO_LARGE and pr.base_offset == -1
            assert pr.error_message.endswith("exceeds the maximum configured value of 1048588.")
            assert s.driver.log_end_offset() == end  # nothing was appended

    _run(main)


# ------------------------------------------------------------------ consumer Fetch
def test_consumer_fetch_out_of_range_between_hw_and_leo_and_long_poll(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, 1, {1: _free_port()})

    async def main() -> None:
        async with serving(cfg) as s:
            await _until(lambda: s.driver.is_leader and s.driver.high_watermark >= 1)
            start = s.driver.log_start_offset()
            low = (await s.ask(FETCH, 12, _fetch(start - 1))).responses[0].partitions[0]
            assert low.error_code == Errors.OFFSET_OUT_OF_RANGE and low.log_start_offset == start
            beyond = (await s.ask(FETCH, 12, _fetch(s.driver.log_end_offset() + 1))).responses[0].partitions[0]
            assert beyond.error_code == Errors.OFFSET_OUT_OF_RANGE

            # hold the driver's high watermark back (the core's HighWatermarkAdvanced actions are
            # kept for later): records between the high watermark and the log end
            held: list[object] = []
            execute = s.driver._execute

            def holding(a: object) -> bool:
                if isinstance(a, HighWatermarkAdvanced):
                    held.append(a)
                    return False
                return execute(a)

            s.driver._execute = holding  # type: ignore[method-assign]
            hw = s.driver.high_watermark
            await s.ask(PRODUCE, 9, _produce([b"pending"], acks=1))
            await _until(lambda: bool(held))
            assert s.driver.log_end_offset() > hw == s.driver.high_watermark
            between = (await s.ask(FETCH, 12, _fetch(hw))).responses[0].partitions[0]
            assert between.error_code == 0 and between.high_watermark == hw
            assert not between.records  # not yet committed: nothing, and no error

            # a long poll answers as soon as the high watermark passes the records
            async def release() -> None:
                await anyio.sleep(0.3)
                s.driver._execute = execute  # type: ignore[method-assign]
                for a in held:
                    execute(a)

            async with anyio.create_task_group() as tg:
                tg.start_soon(release)
                t0 = anyio.current_time()
                polled = (await s.ask(FETCH, 12, _fetch(hw, max_wait_ms=5000))).responses[0].partitions[0]
                waited = anyio.current_time() - t0
            assert polled.error_code == 0 and polled.high_watermark > hw
            assert [r.value for b in _batches(polled.records) for r in b.records()] == [b"pending"]
            assert 0.2 < waited < 4.0

    _run(main)


# ------------------------------------------------------------------ DescribeQuorum
def test_describe_quorum_on_the_leader_and_forwarded_by_a_follower(tmp_path: Path) -> None:
    ports = {1: _free_port(), 2: _free_port(), 3: _free_port()}
    follower_cfg = _formatted(tmp_path / "n1", 1, ports, NO_ELECTION)
    # node 2: a single-voter quorum of its own on voter 2's port, the leader node 1 forwards to
    leader_cfg = _formatted(tmp_path / "n2", 2, {2: ports[2]})

    async def main() -> None:
        async with serving(leader_cfg, listen=True) as leader, serving(follower_cfg) as follower:
            await _until(lambda: leader.driver.is_leader and leader.driver.high_watermark >= 1)
            own = await leader.ask(DESCRIBE_QUORUM, 2, _describe_quorum())
            p = own.topics[0].partitions[0]
            assert (p.error_code, p.leader_id) == (0, 2)
            assert [v.replica_id for v in p.current_voters] == [2]
            assert [n.node_id for n in own.nodes] == [2]

            # not leader, no leader known: the core's NOT_LEADER_OR_FOLLOWER answer
            alone = (await follower.ask(DESCRIBE_QUORUM, 2, _describe_quorum())).topics[0].partitions[0]
            assert alone.error_code == Errors.NOT_LEADER_OR_FOLLOWER and alone.error_message
            epoch = leader.driver.leader_and_epoch()[1]
            await follower.ask(BEGIN_QUORUM_EPOCH, 0, _begin_epoch(leader=2, epoch=epoch))
            forwarded = await follower.ask(DESCRIBE_QUORUM, 2, _describe_quorum())
            fp = forwarded.topics[0].partitions[0]
            assert (fp.error_code, fp.leader_id, fp.leader_epoch) == (0, 2, epoch)
            assert [v.replica_id for v in fp.current_voters] == [2]

    _run(main)


# ------------------------------------------------------------------ DescribeCluster
def test_describe_cluster_lists_the_voters_and_the_leader(tmp_path: Path) -> None:
    ports = {1: _free_port(), 2: _free_port(), 3: _free_port()}
    cfg = _formatted(tmp_path, 1, ports)

    async def main() -> None:
        async with serving(cfg) as s:
            D = w.DescribeClusterRequest
            none = await s.ask(DESCRIBE_CLUSTER, 1, D(include_cluster_authorized_operations=False,
                                                      endpoint_type=2))
            assert none.error_code == 0 and none.controller_id == -1 and none.brokers == []
            await s.ask(BEGIN_QUORUM_EPOCH, 0, _begin_epoch(leader=3, epoch=4))
            r = await s.ask(DESCRIBE_CLUSTER, 1, D(include_cluster_authorized_operations=True,
                                                   endpoint_type=2))
            assert (r.error_code, r.cluster_id, r.controller_id, r.endpoint_type) == (0, CLUSTER, 3, 2)
            assert sorted((b.broker_id, b.port) for b in r.brokers) == sorted(ports.items())
            assert r.cluster_authorized_operations > 0
            bad = await s.ask(DESCRIBE_CLUSTER, 1, D(include_cluster_authorized_operations=False,
                                                     endpoint_type=3))
            assert bad.error_code == Errors.UNSUPPORTED_ENDPOINT_TYPE

    _run(main)


# ------------------------------------------------------------------ UpdateFeatures
def test_update_features_on_leader_and_follower(tmp_path: Path) -> None:
    cfg = _formatted(tmp_path, 1, {1: _free_port()})
    ports = {1: _free_port(), 2: _free_port(), 3: _free_port()}
    follower_cfg = _formatted(tmp_path / "f", 1, ports)

    def update(name: str, level: int, kind: int = 1, validate_only: bool = False) -> w.UpdateFeaturesRequest:
        U = w.UpdateFeaturesRequest
        return U(timeout_ms=1000, validate_only=validate_only, feature_updates=[
            U.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)])

    async def main() -> None:
        async with serving(follower_cfg) as f:
            r = await f.ask(UPDATE_FEATURES, 1, update("kraft.version", 1))
            assert r.error_code == Errors.NOT_CONTROLLER
        async with serving(cfg) as s:
            # the leader, but served without controller duties (handlers alone, as a node of a
            # TestRaftServer quorum): no active controller to judge and write features. The rules
            # are tests/kraftnode/controller/test_feature_control.py's, a real node's
            # tests/kraftnode/server/handlers/test_admin_tools.py's
            await _until(lambda: s.driver.is_leader and s.driver.high_watermark >= 1)
            r = await s.ask(UPDATE_FEATURES, 1, update("metadata.version", 21))
            assert r.error_code == Errors.NOT_CONTROLLER

    _run(main)


# ------------------------------------------------------------------ voter changes
def test_voter_changes_forwarded_to_the_leader_or_refused(tmp_path: Path) -> None:
    ports = {1: _free_port(), 2: _free_port(), 3: _free_port()}
    follower_cfg = _formatted(tmp_path / "n1", 1, ports, NO_ELECTION)
    leader_cfg = _formatted(tmp_path / "n2", 2, {2: ports[2]})
    A, R = w.AddRaftVoterRequest, w.RemoveRaftVoterRequest

    def add(voter: int) -> w.AddRaftVoterRequest:
        return A(cluster_id=CLUSTER, timeout_ms=1000, voter_id=voter, voter_directory_id=uuid.uuid4(),
                 listeners=[A.Listener(name="CONTROLLER", host="127.0.0.1", port=_free_port())])

    def remove(voter: int) -> w.RemoveRaftVoterRequest:
        return R(cluster_id=CLUSTER, voter_id=voter, voter_directory_id=ZERO_UUID)

    async def main() -> None:
        async with serving(leader_cfg, listen=True) as leader, serving(follower_cfg) as follower:
            await _until(lambda: leader.driver.is_leader and leader.driver.high_watermark >= 1)
            # no leader known: the core's own refusal
            alone = await follower.ask(ADD_RAFT_VOTER, 0, add(9))
            assert alone.error_code == Errors.NOT_LEADER_OR_FOLLOWER
            epoch = leader.driver.leader_and_epoch()[1]
            await follower.ask(BEGIN_QUORUM_EPOCH, 0, _begin_epoch(leader=2, epoch=epoch))
            # forwarded: the leader's answer. A static quorum (kraft.version 0) refuses changes
            fwd = await follower.ask(ADD_RAFT_VOTER, 0, add(9))
            direct = await leader.ask(ADD_RAFT_VOTER, 0, add(9))
            assert fwd.error_code == direct.error_code == Errors.UNSUPPORTED_VERSION
            assert fwd.error_message == direct.error_message
            assert "kraft.version feature is 0" in fwd.error_message
            fwd_rm = await follower.ask(REMOVE_RAFT_VOTER, 0, remove(9))
            direct_rm = await leader.ask(REMOVE_RAFT_VOTER, 0, remove(9))
            assert fwd_rm.error_code == direct_rm.error_code != 0

    _run(main)
