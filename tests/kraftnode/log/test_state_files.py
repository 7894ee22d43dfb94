"""quorum-state, meta.properties, leader-epoch-checkpoint, partition.metadata: exact bytes."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from kraftnode.log.checkpoint import CheckpointError
from kraftnode.log.epoch_cache import LeaderEpochCache
from kraftnode.log.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    read_meta_properties,
    write_meta_properties,
)
from kraftnode.log.partition_metadata import (
    PartitionMetadataError,
    ensure_partition_metadata,
)
from kraftnode.log.quorum_state_store import QuorumStateData, QuorumStateStore
from kraftnode.log.uuids import (
    is_reserved_directory_id,
    random_directory_id,
    random_uuid,
)
from recordbatch.wire import uuid_from_base64, uuid_to_base64


def test_quorum_state_v0_bytes_match_kafka() -> None:
    data = QuorumStateData(leader_id=1, leader_epoch=2, voted_id=-1, applied_offset=0,
                           current_voters=[1], data_version=0)
    assert data.to_json() == ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,'
                              '"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}')


def test_quorum_state_v1_bytes_match_kafka() -> None:
    d = uuid_from_base64("NkVSAG-fTiaefvUO7-4MDw")
    data = QuorumStateData(leader_id=-1, leader_epoch=2, voted_id=1, voted_directory_id=d, data_version=1)
    assert data.to_json() == ('{"leaderId":-1,"leaderEpoch":2,"votedId":1,'
                              '"votedDirectoryId":"NkVSAG-fTiaefvUO7-4MDw","data_version":1}')


@pytest.mark.parametrize("version", [0, 1])
def test_quorum_state_store_roundtrip_is_atomic(tmp_path: Path, version: int) -> None:
    store = QuorumStateStore(tmp_path)
    assert store.read() is None
    data = QuorumStateData(leader_id=3, leader_epoch=9, voted_id=3, voted_directory_id=uuid.uuid4(),
                           current_voters=[1, 2, 3], data_version=version)
    if version == 1:
        data.current_voters = []
    else:
        data.voted_directory_id = uuid.UUID(int=0)
    store.write(data)
    assert store.read() == data
    assert not (tmp_path / "quorum-state.tmp").exists()
    assert (tmp_path / "quorum-state").read_text() == data.to_json()


def test_meta_properties_text(tmp_path: Path) -> None:
    d = uuid_from_base64("NkVSAG-fTiaefvUO7-4MDw")
    write_meta_properties(tmp_path, MetaProperties(cluster_id="8dCxcNQyTPKYEljpZSr-Cg", node_id=1, directory_id=d))
    lines = (tmp_path / "meta.properties").read_text().split("\n")
    assert lines[0] == "#"
    assert re.fullmatch(r"#\w{3} \w{3} \d\d \d\d:\d\d:\d\d \S+ \d{4}", lines[1])
    assert lines[2:] == ["node.id=1", "directory.id=NkVSAG-fTiaefvUO7-4MDw", "version=1",
                         "cluster.id=8dCxcNQyTPKYEljpZSr-Cg", ""]
    assert read_meta_properties(tmp_path) == MetaProperties("8dCxcNQyTPKYEljpZSr-Cg", 1, d)


@pytest.mark.parametrize("text, why", [
    ("version=1\nnode.id=1\n", "cluster.id"),
    ("version=1\ncluster.id=x\n", "node.id"),
    ("version=2\ncluster.id=x\nnode.id=1\n", "version"),
    ("version=1\ncluster.id=x\nnode.id=one\n", "integer"),
    ("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n", "reserved"),
    ("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n", "reserved"),
    ("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=nope\n", "directory.id"),
])
def test_meta_properties_refused(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "meta.properties").write_text(text)
    with pytest.raises(MetaPropertiesError, match=why):
        read_meta_properties(tmp_path)


def test_reserved_and_random_ids() -> None:
    for i in range(100):
        assert is_reserved_directory_id(uuid.UUID(int=i))
    assert not is_reserved_directory_id(uuid.UUID(int=100))
    assert not is_reserved_directory_id(uuid.UUID(int=1 << 64))
    for _ in range(500):
        u = random_uuid()
        assert u not in (uuid.UUID(int=0), uuid.UUID(int=1))
        assert not uuid_to_base64(u).startswith("-")
        assert not is_reserved_directory_id(random_directory_id())


def test_epoch_cache_assign_and_query_follow_kafka(tmp_path: Path) -> None:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert c.end_offset_for(0, 0) == (-1, -1)
    assert c.assign(2, 10)
    assert not c.assign(2, 15)  # same epoch, later offset: no change
    assert c.assign(4, 20)
    assert c.entries() == [(2, 10), (4, 20)]
    assert c.end_offset_for(2, 30) == (2, 20)
    assert c.end_offset_for(3, 30) == (2, 20)
    assert c.end_offset_for(1, 30) == (1, 10)
    assert c.end_offset_for(4, 30) == (4, 30)
    assert c.end_offset_for(5, 30) == (-1, -1)
    assert c.assign(5, 15)  # a new epoch at a lower offset replaces conflicting entries
    assert c.entries() == [(2, 10), (5, 15)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n2 10\n5 15\n"
    c.truncate_from_end(15)
    assert c.entries() == [(2, 10)]
    c.assign(6, 40)
    c.truncate_from_start(30)
    assert c.entries() == [(2, 30), (6, 40)]
    assert LeaderEpochCache.load(tmp_path).entries() == [(2, 30), (6, 40)]
    # as in Kafka, a lower epoch assigned later removes the entries it contradicts
    assert c.assign(3, 50)
    assert c.entries() == [(2, 30), (3, 50)]


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\n1 0\n", "0\n1\n1\n", "0\nx\n", "0\n2\n3 5\n2 6\n"])
def test_epoch_checkpoint_malformed(tmp_path: Path, text: str) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text(text)
    with pytest.raises(CheckpointError):
        LeaderEpochCache.load(tmp_path)


def test_partition_metadata(tmp_path: Path) -> None:
    ensure_partition_metadata(tmp_path)
    assert (tmp_path / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    ensure_partition_metadata(tmp_path)
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAg")
    with pytest.raises(PartitionMetadataError, match="does not match"):
        ensure_partition_metadata(tmp_path)
    (tmp_path / "partition.metadata").write_text("junk")
    with pytest.raises(PartitionMetadataError):
        ensure_partition_metadata(tmp_path)
