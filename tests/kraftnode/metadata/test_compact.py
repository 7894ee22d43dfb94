"""The image's compact partitions (kraftnode/metadata/compact.py): the fast PartitionRecord decoder
decodes every record as the generated codec does (random records of every version, byte for byte
on the way back), falls back to the codec for what it does not handle and for malformed input
(the same errors), and the image shares equal lists between partitions without any partition
seeing another's change."""

from __future__ import annotations

import random
import uuid

import pytest

from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.metadata import compact
from kraftnode.metadata.compact import decode_image_record
from kraftnode.metadata.image import MetadataImage
from kraftnode.metadata.state import MetadataState
from kraftnode.protocol.generated.metadata import (
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from recordbatch.wire import DecodeError

DIRS = [uuid.UUID(int=(b << 64) | 7) for b in range(1, 6)] + [uuid.UUID(int=1), uuid.UUID(int=2)]


def ints(rng: random.Random, hi: int) -> list[int]:
    n = rng.choice([0, 0, 1, 3, 3, 5, rng.randrange(0, 200)])  # now and then past the fast path
    return [rng.choice([rng.randrange(0, 40), rng.randrange(-2**31, 2**31)]) for _ in range(min(n, hi))]


def random_partition(rng: random.Random, version: int) -> PartitionRecord:
    replicas = ints(rng, 300)
    p = PartitionRecord(
        partition_id=rng.choice([0, 7, rng.randrange(-2**31, 2**31)]), topic_id=uuid.UUID(int=rng.getrandbits(128)),
        replicas=replicas, isr=rng.choice([list(replicas), ints(rng, 300)]), removing_replicas=ints(rng, 4),
        adding_replicas=ints(rng, 4), leader=rng.choice([-1, 3, rng.randrange(-2**31, 2**31)]),
        leader_recovery_state=rng.choice([0, 0, 0, 1]), leader_epoch=rng.randrange(-1, 2**31),
        partition_epoch=rng.randrange(-1, 2**31))
    if version >= 1:
        p.directories = [rng.choice(DIRS) for _ in range(rng.choice([0, 3, 3, len(replicas), 130]))]
    if version >= 2 and rng.random() < 0.3:
        p.eligible_leader_replicas = ints(rng, 5)
        p.last_known_elr = rng.choice([None, ints(rng, 5)])
    if rng.random() < 0.05:
        p.unknown_tagged_fields = [(9, b"\x01\x02")]
    return p


def test_fast_decoder_agrees_with_the_generated_codec_on_random_records() -> None:
    rng = random.Random(3901)
    fast = 0
    for i in range(6000):
        version = i % 3
        value = encode_metadata_record(random_partition(rng, version), version)
        want, want_v = decode_metadata_record(value)
        for given in (value, memoryview(value), bytearray(value)):
            got, got_v = decode_image_record(given)
            assert (got, got_v) == (want, want_v)
            assert type(got) is PartitionRecord
            assert encode_metadata_record(got, got_v) == value  # byte for byte
            for attr in ("replicas", "isr", "removing_replicas", "adding_replicas", "directories"):
                assert isinstance(getattr(got, attr), list)
        try:
            compact._fast_partition(value, version)
            fast += 1
        except (DecodeError, IndexError):
            pass
    assert fast > 3000  # most records take the fast path, and the rest the codec


def test_malformed_records_fail_as_the_codec_fails() -> None:
    rng = random.Random(3902)
    for i in range(1500):
        version = i % 3
        value = encode_metadata_record(random_partition(rng, version), version)
        cut = rng.randrange(3, len(value))
        bad = [value[:cut], value + b"\x00", value[:cut] + bytes([rng.randrange(256)]) + value[cut + 1:]]
        for b in bad:
            try:
                want: object = decode_metadata_record(b)
            except (DecodeError, ValueError, IndexError) as e:
                want = (type(e), str(e))
            try:
                got: object = decode_image_record(b)
            except (DecodeError, ValueError, IndexError) as e:
                got = (type(e), str(e))
            assert got == want


def test_other_records_decode_as_before() -> None:
    t = TopicRecord(name="a", topic_id=uuid.UUID(int=5))
    value = encode_metadata_record(t, 0)
    assert decode_image_record(value) == decode_metadata_record(value) == (t, 0)


def image_with(parts: int) -> MetadataImage:
    im = MetadataImage()
    tid = uuid.UUID(int=77)
    im.replay(TopicRecord(name="t", topic_id=tid), 0)
    for p in range(parts):
        value = encode_metadata_record(PartitionRecord(
            partition_id=p, topic_id=uuid.UUID(int=77), replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0,
            partition_epoch=0, directories=DIRS[:3]), 1)
        im.replay(*decode_image_record(value))
    return im


def test_the_image_shares_equal_lists_and_a_change_touches_one_partition() -> None:
    im = image_with(4)
    tid = next(iter(im.topics))
    p = {pid: rec for pid, (rec, _v) in im.partitions[tid].items()}
    assert p[0].replicas is p[1].replicas and p[0].isr is p[3].replicas
    assert p[0].directories is p[2].directories and p[0].removing_replicas is p[0].adding_replicas
    assert p[2].topic_id is im.topics[tid][0].topic_id  # the image's own topic id object
    im.replay(PartitionChangeRecord(topic_id=tid, partition_id=1, isr=[1, 2], leader=2), 0)
    after = {pid: rec for pid, (rec, _v) in im.partitions[tid].items()}
    assert (after[1].isr, after[1].leader, after[1].leader_epoch, after[1].partition_epoch) == ([1, 2], 2, 1, 1)
    for pid in (0, 2, 3):  # the others, and the lists they share, are untouched
        assert after[pid] is p[pid] and after[pid].isr == [1, 2, 3] and after[pid].leader == 1
    assert p[1].isr == [1, 2, 3]  # the replaced record itself too
    assert after[1].replicas is p[0].replicas


def test_records_built_in_memory_are_compacted_without_touching_the_callers_lists() -> None:
    im = MetadataImage()
    tid = uuid.UUID(int=78)
    im.replay(TopicRecord(name="u", topic_id=tid), 0)
    mine = [4, 5, 6]
    im.replay(PartitionRecord(partition_id=0, topic_id=uuid.UUID(int=78), replicas=mine, isr=mine), 1)
    im.replay(PartitionRecord(partition_id=1, topic_id=uuid.UUID(int=78), replicas=[4, 5, 6], isr=[4, 5, 6]), 1)
    a, b = (im.partitions[tid][i][0] for i in (0, 1))
    assert a.replicas is b.replicas is a.isr and a.replicas is not mine
    mine.append(7)  # the caller's list stays its own
    assert a.replicas == [4, 5, 6]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_snapshot_of_a_compact_image_is_byte_identical(version: int) -> None:
    rng = random.Random(3903 + version)
    tid = uuid.UUID(int=80)
    values = [encode_metadata_record(TopicRecord(name="w", topic_id=tid), 0)]
    for pid in range(200):
        p = random_partition(rng, version)
        p.topic_id, p.partition_id = tid, pid
        values.append(encode_metadata_record(p, version))
    st = MetadataState()
    st.load_snapshot((None, v) for v in values)
    assert [v for _k, v in st.snapshot()()] == values


def test_shared_lists_refuse_changes_and_copy_as_lists() -> None:
    import copy
    import pickle

    im = image_with(2)
    tid = next(iter(im.topics))
    rec = im.partitions[tid][0][0]
    for change in (lambda x: x.append(4), lambda x: x.extend([4]), lambda x: x.sort(), lambda x: x.pop(),
                   lambda x: x.__setitem__(0, 9), lambda x: x.__delitem__(0), lambda x: x.remove(1),
                   lambda x: x.insert(0, 1), lambda x: x.clear(), lambda x: x.reverse(), lambda x: x.__iadd__([1])):
        with pytest.raises(TypeError, match="shared by partitions"):
            change(rec.isr)
    assert rec.isr == [1, 2, 3] and im.partitions[tid][1][0].isr == [1, 2, 3]
    for c in (copy.copy(rec), copy.deepcopy(rec), pickle.loads(pickle.dumps(rec))):
        assert c == rec and c.isr == [1, 2, 3]
    mine = list(rec.isr)
    mine.append(4)
    assert mine == [1, 2, 3, 4] and rec.isr == [1, 2, 3]
