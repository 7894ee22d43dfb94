"""The group coordinator's defaults are the key table's (kraftnode.config.keys is the one source
of names and defaults; GroupConfig's field defaults only serve code that builds one directly)."""

from __future__ import annotations

from kraftnode.config import keys
from kraftnode.config.consumers import GROUP_KEYS as KEYS
from kraftnode.groups.config import GroupConfig


def test_every_group_key_defaults_as_the_key_table_says() -> None:
    defaults = GroupConfig()
    for key, (attr, kind) in KEYS.items():
        table = keys.value({}, key)
        ours = getattr(defaults, attr)
        if kind == "list":
            assert isinstance(table, list)
            assert list(ours) == [t.strip() for t in table], key
        else:
            assert ours == table, key
