"""Schema-language features the generated code must get exactly right on the wire."""

from __future__ import annotations

import uuid

import pytest

from codegen.schema import SchemaError, Versions, snake
from kraftnode.protocol import (
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    RequestHeader,
    UnsupportedVersionError,
)


def test_version_ranges() -> None:
    assert Versions.parse("0+", "x") == Versions(0, 32767)
    assert Versions.parse("3-11", "x") == Versions(3, 11)
    assert Versions.parse("none", "x") is None
    with pytest.raises(SchemaError):
        Versions.parse("5-3", "x")


def test_snake_names() -> None:
    assert snake("ReplicaDirectoryId") == "replica_directory_id"
    assert snake("KRaftVersionFeature") == "kraft_version_feature"
    assert snake("ZkMigrationReady") == "zk_migration_ready"


def test_field_level_flexible_versions_keep_client_id_classic() -> None:
    # RequestHeader v2 is flexible, but ClientId keeps the int16 length (flexibleVersions none)
    raw = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=9,
                        client_id="ab").encode(2)
    assert raw == b"\x00\x12\x00\x03\x00\x00\x00\x09" + b"\x00\x02ab" + b"\x00"


def test_tagged_fields_written_only_when_not_default_and_in_tag_order() -> None:
    p = FetchResponse.PartitionData(partition_index=0)
    plain = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[p])])
    n0 = len(plain.encode(16))
    p.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=7)
    p.diverging_epoch = FetchResponse.EpochEndOffset(epoch=3, end_offset=10)
    tagged = plain.encode(16)
    assert len(tagged) > n0
    back = FetchResponse.decode(tagged, 16)
    assert back.responses[0].partitions[0].current_leader.leader_id == 2
    assert back.responses[0].partitions[0].diverging_epoch.end_offset == 10
    # tag 0 (DivergingEpoch) precedes tag 1 (CurrentLeader) on the wire
    i0 = tagged.find(bytes([0, 13]))  # tag 0, size 4+8+1
    i1 = tagged.find(bytes([1, 9]))   # tag 1, size 4+4+1
    assert 0 <= i0 < i1


def test_unknown_tagged_fields_survive_a_round_trip() -> None:
    req = FetchRequest(cluster_id="c", replica_state=FetchRequest.ReplicaState(replica_id=1),
                       unknown_tagged_fields=[(9, b"future"), (5, b"x")])
    raw = req.encode(17)
    back = FetchRequest.decode(raw, 17)
    assert back.unknown_tagged_fields == [(5, b"x"), (9, b"future")]
    assert back.encode(17) == raw


def test_nullable_only_where_the_schema_says() -> None:
    req = FetchRequest(topics=None)  # Topics is not nullable
    with pytest.raises(UnsupportedVersionError, match="not nullable"):
        req.encode(17)
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        partitions=[FetchResponse.PartitionData(records=None, aborted_transactions=None)])])
    assert FetchResponse.decode(resp.encode(16), 16) == resp


def test_defaults_follow_the_schema() -> None:
    r = ApiVersionsResponse()
    assert r.finalized_features_epoch == -1 and r.zk_migration_ready is False
    f = FetchRequest()
    assert f.replica_id == -1 and f.max_bytes == 0x7FFFFFFF and f.session_epoch == -1
    assert f.replica_state.replica_epoch == -1
    assert FetchRequest.FetchPartition().replica_directory_id == uuid.UUID(int=0)
