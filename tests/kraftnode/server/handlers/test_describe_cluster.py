"""DescribeCluster as the Java Admin client uses it (KIP-919), against real processes.

With ``bootstrap.controllers`` the Admin's metadata is a DescribeCluster v1 with
EndpointType 2: the nodes listed become its cluster, ControllerId its controller, to
which it sends DescribeQuorum, AddRaftVoter and RemoveRaftVoter.
"""

from __future__ import annotations

import time

import pytest

from kraftnode.protocol import generated as w
from tests.support.cluster import Cluster
from tests.support.node import call

pytestmark = pytest.mark.timeout(120)


def describe_cluster(port: int, endpoint_type: int) -> w.DescribeClusterResponse:
    _, resp = call(port, 60, 1, w.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                         endpoint_type=endpoint_type))
    assert isinstance(resp, w.DescribeClusterResponse)
    return resp



def until(check, timeout: float = 30):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_no_controllers_are_listed_until_a_leader_is_known(cluster: Cluster) -> None:
    """One voter of three cannot elect a leader. Listing the voters with ControllerId -1
    would leave the Java Admin without a node to send DescribeQuorum to, and it does not
    ask again before metadata.max.age.ms; an empty list makes it ask again."""
    cluster.start(1)
    p1 = cluster.port(1)
    d = until(lambda: describe_cluster(p1, 2))
    assert (d.error_code, d.endpoint_type, d.controller_id, list(d.brokers)) == (0, 2, -1, [])
    # EndpointType 1 (our stand-in for a broker listener; the Admin with bootstrap.servers
    # takes its metadata from Metadata, not from this) still lists the voters.
    b = describe_cluster(p1, 1)
    assert (b.controller_id, sorted(x.broker_id for x in b.brokers)) == (-1, [1, 2, 3])

    cluster.start(2)
    d = until(lambda: (lambda r: r if r.controller_id > 0 else None)(describe_cluster(p1, 2)))
    assert {x.broker_id: x.port for x in d.brokers} == {i: cluster.port(i) for i in (1, 2, 3)}
    assert d.controller_id in (1, 2)

    # v2 (KIP-1073): IncludeFencedBrokers changes nothing on a controller (Kafka 4.4's
    # ControllerApis ignores it) and no node listed is fenced; the same answer at v1
    for include in (False, True):
        _, v2 = call(p1, 60, 2, w.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                          endpoint_type=2, include_fenced_brokers=include))
        assert isinstance(v2, w.DescribeClusterResponse)
        assert [(x.broker_id, x.port, x.is_fenced) for x in v2.brokers] == [
            (x.broker_id, x.port, False) for x in d.brokers]
        assert v2.controller_id == d.controller_id
