"""Every generated message, every valid version: decode(encode(x)) == x and re-encoding
is byte-identical -- including unknown tagged fields, which must survive untouched."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kraftnode.protocol.strategies import all_message_classes, attach_flexibility, message

CLASSES = all_message_classes()
attach_flexibility(CLASSES)
CASES = [
    pytest.param(cls, v, id=f"{cls.NAME}-v{v}")
    for cls in CLASSES
    for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)  # type: ignore[attr-defined]
]


def test_every_schema_is_generated() -> None:
    assert len(CLASSES) >= 37 + 25 + 5


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(cls: type, version: int, data: st.DataObject) -> None:
    msg = data.draw(message(cls, version))
    encoded = msg.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == msg
    assert decoded.encode(version) == encoded
    # decode_from leaves the position after the message, so framed parsing can continue
    obj, pos = cls.decode_from(memoryview(encoded + b"tail"), 0, version)
    assert pos == len(encoded) and obj == msg
