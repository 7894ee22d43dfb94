"""A consumer's Fetch sees the group coordinator's batches as empty batches over the same
offsets (kraftnode.server.handlers.group_fetch_view.hide_group_batches), every other batch as is."""

from __future__ import annotations

from kraftnode.groups import records as rec
from kraftnode.server.handlers.group_fetch_view import hide_group_batches
from recordbatch import Record, build_batch, iter_batches


def _batch(records: list[Record], base: int) -> bytearray:
    b = bytearray(build_batch(records, now_ms=1000))
    b[0:8] = base.to_bytes(8, "big")
    return b


def test_group_batches_become_empty_batches_others_stay() -> None:
    app = _batch([Record(None, b"a"), Record(None, b"b")], 0)
    grp = _batch([Record(*rec.offset_commit("g", "t", 0, 5, -1, "", 1)),
                  Record(*rec.offset_commit("g", "t", 1, 6, -1, "", 1))], 2)
    keyed = _batch([Record(b"user-key", b"v")], 4)
    data = bytes(app + grp + keyed)
    out = bytes(hide_group_batches(data))
    got = list(iter_batches(out))
    assert [(b.base_offset, b.last_offset, b.records_count) for b in got] == [(0, 1, 2), (2, 3, 0), (4, 4, 1)]
    for b in got:
        b.validate()    # the empty batch's CRC is right
    assert out.startswith(bytes(app)) and out.endswith(bytes(keyed))
    assert hide_group_batches(bytes(app + keyed)) == bytes(app + keyed)   # nothing to hide: untouched
    # a batch cut at the byte limit of a Fetch stays cut
    cut = data[:-3]
    assert bytes(hide_group_batches(cut)).endswith(cut[len(app) + len(grp):])
