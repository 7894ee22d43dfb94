"""ControllerView: the active controller's replay of the log counts application data and keeps
none of it (the committed state keeps the keys and values, for snapshots and group offsets)."""

from __future__ import annotations

from kraftnode.controller.view import ControllerView
from kraftnode.metadata.state import MetadataState
from recordbatch import Record, build_batch, iter_batches

# offsets 0-1 keyed, 2-4 unkeyed, 5 keyed from an idempotent producer
LOG = (build_batch([Record(b"k1", b"a"), Record(b"k2", b"b")], base_offset=0)
       + build_batch([Record(None, b"x"), Record(None, b"y"), Record(None, b"z")], base_offset=2)
       + build_batch([Record(b"k1", b"c")], base_offset=5, producer_id=7, producer_epoch=0, base_sequence=0))


def _replay(st: MetadataState, *ends: int) -> list[int]:
    counts = []
    for end in ends:
        st.replay_batches(iter_batches(LOG), end)
        counts.append(st.foreign_records)
    return counts


def test_the_view_counts_application_records_as_the_committed_state_does_and_keeps_none() -> None:
    committed, view = MetadataState(), ControllerView()
    assert _replay(committed, 6) == _replay(view, 6) == [6]
    assert committed.app == {b"k1": b"c", b"k2": b"b"}
    assert view.app == {} and view.next_offset == committed.next_offset == 6


def test_a_replay_that_ends_inside_a_batch_counts_only_the_records_below_the_end() -> None:
    committed, view = MetadataState(), ControllerView()
    # 4 cuts the unkeyed batch (2-4) after two records; 6 takes the rest
    assert _replay(committed, 1, 4, 6) == _replay(view, 1, 4, 6) == [1, 4, 6]
    assert view.app == {} and committed.app == {b"k1": b"c", b"k2": b"b"}
