"""A request a follower forwards to the leader is encoded at the version the leader speaks:
AddRaftVoter v1's AckWhenCommitted false cannot be said at v0 (Kafka 3.9 leaders), so it is
sent as v0 means it -- answered once committed (handlers/base.py ``_for_version``)."""

from __future__ import annotations

import uuid

import pytest

from kraftnode.protocol import generated as w
from kraftnode.server.handlers.base import _for_version
from recordbatch.message import UnsupportedVersionError


def _add(ack: bool) -> w.AddRaftVoterRequest:
    return w.AddRaftVoterRequest(cluster_id="c", timeout_ms=1000, voter_id=4, voter_directory_id=uuid.uuid4(),
                                 listeners=[], ack_when_committed=ack)


def test_ack_false_is_forwarded_to_a_v0_leader_as_acked_when_committed() -> None:
    q = _add(False)
    with pytest.raises(UnsupportedVersionError, match="AckWhenCommitted|ack_when_committed"):
        q.encode(0)
    sent = _for_version(q, 0)
    assert w.AddRaftVoterRequest.decode(sent.encode(0), 0).ack_when_committed is True
    assert q.ack_when_committed is False  # the client's request is not changed


def test_v1_leaders_get_the_request_as_it_came() -> None:
    q = _add(False)
    assert _for_version(q, 1) is q
    assert w.AddRaftVoterRequest.decode(q.encode(1), 1).ack_when_committed is False
    acked = _add(True)
    assert _for_version(acked, 0) is acked
