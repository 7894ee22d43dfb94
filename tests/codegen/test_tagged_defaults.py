"""Tagged struct fields are written only when they differ from their default, decided by the
generated ``_isdef_*`` functions (issue 28): a nullable one holding None is not its default
(a default-constructed struct is), so None must be written (as null) and read back as None.
The generated test says so before the call (``x is not None and _isdef_...(x)``): the
``_isdef_*`` functions take the struct, not an optional one (mypy strict)."""

from __future__ import annotations

from kraftnode.protocol.generated.groups.consumer_group_member_metadata_value import (
    ConsumerGroupMemberMetadataValue as Value,
)
from kraftnode.protocol.generated.groups.consumer_group_member_metadata_value import (
    _ConsumerGroupMemberMetadataValue_ClassicMemberMetadata as Classic,
)


def _value(classic: Classic | None) -> Value:
    return Value(client_id="c", client_host="/127.0.0.1", classic_member_metadata=classic)


def test_a_default_tagged_struct_is_left_out() -> None:
    plain = _value(Value.ClassicMemberMetadata())
    data = plain.encode(0)
    assert Value.decode(data, 0) == plain
    assert len(data) < len(_value(None).encode(0))    # the null is a tagged field; the default is none


def test_a_null_tagged_struct_is_written_and_read_back_as_null() -> None:
    back = Value.decode(_value(None).encode(0), 0)
    assert back.classic_member_metadata is None


def test_a_set_tagged_struct_round_trips() -> None:
    meta = Value.ClassicMemberMetadata(session_timeout_ms=45000)
    back = Value.decode(_value(meta).encode(0), 0)
    assert back.classic_member_metadata == meta


def test_a_null_struct_in_a_tagged_field_is_kafkas_varint_0() -> None:
    """Kafka's generator writes a nullable struct inside a tagged field with an unsigned
    varint marker (0 null, 1 present), not the int8 -1 of an untagged one: Kafka 3.9's
    ConsumerGroupMemberMetadataValue reads 0xff there as the start of a longer varint (found by
    tests/interop/test_codec_vs_kafka.py). What kraftnode wrote before is still read as null."""
    from kraftnode.protocol.generated.groups import ConsumerGroupMemberMetadataValue

    m = ConsumerGroupMemberMetadataValue(client_id="a", client_host="b", subscribed_topic_names=[],
                                         classic_member_metadata=None)
    raw = m.encode(0)
    assert raw.endswith(bytes([1, 0, 1, 0]))  # one tagged field: tag 0, size 1, null
    assert ConsumerGroupMemberMetadataValue.decode(raw, 0) == m
    legacy = raw[:-1] + b"\xff"
    assert ConsumerGroupMemberMetadataValue.decode(legacy, 0).classic_member_metadata is None
