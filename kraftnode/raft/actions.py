"""Actions the core asks its driver to perform.

The driver executes the actions returned by :meth:`RaftNode.take_actions` in
order. ``PersistElectionState`` and ``FlushLog`` are *barriers*: they must be
durable before any later action (from this or a later drain) is executed,
because the core places them before the sends and notifications that depend on
them (a granted vote, an acknowledged fetch offset, a commit).
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.raft.election import ElectionState
from kraftnode.raft.messages import Request, Response
from kraftnode.raft.voters import Endpoint


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send ``request`` to node ``destination`` and report the answer with ``correlation_id``.

    ``destination`` is a replica id; negative ids name bootstrap servers
    (-1 - index into the configured bootstrap list). ``endpoints`` are the
    destination's endpoints as known to the core (may be empty for bootstrap servers).
    """

    destination: int
    correlation_id: int
    request: Request
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class SendResponse:
    """Answer the inbound request the driver registered as ``request_id``."""

    request_id: int
    response: Response


@dataclass(frozen=True, slots=True)
class PersistElectionState:
    """Barrier: durably write the quorum-state file with this value."""

    state: ElectionState


@dataclass(frozen=True, slots=True)
class FlushLog:
    """Barrier: fsync the log up to (at least) ``end_offset``."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class HighWatermarkAdvanced:
    """Records below ``high_watermark`` are committed; deliver them to listeners."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class StateChanged:
    """The node entered a new epoch state (for metrics, logs and listeners).

    ``state`` is one of unattached, voted, candidate, leader, follower, resigned;
    ``leader_id`` is -1 when unknown.
    """

    state: str
    epoch: int
    leader_id: int
    is_voter: bool


@dataclass(frozen=True, slots=True)
class AppendCompleted:
    """An application append finished: committed at ``last_offset``, or failed with ``error_code``."""

    handle: int
    last_offset: int
    error_code: int


@dataclass(frozen=True, slots=True)
class ReadIndexCompleted:
    """A read barrier (:meth:`RaftNode.read_index`) finished: after the call, a majority
    confirmed this node is still the leader, and ``read_index`` (the high watermark then)
    covers every write committed before the call; or it failed with ``error_code``."""

    handle: int
    read_index: int
    error_code: int


@dataclass(frozen=True, slots=True)
class FatalError:
    """The node must stop (e.g. the established leader reports another cluster id)."""

    error_code: int
    message: str


Action = (
    SendRequest
    | SendResponse
    | PersistElectionState
    | FlushLog
    | HighWatermarkAdvanced
    | StateChanged
    | AppendCompleted
    | ReadIndexCompleted
    | FatalError
)
