"""The Raft consensus core (KIP-595 with KIP-853's voter model).

Deterministic and I/O-free: :class:`~kraftnode.raft.raft_node.RaftNode` consumes
events (time, messages, appends) and emits :mod:`~kraftnode.raft.actions` that a
driver (the server, or the simulator in ``tests/simulation``) executes in order.
See ``docs/raft.md`` for the driver contract.
"""

from kraftnode.raft.actions import (
    Action,
    AppendCompleted,
    FatalError,
    FlushLog,
    HighWatermarkAdvanced,
    PersistElectionState,
    SendRequest,
    SendResponse,
    StateChanged,
)
from kraftnode.raft.batches import (
    Batch,
    KRaftVersionControlRecord,
    LeaderChangeRecord,
    VotersControlRecord,
)
from kraftnode.raft.election import ElectionState
from kraftnode.raft.log import MemoryRaftLog, OffsetAndEpoch, RaftLog
from kraftnode.raft.quorum_config import RaftConfig
from kraftnode.raft.raft_node import RaftNode
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet

__all__ = [
    "Action", "AppendCompleted", "Batch", "ElectionState", "Endpoint", "FatalError",
    "FlushLog", "HighWatermarkAdvanced", "KRaftVersionControlRecord", "LeaderChangeRecord", "MemoryRaftLog",
    "OffsetAndEpoch", "PersistElectionState", "RaftConfig", "RaftLog", "RaftNode",
    "ReplicaKey", "SendRequest", "SendResponse", "StateChanged", "VoterNode", "VoterSet", "VotersControlRecord",
]
