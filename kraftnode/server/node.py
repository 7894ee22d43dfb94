"""A running node: the on-disk log, the Raft core and its driver, and the listeners.

``kraftnode start server.properties`` runs :func:`run_node`.  The metadata log dir
must have been formatted (``kraftnode format``), as Kafka requires: that is where
the cluster id and this node's directory id come from.
"""

from __future__ import annotations

import logging
import os
import random
import signal
from pathlib import Path

import anyio

from kraftnode.config import ConfigError
from kraftnode.log.meta_properties import MetaPropertiesError, read_meta_properties
from kraftnode.log.metadata_log import METADATA_PARTITION_DIR, LogError, MetadataLog
from kraftnode.log.quorum_state import QuorumStateError, QuorumStateStore
from kraftnode.raft.config import RaftConfig
from kraftnode.raft.node import RaftNode
from kraftnode.raft.voters import Endpoint, VoterSet
from kraftnode.server import api_versions
from kraftnode.server import raft_wire as rw
from kraftnode.server.controller_duties import ControllerDuties
from kraftnode.server.handlers import NodeHandlers, NodeIdentity
from kraftnode.server.network import KafkaListener, ServerLimits
from kraftnode.server.node_config import NodeConfig
from kraftnode.server.peer_client import PeerPool
from kraftnode.server.raft_driver import RaftDriver, now_ms, quorum_state_to_election
from kraftnode.server.raft_log import DiskRaftLog, DiskSnapshotStore
from kraftnode.server.security import hooks as security_hooks
from kraftnode.server.security.listeners import OnListener

log = logging.getLogger("kraftnode.node")


class StartupError(Exception):
    """The node cannot start; the message says why (printed as one line, exit 2)."""


def open_storage(cfg: NodeConfig) -> tuple[str, object, MetadataLog, QuorumStateStore]:
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
    except (LogError, OSError) as e:
        raise StartupError(f"cannot open the metadata log in {root}: {e}") from None
    store = QuorumStateStore(root / METADATA_PARTITION_DIR)
    return meta.cluster_id, meta.directory_id, mlog, store


async def run_node(cfg: NodeConfig) -> None:
    cluster_id, directory_id, mlog, store = open_storage(cfg)
    try:
        try:
            election = quorum_state_to_election(store.read())
        except QuorumStateError as e:
            raise StartupError(str(e)) from None
        rlog = DiskRaftLog(mlog, mlog.dir)
        # Kafka's standalone raft server (TestRaftServer) runs its quorum on its own topic
        # with the all-zero cluster id; a kraftnode joining such a quorum must do the same
        topic = cfg.raft_topic or ("__raft_performance_test"
                                   if cluster_id == rw.TEST_RAFT_SERVER_CLUSTER_ID else "__cluster_metadata")
        rw.use_topic(topic)
        if topic == "__raft_performance_test" and cluster_id != rw.TEST_RAFT_SERVER_CLUSTER_ID:
            # TestRaftServer always runs with Uuid.ZERO_UUID as its cluster id and answers
            # INCONSISTENT_CLUSTER_ID to any other, so this node could not share its quorum
            log.warning("kraftnode.raft.topic=__raft_performance_test but the cluster id is %s: "
                        "Kafka's TestRaftServer uses cluster id %s and will refuse this node's "
                        "requests (format with --cluster-id %s to join it)", cluster_id,
                        rw.TEST_RAFT_SERVER_CLUSTER_ID, rw.TEST_RAFT_SERVER_CLUSTER_ID)
        controller = topic == "__cluster_metadata"
        listener = cfg.controller_listener
        # every controller listener as advertised, the default one first (NodeConfig)
        endpoints = cfg.controller_endpoints or ((listener, cfg.advertised_host, cfg.advertised_port),)
        static = VoterSet.static({v.node_id: [Endpoint(listener, v.host, v.port)]
                                  for v in cfg.static_voters}) if cfg.static_voters else VoterSet.of([])
        kraft_version = 0 if cfg.static_voters else 1
        raft_cfg = RaftConfig(
            cluster_id=cluster_id, election_timeout_ms=cfg.election_timeout_ms,
            election_backoff_max_ms=cfg.election_backoff_max_ms, fetch_timeout_ms=cfg.fetch_timeout_ms,
            request_timeout_ms=cfg.request_timeout_ms, retry_backoff_ms=cfg.retry_backoff_ms,
            listener_name=listener)
        node = RaftNode(
            cfg.node_id, directory_id, raft_cfg, rlog, election,  # type: ignore[arg-type]
            static, random.Random(), now_ms(),
            local_endpoints=tuple(Endpoint(*e) for e in endpoints),
            bootstrap_servers=[-1 - i for i in range(len(cfg.bootstrap_servers))],
            snapshots=DiskSnapshotStore(rlog))
        async with anyio.create_task_group() as tg:
            ctrl_sec = cfg.security.get(listener)
            pool = PeerPool(tg, f"raft-client-{cfg.node_id}", cfg.request_timeout_ms / 1000,
                            cfg.retry_backoff_ms / 1000, max(cfg.retry_backoff_ms, 1000) / 1000,
                            ssl=ctrl_sec.client_ssl_context if ctrl_sec else None,
                            sasl_login=ctrl_sec.client_login if ctrl_sec else None)
            driver = RaftDriver(node, rlog, store, pool,
                                {v.node_id: (v.host, v.port) for v in cfg.static_voters},
                                cfg.bootstrap_servers, kraft_version, cfg.request_timeout_ms / 1000)
            features = api_versions.FeatureView()
            # controller duties only in a KRaft controller quorum: a TestRaftServer quorum
            # carries opaque bytes, and its Java nodes serve no controller APIs
            duties = ControllerDuties(driver, cfg.node_id, cfg.metadata_log_dir,
                                      endpoints,
                                      dict(features.supported),
                                      {n: int(sec.protocol) for n, sec in cfg.security.items()}
                                      ) if controller else None
            handlers = NodeHandlers(NodeIdentity(cfg.node_id, cluster_id, listener), driver,
                                    features, duties)
            limits = ServerLimits(cfg.socket_request_max_bytes, cfg.connections_max_idle_ms / 1000)
            for lst in cfg.listeners:
                host = lst.host or "0.0.0.0"
                sec = cfg.security.get(lst.name)
                on_listener = OnListener(handlers, lst.name) if len(cfg.listeners) > 1 else handlers
                port = await tg.start(KafkaListener(host, lst.port, on_listener, limits,
                                                    sec.ssl_context if sec else None,
                                                    security_hooks.authenticator(sec, duties)).serve)
                print(f"node {cfg.node_id} listening on {lst.name}://{host}:{port}", flush=True)
            tg.start_soon(driver.run, tg)
            if duties is not None:
                tg.start_soon(duties.run)
            log.info("node %d started: cluster %s, %s quorum on %s, log end offset %d", cfg.node_id,
                     cluster_id, "static" if kraft_version == 0 else "dynamic", topic, rlog.end_offset)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async def watch_fatal() -> None:
                    while driver.fatal is None:
                        await anyio.sleep(0.2)
                    tg.cancel_scope.cancel()

                tg.start_soon(watch_fatal)
                async for sig in signals:
                    log.info("received %s: shutting down", signal.Signals(sig).name)
                    await _graceful_shutdown(driver)
                    tg.cancel_scope.cancel()
                    break
    finally:
        mlog.close()


async def _graceful_shutdown(driver: RaftDriver) -> None:
    """A leader resigns first (EndQuorumEpoch) so a successor is elected at once."""
    if driver.node.is_leader:
        log.info("resigning leadership of epoch %d", driver.node.epoch)
        await driver.resign()
        with anyio.move_on_after(0.5):
            await anyio.sleep(0.3)  # let the EndQuorumEpoch requests leave
    driver.stop()


def start(cfg: NodeConfig) -> None:
    anyio.run(run_node, cfg, backend="asyncio",
              backend_options={"use_uvloop": _use_uvloop()})


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


__all__ = ["ConfigError", "StartupError", "run_node", "start"]
