"""What a KRaft controller does on top of Raft, so Kafka 3.9 controllers can share the quorum.

A Kafka controller that follows a kraftnode leader replays every committed record
of ``__cluster_metadata``; one that takes over leadership expects the log to have
been initialised by an earlier active controller.  So a kraftnode node does the
controller duties Kafka's ``QuorumController`` and ``ControllerRegistrationManager``
do:

* **replay** -- follow the high watermark into :class:`MetadataState`;
* **activation** -- a new leader that has committed its epoch's first record and
  replayed everything before it writes, if no metadata record was ever written, the
  bootstrap records from ``bootstrap.checkpoint`` inside a metadata transaction
  (``BeginTransactionRecord``, the ``FeatureLevelRecord`` s, ``ZkMigrationStateRecord``
  NONE, ``EndTransactionRecord``), exactly as Kafka's ``ActivationRecordsGenerator``
  does for an empty log; an unfinished transaction left by a failed leader is
  aborted first;
* **registration** (KIP-919) -- once ``metadata.version`` >= 3.7-IV0 is committed,
  each node registers itself with the active controller (ControllerRegistration,
  API 70), which writes a ``RegisterControllerRecord``; the active controller, kraftnode
  or Kafka, answers the others' registrations.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from kraftnode.log.bootstrap import (
    check_bootstrap_metadata_version,
    read_bootstrap_records,
)
from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.log.snapshot import (
    SnapshotError,
    SnapshotId,
    read_snapshot_batches,
    snapshot_file_name,
)
from kraftnode.metadata.state import (
    METADATA_VERSION_CONTROLLER_REGISTRATION,
    MetadataFault,
    MetadataState,
)
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    RegisterControllerRecord,
    ZkMigrationStateRecord,
)
from kraftnode.protocol.registry import CONTROLLER_REGISTRATION
from kraftnode.server.controller_io.snapshot_manager import SnapshotManager
from kraftnode.server.net.api_versions import java_feature_order, version_range
from kraftnode.server.net.peer_client import PeerError
from kraftnode.server.raft_io.driver import RaftDriver
from recordbatch import CorruptBatchError
from recordbatch.wire import uuid_to_base64

log = logging.getLogger("kraftnode.controller")

__all__ = ["ControllerDuties", "activation_records", "check_bootstrap_records", "controller_registration_record",
           "read_bootstrap_records", "voter_address"]

# MetadataVersion 3.6-IV1: the first with KIP-868 metadata transactions.
METADATA_VERSION_TRANSACTIONS = 13
METADATA_VERSION_4_0 = 22  # 4.0-IV0: Kafka 4.x's activation records
ZK_MIGRATION_NONE = 0
PLAINTEXT = 0
# The ids Kafka's SecurityProtocol.forId knows.
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
# How many batches one replay pass handles before letting other tasks run.
REPLAY_BATCHES_PER_PASS = 2000
# Kafka's ControllerRegistrationManager backoff: 100 ms doubling to 120 s.
REGISTRATION_BACKOFF_MS = (100, 120_000)


def _metadata_version_of(values: Sequence[bytes]) -> int:
    """The last metadata.version FeatureLevelRecord wins, as in ``BootstrapMetadata.fromRecords``."""
    mv = 1  # MINIMUM_KRAFT_VERSION
    for v in values:
        m, _ = decode_metadata_record(v)
        if isinstance(m, FeatureLevelRecord) and m.name == "metadata.version":
            mv = int(m.feature_level)
    return mv


def check_bootstrap_records(values: Sequence[bytes], source: str,
                            supported: dict[str, tuple[int, int]]) -> None:
    """Refuse bootstrap records a Kafka 4.4 controller would refuse; ValueError says why.

    Kafka's ``BootstrapMetadata.fromRecords`` requires a metadata.version record and its
    constructor refuses levels before 3.3-IV0 (the controller does not start).  Every
    record is then replayed by ``FeatureControlManager.replay``, which throws -- a fatal
    fault that stops the controller -- for a FeatureLevelRecord outside the levels the
    controller supports (an unknown feature only at level 0).  A Kafka 4.4 controller
    supports exactly what we register (metadata.version 7-33, kraftnode.features), so
    writing such a record would stop every Kafka controller of the quorum.
    """
    mv: int | None = None
    for v in values:
        m, _ = decode_metadata_record(v)
        if not isinstance(m, FeatureLevelRecord):
            continue
        lo, hi = supported.get(m.name, (0, 0))
        if not lo <= m.feature_level <= hi:
            raise ValueError(
                f"Tried to apply FeatureLevelRecord(name='{m.name}', featureLevel={m.feature_level}) "
                f"from {source}, but this controller only supports versions {version_range(lo, hi)}")
        if m.name == "metadata.version":
            mv = int(m.feature_level)
    if mv is None:
        raise ValueError(f"No FeatureLevelRecord for metadata.version was found in the bootstrap "
                         f"metadata from {source}")
    check_bootstrap_metadata_version(mv, source)


def controller_registration_record(q: w.ControllerRegistrationRequest) -> RegisterControllerRecord:
    """The record ``ClusterControlManager.registerController`` writes for ``q``.

    Listeners go through ``ListenerInfo.fromControllerRegistrationRequest``: an unknown
    security protocol is refused (ValueError), because every Kafka controller replaying
    the record would fail in ``ControllerRegistration.Builder``; a repeated listener name
    keeps its first position and its last value (a LinkedHashMap).
    """
    C = RegisterControllerRecord
    endpoints: dict[str, Any] = {}
    for x in q.listeners:
        if x.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"Unknown security protocol {x.security_protocol} in listener {x.name}")
        endpoints[x.name] = C.ControllerEndpoint(name=x.name, host=x.host, port=x.port,
                                                 security_protocol=x.security_protocol)
    return C(controller_id=q.controller_id, incarnation_id=q.incarnation_id,
             zk_migration_ready=q.zk_migration_ready, end_points=list(endpoints.values()),
             features=[C.ControllerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                           max_supported_version=f.max_supported_version)
                       for f in q.features])


def _framed(*messages: Any) -> list[bytes]:
    return [encode_metadata_record(m, 0) for m in messages]


def _feature_level_of(values: Sequence[bytes], name: str) -> int:
    for v in values:
        m, _ = decode_metadata_record(v)
        if isinstance(m, FeatureLevelRecord) and m.name == name:
            return int(m.feature_level)
    return 0


def activation_records(state: MetadataState, bootstrap: Sequence[bytes],
                       default_min_isr: int = 1) -> tuple[list[bytes], str]:
    """Kafka's ActivationRecordsGenerator: what a new active controller appends first.

    At a 3.x metadata.version as Kafka 3.9 writes it (ZkMigrationStateRecord NONE before the
    EndTransaction, which a 3.9 controller of the same quorum writes too); at 4.0-IV0 and later as
    Kafka 4.4 does: no ZkMigrationStateRecord (4.x has no ZooKeeper migration) and, when the
    bootstrap enables eligible.leader.replicas.version, the cluster-level ``min.insync.replicas``
    ConfigRecord (the controller's ``min.insync.replicas``, ``default_min_isr``)."""
    abort = _framed(AbortTransactionRecord(reason="Controller failover")) if state.transaction_start >= 0 else []
    if not state.empty:
        what = f"aborting in-progress metadata transaction at offset {state.transaction_start}"
        return abort, what if abort else ""
    mv = _metadata_version_of(bootstrap)
    if abort:
        what = (f"aborting partial bootstrap transaction at offset {state.transaction_start}; "
                f"re-appending {len(bootstrap)} bootstrap record(s)")
    else:
        what = f"the metadata log is empty: appending {len(bootstrap)} bootstrap record(s)"
    what += f" at metadata.version level {mv}"
    if mv < METADATA_VERSION_TRANSACTIONS:
        return abort + list(bootstrap), what
    if mv < METADATA_VERSION_4_0:
        return (abort + _framed(BeginTransactionRecord(name="Bootstrap records")) + list(bootstrap)
                + _framed(ZkMigrationStateRecord(zk_migration_state=ZK_MIGRATION_NONE), EndTransactionRecord()),
                what)
    elr: list[bytes] = []
    if _feature_level_of(bootstrap, "eligible.leader.replicas.version") > 0:
        elr = _framed(ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas",
                                   value=str(default_min_isr)))
    return (abort + _framed(BeginTransactionRecord(name="Bootstrap records")) + list(bootstrap) + elr
            + _framed(EndTransactionRecord()), what)


def voter_address(driver: RaftDriver, node_id: int, listener: str) -> tuple[str, int] | None:
    """A voter's endpoint on ``listener`` (else its first one, else its configured address)."""
    node = driver.voters.node(node_id)
    if node is not None:
        ep = node.endpoint(listener) or node.endpoint()
        if ep is not None:
            return ep.host, ep.port
    return driver.addresses.get(node_id)


class ControllerDuties:
    """Replay, activation and registration for one node (runs as one task)."""

    def __init__(self, driver: RaftDriver, node_id: int, metadata_dir: str | Path,
                 listeners: Sequence[tuple[str, str, int]],
                 supported_features: dict[str, tuple[int, int]],
                 snapshots: SnapshotManager | None = None,
                 security_protocols: dict[str, int] | None = None) -> None:
        """``listeners``: every controller listener as advertised, (name, host, port), the
        default one (the one raft requests use) first.  ``snapshots``: the node's state
        machine follower, whose state (a :class:`MetadataState`) these duties read.
        ``security_protocols``: listener name -> Kafka's SecurityProtocol id (PLAINTEXT when
        absent)."""
        if not listeners:
            raise ValueError("a controller needs at least one controller listener")
        self.driver = driver
        self.node_id = node_id
        self.metadata_dir = Path(metadata_dir)
        self.listeners = tuple(listeners)
        self.listener = self.listeners[0]
        self.supported_features = supported_features
        self.security_protocols = dict(security_protocols or {})
        self.incarnation_id = uuid.uuid4()
        #: the controller's min.insync.replicas (Kafka's defaultMinIsr), for the ELR bootstrap
        self.default_min_isr = 1
        self.snapshots = snapshots
        if snapshots is not None:
            assert isinstance(snapshots.runner.sm, MetadataState)
            self.state = snapshots.runner.sm
        else:
            self.state = MetadataState()
        self.active_epoch: int | None = None
        self._failed_registrations = 0
        self._next_registration = 0.0
        self._stopped = False
        #: kraftnode.application.records.enable: without it, replaying a record that is not a
        #: KRaft metadata record stops the node (poisoned_log_error)
        self.application_records = False

    # ---------------------------------------------------------------- queries
    @property
    def is_active(self) -> bool:
        """Leader, caught up, and activation records appended for this epoch."""
        return self.driver.is_leader and self.active_epoch == self.driver.leader_and_epoch()[1]

    # ---------------------------------------------------------------- loop
    def _urgent(self) -> bool:
        """Activation or registration is pending: follow every commit.  Otherwise the
        replay may lag by up to a second, which keeps this task off the commit path."""
        if self.driver.is_leader and self.active_epoch != self.driver.leader_and_epoch()[1]:
            return True
        mv = self.state.metadata_version
        return mv is None or (mv >= METADATA_VERSION_CONTROLLER_REGISTRATION and not self.registered())

    async def run(self) -> None:
        while not self._stopped:
            hw_event = self.driver.hw_changed
            state_event = self.driver.state_changed
            try:
                more = self.catch_up()
                poisoned = self.poisoned_log_error()
                if poisoned is not None:
                    # as Kafka's controller faults on a record it cannot replay: the node stops
                    self.driver.fatal = poisoned
                    log.error("fatal: %s; stopping", poisoned)
                    return
                self.maybe_activate()
                await self.maybe_register()
            except MetadataFault as e:  # Kafka's controller stops on it: so does this node
                self.driver.fail(str(e))
                return
            except ValueError as e:
                log.error("cannot replay the metadata log: %s; controller duties stop", e)
                return
            if more:
                await anyio.sleep(0)
            elif self._urgent():
                with anyio.move_on_after(0.25):
                    await hw_event.wait()
            else:
                # A new term wakes the loop at once: a newly elected leader activates (and answers
                # its first write) without waiting out this second -- failover is the fetch timeout
                # and the election, not a poll interval more.
                with anyio.move_on_after(1.0):
                    await state_event.wait()

    def stop(self) -> None:
        self._stopped = True

    def poisoned_log_error(self) -> str | None:
        """Without kraftnode.application.records.enable, the one line that stops a node whose
        replayed log (or snapshot) holds records that are not KRaft metadata records."""
        foreign = self.state.foreign_records
        if self.application_records or not foreign:
            return None
        return (f"the metadata log holds {foreign} application record(s) (not KRaft metadata records, which "
                f"no Kafka broker or controller can replay) and kraftnode.application.records.enable is false: "
                f"set it to true to run this log as an application log (no broker can then register), or "
                f"format a new quorum for brokers (docs/server.md)")

    def catch_up(self) -> bool:
        """Replay committed batches; True if more remain than one pass handles."""
        hw = self.driver.high_watermark
        if self.snapshots is not None:
            return self.snapshots.catch_up(hw, REPLAY_BATCHES_PER_PASS)
        mlog = self.driver.metadata_log
        st = self.state
        if hw <= st.next_offset:
            return False
        if st.next_offset < mlog.start_offset:
            self._reset_from_snapshot()
        end = st.next_offset
        batches = []
        for b in mlog.batches(st.next_offset, hw):
            batches.append(b)
            end = b.last_offset + 1
            if len(batches) >= REPLAY_BATCHES_PER_PASS:
                break
        if not batches:
            return False
        st.replay_batches(batches, min(end, hw))
        return st.next_offset < hw

    def _reset_from_snapshot(self) -> None:
        sid = self.driver.log.latest_snapshot_id()
        if sid is None:
            return
        path = self.driver.log.partition_dir / snapshot_file_name(SnapshotId(sid.offset, sid.epoch))
        try:
            self.state.reset_to_snapshot(read_snapshot_batches(path), sid.offset)
        except (SnapshotError, CorruptBatchError) as e:
            raise ValueError(f"snapshot {path.name}: {e}") from None
        log.info("metadata state loaded from snapshot %s", path.name)

    def maybe_activate(self) -> None:
        epoch_start = self.driver.epoch_start_offset()
        if epoch_start is None:   # not the leader
            self.active_epoch = None
            return
        epoch = self.driver.epoch
        if self.active_epoch == epoch:
            return
        hw = self.driver.high_watermark
        if hw <= epoch_start or self.state.next_offset < hw:
            return  # not yet caught up with everything before this epoch
        records: list[bytes] = []
        what = ""
        try:
            if self.state.empty or self.state.transaction_start >= 0:
                bootstrap, source = read_bootstrap_records(self.metadata_dir)
                if self.state.empty:  # the bootstrap records are written: Kafka would replay them
                    check_bootstrap_records(bootstrap, source, self.supported_features)
                records, what = activation_records(self.state, bootstrap, self.default_min_isr)
                what += f" from {source}"
        except ValueError as e:
            log.error("controller activation in epoch %d failed: %s", epoch, e)
            self.active_epoch = epoch
            return
        self.active_epoch = epoch
        if records:
            self.driver.append_nowait(records)
            log.info("controller activation in epoch %d: %s", epoch, what)
        else:
            log.info("controller activation in epoch %d: metadata.version level %s", epoch,
                     self.state.metadata_version)

    # ---------------------------------------------------------------- registration (KIP-919)
    def registration_request(self) -> w.ControllerRegistrationRequest:
        """Every controller listener, as Kafka's ControllerRegistrationManager registers
        them (``KafkaConfig.effectiveAdvertisedControllerListeners``): DescribeCluster on a
        Kafka controller lists a registered controller only on a listener it registered."""
        R = w.ControllerRegistrationRequest
        return R(controller_id=self.node_id, incarnation_id=self.incarnation_id, zk_migration_ready=False,
                 listeners=[R.Listener(name=name, host=host, port=port,
                                               security_protocol=self.security_protocols.get(name, PLAINTEXT))
                            for name, host, port in self.listeners],
                 features=[R.Feature(name=f, min_supported_version=lo, max_supported_version=hi)
                           for f, (lo, hi) in ((n, self.supported_features[n]) for n in
                                               java_feature_order(sorted(self.supported_features)))])

    def registered(self) -> bool:
        reg = self.state.controllers.get(self.node_id)
        return reg is not None and reg.incarnation_id == self.incarnation_id

    async def maybe_register(self) -> None:
        mv = self.state.metadata_version
        if mv is None or mv < METADATA_VERSION_CONTROLLER_REGISTRATION or self.registered():
            return
        if time.monotonic() < self._next_registration:
            return
        leader, _ = self.driver.leader_and_epoch()
        if leader < 0:
            return
        req = self.registration_request()
        error: str | None = None
        if leader == self.node_id:
            if not self.is_active:
                return
            resp = await self.register(req)
            if resp.error_code:
                error = f"{Errors(resp.error_code).name}: {resp.error_message}"
        else:
            addr = voter_address(self.driver, leader, self.listener[0])
            if addr is None:
                error = f"no address for the active controller {leader}"
            else:
                try:
                    _, answer = await self.driver.pool.request(
                        ("register", leader), addr[0], addr[1], CONTROLLER_REGISTRATION,
                        lambda _v: req, self.driver.request_timeout_s)
                    code = getattr(answer, "error_code", Errors.UNKNOWN_SERVER_ERROR)
                    if code:
                        error = f"{Errors(code).name}: {getattr(answer, 'error_message', None)}"
                except PeerError as e:
                    error = str(e)
        if error is None:
            log.info("controller %d (incarnation %s) registered with the active controller %d",
                     self.node_id, uuid_to_base64(self.incarnation_id), leader)
            self._failed_registrations = 0
            self._next_registration = time.monotonic() + 5.0  # until the record is replayed
        else:
            lo, hi = REGISTRATION_BACKOFF_MS
            delay = min(hi, lo * (2 ** min(self._failed_registrations, 20))) / 1000
            self._failed_registrations += 1
            self._next_registration = time.monotonic() + delay
            log.info("controller registration with %d failed (%s); retrying in %.1f s", leader, error, delay)

    async def register(self, q: w.ControllerRegistrationRequest) -> w.ControllerRegistrationResponse:
        """The active controller's side: write a RegisterControllerRecord, answer once committed."""
        R = w.ControllerRegistrationResponse
        if not self.is_active:
            return R(throttle_time_ms=0, error_code=Errors.NOT_CONTROLLER,
                     error_message="this node is not the active controller")
        mv = self.state.metadata_version or 1
        if mv < METADATA_VERSION_CONTROLLER_REGISTRATION:
            return R(throttle_time_ms=0, error_code=Errors.UNSUPPORTED_VERSION,
                     error_message="The current MetadataVersion is too old to support controller registrations.")
        try:
            rec = controller_registration_record(q)
        except ValueError as e:
            # Kafka fails the write operation (UNKNOWN_SERVER_ERROR or NOT_CONTROLLER, the
            # registrant retries either way); what matters is that no record is written.
            return R(throttle_time_ms=0, error_code=Errors.UNKNOWN_SERVER_ERROR, error_message=str(e))
        _, waiter = self.driver.append_nowait([encode_metadata_record(rec, 0)])
        with anyio.move_on_after(self.driver.request_timeout_s):
            await waiter.done.wait()
        done = waiter.value
        if done is None:
            return R(throttle_time_ms=0, error_code=Errors.REQUEST_TIMED_OUT,
                     error_message="the registration did not commit in time")
        if done.error_code:
            code = Errors.NOT_CONTROLLER if done.error_code == Errors.NOT_LEADER_OR_FOLLOWER else done.error_code
            return R(throttle_time_ms=0, error_code=code, error_message=None)
        log.info("registered controller %d (incarnation %s) at offset %d", q.controller_id,
                 uuid_to_base64(q.incarnation_id), done.last_offset)
        return R(throttle_time_ms=0, error_code=0, error_message=None)
