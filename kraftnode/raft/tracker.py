"""The leader's bookkeeping: replica progress, high watermark, check-quorum.

Rules (KIP-595, Kafka 3.9 LeaderState):
- the high watermark is the largest offset replicated (flushed) by a majority of
  the *current* voter set, and it only advances once it is above the epoch start
  offset, i.e. once this epoch's LeaderChange record is committed;
- it never goes backwards, even when the voter set shrinks or changes;
- KIP-836 timestamps: last fetch time, and last time the replica was caught up
  (fetched up to the leader's end offset as of that or the previous fetch);
- check-quorum: if a majority of voters has not fetched within 1.5x the fetch
  timeout, the leader must resign.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.raft import quorum
from kraftnode.raft.reconfig import CAUGHT_UP_FETCH_WINDOW_MS, PendingAdd, PendingRemove
from kraftnode.raft.voters import ReplicaKey, VoterSet

#: Observers that have not fetched for this long drop out of DescribeQuorum.
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica (a voter or an observer)."""

    key: ReplicaKey
    end_offset: int = -1
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1
    last_fetch_leader_end_offset: int = -1
    #: The replica endorsed this leader (BeginQuorumEpoch answered or fetched).
    acknowledged: bool = False


class ReplicaTracker:
    """Replication state of a leader for one epoch."""

    def __init__(
        self,
        local_key: ReplicaKey,
        epoch: int,
        epoch_start_offset: int,
        voters: VoterSet,
        now_ms: int,
        check_quorum_timeout_ms: int,
    ) -> None:
        self.local_key = local_key
        self.epoch = epoch
        self.epoch_start_offset = epoch_start_offset
        self.check_quorum_timeout_ms = check_quorum_timeout_ms
        self.voters: dict[int, ReplicaProgress] = {}
        self.observers: dict[ReplicaKey, ReplicaProgress] = {}
        self.voter_set = voters
        self.update_voter_set(voters)
        self.check_quorum_deadline = now_ms + check_quorum_timeout_ms
        self._fetched_voters: set[int] = set()
        self.next_begin_quorum_ms: dict[int, int] = {}
        #: Kafka's LeaderState.highWatermark() is empty until it first advances in this
        #: epoch; voter changes wait for it (previous leaders' changes are then fenced).
        self.high_watermark_known = False
        #: KIP-853: at most one add or remove in progress.
        self.pending_add: PendingAdd | None = None
        self.pending_remove: PendingRemove | None = None
        #: Set when a committed voter set no longer holds this leader (it resigns on the next poll).
        self.resign_requested = False
        #: Kafka 4.1's KRaftVersionUpgrade.Voters: in a static quorum (kraft.version 0), the
        #: voter set the leader would write on an upgrade to kraft.version 1 -- the static set
        #: with each voter as UpdateRaftVoter (or its Fetch's directory id) described it.
        self.volatile_voters: VoterSet | None = None
        #: KRaftVersionUpgrade.Version: the kraft.version an upgrade in this epoch appended.
        self.upgraded_kraft_version: int | None = None

    # -- membership ---------------------------------------------------------
    def update_voter_set(self, voters: VoterSet) -> None:
        """Adopt a new voter set, keeping the progress of replicas that stay."""
        old = self.voters
        self.voter_set = voters
        self.voters = {}
        for node in voters:
            progress = old.get(node.key.id)
            if progress is not None and not progress.key.matches(node.key):
                # Another directory under the same id (a re-formatted voter): a new replica.
                self.observers.setdefault(progress.key, progress)
                progress = None
            if progress is None:
                progress = self.observers.pop(node.key, None) or ReplicaProgress(node.key)
            # Kafka's ReplicaState.setReplicaKey: a voter first known without a directory id
            # (kraft.version 0) takes the one the upgrade's VotersRecord gives it.
            progress.key = node.key
            self.voters[node.key.id] = progress
        for rid, progress in old.items():
            if self.voters.get(rid) is not progress:
                self.observers.setdefault(progress.key, progress)
        local = self.voters.get(self.local_key.id)
        if local is not None:
            local.acknowledged = True

    def is_voter(self, key: ReplicaKey) -> bool:
        return self.voter_set.is_voter(key)

    def unacknowledged_voters(self) -> list[int]:
        return [rid for rid, p in self.voters.items() if not p.acknowledged]

    # -- progress -----------------------------------------------------------
    def update_local(self, flushed_end_offset: int, now_ms: int) -> None:
        """The leader's own log is durable up to ``flushed_end_offset``."""
        local = self.voters.get(self.local_key.id)
        if local is not None:
            local.end_offset = max(local.end_offset, flushed_end_offset)
            local.last_fetch_timestamp = now_ms
            local.last_caught_up_timestamp = now_ms

    def record_fetch(
        self, key: ReplicaKey, fetch_offset: int, leader_end_offset: int, now_ms: int
    ) -> None:
        """A valid Fetch at ``fetch_offset``: the replica has everything below it, durably."""
        progress = self._progress(key)
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_timestamp = max(progress.last_caught_up_timestamp, now_ms)
        elif (
            progress.last_fetch_leader_end_offset > 0
            and fetch_offset >= progress.last_fetch_leader_end_offset
        ):
            progress.last_caught_up_timestamp = max(
                progress.last_caught_up_timestamp, progress.last_fetch_timestamp
            )
        progress.last_fetch_leader_end_offset = leader_end_offset
        progress.last_fetch_timestamp = now_ms
        # Offsets reported by a replica can go down after it lost an unflushed
        # tail; the leader believes the latest report.
        progress.end_offset = fetch_offset
        progress.acknowledged = True

    def _progress(self, key: ReplicaKey) -> ReplicaProgress:
        progress = self.voters.get(key.id)
        if progress is not None and progress.key.matches(key):
            return progress
        progress = self.observers.get(key)
        if progress is None:
            progress = ReplicaProgress(key)
            self.observers[key] = progress
        return progress

    def acknowledge(self, replica_id: int) -> None:
        progress = self.voters.get(replica_id)
        if progress is not None:
            progress.acknowledged = True

    def majority_offset(self) -> int:
        """The largest offset that a majority of voters has durably replicated (-1 if none)."""
        return quorum.majority_offset(p.end_offset for p in self.voters.values())

    def candidate_high_watermark(self, current_hw: int) -> int | None:
        """The new high watermark, or None if it cannot advance: the majority offset once it
        covers this epoch's first entry (figure 8), never backwards."""
        offset = self.majority_offset()
        if not self.commits_current_epoch(offset):
            return None
        return quorum.advanced_high_watermark(offset, current_hw)

    def commits_current_epoch(self, offset: int) -> bool:
        """quorum.commits_current_epoch for this epoch."""
        return quorum.commits_current_epoch(offset, self.epoch_start_offset)

    def _other_voters_needed(self) -> int:
        return quorum.other_voters_needed(len(self.voter_set.voters), self.voter_set.is_voter(self.local_key))

    # -- check quorum -------------------------------------------------------
    def record_voter_contact(self, key: ReplicaKey, now_ms: int) -> None:
        """A replica fetched from us (Fetch or FetchSnapshot): count it towards the
        check-quorum majority, and renew the deadline once a majority has fetched.

        Kafka's LeaderState.updateCheckQuorumForFollowingVoter runs on every replica's
        fetch, observers' too: while the leader alone is a majority no other voter is
        needed, so each fetch renews the deadline. That keeps it fresh for the moment a
        second voter joins (the observer being added has been fetching all along); a
        deadline left at the epoch's start would already be past then, and the leader
        would resign right after its own AddRaftVoter. Consumers (negative replica ids)
        are not replicas and renew nothing (LeaderState.updateReplicaState).
        """
        if key.id < 0 or key.id == self.local_key.id:
            return
        if self.voter_set.is_voter(key):
            self._fetched_voters.add(key.id)
        if len(self._fetched_voters) >= self._other_voters_needed():
            self._fetched_voters.clear()
            self.check_quorum_deadline = now_ms + self.check_quorum_timeout_ms

    def check_quorum_applies(self) -> bool:
        """False when the leader alone is a majority (nobody else has to fetch)."""
        return self._other_voters_needed() > 0

    def check_quorum_expired(self, now_ms: int) -> bool:
        return self.check_quorum_applies() and now_ms >= self.check_quorum_deadline

    def clear_inactive_observers(self, now_ms: int) -> None:
        """Forget observers that have not fetched for 5 minutes (Kafka's observer session)."""
        stale = [k for k, p in self.observers.items()
                 if p.last_fetch_timestamp < now_ms - OBSERVER_SESSION_TIMEOUT_MS]
        for key in stale:
            del self.observers[key]

    def is_replica_caught_up(self, key: ReplicaKey, now_ms: int) -> bool:
        """LeaderState.isReplicaCaughtUp: ``key`` is an observer (exact id and directory id)
        that has been caught up once and fetched within the last hour."""
        progress = self.observers.get(key)
        return (
            progress is not None and progress.last_caught_up_timestamp > 0
            and progress.last_fetch_timestamp > 0
            and progress.last_fetch_timestamp > now_ms - CAUGHT_UP_FETCH_WINDOW_MS
        )

    def voters_by_descending_offset(self) -> list[ReplicaKey]:
        """Other voters, most caught-up first: the preferred successors on resignation."""
        others = [p for rid, p in self.voters.items() if rid != self.local_key.id]
        others.sort(key=lambda p: (-p.end_offset, p.key.id))
        return [p.key for p in others]
