"""Genuine ``kafka-metadata-quorum.sh add-controller`` / ``remove-controller`` (Kafka 3.9,
``--command-config`` = the controller's own server.properties) on a dynamic kraftnode quorum.

Nodes 1 and 2 are the initial voters (``format --initial-controllers``); node 3 is an
observer (``--no-initial-controllers``); node 4 is formatted for another cluster, so the
leader refuses its fetches and it never catches up, though it answers ApiVersions. Each
error is compared with the text Kafka's own code builds: the voter sets in the messages
come from genuine ``ReplicaKey``s in a Java ``HashSet``, as ``VoterSet.voterKeys()`` makes
them (``tests/interop/java/admin``).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from kraftnode.log.meta_properties import read_meta_properties
from tests.support.cluster import serving, wait_for_hw
from tests.support.java_admin import JavaAdmin
from tests.support.kafka import KafkaHome
from tests.support.quorums import DynamicCluster, format_node

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def dyn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DynamicCluster]:
    cl = DynamicCluster(tmp_path_factory.mktemp("controllers"), 2, observers=2)
    meta4 = cl.root / "node4" / "metadata"
    shutil.rmtree(meta4)
    format_node(cl.properties(4), "AnotherClusterIdAAAAAA", "--no-initial-controllers")
    meta = read_meta_properties(meta4)
    assert meta is not None and meta.directory_id is not None
    cl.dir_ids[4] = meta.directory_id
    yield from serving(cl)


@pytest.fixture(scope="module")
def java(kafka_home: KafkaHome) -> Iterator[JavaAdmin]:
    a = JavaAdmin(kafka_home)
    yield a
    a.close()


def mq(kafka: KafkaHome, cl: DynamicCluster, *args: str) -> subprocess.CompletedProcess[str]:
    # nodes 1-3 only: node 4 belongs to another cluster and knows no controller of this one
    servers = ",".join(f"127.0.0.1:{cl.port(i)}" for i in (1, 2, 3))
    return kafka.tool("kafka-metadata-quorum", "--bootstrap-controller", servers, *args, timeout=90)


def key(cl: DynamicCluster, i: int) -> str:
    return f"ReplicaKey(id={i}, directoryId=Optional[{cl.directory_id(i)}])"


def voter_set(java: JavaAdmin, cl: DynamicCluster, ids: list[int]) -> str:
    text: str = java("voterkeys", ",".join(f"{i}:{cl.directory_id(i)}" for i in ids))["text"]
    return text


def voters_now(cl: DynamicCluster) -> list[int]:
    info = wait_for_hw(cl, 1)
    return sorted(v.replica_id for v in info.voters)


def first_line(r: subprocess.CompletedProcess[str]) -> str:
    return r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""


def wait_observing(cl: DynamicCluster, i: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = wait_for_hw(cl, 1)
        if any(o.replica_id == i for o in info.observers):
            return
        time.sleep(0.2)
    raise AssertionError(f"node {i} is not observing")


def test_add_an_observer_then_the_errors(dyn: DynamicCluster, kafka_home: KafkaHome, java: JavaAdmin,
                                         ) -> None:
    wait_observing(dyn, 3)
    endpoint = f"CONTROLLER://127.0.0.1:{dyn.port(3)}"
    dry = mq(kafka_home, dyn, "--command-config", dyn.properties(3), "add-controller", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, f"DRY RUN of adding controller 3 with directory id "
                                               f"{dyn.directory_id(3)} and endpoints: {endpoint}\n"), dry.stderr
    assert voters_now(dyn) == [1, 2]

    added = mq(kafka_home, dyn, "--command-config", dyn.properties(3), "add-controller")
    assert (added.returncode, added.stdout) == (0, f"Added controller 3 with directory id "
                                                   f"{dyn.directory_id(3)} and endpoints: {endpoint}\n"), added.stderr
    assert voters_now(dyn) == [1, 2, 3]

    dup = mq(kafka_home, dyn, "--command-config", dyn.properties(3), "add-controller")
    assert dup.returncode == 1
    assert first_line(dup) == (
        f"org.apache.kafka.common.errors.DuplicateVoterException: The voter id for {key(dyn, 3)} is "
        f"already part of the set of voters {voter_set(java, dyn, [1, 2, 3])}.")

    unknown = mq(kafka_home, dyn, "remove-controller", "--controller-id", "9",
                 f"--controller-directory-id={dyn.directory_id(3)}")
    assert unknown.returncode == 1
    assert first_line(unknown) == (
        f"org.apache.kafka.common.errors.VoterNotFoundException: Cannot remove voter "
        f"ReplicaKey(id=9, directoryId=Optional[{dyn.directory_id(3)}]) from the set of voters "
        f"{voter_set(java, dyn, [1, 2, 3])}")

    # Node 4 answers ApiVersions but has never fetched from this quorum: the leader aborts
    # with REQUEST_TIMED_OUT, which the Admin does not retry (an error in the response
    # completes the call: KafkaAdminClient.addRaftVoter), so the tool prints it at once.
    lagging = mq(kafka_home, dyn, "--command-config", dyn.properties(4), "add-controller")
    assert lagging.returncode == 1
    assert first_line(lagging) == (
        f"org.apache.kafka.common.errors.TimeoutException: Aborted add voter operation for {key(dyn, 4)} "
        "since it is lagging behind"), lagging.stderr
    assert voters_now(dyn) == [1, 2, 3]


def test_remove_voters_down_to_the_last(dyn: DynamicCluster, kafka_home: KafkaHome, java: JavaAdmin) -> None:
    if voters_now(dyn) != [1, 2, 3]:
        pytest.skip("needs the voters the previous test made")
    leader = wait_for_hw(dyn, 1).leader_id
    followers = [i for i in (1, 2, 3) if i != leader]
    for n, f in enumerate(followers):
        r = mq(kafka_home, dyn, "remove-controller", "-i", str(f), f"--controller-directory-id={dyn.directory_id(f)}")
        assert (r.returncode, r.stdout) == (
            0, f"Removed  KRaft controller {f} with directory id {dyn.directory_id(f)}\n"), r.stderr
        assert voters_now(dyn) == sorted([leader, *followers[n + 1:]])
    # the removed voters keep replicating as observers
    for f in followers:
        wait_observing(dyn, f)

    last = mq(kafka_home, dyn, "remove-controller", "-i", str(leader), f"--controller-directory-id={dyn.directory_id(leader)}")
    assert last.returncode == 1
    assert first_line(last) == (
        f"org.apache.kafka.common.errors.VoterNotFoundException: Cannot remove voter {key(dyn, leader)} "
        f"from the set of voters {voter_set(java, dyn, [leader])}")
    assert voters_now(dyn) == [leader]

    # and one comes back
    back = mq(kafka_home, dyn, "--command-config", dyn.properties(followers[0]), "add-controller")
    assert back.returncode == 0, back.stderr
    assert voters_now(dyn) == sorted([leader, followers[0]])
