"""Kafka's random Uuids and the reserved ids it never hands out.

``Uuid.randomUuid()`` draws a random (version 4) UUID and retries while it is one of
the reserved ids (ZERO, ONE, the metadata topic id) or its base64 text starts with
``-`` (so it is never mistaken for a command-line flag).  Directory ids must in
addition avoid ``DirectoryId``'s reserved range: most significant 64 bits zero and
least significant bits below 100 (UNASSIGNED=0, LOST=1, MIGRATING=2, and room for
more), which Kafka refuses in ``meta.properties`` at start-up.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection

from kraftnode.vocabulary import METADATA_TOPIC_ID
from recordbatch.wire import uuid_to_base64

__all__ = ["random_uuid", "random_directory_id", "is_reserved_uuid", "is_reserved_directory_id"]

ZERO_UUID = uuid.UUID(int=0)
ONE_UUID = uuid.UUID(int=1)  # Uuid.ONE_UUID
_RESERVED = frozenset({ZERO_UUID, ONE_UUID, METADATA_TOPIC_ID})


def is_reserved_uuid(u: uuid.UUID) -> bool:
    return u in _RESERVED


def is_reserved_directory_id(u: uuid.UUID) -> bool:
    """``DirectoryId.reserved``: msb == 0 and lsb < 100."""
    return (u.int >> 64) == 0 and (u.int & 0xFFFFFFFFFFFFFFFF) < 100


def random_uuid() -> uuid.UUID:
    while True:
        u = uuid.uuid4()
        if u not in _RESERVED and not uuid_to_base64(u).startswith("-"):
            return u


def random_directory_id(in_use: Collection[uuid.UUID] = ()) -> uuid.UUID:
    while True:
        u = random_uuid()
        if not is_reserved_directory_id(u) and u not in in_use:
            return u
