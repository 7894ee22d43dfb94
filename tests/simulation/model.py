"""Simulated pieces: a log that can lose its unflushed tail, and per-seed fault settings."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kraftnode.raft.batches import Batch, ControlRecord
from kraftnode.raft.log import OffsetAndEpoch
from tests.kraftnode.raft.harness_log import HarnessLog


class SimLog(HarnessLog):
    """HarnessLog (MemoryRaftLog with crash/compact), a hash chain per batch (fast log-matching
    checks) and a truncation hook."""

    def __init__(self) -> None:
        super().__init__()
        self.hashes: list[int] = []
        self.on_truncate: Callable[[int], None] | None = None
        self.version = 0

    base_hash = 0  # chain value at the log start (the snapshot's prefix)

    @staticmethod
    def chain(prev: int, batch: Batch) -> int:
        body = ("ctl",) if batch.is_control else tuple(batch.records)
        return hash((prev, batch.base_offset, batch.last_offset, batch.epoch, body))

    def _push(self, batch: Batch) -> None:
        super()._push(batch)
        prev = self.hashes[-1] if self.hashes else self.base_hash
        self.hashes.append(self.chain(prev, batch))
        self.version += 1

    def compact(self, offset: int) -> OffsetAndEpoch:
        removed = sum(1 for b in self.batches if b.last_offset < offset)
        snap = super().compact(offset)
        if removed:
            self.base_hash = self.hashes[removed - 1]
            del self.hashes[:removed]
        self.version += 1
        return snap

    def install_snapshot(self, snapshot_id: OffsetAndEpoch) -> Sequence[ControlRecord]:
        records = super().install_snapshot(snapshot_id)
        h = 0
        for batch in self.snapshot_batches:
            h = self.chain(h, batch)
        self.base_hash = h
        self.hashes = []
        self.version += 1
        return records

    def truncate_to(self, offset: int) -> None:
        if offset < self.end_offset and self.on_truncate is not None:
            self.on_truncate(offset)
        super().truncate_to(offset)
        del self.hashes[len(self.batches):]
        self.version += 1

    def index_of_base(self, base_offset: int) -> int | None:
        import bisect

        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return i
        return None

    def entry(self, offset: int) -> tuple[int, object] | None:
        """(epoch, record identity) at ``offset``."""
        batch = self.batch_at(offset)
        if batch is None:
            return None
        if batch.is_control:
            return (batch.epoch, ("ctl", batch.base_offset))
        return (batch.epoch, batch.records[offset - batch.base_offset])


@dataclass(frozen=True)
class FaultProfile:
    """The faults of one seed, drawn from the seed so a run replays exactly."""

    loss: float
    duplicate: float
    delay_min_ms: int
    delay_jitter_ms: int
    long_delay_p: float
    crash_interval_ms: int | None  # mean time between crashes; None = no crashes
    mid_action_crash_p: float
    restart_delay_max_ms: int
    partition_interval_ms: int | None
    resign_interval_ms: int | None
    append_interval_ms: int
    request_timeout_ms: int
    fetch_max_bytes: int
    records_per_append: int
    snapshot_interval_ms: int | None
    election_timeout_ms: int
    fetch_timeout_ms: int

    @staticmethod
    def draw(rng: random.Random) -> FaultProfile:
        crashes = rng.choice([None, 4000, 2000, 1000])
        profile = FaultProfile(
            loss=rng.choice([0.0, 0.01, 0.05, 0.15]),
            duplicate=rng.choice([0.0, 0.02, 0.1]),
            delay_min_ms=rng.randint(1, 5),
            delay_jitter_ms=rng.choice([5, 30, 150]),
            long_delay_p=rng.choice([0.0, 0.02]),
            crash_interval_ms=crashes,
            mid_action_crash_p=0.0 if crashes is None else rng.choice([0.05, 0.2, 0.5]),
            restart_delay_max_ms=rng.choice([300, 1500]),
            partition_interval_ms=rng.choice([None, 3000, 1500]),
            resign_interval_ms=rng.choice([None, None, 3000]),
            append_interval_ms=rng.choice([20, 60, 150]),
            request_timeout_ms=rng.choice([300, 1000, 2000]),
            fetch_max_bytes=rng.choice([150, 600, 1 << 20]),
            records_per_append=rng.choice([1, 3]),
            snapshot_interval_ms=rng.choice([None, 2000, 700]),
            election_timeout_ms=0,
            fetch_timeout_ms=0,
        )
        election, fetch = rng.choice([(1000, 2000), (500, 1000), (300, 600)])
        profile = dataclasses.replace(profile, election_timeout_ms=election, fetch_timeout_ms=fetch)
        if profile.fetch_max_bytes < 200:
            # One batch per fetch: keep the offered load below what can be replicated,
            # so the cluster can catch up within the liveness bound.
            profile = dataclasses.replace(profile, append_interval_ms=max(profile.append_interval_ms, 150),
                                          delay_jitter_ms=min(profile.delay_jitter_ms, 30))
        return profile


def describe(profile: FaultProfile) -> str:
    return ", ".join(f"{k}={v}" for k, v in profile.__dict__.items())


def pick(rng: random.Random, items: Sequence[int]) -> int:
    return items[rng.randrange(len(items))]
