"""Write the metadata log dirs of a 3-replica quorum with a known history, for the audit.

Why this exists: the audit must be tested (and demonstrated) against logs whose
history is known exactly -- leader changes, a voter-set change, a legal
uncommitted tail on a deposed leader, and, on request, a planted safety violation.
The files are written through ``MetadataLog`` exactly as a node writes them
(leader: ``append_as_leader``-equivalent batches with assigned offsets; followers:
``append_as_follower`` of the same bytes), with ``meta.properties`` per replica.

History (offsets depend on ``records_per_epoch``):

* epoch 1, leader 1 (granted by 1, 2): KRaftVersion + Voters {1,2,3}, LeaderChange,
  metadata records (FeatureLevel, Topic, Partition, Config), none/lz4/zstd batches;
* epoch 2, leader 2 (granted by 2, 3): LeaderChange, records, a VotersRecord with
  node 3 on a new port; then ``tail`` batches that only leader 2 wrote before it
  was deposed (uncommitted: replica 2 still holds them at audit time);
* epoch 3, leader 3 (granted by 3, 1): LeaderChange at the offset where replica 2's
  stale tail starts, records; replica 1 lags one batch behind.

    python tools/pipelines/sample_quorum.py DIR      # writes DIR/node{1,2,3}/metadata
"""

from __future__ import annotations

import shutil
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import recordbatch as rb
from kraftnode.log import LogConfig, MetadataLog
from kraftnode.log.meta_properties import MetaProperties, write_meta_properties
from kraftnode.log.metadata_log import METADATA_PARTITION_DIR
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol.generated import metadata as md
from recordbatch.generated import KRaftVersionRecord, LeaderChangeMessage, VotersRecord

__all__ = ["SampleQuorum", "write_sample_quorum", "plant_divergence", "T0"]

T0 = 1_700_000_000_000
CLUSTER_ID = "kraftnode-sample-AAAA"
CONFIG = LogConfig(segment_bytes=256 * 1024, segment_min_bytes=1)


@dataclass
class SampleQuorum:
    root: Path
    log_dirs: dict[int, Path]
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader
    granting: dict[int, list[int]] = field(default_factory=dict)
    epoch_start: dict[int, int] = field(default_factory=dict)  # epoch -> LeaderChange offset
    stale_tail: tuple[int, int] = (0, 0)  # [start, end) offsets only replica 2 holds (epoch 2)
    end_offsets: dict[int, int] = field(default_factory=dict)  # replica -> log end offset
    voters_offsets: list[int] = field(default_factory=list)


def _voters(port3: int) -> VotersRecord:
    return VotersRecord(voters=[
        VotersRecord.Voter(voter_id=i, voter_directory_id=uuid.UUID(int=(i << 64) + 0xC0FFEE),
                           endpoints=[VotersRecord.Endpoint(name="CONTROLLER", host="127.0.0.1",
                                                            port=port3 if i == 3 else 9090 + i)],
                           kraft_version_feature=VotersRecord.KRaftVersionFeature(min_supported_version=0,
                                                                                 max_supported_version=1))
        for i in (1, 2, 3)])


def _leader_change(leader: int, granting: list[int]) -> LeaderChangeMessage:
    return LeaderChangeMessage(leader_id=leader,
                               voters=[LeaderChangeMessage.Voter(voter_id=i) for i in (1, 2, 3)],
                               granting_voters=[LeaderChangeMessage.Voter(voter_id=i) for i in granting])


def _metadata_batch(i: int, epoch: int, offset: int, ts: int) -> bytes:
    topic_id = uuid.UUID(int=(epoch << 32) + i + 1)
    msgs: list[tuple[object, int]] = [
        (md.TopicRecord(name=f"topic-{epoch}-{i}", topic_id=topic_id), 0),
        (md.PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1, 2, 3], isr=[1, 2, 3],
                            removing_replicas=[], adding_replicas=[], leader=1 + i % 3, leader_epoch=0,
                            partition_epoch=0), 0),
        (md.ConfigRecord(resource_type=2, resource_name=f"topic-{epoch}-{i}", name="retention.ms",
                         value=str(1000 * (i + 1))), 0),
    ]
    if i == 0 and epoch == 1:
        msgs.insert(0, (md.FeatureLevelRecord(name="metadata.version", feature_level=21), 0))
    records = [rb.Record(None, encode_metadata_record(m, v), (), timestamp=ts) for m, v in msgs]
    return rb.build_batch(records, base_offset=offset, partition_leader_epoch=epoch,
                          compression=("none", "lz4", "zstd")[i % 3])


class _Writer:
    """The "true" sequence of batches, and which replicas hold each."""

    def __init__(self) -> None:
        self.batches: list[tuple[bytes, set[int]]] = []
        self.next_offset = 0
        self.ts = T0

    def add(self, batch: bytes, holders: set[int]) -> int:
        view = next(rb.iter_batches(batch))
        assert view.base_offset == self.next_offset
        offset = self.next_offset
        self.batches.append((batch, holders))
        self.next_offset = view.next_offset
        self.ts += 250
        return offset


def write_sample_quorum(root: Path, records_per_epoch: int = 12, tail: int = 3) -> SampleQuorum:
    root = Path(root)
    q = SampleQuorum(root, {i: root / f"node{i}" / "metadata" for i in (1, 2, 3)})
    w = _Writer()
    everyone = {1, 2, 3}

    def leader_change(epoch: int, leader: int, granting: list[int], holders: set[int]) -> None:
        q.leaders[epoch] = leader
        q.granting[epoch] = granting
        q.epoch_start[epoch] = w.add(rb.leader_change_batch(_leader_change(leader, granting),
                                                            base_offset=w.next_offset,
                                                            partition_leader_epoch=epoch, timestamp=w.ts), holders)

    def records(epoch: int, n: int, holders: set[int]) -> None:
        for i in range(n):
            w.add(_metadata_batch(i, epoch, w.next_offset, w.ts), holders)

    # epoch 1
    q.voters_offsets.append(1 + w.add(rb.build_kraft_control_batch(  # [KRaftVersion @0, Voters @1]
        [KRaftVersionRecord(kraft_version=1), _voters(9093)], base_offset=0, partition_leader_epoch=1,
        timestamp=w.ts), everyone))
    leader_change(1, 1, [1, 2], everyone)
    records(1, records_per_epoch, everyone)
    # epoch 2
    leader_change(2, 2, [2, 3], everyone)
    records(2, records_per_epoch // 2, everyone)
    q.voters_offsets.append(w.add(rb.voters_batch(_voters(19093), base_offset=w.next_offset,
                                                  partition_leader_epoch=2, timestamp=w.ts), everyone))
    records(2, records_per_epoch // 2, everyone)
    tail_start = w.next_offset
    stale: list[bytes] = []
    for i in range(tail):  # written by leader 2 only, then leader 2 is deposed
        b = _metadata_batch(100 + i, 2, w.next_offset, w.ts)
        stale.append(b)
        w.next_offset = next(rb.iter_batches(b)).next_offset
    q.stale_tail = (tail_start, w.next_offset)
    w.next_offset = tail_start
    w.ts += 5000  # election timeout
    # epoch 3
    leader_change(3, 3, [3, 1], {1, 3})
    records(3, records_per_epoch - 1, {1, 3})
    records(3, 1, {3})  # replica 1 lags one batch

    for node, log_dir in q.log_dirs.items():
        log_dir.mkdir(parents=True, exist_ok=True)
        write_meta_properties(log_dir, MetaProperties(cluster_id=CLUSTER_ID, node_id=node,
                                                      directory_id=uuid.UUID(int=(node << 64) + 0xC0FFEE)))
        with MetadataLog(log_dir, CONFIG) as log:
            for batch, holders in w.batches:
                if node in holders and not (node == 2 and next(rb.iter_batches(batch)).base_offset >= tail_start):
                    log.append_as_follower(batch)
            if node == 2:
                for b in stale:
                    log.append_as_follower(b)
            log.flush()
            q.end_offsets[node] = log.end_offset
    return q


def plant_divergence(log_dir: Path, offset: int) -> Path:
    """Rewrite the record at ``offset`` in ``log_dir``'s segment with a different value of
    the same size, keeping its batch's offsets, epoch and timestamps and a valid CRC:
    what a replica that silently accepted another leader's entry would hold.
    Returns the segment file changed."""
    pdir = Path(log_dir) / METADATA_PARTITION_DIR
    for seg in sorted(pdir.glob("*.log")):
        data = bytearray(seg.read_bytes())
        pos = 0
        for view in rb.iter_batches(bytes(data)):
            size = view.size_in_bytes
            if view.base_offset <= offset <= view.last_offset and not view.is_control:
                recs = list(view.records())
                new = []
                for r in recs:
                    value = r.value
                    if r.offset == offset and value is not None:
                        value = value[:-1] + bytes([value[-1] ^ 0x5A])
                    new.append(rb.Record(r.key, value, r.headers, timestamp=r.timestamp))
                rebuilt = rb.build_batch(new, base_offset=view.base_offset,
                                         partition_leader_epoch=view.partition_leader_epoch,
                                         compression=view.compression)
                data[pos:pos + size] = rebuilt
                seg.write_bytes(bytes(data))
                return seg
            pos += size
    raise ValueError(f"no data record at offset {offset} under {log_dir}")


def flip_bytes(log_dir: Path, offset: int, count: int = 8, at: str = "records") -> tuple[int, int]:
    """Flip ``count`` bytes of the segment batch holding ``offset`` in ``log_dir``, as a bad disk
    would, leaving everything else in place: ``at="records"`` inside its records (its CRC no
    longer matches), ``at="length"`` in its length field (the file cannot be walked past it).
    Returns the batch's (base offset, last offset)."""
    pdir = Path(log_dir) / METADATA_PARTITION_DIR
    for seg in sorted(pdir.glob("*.log")):
        data = bytearray(seg.read_bytes())
        pos = 0
        for view in rb.iter_batches(bytes(data)):
            size = view.size_in_bytes
            if view.base_offset <= offset <= view.last_offset:
                start = pos + 8 if at == "length" else pos + 61 + (size - 61 - count) // 2
                for i in range(start, start + (4 if at == "length" else count)):
                    data[i] ^= 0xFF
                seg.write_bytes(bytes(data))
                return view.base_offset, view.last_offset
            pos += size
    raise ValueError(f"no batch holds offset {offset} under {log_dir}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: sample_quorum.py DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    if root.exists():
        shutil.rmtree(root)
    q = write_sample_quorum(root)
    print(f"wrote {', '.join(str(d) for d in q.log_dirs.values())}; leaders {q.leaders}; "
          f"stale tail on replica 2 at offsets {q.stale_tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
