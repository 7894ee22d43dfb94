"""A running node: the on-disk log, the Raft core and its driver, and the listeners.

``kraftnode start server.properties`` runs :func:`run_node`.  The metadata log dir
must have been formatted (``kraftnode format``), as Kafka requires: that is where
the cluster id and this node's directory id come from.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import random
import signal
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from kraftnode import __version__, vocabulary
from kraftnode.config import ConfigError
from kraftnode.config.node_config import NodeConfig
from kraftnode.errors import LocalError
from kraftnode.log.meta_properties import MetaPropertiesError, read_meta_properties
from kraftnode.log.metadata_log import METADATA_PARTITION_DIR, LogError, MetadataLog
from kraftnode.log.quorum_state_store import QuorumStateError, QuorumStateStore
from kraftnode.log.snapshot import SnapshotError
from kraftnode.logsetup import os_error_text
from kraftnode.metadata.state import MetadataState
from kraftnode.metadata.state_machine import StateMachine, StateMachineRunner
from kraftnode.raft import RaftNode
from kraftnode.raft.election import ElectionState
from kraftnode.raft.voters import Endpoint, VoterSet
from kraftnode.security import hooks as security_hooks
from kraftnode.security.credentials import ScramCredentials
from kraftnode.security.listeners import OnListener
from kraftnode.server.controller_io.controller_duties import ControllerDuties
from kraftnode.server.controller_io.controller_shell import ControllerShell
from kraftnode.server.controller_io.snapshot_manager import (
    SnapshotManager,
    prepare_storage,
    voters_at,
)
from kraftnode.server.handlers import HandlerServices, NodeHandlers, NodeIdentity
from kraftnode.server.metrics import latency_trace
from kraftnode.server.net import api_versions
from kraftnode.server.net.listener import KafkaListener, ListenerError, ServerLimits
from kraftnode.server.net.peer_client import PeerPool
from kraftnode.server.raft_io import wire as rw
from kraftnode.server.raft_io.disk_log import DiskRaftLog, DiskSnapshotStore
from kraftnode.server.raft_io.driver import RaftDriver, now_ms, quorum_state_to_election

if TYPE_CHECKING:
    from kraftnode.server.metrics.recording import RequestMetrics

log = logging.getLogger("kraftnode.node")


class StartupError(LocalError):
    """The node cannot start; the message says why (printed as one line, exit 2)."""


class NodeFailure(StartupError):
    """The node stopped on an environment failure (a full disk, ...); printed as one line, exit 2."""


def open_storage(cfg: NodeConfig) -> tuple[str, uuid.UUID | None, MetadataLog, QuorumStateStore]:
    root = Path(cfg.metadata_log_dir)
    try:
        meta = read_meta_properties(root)
    except MetaPropertiesError as e:
        raise StartupError(str(e)) from None
    if meta is None:
        raise StartupError(f"{root} is not formatted: run `kraftnode format --config {cfg.source} "
                           f"--cluster-id ID` first")
    if meta.node_id != cfg.node_id:
        raise StartupError(f"stored node.id {meta.node_id} in {root / 'meta.properties'} does not "
                           f"match the configured node.id {cfg.node_id}")
    try:
        mlog = MetadataLog(root, cfg.log_config)
    except LogError as e:
        raise StartupError(f"cannot open the metadata log in {root}: {e}") from None
    except OSError as e:
        raise StartupError(f"cannot open the metadata log in {root}: {os_error_text(e)}") from None
    store = QuorumStateStore(root / METADATA_PARTITION_DIR)
    return meta.cluster_id, meta.directory_id, mlog, store


@dataclass
class RunningNode:
    """What an embedding application gets once the node runs (kraftnode.embed)."""

    driver: RaftDriver
    snapshots: SnapshotManager
    stop: Callable[[], None]


async def run_node(cfg: NodeConfig, state_machine: StateMachine | None = None,
                   on_started: Callable[[RunningNode], None] | None = None,
                   handle_signals: bool = True) -> None:
    """Run a node until SIGTERM/SIGINT (or ``RunningNode.stop``).

    ``state_machine``: the application's (default: the metadata image,
    :class:`MetadataState`).  Controller duties (activation, KIP-919 registration) need
    the metadata image, so a node with another state machine does not do them: Kafka
    controllers cannot share its quorum."""
    cluster_id, directory_id, mlog, store = open_storage(cfg)
    latency_trace.set_node(cfg.node_id)
    driver: RaftDriver | None = None
    metrics_server: Any = None
    try:
        election, sm, runner = _load_state(mlog, store, state_machine)
        rlog = DiskRaftLog(mlog, mlog.dir)
        topic = _raft_topic(cfg, cluster_id)
        controller = topic == vocabulary.METADATA_TOPIC and isinstance(sm, MetadataState)
        _check_application_records(cfg, sm, controller)
        listener = cfg.controller_listener
        # every controller listener as advertised, the default one first (NodeConfig)
        endpoints = cfg.controller_endpoints or ((listener, cfg.advertised_host, cfg.advertised_port),)
        node = _raft_node(cfg, cluster_id, directory_id, rlog, election, endpoints)
        scram_credentials = _scram_credentials(
            cfg, sm if controller and isinstance(sm, MetadataState) else None, mlog, node)
        metrics_server = await _bind_metrics(cfg)
        raft_metrics, request_metrics = _recorders(metrics_server)
        stop_requested = anyio.Event()
        # signals are caught from the start: a SIGTERM during start-up still shuts down cleanly
        receiver = (anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) if handle_signals
                    else contextlib.nullcontext(None))
        with receiver as signals:
            async with anyio.create_task_group() as tg:
                driver = drv = _driver(tg, cfg, node, rlog, store, raft_metrics)
                snapshots = SnapshotManager(mlog, runner, cfg.snapshot_config,
                                            lambda offset: voters_at(node, offset),
                                            on_snapshots_changed=rlog.snapshots_changed)
                features = api_versions.FeatureView()
                if cfg.raft.pre_vote:
                    features.api_max = {}  # KIP-996: advertise Vote v2
                # controller duties only in a KRaft controller quorum: a TestRaftServer quorum
                # carries opaque bytes, and its Java nodes serve no controller APIs
                duties = ControllerDuties(drv, cfg.node_id, cfg.metadata_log_dir,
                                          endpoints,
                                          dict(features.supported), snapshots,
                                          {n: int(sec.protocol) for n, sec in cfg.security.items()}
                                          ) if controller else None
                handlers = _handlers(cfg, cluster_id, drv, features, duties)
                shell = handlers.services.controller
                bound, listeners = await _start_listeners(tg, cfg, handlers, request_metrics,
                                                          scram_credentials)
                if metrics_server is not None:
                    _start_metrics(tg, metrics_server, cfg, drv, raft_metrics, request_metrics,
                                   listeners, cluster_id, shell)
                _start_tasks(tg, drv, duties, shell, handlers, snapshots)
                _log_started(cfg, cluster_id, node, topic, bound, rlog.end_offset)
                if on_started is not None:
                    on_started(RunningNode(drv, snapshots, stop_requested.set))
                await _serve_until_stopped(tg, drv, stop_requested, signals)
        if handle_signals:
            _ignore_further_signals()
    finally:
        _close(metrics_server, mlog)
    if driver is not None and driver.fatal is not None:
        raise NodeFailure(f"node {cfg.node_id} stopped: {driver.fatal}")
    log.info("node %d shut down cleanly", cfg.node_id)


def _check_application_records(cfg: NodeConfig, sm: StateMachine, controller: bool) -> None:
    """A node that does not opt in to application records refuses a snapshot holding some (the
    log's are found by the replay)."""
    if controller and not cfg.application_records and isinstance(sm, MetadataState) and sm.foreign_records:
        raise StartupError(f"the metadata snapshot holds {sm.foreign_records} application record(s), which "
                           "no Kafka broker or controller can replay, and "
                           "kraftnode.application.records.enable is false (docs/server.md)")


def _recorders(metrics_server: Any) -> tuple[Any, RequestMetrics | None]:
    """(raft metrics, request metrics) when metrics are served, else (None, None): nothing timed."""
    if metrics_server is None:
        return None, None
    from kraftnode.server.metrics.recording import RaftMetrics, RequestMetrics

    return RaftMetrics(), RequestMetrics()


def _driver(tg: anyio.abc.TaskGroup, cfg: NodeConfig, node: RaftNode, rlog: DiskRaftLog,
            store: QuorumStateStore, raft_metrics: Any) -> RaftDriver:
    """The raft core's driver, its producer-state rescan of the log's tail done."""
    drv = RaftDriver(node, rlog, store, _peer_pool(tg, cfg),
                     {v.node_id: (v.host, v.port) for v in cfg.static_voters},
                     cfg.bootstrap_servers, 0 if cfg.static_voters else 1,
                     cfg.raft.request_timeout_ms / 1000, metrics=raft_metrics)
    drv.linearizable_reads = cfg.read_linearizable
    drv.start()
    return drv


def _start_tasks(tg: anyio.abc.TaskGroup, drv: RaftDriver, duties: ControllerDuties | None,
                 shell: ControllerShell | None, handlers: NodeHandlers, snapshots: SnapshotManager) -> None:
    """The node's long-running tasks: the driver, the controller's, snapshots, group timers."""
    tg.start_soon(drv.run, tg)
    if duties is not None:
        tg.start_soon(duties.run)
    if shell is not None:
        tg.start_soon(shell.run)
    tg.start_soon(snapshots.run, lambda: drv.high_watermark)
    tg.start_soon(handlers.groups.service.run)  # the group coordinator's timers


def _log_started(cfg: NodeConfig, cluster_id: str, node: RaftNode, topic: str, bound: list[str],
                 end_offset: int) -> None:
    log.info("kraftnode %s node %d started: cluster %s, %s quorum on %s, listeners %s, "
             "log dir %s, log end offset %d", __version__, cfg.node_id, cluster_id,
             # a --no-initial-controllers node's log is empty (kraft.version 0 until it
             # fetches): its quorum is dynamic all the same (no controller.quorum.voters)
             "static" if node.history.kraft_version() == 0 and not cfg.is_dynamic else "dynamic",
             topic, ",".join(bound),
             cfg.metadata_log_dir, end_offset)

    if cfg.application_records and topic == vocabulary.METADATA_TOPIC:
        log.warning("kraftnode.application.records.enable=true: this quorum's log takes application "
                    "records (Produce, consumer groups, the embedding API); Kafka brokers cannot "
                    "replay it and their registration is refused")


def _ignore_further_signals() -> None:
    """Shutting down: a further SIGTERM/SIGINT (an impatient second Ctrl-C, a supervisor's
    follow-up) must not kill the node before its log is closed and it has said so; the
    receiver of run_node no longer catches them."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _close(metrics_server: Any, mlog: MetadataLog) -> None:
    latency_trace.dump()
    if metrics_server is not None:
        metrics_server.close()
    try:
        mlog.close()
    except OSError as e:
        log.error("closing the metadata log failed: %s", os_error_text(e))


def _load_state(mlog: MetadataLog, store: QuorumStateStore, state_machine: StateMachine | None,
                ) -> tuple[ElectionState, StateMachine, StateMachineRunner]:
    """The stored election state, and the state machine loaded from the latest valid
    snapshot (only the log after it is replayed)."""
    try:
        election = quorum_state_to_election(store.read())
    except QuorumStateError as e:
        raise StartupError(str(e)) from None
    sm: StateMachine = MetadataState() if state_machine is None else state_machine
    runner = StateMachineRunner(sm)
    try:
        prepare_storage(mlog, runner)
    except (OSError, SnapshotError, ValueError) as e:
        raise StartupError(f"cannot load the metadata snapshots in {mlog.dir}: {e}") from None
    return election, sm, runner


def _handlers(cfg: NodeConfig, cluster_id: str, drv: RaftDriver, features: api_versions.FeatureView,
              duties: ControllerDuties | None) -> NodeHandlers:
    """The request handlers, constructed from the one services object (nothing is set on
    them afterwards): the controller shell of a node with controller duties (the
    controller APIs, docs/controller.md), the authorizer, and the limits and switches of
    the configuration."""
    if duties is not None:
        duties.application_records = cfg.application_records
        duties.default_min_isr = cfg.controller.min_insync_replicas
    shell = ControllerShell(drv, duties, replace(cfg.controller, cluster_id=cluster_id),
                            drv.current_kraft_version) if duties is not None else None
    return NodeHandlers(HandlerServices(
        ident=NodeIdentity(cfg.node_id, cluster_id, cfg.controller_listener), driver=drv, features=features,
        message_max_bytes=cfg.message_max_bytes, duties=duties,
        authorizer=security_hooks.authorizer(cfg.authorizer_config, duties), controller=shell,
        group_config=cfg.group_config, application_records=cfg.application_records,
        broker_properties=cfg.listed_properties))


def _scram_credentials(cfg: NodeConfig, image: MetadataState | None, mlog: MetadataLog,
                       node: RaftNode) -> ScramCredentials | None:
    """The SCRAM credential store of the node's SASL listeners (kraftnode.security.credentials),
    and the start-up check of its own SCRAM login to the other voters."""
    try:
        creds = security_hooks.scram_credentials(cfg.security, cfg.metadata_log_dir, image, mlog)
        warning = security_hooks.check_controller_login(
            creds, cfg.security.get(cfg.controller_listener), cfg.metadata_log_dir, len(node.voters),
            node.is_voter)
    except ValueError as e:   # ConfigError, or an unreadable bootstrap.checkpoint
        raise StartupError(str(e)) from None
    if warning is not None:
        log.warning("%s", warning)
    if creds is not None:
        log.info("%s", creds.describe())
    return creds


def _raft_topic(cfg: NodeConfig, cluster_id: str) -> str:
    """The quorum's topic (set process-wide with raft.wire.use_topic). Kafka's standalone
    raft server (TestRaftServer) runs its quorum on its own topic with the all-zero cluster
    id; a kraftnode joining such a quorum must do the same."""
    topic = cfg.raft_topic or (vocabulary.TEST_RAFT_TOPIC
                               if cluster_id == vocabulary.TEST_RAFT_SERVER_CLUSTER_ID
                               else vocabulary.METADATA_TOPIC)
    rw.use_topic(topic)
    if topic == vocabulary.TEST_RAFT_TOPIC and cluster_id != vocabulary.TEST_RAFT_SERVER_CLUSTER_ID:
        # TestRaftServer always runs with Uuid.ZERO_UUID as its cluster id and answers
        # INCONSISTENT_CLUSTER_ID to any other, so this node could not share its quorum
        log.warning("kraftnode.raft.topic=__raft_performance_test but the cluster id is %s: "
                    "Kafka's TestRaftServer uses cluster id %s and will refuse this node's "
                    "requests (format with --cluster-id %s to join it)", cluster_id,
                    vocabulary.TEST_RAFT_SERVER_CLUSTER_ID, vocabulary.TEST_RAFT_SERVER_CLUSTER_ID)
    return topic


def _raft_node(cfg: NodeConfig, cluster_id: str, directory_id: uuid.UUID | None, rlog: DiskRaftLog,
               election: ElectionState, endpoints: Sequence[tuple[str, str, int]]) -> RaftNode:
    """The raft core of this node, from its configuration."""
    listener = cfg.controller_listener
    static = VoterSet.static({v.node_id: [Endpoint(listener, v.host, v.port)]
                              for v in cfg.static_voters}) if cfg.static_voters else VoterSet.of([])
    return RaftNode(
        cfg.node_id, directory_id, replace(cfg.raft, cluster_id=cluster_id), rlog, election,
        static, random.Random(), now_ms(),
        local_endpoints=tuple(Endpoint(*e) for e in endpoints),
        bootstrap_servers=[-1 - i for i in range(len(cfg.bootstrap_servers))],
        snapshots=DiskSnapshotStore(rlog))


async def _start_listeners(tg: anyio.abc.TaskGroup, cfg: NodeConfig, handlers: NodeHandlers,
                           request_metrics: RequestMetrics | None,
                           scram_credentials: ScramCredentials | None,
                           ) -> tuple[list[str], list[tuple[str, KafkaListener]]]:
    """Bind and serve every listener; (their bound addresses, (name, listener) pairs)."""
    limits = ServerLimits(cfg.socket_request_max_bytes, cfg.connections_max_idle_ms / 1000)
    bound = []
    listeners = []
    for lst in cfg.listeners:
        host = lst.host or "0.0.0.0"
        sec = cfg.security.get(lst.name)
        on_listener = OnListener(handlers, lst.name) if len(cfg.listeners) > 1 else handlers
        kl = KafkaListener(host, lst.port, on_listener, limits, request_metrics,
                           sec.ssl_context if sec else None,
                           security_hooks.authenticator(sec, scram_credentials),
                           sec.principal_mapper if sec else None, lst.name)
        port = await tg.start(kl.serve)
        listeners.append((lst.name, kl))
        bound.append(f"{lst.name}://{host}:{port}")
        print(f"node {cfg.node_id} listening on {lst.name}://{host}:{port}", flush=True)
    return bound, listeners


def _peer_pool(tg: anyio.abc.TaskGroup, cfg: NodeConfig) -> PeerPool:
    """The connections to raft peers, secured as the controller listener is."""
    ctrl_sec = cfg.security.get(cfg.controller_listener)
    return PeerPool(tg, f"raft-client-{cfg.node_id}", cfg.raft.request_timeout_ms / 1000,
                    cfg.raft.retry_backoff_ms / 1000, max(cfg.raft.retry_backoff_ms, 1000) / 1000,
                    ssl=ctrl_sec.client_ssl_context if ctrl_sec else None,
                    sasl_login=ctrl_sec.client_login if ctrl_sec else None)


async def _serve_until_stopped(tg: anyio.abc.TaskGroup, drv: RaftDriver, stop_requested: anyio.Event,
                               signals: Any) -> None:
    """Run until a fatal error, ``stop_requested`` (a graceful shutdown) or a signal."""
    async def watch_fatal() -> None:
        while drv.fatal is None:
            await anyio.sleep(0.2)
        tg.cancel_scope.cancel()

    async def on_stop() -> None:
        await stop_requested.wait()
        await _graceful_shutdown(drv)
        tg.cancel_scope.cancel()

    tg.start_soon(watch_fatal)
    tg.start_soon(on_stop)
    if signals is not None:
        async for sig in signals:
            log.info("received %s: shutting down", signal.Signals(sig).name)
            stop_requested.set()
            break


async def _bind_metrics(cfg: NodeConfig) -> Any:
    """Bind kraftnode.metrics.listener before anything starts (a bad address is a
    one-line start-up error); None when the key is unset."""
    if cfg.metrics_listener is None:
        return None
    from prometheus_client.registry import CollectorRegistry

    from kraftnode.server.metrics.http import MetricsServer

    host, port = cfg.metrics_listener
    server = MetricsServer(host, port, CollectorRegistry(auto_describe=False))
    try:
        await server.bind()
    except OSError as e:
        # (asyncio's bind error repeats the address; a resolver error has a negative errno)
        why = os.strerror(e.errno) if e.errno and e.errno > 0 else (e.strerror or str(e))
        raise StartupError(f"cannot listen on kraftnode.metrics.listener={host}:{port}: "
                           f"{why}") from None
    return server


def _start_metrics(tg: anyio.abc.TaskGroup, server: Any, cfg: NodeConfig, driver: RaftDriver,
                   raft_metrics: Any, request_metrics: Any,
                   listeners: list[tuple[str, KafkaListener]], cluster_id: str,
                   controller: ControllerShell | None = None) -> None:
    """Register the collectors and serve /metrics, /healthz and /readyz (and Kafka's controller
    metrics on a node with controller duties)."""
    from prometheus_client.gc_collector import GCCollector
    from prometheus_client.platform_collector import PlatformCollector
    from prometheus_client.process_collector import ProcessCollector

    from kraftnode.server.metrics.collector import NodeCollector, liveness, readiness

    registry = server.registry
    registry.register(NodeCollector(driver, raft_metrics, request_metrics, listeners,
                                    cfg.node_id, cluster_id, cfg.raft.fetch_timeout_ms))
    if controller is not None:
        from kraftnode.server.metrics.controller import ControllerCollector, ControllerMetrics

        controller.metrics = ControllerMetrics()
        registry.register(ControllerCollector(controller, controller.metrics, bool(cfg.static_voters)))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    server.live = lambda: liveness(driver)
    server.ready = lambda: readiness(driver, cfg.raft.fetch_timeout_ms, raft_metrics)
    tg.start_soon(server.serve)
    host = server.host
    shown = f"[{host}]" if ":" in host else host
    print(f"node {cfg.node_id} metrics on http://{shown}:{server.bound_port}/metrics "
          f"(health: /healthz, /readyz)", flush=True)
    log.info("metrics on http://%s:%d/metrics", shown, server.bound_port)


def _tune_gc(_node: RunningNode) -> None:
    """``kraftnode start`` owns its process (an embedding application's collector is left
    alone): what is loaded by the time the node runs (modules, the replayed state) lives as
    long as the node, so it is frozen and the collector never walks it again; and a young
    generation of 20,000 objects instead of 700 runs the collector a few times a second
    under load instead of several times per request (the serving path allocates many
    short-lived objects and few cycles). A/B: p50 at 1 outstanding 0.96x, CPU per record
    0.92x (tools/bench/ab_quorum.sh, 5 rounds). The middle generation is collected after 100
    young collections, not 20: a controller growing the cluster keeps nearly every object it
    makes (partitions), and each older collection walked them all again -- three controllers
    growing 10k to 60k partitions spent 57-61 us of CPU per partition instead of 63-66
    (issue 39; docs/bench.md, "The controller at scale")."""
    gc.freeze()
    gc.set_threshold(20_000, 100, 20)


async def _graceful_shutdown(driver: RaftDriver) -> None:
    """A leader resigns first (EndQuorumEpoch) so a successor is elected at once."""
    if driver.is_leader:
        log.info("resigning leadership of epoch %d", driver.epoch)
        with anyio.move_on_after(2):  # bounded: a shutdown never waits on the network
            await driver.resign()
            await anyio.sleep(0.3)  # let the EndQuorumEpoch requests leave
    driver.stop()


def start(cfg: NodeConfig) -> None:
    """Run the node until SIGTERM/SIGINT; StartupError (one line for the CLI) when it cannot."""
    try:
        anyio.run(run_node, cfg, None, _tune_gc, backend="asyncio",
                  backend_options={"use_uvloop": _use_uvloop()})
    except BaseExceptionGroup as eg:
        # a task of the node's task group failed: report the environment's problem in one line
        first = _first_user_error(eg)
        if first is None:
            raise
        raise first from None
    except OSError as e:
        raise StartupError(f"node {cfg.node_id}: {os_error_text(e)}") from None


def _first_user_error(eg: BaseExceptionGroup[BaseException]) -> StartupError | None:
    for e in eg.exceptions:
        if isinstance(e, StartupError):
            return e
        if isinstance(e, ListenerError):
            return StartupError(str(e))
        if isinstance(e, OSError):
            return StartupError(os_error_text(e))
        if isinstance(e, BaseExceptionGroup):
            found = _first_user_error(e)
            if found is not None:
                return found
    return None


def _use_uvloop() -> bool:
    """uvloop when it is installed: its loop and transports cost a fraction of the
    pure-Python ones per wake-up, and a commit is a chain of wake-ups across three
    processes.  ``KRAFTNODE_UVLOOP=0`` runs the standard asyncio loop."""
    if os.environ.get("KRAFTNODE_UVLOOP", "1") == "0":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


__all__ = ["ConfigError", "NodeFailure", "RunningNode", "StartupError", "run_node", "start"]
