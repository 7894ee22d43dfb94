from __future__ import annotations

import re
from pathlib import Path

import pytest

from kraftnode.cli import main
from kraftnode.log import MetadataLog
from kraftnode.log.bootstrap import write_bootstrap_checkpoint
from recordbatch import Record, build_batch
from recordbatch.control import leader_change_batch
from recordbatch.generated import LeaderChangeMessage

BATCH_RE = re.compile(
    r"^baseOffset: \d+ lastOffset: \d+ count: \d+ baseSequence: -?\d+ lastSequence: -?\d+ producerId: -?\d+ "
    r"producerEpoch: -?\d+ partitionLeaderEpoch: \d+ isTransactional: (true|false) isControl: (true|false) "
    r"deleteHorizonMs: OptionalLong.empty position: \d+ CreateTime: \d+ size: \d+ magic: 2 "
    r"compresscodec: (none|gzip|snappy|lz4|zstd) crc: \d+ isvalid: (true|false)$")


def test_bootstrap_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write_bootstrap_checkpoint(tmp_path, 21, 1700000000000)
    assert main(["dump-log", str(p)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Dumping {p}"
    assert lines[1] == "KRaft bootstrap snapshot"
    assert BATCH_RE.match(lines[2]) and "isControl: true" in lines[2] and "position: 0 " in lines[2]
    assert lines[3] == ("| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: 11 sequence: -1 "
                        'headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}')
    assert lines[5] == ("| offset: 1 CreateTime: 1700000000000 keySize: -1 valueSize: 23 sequence: -1 "
                        'headerKeys: [] payload: {"type":"FEATURE_LEVEL_RECORD","version":0,'
                        '"data":{"name":"metadata.version","featureLevel":21}}')
    assert lines[7].endswith('SnapshotFooter {"version":0}')
    assert len(lines) == 8


def test_segment_with_control_and_torn_tail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with MetadataLog(tmp_path) as log:
        lc = LeaderChangeMessage(version_=0, leader_id=1, voters=[], granting_voters=[])
        log.append_as_leader(leader_change_batch(lc, base_offset=0, partition_leader_epoch=1, timestamp=5), 1)
        log.append_as_leader(build_batch([Record(None, b"not-a-metadata-record", (), 6)], compression="gzip"), 1)
    seg = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(b"\0\0\0")
    assert main(["dump-log", str(seg), str(seg.with_suffix(".index"))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "Log starting offset: 0"
    assert BATCH_RE.match(out[2]) and BATCH_RE.match(out[4])
    assert " controlType: LEADER_CHANGE(2) LeaderChange {" in out[3] and '"leaderId":1' in out[3]
    assert "compresscodec: gzip" in out[4]
    assert out[5].startswith("| offset: 1 ") and "payload: Error at 1, skipping." in out[5]
    assert out[6] == "Found 3 invalid bytes at the end of 00000000000000000000.log"


def test_a_segment_copied_under_another_name_is_read(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A person copies a segment to flip.log (to flip bytes in it): the batches carry their
    own offsets, so the copy dumps as the original does, saying its name gives no offset."""
    with MetadataLog(tmp_path) as log:
        log.append_as_leader(build_batch([Record(None, b"a", (), 6)], base_offset=0), 1)
        log.append_as_leader(build_batch([Record(None, b"b", (), 7)], base_offset=1), 1)
    seg = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    flip = tmp_path / "flip.log"
    flip.write_bytes(seg.read_bytes())
    assert main(["dump-log", str(seg)]) == 0
    original = capsys.readouterr().out.splitlines()
    assert main(["dump-log", str(flip)]) == 0
    captured = capsys.readouterr()
    copy = captured.out.splitlines()
    assert captured.err == ""
    assert copy[1] == ("Log starting offset: unknown (flip.log is not named NNNNNNNNNNNNNNNNNNNN.log; "
                       "the offsets below are the batches' own)")
    assert copy[2:] == original[2:] and len(copy) == 6
    assert "baseOffset: 1 lastOffset: 1" in copy[4]


def test_missing_file_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump-log", str(tmp_path / "nope.log")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_snapshot_with_metadata_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kraftnode.log.metadata_records import encode_metadata_record
    from kraftnode.log.snapshot import SnapshotId, write_snapshot
    from kraftnode.protocol.generated.metadata import FeatureLevelRecord, NoOpRecord

    values = [encode_metadata_record(FeatureLevelRecord(name="group.version", feature_level=1), 0),
              encode_metadata_record(NoOpRecord(), 0)]
    data = build_batch([Record(None, v, (), 9) for v in values])
    p = write_snapshot(tmp_path, SnapshotId(5, 3), [data], last_contained_log_timestamp=8, now_ms=9)
    assert main(["dump-log", str(p)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "Snapshot end offset: 5, epoch: 3"
    assert "partitionLeaderEpoch: 3" in out[2]
    assert out[5].endswith('payload: {"type":"FEATURE_LEVEL_RECORD","version":0,'
                           '"data":{"name":"group.version","featureLevel":1}}')
    assert out[6].endswith('payload: {"type":"NO_OP_RECORD","version":0,"data":{}}')
    assert out[8].endswith('SnapshotFooter {"version":0}')


def _app_log(tmp_path: Path) -> Path:
    """A metadata log dir holding a LeaderChange, a metadata record and application records."""
    from kraftnode.log.metadata_records import encode_metadata_record
    from kraftnode.protocol.generated.metadata import NoOpRecord

    write_bootstrap_checkpoint(tmp_path, 21, 1700000000000)
    with MetadataLog(tmp_path) as log:
        lc = LeaderChangeMessage(version_=0, leader_id=1, voters=[], granting_voters=[])
        log.append_as_leader(leader_change_batch(lc, base_offset=0, partition_leader_epoch=1, timestamp=5), 1)
        log.append_as_leader(build_batch([Record(None, encode_metadata_record(NoOpRecord(), 0), (), 6)]), 1)
        log.append_as_leader(build_batch([Record(b"user-7", b'{"name":"ada"}', (), 7),
                                          Record(None, b"\xffraw", (), 7),
                                          Record(b"gone", None, (), 7)]), 1)
    return tmp_path


def test_a_directory_dumps_its_segments_and_snapshots(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    d = _app_log(tmp_path)
    assert main(["dump-log", str(d)]) == 0
    out = capsys.readouterr().out.splitlines()
    dumped = [ln for ln in out if ln.startswith("Dumping ")]
    assert dumped == [f"Dumping {d / 'bootstrap.checkpoint'}",
                      f"Dumping {d / '__cluster_metadata-0' / '00000000000000000000.log'}"]
    # the partition directory itself works too
    assert main(["dump-log", str(d / "__cluster_metadata-0")]) == 0
    assert capsys.readouterr().out.count("Dumping ") == 1


def test_print_data_log_shows_application_payloads(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    d = _app_log(tmp_path)
    seg = d / "__cluster_metadata-0" / "00000000000000000000.log"
    assert main(["dump-log", str(seg)]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert "payload: Error at 2, skipping." in plain[7]     # not a metadata record
    assert main(["dump-log", "--print-data-log", str(seg)]) == 0
    out = capsys.readouterr().out.splitlines()
    # metadata records are still decoded; application records as kafka-dump-log.sh prints them
    assert out[5].endswith('payload: {"type":"NO_OP_RECORD","version":0,"data":{}}')
    assert out[7].endswith('headerKeys: [] key: user-7 payload: {"name":"ada"}')
    assert out[8].endswith("headerKeys: [] payload: \ufffdraw")
    assert out[9].endswith("headerKeys: [] key: gone")
    assert main(["dump-log", "--print-data-log", "--skip-record-metadata", str(seg)]) == 0
    out = capsys.readouterr().out.splitlines()
    # Kafka's prefix rules: "| " before the key; a record without a key starts " payload: "
    assert out[7] == '| key: user-7 payload: {"name":"ada"}'
    assert out[8] == " payload: \ufffdraw"


def test_a_node_directory_finds_its_log_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41: ``dump-log DEVDIR/node1/`` (the folder tools/dev.sh prints; its log dir is
    node1/metadata/) failed where it could find metadata/ inside. A directory that holds log
    dirs one level down dumps each of them."""
    node = tmp_path / "node1"
    (node / "metadata").mkdir(parents=True)
    d = _app_log(node / "metadata")
    (node / "server.properties").write_text("node.id=1\n")
    assert main(["dump-log", f"{node}/"]) == 0
    dumped = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Dumping ")]
    assert dumped == [f"Dumping {d / 'bootstrap.checkpoint'}",
                      f"Dumping {d / '__cluster_metadata-0' / '00000000000000000000.log'}"]
