"""Leadership transfer on demand (a kraftnode extension; Kafka has none).

An admin client sends the *leader* an EndQuorumEpoch naming the leader itself at its
current epoch with exactly one preferred candidate N: "resign in favour of N". Kafka
never sends that (a leader's EndQuorumEpoch goes to the other voters, and a Kafka 3.9
leader answers one naming itself with INVALID_REQUEST), so no genuine peer or client
is affected. The leader then

1. refuses at once when N is not a voter (VOTER_NOT_FOUND), is itself, or has not
   been caught up within the fetch timeout (REQUEST_TIMED_OUT, "not caught up");
2. stops taking appends (they fail with NOT_LEADER_OR_FOLLOWER and are retried by
   clients) and waits until N's log ends where its own does -- so N's log is at
   least as up to date as every voter's and N wins the election;
3. resigns with N as the only preferred successor (EndQuorumEpoch to every voter):
   N, first in the list, starts its election at once (no pre-vote: the leader has
   resigned), and answers the admin NONE. If N does not catch up within one election
   timeout the transfer is abandoned (REQUEST_TIMED_OUT) and appends resume.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftnode.raft.voters import ReplicaKey


@dataclass(slots=True)
class PendingTransfer:
    request_id: int
    target: ReplicaKey
    deadline: int
