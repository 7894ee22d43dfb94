"""The framed PartitionRecord's fast encoding is the generated codec's, byte for byte."""

from __future__ import annotations

import random
import uuid

import pytest

from kraftnode.log.metadata_records import decode_metadata_record, encode_metadata_record
from kraftnode.protocol.generated.metadata import PartitionRecord
from recordbatch.wire import uvarint


def generated(m: PartitionRecord, version: int) -> bytes:
    """The framing of Kafka's MetadataRecordSerde around the generated codec's body."""
    return uvarint(1) + uvarint(3) + uvarint(version) + m.encode(version)


def random_partition(rng: random.Random) -> PartitionRecord:
    def ints() -> list[int]:
        n = rng.choice([0, 1, 3, 5, 126, 127, 200]) if rng.random() < 0.2 else rng.randint(0, 4)
        return [rng.choice([0, 1, -1, 2**31 - 1, -(2**31), rng.randint(0, 5000)]) for _ in range(n)]
    dirs = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(rng.choice([0, 1, 3, 127] if rng.random() < 0.1
                                                                              else [0, 1, 2, 3]))]
    return PartitionRecord(
        partition_id=rng.randint(0, 2**31 - 1), topic_id=uuid.UUID(int=rng.getrandbits(128)), replicas=ints(),
        isr=ints(), removing_replicas=ints(), adding_replicas=ints(), leader=rng.randint(-1, 5000),
        leader_recovery_state=rng.choice([0, 0, 0, 1]), leader_epoch=rng.randint(0, 2**31 - 1),
        partition_epoch=rng.randint(0, 2**31 - 1), directories=dirs,
        eligible_leader_replicas=rng.choice([None, None, [], [1, 2]]),
        last_known_elr=rng.choice([None, None, [], [3]]),
        unknown_tagged_fields=rng.choice([None, None, None, [(7, b"x")]]))


@pytest.mark.parametrize("seed", range(4))
def test_a_partition_record_encodes_as_the_generated_codec_does(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(3000):
        m = random_partition(rng)
        for version in (0, 1, 2):
            try:
                want = generated(m, version)
            except Exception as e:  # noqa: BLE001 - the fast path must refuse it the same way
                with pytest.raises(type(e)):
                    encode_metadata_record(m, version)
                continue
            got = encode_metadata_record(m, version)
            assert got == want, (m, version)
            assert decode_metadata_record(got) == (m, version) or m.unknown_tagged_fields


def test_out_of_range_and_missing_fields_are_refused_by_the_generated_codec() -> None:
    base = random_partition(random.Random(9))
    base.leader_recovery_state, base.eligible_leader_replicas, base.last_known_elr = 0, None, None
    base.unknown_tagged_fields = None
    for field, bad in (("leader", 2**31), ("replicas", None), ("directories", None), ("isr", [2**40])):
        m = PartitionRecord(**{**{f: getattr(base, f) for f in PartitionRecord.__slots__}, field: bad})
        with pytest.raises(Exception) as want:  # noqa: PT011 - whatever the generated codec raises
            generated(m, 1)
        with pytest.raises(want.type):
            encode_metadata_record(m, 1)
