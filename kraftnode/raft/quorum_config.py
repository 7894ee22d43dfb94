"""Tunables of the core, with Kafka 3.9's ``controller.quorum.*`` defaults.

The defaults come from :mod:`kraftnode.vocabulary` (``QUORUM_*``), the one home the
configuration definitions read too, so the core and ``kraftnode.config.keys`` cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.vocabulary import (
    QUORUM_ELECTION_BACKOFF_MAX_MS,
    QUORUM_ELECTION_TIMEOUT_MS,
    QUORUM_FETCH_TIMEOUT_MS,
    QUORUM_REQUEST_TIMEOUT_MS,
    QUORUM_RETRY_BACKOFF_MS,
)


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timeouts in milliseconds; names follow Kafka's quorum configs."""

    cluster_id: str | None = None
    election_timeout_ms: int = QUORUM_ELECTION_TIMEOUT_MS  # controller.quorum.election.timeout.ms
    election_backoff_max_ms: int = QUORUM_ELECTION_BACKOFF_MAX_MS  # controller.quorum.election.backoff.max.ms
    fetch_timeout_ms: int = QUORUM_FETCH_TIMEOUT_MS  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = QUORUM_REQUEST_TIMEOUT_MS  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = QUORUM_RETRY_BACKOFF_MS  # controller.quorum.retry.backoff.ms
    fetch_max_wait_ms: int = 500  # Kafka's raft fetch max wait
    fetch_max_bytes: int = 8 * 1024 * 1024
    #: Listener used for the leader endpoints we advertise.
    listener_name: str = "CONTROLLER"
    #: KIP-996 pre-vote and leader stickiness (kraftnode.raft.pre.vote.enable); off: Kafka 3.9.
    pre_vote: bool = False
    #: Kafka 4.x controller.quorum.auto.join.enable: an observer adds itself as a voter.
    auto_join: bool = False

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.election_backoff_max_ms < 0 or self.retry_backoff_ms < 0 or self.fetch_max_wait_ms < 0:
            raise ValueError("backoffs and waits must not be negative")

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader resigns if a majority has not fetched within 1.5x the fetch timeout."""
        return self.fetch_timeout_ms * 3 // 2

    @property
    def begin_quorum_resend_ms(self) -> int:
        return max(1, self.fetch_timeout_ms // 2)
