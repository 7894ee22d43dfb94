"""The commit dispatcher delivers exactly the committed batches, once, in order."""

from __future__ import annotations

from collections.abc import Sequence

from kraftnode.raft.batches import Batch
from kraftnode.raft.listener import CommitDispatcher
from tests.kraftnode.raft.rafttest_helpers import elect, fetch_request, make_node


class Recorder:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.leaders: list[tuple[int, int]] = []

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        self.batches.extend(batches)

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        self.leaders.append((leader_id, epoch))


def test_committed_batches_and_leader_changes_reach_the_listener() -> None:
    node = make_node(1)
    dispatcher = CommitDispatcher(node.log, max_bytes_per_read=100)
    recorder = Recorder()
    dispatcher.register(recorder)

    def drive() -> None:
        for action in node.take_actions():
            dispatcher.on_action(action)

    drive()
    now = elect(node, 0)
    drive()
    assert recorder.leaders[-1] == (1, 1)
    for rec in ("a", "b", "c"):
        node.append([rec], now)
    drive()
    assert recorder.batches == []  # nothing committed yet
    node.handle_request(1, fetch_request(2, 1, 3, 1), now + 1)  # voter 2 has 0..2
    drive()
    assert [b.base_offset for b in recorder.batches] == [0, 1, 2]
    node.handle_request(2, fetch_request(2, 1, node.log.end_offset, 1), now + 2)
    drive()
    assert [b.base_offset for b in recorder.batches] == [0, 1, 2, 3]
    assert [r for b in recorder.batches if not b.is_control for r in b.records] == ["a", "b", "c"]
