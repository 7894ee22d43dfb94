"""``kraftnode format`` against real directories; batches cross-checked with kafka-python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record import MemoryRecords

from kraftnode.cli import main
from kraftnode.log.meta_properties import read_meta_properties
from kraftnode.log.metadata_records import decode_metadata_record
from kraftnode.log.snapshot import validate_snapshot
from recordbatch.control import decode_control_record
from recordbatch.generated import VotersRecord
from recordbatch.wire import uuid_to_base64

CLUSTER = "8dCxcNQyTPKYEljpZSr-Cg"
DIRID = "NkVSAG-fTiaefvUO7-4MDw"


def config(tmp_path: Path, extra: str = "", dirs: str | None = None) -> Path:
    f = tmp_path / "server.properties"
    f.write_text(
        "process.roles=controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n"
        "listeners=CONTROLLER://localhost:9093\n"
        f"log.dirs={dirs or tmp_path / 'meta'}\n" + extra)
    return f


def kafka_python_batches(path: Path) -> list[tuple[int, bool, list[tuple[int, bytes | None, bytes | None]]]]:
    """Decode with kafka-python (an independent implementation), checking every CRC."""
    mr = MemoryRecords(path.read_bytes())
    out = []
    while (b := mr.next_batch()) is not None:
        assert b.validate_crc()
        out.append((b.base_offset, b.is_control_batch, [(r.offset, r.key, r.value) for r in b]))
    return out


def test_standalone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config(tmp_path)
    assert main(["format", "-c", str(cfg), "-t", CLUSTER, "--standalone"]) == 0
    meta = tmp_path / "meta"
    assert "Formatting dynamic metadata voter directory" in capsys.readouterr().out
    mp = read_meta_properties(meta)
    assert mp is not None and mp.cluster_id == CLUSTER and mp.node_id == 1 and mp.directory_id is not None

    boot = kafka_python_batches(meta / "bootstrap.checkpoint")
    # Kafka 4.4's defaults: metadata.version 4.4-IV2 and every production feature at its
    # default level for it, by name (kraft.version is the raft's: no FeatureLevelRecord)
    assert [(b[0], b[1]) for b in boot] == [(0, True), (1, False), (7, True)]
    assert boot[0][2][0][1] == b"\x00\x00\x00\x03" and boot[2][2][0][1] == b"\x00\x00\x00\x04"
    recs = [decode_metadata_record(v or b"") for _o, _k, v in boot[1][2]]
    assert [(m.NAME, m.name, m.feature_level, version) for m, version in recs] == [
        ("FeatureLevelRecord", "metadata.version", 33, 0),
        ("FeatureLevelRecord", "eligible.leader.replicas.version", 1, 0),
        ("FeatureLevelRecord", "group.version", 1, 0),
        ("FeatureLevelRecord", "share.version", 2, 0),
        ("FeatureLevelRecord", "streams.version", 1, 0),
        ("FeatureLevelRecord", "transaction.version", 2, 0),
    ]
    assert boot[1][2][0][1] is None

    snap = meta / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    assert validate_snapshot(snap) == 2
    batches = kafka_python_batches(snap)
    assert [(b[0], b[1], [r[0] for r in b[2]]) for b in batches] == [(0, True, [0, 1, 2]), (3, True, [3])]

    class R:
        def __init__(self, k: bytes | None, v: bytes | None) -> None:
            self.key, self.value = k, v

    values = [decode_control_record(R(k, v))[1] for _, k, v in batches[0][2]]
    assert values[1].kraft_version == 1  # type: ignore[union-attr]
    assert isinstance(values[2], VotersRecord)
    voters = values[2].voters
    assert len(voters) == 1 and voters[0].voter_id == 1
    assert uuid_to_base64(voters[0].voter_directory_id) == uuid_to_base64(mp.directory_id)
    ep = voters[0].endpoints[0]
    assert (ep.name, ep.host, ep.port) == ("CONTROLLER", "localhost", 9093)
    kv = voters[0].kraft_version_feature
    assert (kv.min_supported_version, kv.max_supported_version) == (0, 1)


def test_initial_controllers_and_data_dirs(tmp_path: Path) -> None:
    meta, data = tmp_path / "meta", tmp_path / "data"
    cfg = config(tmp_path, f"metadata.log.dir={meta}\n", dirs=str(data))
    ctl = f"1@h1:9093:{DIRID},2@[::1]:9094:AAAAAAAAAAAAAAAAAAAAZA"
    assert main(["format", "-c", str(cfg), "-t", CLUSTER, "--initial-controllers", ctl]) == 0
    mp = read_meta_properties(meta)
    assert mp is not None and mp.directory_id is not None and uuid_to_base64(mp.directory_id) == DIRID
    dp = read_meta_properties(data)
    assert dp is not None and dp.directory_id != mp.directory_id
    assert (data / "bootstrap.checkpoint").exists()
    assert not (data / "__cluster_metadata-0").exists()
    assert (meta / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").exists()


def test_static_quorum_writes_no_bootstrap_snapshot(tmp_path: Path) -> None:
    cfg = config(tmp_path, "controller.quorum.voters=1@localhost:9093\n")
    assert main(["format", "-c", str(cfg), "-t", CLUSTER, "--release-version", "3.8"]) == 0
    assert not (tmp_path / "meta" / "__cluster_metadata-0").exists()
    boot = kafka_python_batches(tmp_path / "meta" / "bootstrap.checkpoint")
    msg, _ = decode_metadata_record(boot[1][2][0][2] or b"")
    assert msg.feature_level == 20


@pytest.mark.parametrize("args, extra, level", [
    (["--release-version", "3.7.1"], "", 19),             # MetadataVersion.fromVersionString: 3.7 -> 3.7-IV4
    ([], "inter.broker.protocol.version=3.6\n", 33),     # Kafka 4.4 ignores the IBP config
    (["-r", "3.5-IV2"], "inter.broker.protocol.version=3.6\n", 11),  # --release-version wins
    (["-r", "3.3"], "", 7),                               # 3.3-IV3, MetadataVersion.MINIMUM_VERSION
    (["-r", "4.0"], "", 25),                              # 4.0-IV3
    (["--feature", "metadata.version=20"], "", 20),       # the level itself, without --release-version
])
def test_release_version_as_kafka_storage_tool(tmp_path: Path, args: list[str], extra: str, level: int) -> None:
    cfg = config(tmp_path, "controller.quorum.voters=1@localhost:9093\n" + extra)
    assert main(["format", "-c", str(cfg), "-t", CLUSTER, *args]) == 0
    boot = kafka_python_batches(tmp_path / "meta" / "bootstrap.checkpoint")
    msg, _ = decode_metadata_record(boot[1][2][0][2] or b"")
    assert (msg.name, msg.feature_level) == ("metadata.version", level)


def test_no_initial_controllers_formats_a_plain_metadata_directory(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Kafka's DirectoryType.calculate: no initial controllers -> STATIC_METADATA_DIRECTORY
    assert main(["format", "-c", str(config(tmp_path)), "-t", CLUSTER, "-N"]) == 0
    assert main(["format", "-c", str(config(tmp_path, dirs=str(tmp_path / "m2"))), "-t", CLUSTER, "-N",
                 "-r", "3.9"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "Bootstrap metadata: BootstrapMetadata(records=[ApiMessageAndVersion(FeatureLevelRecord("
        "name='metadata.version', featureLevel=21) at version 0)], metadataVersionLevel=21, "
        "source=format command)",
        f"Formatting metadata directory {tmp_path / 'm2'} with metadata.version 3.9-IV0."]
    assert not (tmp_path / "meta" / "__cluster_metadata-0").exists()


def test_refuses_to_reformat_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config(tmp_path)
    assert main(["format", "-c", str(cfg), "-t", CLUSTER, "-N"]) == 0
    before = (tmp_path / "meta" / "meta.properties").read_bytes()
    capsys.readouterr()
    assert main(["format", "-c", str(cfg), "-t", CLUSTER, "-N"]) == 2
    assert "already formatted" in capsys.readouterr().err
    assert main(["format", "-c", str(cfg), "-t", CLUSTER, "-N", "--ignore-formatted"]) == 0
    assert "All of the log directories are already formatted." in capsys.readouterr().out
    assert main(["format", "-c", str(cfg), "-t", "AAAAAAAAAAAAAAAAAAAAAw", "-N", "-g"]) == 2
    assert "Invalid cluster.id" in capsys.readouterr().err
    assert (tmp_path / "meta" / "meta.properties").read_bytes() == before


@pytest.mark.parametrize("args, extra, why", [
    (["-t", "short", "-s"], "", "valid UUID"),
    (["-t", CLUSTER], "", "--standalone, --initial-controllers, or --no-initial-controllers"),
    (["-t", CLUSTER, "-s"], "controller.quorum.voters=1@h:1\n", "controller.quorum.voters is set"),
    (["-t", CLUSTER, "-I", "1@h:1"], "", "expected <id>@<host>:<port>:<directory id>"),
    (["-t", CLUSTER, "-I", "1@h:1:AAAAAAAAAAAAAAAAAAAAAQ"], "", "reserved"),
    (["-t", CLUSTER, "-I", f"1@h:1:{DIRID},1@h:2:{DIRID}"], "", "more than once"),
    (["-t", CLUSTER, "-s", "--feature", "kraft.version=0"], "", "Cannot set kraft.version to 0 if"),
    (["-t", CLUSTER, "-s", "-r", "9.9"], "", "Unknown metadata.version '9.9'. Supported metadata.version are: 3.3-IV3,"),
    # Kafka 4.4 knows nothing before MetadataVersion.MINIMUM_VERSION (3.3-IV3)
    (["-t", CLUSTER, "-r", "3.2"], "controller.quorum.voters=1@localhost:9093\n", "Unknown metadata.version '3.2'"),
    (["-t", CLUSTER, "-r", "3.9", "--feature", "eligible.leader.replicas.version=1"],
     "controller.quorum.voters=1@localhost:9093\n",
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"),
    (["-t", CLUSTER, "-s"], "node.id=x\n", "node.id"),
])
def test_user_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         args: list[str], extra: str, why: str) -> None:
    cfg = config(tmp_path, extra)
    assert main(["format", "-c", str(cfg), *args]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "meta" / "meta.properties").exists()


def test_missing_config_via_subprocess(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "kraftnode", "format", "-c", str(tmp_path / "nope"),
                        "-t", CLUSTER, "-s"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "does not exist" in p.stderr
