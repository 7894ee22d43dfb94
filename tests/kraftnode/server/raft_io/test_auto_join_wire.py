"""The auto-joining observer's AddRaftVoter on the wire (controller.quorum.auto.join.enable): v1
carries AckWhenCommitted false, as Kafka 4.4's ``KafkaRaftClient.buildAddVoterRequest`` sends
it (answered at the append: the joiner does not fetch while its request is out); v0, to a leader
that speaks no v1, is sent as v0 means it (answered at the commit), never refused by the encoder."""

from __future__ import annotations

import uuid

from kraftnode.protocol import generated as w
from kraftnode.raft import messages as m
from kraftnode.raft.voters import Endpoint
from kraftnode.server.raft_io.rpcs import ADD_RAFT_VOTER_RPC

JOIN = m.AddRaftVoterRequest("c", 2000, 4, uuid.UUID(int=4), (Endpoint("CONTROLLER", "127.0.0.1", 9093),),
                             ack_when_committed=False)


def test_v1_asks_for_the_answer_at_the_append() -> None:
    q = ADD_RAFT_VOTER_RPC.build(JOIN)(1)
    assert isinstance(q, w.AddRaftVoterRequest)
    assert w.AddRaftVoterRequest.decode(q.encode(1), 1).ack_when_committed is False


def test_v0_is_sent_as_v0_means_it() -> None:
    q = ADD_RAFT_VOTER_RPC.build(JOIN)(0)
    assert isinstance(q, w.AddRaftVoterRequest)
    got = w.AddRaftVoterRequest.decode(q.encode(0), 0)
    assert (got.voter_id, got.ack_when_committed) == (4, True)
