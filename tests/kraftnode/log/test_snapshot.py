from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from logtest_helpers import batch

from kraftnode.log.snapshot import (
    SnapshotError,
    SnapshotId,
    SnapshotWriter,
    list_snapshots,
    read_snapshot_batches,
    snapshot_file_name,
    validate_snapshot,
    write_snapshot,
)
from recordbatch.control import build_kraft_control_batch, decode_control_record
from recordbatch.generated import SnapshotFooterRecord, SnapshotHeaderRecord, VotersRecord


def test_file_name() -> None:
    assert snapshot_file_name(SnapshotId(42, 3)) == "00000000000000000042-0000000003.checkpoint"


def test_write_read_validate(tmp_path: Path) -> None:
    voters = VotersRecord(version_=0, voters=[VotersRecord.Voter(voter_id=1, voter_directory_id=uuid.uuid4())])
    path = write_snapshot(tmp_path, SnapshotId(100, 5), [batch(3), batch(2)], last_contained_log_timestamp=77,
                          now_ms=1234, kraft_version=1, voters=voters)
    assert path.name == "00000000000000000100-0000000005.checkpoint"
    assert validate_snapshot(path) == 4
    views = list(read_snapshot_batches(path))
    assert [(v.base_offset, v.last_offset, v.partition_leader_epoch) for v in views] == [
        (0, 2, 5), (3, 5, 5), (6, 7, 5), (8, 8, 5)]
    types = [decode_control_record(r)[1] for r in views[0].decode_records()]
    assert isinstance(types[0], SnapshotHeaderRecord) and types[0].last_contained_log_timestamp == 77
    assert types[1].kraft_version == 1 and types[2] == voters  # type: ignore[union-attr]
    assert list_snapshots(tmp_path) == [SnapshotId(100, 5)]


def test_unfrozen_writer_leaves_no_snapshot(tmp_path: Path) -> None:
    with SnapshotWriter(tmp_path, SnapshotId(1, 1)) as w:
        w.append(batch(1))
    assert os.listdir(tmp_path) == []
    (tmp_path / "00000000000000000005-0000000001.checkpoint.part").write_bytes(b"x")
    assert list_snapshots(tmp_path, delete_partial=True) == []
    assert os.listdir(tmp_path) == []


def _raw(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / snapshot_file_name(SnapshotId(9, 9))
    p.write_bytes(data)
    return p


def test_validation_failures(tmp_path: Path) -> None:
    header = build_kraft_control_batch([SnapshotHeaderRecord(version_=0)], base_offset=0,
                                       partition_leader_epoch=0, timestamp=1)
    footer = build_kraft_control_batch([SnapshotFooterRecord(version_=0)], base_offset=1,
                                       partition_leader_epoch=0, timestamp=1)
    assert validate_snapshot(_raw(tmp_path, header + footer)) == 2
    with pytest.raises(SnapshotError, match="SnapshotFooter"):
        validate_snapshot(_raw(tmp_path, header))
    with pytest.raises(SnapshotError, match="SnapshotHeader"):
        validate_snapshot(_raw(tmp_path, batch(1) + footer))
    with pytest.raises(SnapshotError, match="trailing"):
        validate_snapshot(_raw(tmp_path, header + footer + b"\0" * 5))
    bad = bytearray(header + footer)
    bad[70] ^= 1
    with pytest.raises(SnapshotError):
        validate_snapshot(_raw(tmp_path, bytes(bad)))
    with pytest.raises(SnapshotError, match="no batches"):
        validate_snapshot(_raw(tmp_path, b""))


def test_reader_chunks_reassemble_and_delete(tmp_path: Path) -> None:
    from kraftnode.log.snapshot import SnapshotReader, delete_snapshot

    path = write_snapshot(tmp_path, SnapshotId(10, 2), [batch(5, 1000)] * 4, last_contained_log_timestamp=1,
                          now_ms=2)
    with SnapshotReader(path) as r:
        assert r.id == SnapshotId(10, 2)
        chunks = []
        pos = 0
        while pos < r.size:
            c = r.read(pos, 777)
            chunks.append(c)
            pos += len(c)
        assert b"".join(chunks) == path.read_bytes()
        assert r.read(r.size, 10) == b""
        with pytest.raises(SnapshotError):
            r.read(r.size + 1, 10)
        assert len(list(r.batches(window=100))) == 6
    # a receiver rebuilds it from chunks with a writer, then it validates
    dest = tmp_path / "copy"
    dest.mkdir()
    with SnapshotWriter(dest, SnapshotId(10, 2)) as w:
        for c in chunks:
            w.append(c)
        w.freeze()
    assert validate_snapshot(dest / path.name) == 6
    assert delete_snapshot(tmp_path, SnapshotId(10, 2)) and not path.exists()
    assert not delete_snapshot(tmp_path, SnapshotId(10, 2))
