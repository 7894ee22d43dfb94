"""Broker sessions on the active controller (Kafka's BrokerHeartbeatManager).

Only the active controller keeps this: when a node becomes active every registered broker is
given a fresh session (as if it had just heartbeated), so a controller failover never fences a
broker that keeps heartbeating. A broker is *fenced* here when it has no session; an unfenced
broker whose last contact is older than ``broker.session.timeout.ms`` is stale and is fenced by
the periodic check (:meth:`find_one_stale_broker`). ``controlled_shutdown_offset`` is the end
offset of the batch that put a broker into controlled shutdown: it may shut down once every
active broker has replayed that far (``lowest_active_offset``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["BrokerControlState", "BrokerHeartbeatManager", "BrokerHeartbeatState"]


class BrokerControlState(Enum):
    """BrokerControlState: (fenced, in controlled shutdown, should shut down)."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, False, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def in_controlled_shutdown(self) -> bool:
        return self.value[1]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


@dataclass
class BrokerHeartbeatState:
    id: int
    last_contact_ms: int = 0
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1
    fenced: bool = True

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.brokers: dict[int, BrokerHeartbeatState] = {}

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and b.last_contact_ms + self.session_timeout_ms >= now_ms

    def register(self, broker_id: int, fenced: bool, now_ms: int) -> None:
        """A registration was replayed (new or changed): a fresh contact; the metadata offset
        survives only a change of fencing."""
        b = self.brokers.get(broker_id)
        offset = -1
        if b is None:
            b = self.brokers[broker_id] = BrokerHeartbeatState(broker_id)
        elif b.fenced != fenced:
            offset = b.metadata_offset
        self.touch(broker_id, fenced, offset, now_ms)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int, now_ms: int) -> None:
        b = self.brokers[broker_id]
        b.last_contact_ms = now_ms
        b.metadata_offset = metadata_offset
        b.fenced = fenced
        if fenced:
            b.controlled_shutdown_offset = -1  # a fenced broker leaves controlled shutdown

    def fence(self, broker_id: int) -> None:
        b = self.brokers.get(broker_id)
        if b is not None:
            b.fenced = True

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def maybe_update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        b = self.brokers[broker_id]
        if b.fenced:
            raise RuntimeError("Fenced brokers cannot enter controlled shutdown.")
        if b.controlled_shutdown_offset < 0:
            b.controlled_shutdown_offset = offset

    def lowest_active_offset(self) -> int | None:
        """The lowest metadata offset of the unfenced brokers not shutting down (None: none)."""
        offsets = [b.metadata_offset for b in self.brokers.values() if not b.fenced and not b.shutting_down]
        return min(offsets) if offsets else None

    def next_check_ms(self) -> int | None:
        """When the least recently heard-from unfenced broker's session expires (None: no
        unfenced broker)."""
        unfenced = [b.last_contact_ms for b in self.brokers.values() if not b.fenced]
        return min(unfenced) + self.session_timeout_ms if unfenced else None

    def find_one_stale_broker(self, now_ms: int) -> int | None:
        unfenced = [b for b in self.brokers.values() if not b.fenced]
        if not unfenced:
            return None
        oldest = min(unfenced, key=lambda b: (b.last_contact_ms, b.id))
        return None if self.has_valid_session(oldest.id, now_ms) else oldest.id

    def usable_brokers(self) -> list[tuple[int, bool]]:
        """(id, fenced) of every broker not in controlled shutdown, for replica placement."""
        return [(b.id, b.fenced) for b in self.brokers.values() if not b.shutting_down]

    def current_state(self, broker_id: int) -> BrokerControlState:
        b = self.brokers[broker_id]
        if b.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if b.fenced else BrokerControlState.UNFENCED

    def next_state(self, broker_id: int, want_fence: bool, want_shut_down: bool,
                   current_metadata_offset: int, register_offset: int,
                   has_leaderships: bool) -> tuple[BrokerControlState, BrokerControlState]:
        """BrokerHeartbeatManager.calculateNextBrokerState: (current, next)."""
        S = BrokerControlState
        cur = self.current_state(broker_id)
        b = self.brokers[broker_id]
        if cur is S.FENCED:
            if want_shut_down:
                return cur, S.SHUTDOWN_NOW
            if not want_fence and current_metadata_offset >= register_offset:
                return cur, S.UNFENCED
            return cur, S.FENCED
        if cur is S.UNFENCED:
            if want_fence:
                return cur, S.SHUTDOWN_NOW if want_shut_down else S.FENCED
            if want_shut_down:
                return cur, S.CONTROLLED_SHUTDOWN if has_leaderships else S.SHUTDOWN_NOW
            return cur, S.UNFENCED
        # controlled shutdown
        if has_leaderships:
            return cur, S.CONTROLLED_SHUTDOWN
        lowest = self.lowest_active_offset()
        if lowest is None or b.controlled_shutdown_offset <= lowest:
            return cur, S.SHUTDOWN_NOW
        return cur, S.CONTROLLED_SHUTDOWN
