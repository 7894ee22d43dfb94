"""Idempotent producers: producer ids, and duplicate detection on the leader.

Kafka producers are idempotent by default (Java since 3.0, kafka-python 3.x), so
they start with InitProducerId and then tag each batch with (producer id, epoch,
sequence).  A retried batch must not be appended twice: the leader remembers the
last five batches of each producer and answers a retry with the offset it already
has.  Every replica learns producer sequences from the batches it appends (and from
the log's tail at start-up), so a newly elected leader recognises retries of writes
its predecessor accepted; a producer it has never seen may start at any sequence.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from kraftnode.protocol import Errors
from recordbatch import BatchView

_RECENT = 5
_INT32_MAX = 2**31 - 1


@dataclass
class _ProducerState:
    epoch: int
    last_seq: int = -1
    recent: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=_RECENT))


class ProducerIds:
    def __init__(self, node_id: int) -> None:
        # node id in the high bits keeps ids from different nodes apart; the start time
        # in the low bits keeps a restarted node from reusing its earlier ids
        self._next = (node_id << 40) | ((int(time.time()) & 0xFFFF) << 24)
        self._state: dict[int, _ProducerState] = {}

    def observe(self, views: Iterable[BatchView]) -> None:
        """Learn producer sequences from batches appended to the log (leader or follower),
        so that a newly elected leader already knows what every producer wrote."""
        for v in views:
            if not v.is_control:
                self.record(v, v, v.base_offset)  # (skips batches without a producer)

    def truncate(self, offset: int) -> None:
        """Forget batches at or above ``offset`` (the log was truncated there)."""
        for pid in list(self._state):
            st = self._state[pid]
            kept = [e for e in st.recent if e[2] < offset]
            if len(kept) != len(st.recent):
                if not kept:
                    del self._state[pid]
                    continue
                st.recent = deque(kept, maxlen=_RECENT)
                st.last_seq = kept[-1][1]

    def allocate(self) -> tuple[int, int]:
        pid = self._next
        self._next += 1
        return pid, 0

    def check(self, first: BatchView, last: BatchView) -> tuple[int, int | None]:
        """(error code, base offset of an identical earlier append or None) for a write."""
        pid = first.producer_id
        if pid < 0 or first.base_sequence < 0:
            return Errors.NONE, None
        st = self._state.get(pid)
        first_seq = first.base_sequence
        last_seq = (last.base_sequence + last.last_offset_delta) & _INT32_MAX
        if st is None or first.producer_epoch > st.epoch:
            return Errors.NONE, None
        if first.producer_epoch < st.epoch:
            return Errors.INVALID_PRODUCER_EPOCH, None
        for f, lseq, base in st.recent:
            if f == first_seq and lseq == last_seq:
                return Errors.NONE, base
        expected = (st.last_seq + 1) & _INT32_MAX
        if first_seq != expected:
            return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return Errors.NONE, None

    def record(self, first: BatchView, last: BatchView, base_offset: int) -> None:
        pid = first.producer_id
        if pid < 0 or first.base_sequence < 0:
            return
        st = self._state.get(pid)
        if st is None or first.producer_epoch > st.epoch:
            st = self._state[pid] = _ProducerState(first.producer_epoch)
        last_seq = (last.base_sequence + last.last_offset_delta) & _INT32_MAX
        st.last_seq = last_seq
        st.recent.append((first.base_sequence, last_seq, base_offset))
