"""Table tests of the quorum arithmetic (kraftnode/raft/quorum.py), as etcd's quorum package has."""

from __future__ import annotations

import pytest

from kraftnode.raft import quorum


@pytest.mark.parametrize(("voters", "needed"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)])
def test_majority(voters: int, needed: int) -> None:
    assert quorum.majority(voters) == needed


@pytest.mark.parametrize(("offsets", "expected"), [
    ([], -1),
    ([7], 7),
    ([7, 3], 3),          # two voters: both must have it
    ([3, 9, 5], 5),       # order does not matter
    ([10, 10, 2], 10),
    ([10, 4, 4, 2], 4),   # four voters: three must have it
    ([10, 8, 6, 4, 2], 6),
    ([-1, -1, 5], -1),    # nobody but one has anything
])
def test_majority_offset(offsets: list[int], expected: int) -> None:
    assert quorum.majority_offset(offsets) == expected
    assert quorum.majority_offset(iter(offsets)) == expected


@pytest.mark.parametrize(("offset", "epoch_start", "covered"), [
    (5, 4, True),     # past this epoch's start
    (5, 5, False),    # figure 8: the epoch's first entry itself is not yet covered
    (5, 6, False),    # earlier epochs' entries alone never commit
    (-1, -1, False),
])
def test_commits_current_epoch(offset: int, epoch_start: int, covered: bool) -> None:
    assert quorum.commits_current_epoch(offset, epoch_start) is covered


@pytest.mark.parametrize(("majority_offset", "current_hw", "expected"), [
    (5, 0, 5),
    (7, 7, None),     # the majority offset is the current high watermark
    (3, 7, None),     # never backwards (a voter restarted with less, the voter set shrank)
    (8, 7, 8),
])
def test_advanced_high_watermark(majority_offset: int, current_hw: int, expected: int | None) -> None:
    assert quorum.advanced_high_watermark(majority_offset, current_hw) == expected


@pytest.mark.parametrize(("voters", "leader_votes", "needed"), [
    (1, True, 0),    # a single voter is its own majority: check-quorum does not apply
    (1, False, 1),   # a leader being removed is not counted
    (2, True, 1),
    (3, True, 1),
    (3, False, 2),
    (4, True, 2),
    (5, True, 2),
])
def test_other_voters_needed(voters: int, leader_votes: bool, needed: int) -> None:
    assert quorum.other_voters_needed(voters, leader_votes) == needed
