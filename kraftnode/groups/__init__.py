"""The group coordinator (consumer groups and their committed offsets), sans-IO.

Kafka 3.9's group coordinator rules -- the classic protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, static membership, rebalance and session timeouts,
``group.initial.rebalance.delay.ms``), KIP-848 consumer groups (ConsumerGroupHeartbeat,
ConsumerGroupDescribe, the ``uniform`` and ``range`` server assignors) and offsets
(OffsetCommit with generation/member checks, OffsetFetch, OffsetDelete, DeleteGroups) --
as a deterministic state machine: time is an argument, member ids are made by the
caller, and every operation returns the records to append to the raft log and the
answers to give once they are committed (:class:`coordinator.Result`).  The records are
Kafka's ``__consumer_offsets`` keys and values behind a reserved key prefix
(:mod:`records`), so the node's state machine compacts them and its snapshots carry them.

The I/O shell (handlers and timers on the raft leader) is in
``kraftnode.server.handlers.group_service``; nothing here imports the server.
"""

from kraftnode.groups.config import GroupConfig
from kraftnode.groups.coordinator import GroupCoordinator, Result
from kraftnode.groups.records import RECORD_KEY_PREFIX

__all__ = ["GroupConfig", "GroupCoordinator", "RECORD_KEY_PREFIX", "Result"]
