"""Building controller states for the managers' unit tests: a view replayed from records, a
QuorumController over it, and requests as brokers and admin clients send them."""

from __future__ import annotations

import random
import uuid
from typing import Any

from kraftnode.controller import (
    ControllerConfig,
    ControllerResult,
    ControllerView,
    QuorumController,
)
from kraftnode.protocol import generated as w
from kraftnode.protocol.generated.metadata import FeatureLevelRecord

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
#: Kafka 4.4's metadata.version (kafka-storage.sh version-mapping --release-version 4.4); ELR from 23 (4.0-IV1)
MV_4_4 = 33


def dir_of(broker: int) -> uuid.UUID:
    return uuid.UUID(int=(broker << 64) | 7)


def incarnation(broker: int, n: int = 1) -> uuid.UUID:
    return uuid.UUID(int=(broker << 64) | (1000 + n))


class Harness:
    """A controller over a view, with every result appended and replayed at the next offsets,
    as the shell does."""

    def __init__(self, mv: int = 21, now: int = 1_000_000, seed: int = 7, **config: Any) -> None:
        self.view = ControllerView()
        self.offset = 0
        self.apply([(FeatureLevelRecord(name="metadata.version", feature_level=mv), 0)])
        self.now = now
        ids = iter(range(1, 1 << 30))
        self.ctl = QuorumController(ControllerConfig(cluster_id=CLUSTER, node_id=1, **config), self.view, now,
                                    random.Random(seed), lambda: uuid.UUID(int=(next(ids) << 64) | 0xAB),
                                    lambda _m: None)

    def apply(self, records: list[tuple[Any, int]]) -> None:
        for m, v in records:
            self.view.replay(m, v, self.offset)
            self.offset += 1

    def commit(self, result: ControllerResult[Any]) -> Any:
        """Append (replay) the result's records as the shell does; its answer."""
        self.apply(result.records)
        if result.on_offset is not None:
            result.on_offset(self.offset - 1)
        self.ctl.after_write(self.now)
        return result.response

    # ------------------------------------------------------------------ brokers
    def registration(self, broker: int, n: int = 1, rack: str | None = None,
                     mv_range: tuple[int, int] | None = None) -> w.BrokerRegistrationRequest:
        R = w.BrokerRegistrationRequest
        if mv_range is None:  # a broker that supports the finalized level (3.9's range at least)
            mv_range = (1, max(21, self.view.mv.level))
        return R(broker_id=broker, cluster_id=CLUSTER, incarnation_id=incarnation(broker, n),
                 listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker, security_protocol=0)],
                 features=[R.Feature(name="metadata.version", min_supported_version=mv_range[0],
                                     max_supported_version=mv_range[1]),
                           R.Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)],
                 rack=rack, is_migrating_zk_broker=False, log_dirs=[dir_of(broker)], previous_broker_epoch=-1)

    def register(self, broker: int, n: int = 1, rack: str | None = None) -> int:
        r = self.ctl.register_broker(self.registration(broker, n, rack), self.offset, 0, self.now)
        return int(self.commit(r))

    def heartbeat(self, broker: int, *, offset: int | None = None, want_fence: bool = False,
                  want_shut_down: bool = False) -> ControllerResult[Any]:
        reg = self.view.broker(broker)
        assert reg is not None
        q = w.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=reg.broker_epoch,
                                     current_metadata_offset=self.offset if offset is None else offset,
                                     want_fence=want_fence, want_shut_down=want_shut_down, offline_log_dirs=[])
        return self.ctl.broker_heartbeat(q, self.now)

    def active_brokers(self, *brokers: int, rack: dict[int, str] | None = None) -> None:
        """Register and unfence brokers."""
        for b in brokers:
            self.register(b, rack=(rack or {}).get(b))
        for b in brokers:
            self.commit(self.heartbeat(b))
            assert not self.view.broker(b).fenced  # type: ignore[union-attr]

    # ------------------------------------------------------------------ topics
    def create_topic(self, name: str, partitions: int = -1, rf: int = -1,
                     assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> Any:
        C = w.CreateTopicsRequest
        t = C.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf,
                             assignments=[C.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                                          for p, b in (assignments or {}).items()],
                             configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        q = C(topics=[t], timeout_ms=30000, validate_only=validate_only)
        result = self.ctl.create_topics(q, {name}, self.now)
        return result

    def topic(self, name: str) -> uuid.UUID:
        tid = self.view.topic_id(name)
        assert tid is not None
        return tid


class ElrHarness(Harness):
    """A controller at a 4.x metadata.version with eligible.leader.replicas.version finalized."""

    def __init__(self, elr_level: int = 1, mv: int = MV_4_4) -> None:
        super().__init__(mv=mv)
        self.apply([(FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=elr_level), 0)])

    def registration(self, broker: int, n: int = 1, rack: str | None = None,
                     mv_range: tuple[int, int] = (1, MV_4_4), previous_epoch: int = -1
                     ) -> w.BrokerRegistrationRequest:
        q = super().registration(broker, n, rack, mv_range)
        q.features.append(type(q.features[0])(name="eligible.leader.replicas.version", min_supported_version=0,
                                              max_supported_version=1))
        q.previous_broker_epoch = previous_epoch
        return q

    def restart(self, broker: int, n: int, clean: bool) -> None:
        """A new incarnation registers (BrokerRegistration v3+: PreviousBrokerEpoch is read)."""
        reg = self.view.broker(broker)
        assert reg is not None
        self.now += 60_000  # the old incarnation's session has expired
        q = self.registration(broker, n, previous_epoch=reg.broker_epoch if clean else -1)
        self.commit(self.ctl.register_broker(q, self.offset, 0, self.now, True))

    def state(self, name: str, pid: int = 0) -> tuple[list[int], list[int], list[int], int]:
        p = self.view.partition(self.topic(name), pid)
        assert p is not None
        return list(p.isr), list(p.eligible_leader_replicas or []), list(p.last_known_elr or []), p.leader
