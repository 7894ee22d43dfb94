"""The core's bookkeeping of requests it sent (one per destination) and fetches it parked."""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.raft.messages import FetchRequest


@dataclass(slots=True)
class InFlight:
    """The one outstanding request to a destination."""

    correlation_id: int
    deadline: int
    #: For Fetch: the fetch offset sent, so stale answers can be recognised.
    fetch_offset: int = -1
    #: For a BeginQuorumEpoch sent to confirm reads: the read round it confirms.
    read_round: int = -1


@dataclass(slots=True)
class ParkedFetch:
    """A leader's long-poll: a Fetch answered when data arrives or ``deadline`` passes."""

    request_id: int
    request: FetchRequest
    deadline: int
