"""Test-only planted bugs, to prove the simulation can catch them.

A ``RaftNode`` built with a non-empty ``plants`` set deliberately breaks one
rule. Production code never passes any.
"""

from __future__ import annotations

#: Advance the high watermark without requiring an entry of the current epoch.
HW_WITHOUT_CURRENT_EPOCH = "hw_without_current_epoch"
#: Grant a vote to a second candidate in an epoch where we already voted.
DOUBLE_VOTE = "double_vote"
#: Send the vote-granting response before persisting the vote.
REPLY_BEFORE_PERSIST = "reply_before_persist"
#: Ignore the DivergingEpoch of a fetch response (no truncation), still adopt the HW.
SKIP_DIVERGENCE_TRUNCATION = "skip_divergence_truncation"
#: Leadership transfer: resign at once, without waiting for the successor to catch up.
TRANSFER_WITHOUT_CATCH_UP = "transfer_without_catch_up"
#: Read index: complete reads without waiting for a majority to confirm leadership.
STALE_READ = "stale_read"
#: KIP-996: grant pre-votes even while following a live leader (no stickiness).
PRE_VOTE_IGNORES_LEADER = "pre_vote_ignores_leader"

ALL: dict[str, str] = {
    HW_WITHOUT_CURRENT_EPOCH: "leader advances HW over old-epoch entries (Raft figure 8)",
    DOUBLE_VOTE: "voter grants two candidates in one epoch",
    REPLY_BEFORE_PERSIST: "vote reply sent before the vote is durable",
    SKIP_DIVERGENCE_TRUNCATION: "follower ignores DivergingEpoch but adopts the HW",
    PRE_VOTE_IGNORES_LEADER: "follower grants pre-votes while it hears from its leader",
    TRANSFER_WITHOUT_CATCH_UP: "leadership transfer resigns before the successor has the leader's log",
    STALE_READ: "a leader answers linearizable reads without confirming its leadership",
}


def validate(plants: frozenset[str]) -> frozenset[str]:
    unknown = plants - ALL.keys()
    if unknown:
        raise ValueError(f"unknown plants: {sorted(unknown)}")
    return plants
