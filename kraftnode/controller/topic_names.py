"""Topic names as Kafka's ``Topic.validate`` judges them."""

from __future__ import annotations

import re

__all__ = ["MAX_TOPIC_NAME", "topic_name_error"]

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str) -> str | None:
    """Topic.validate: why ``name`` is not a legal topic name (None if it is)."""
    why = None
    if name == "":
        why = "the empty string is not allowed"
    elif name == ".":
        why = "'.' is not allowed"
    elif name == "..":
        why = "'..' is not allowed"
    elif len(name) > MAX_TOPIC_NAME:
        why = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}"
    elif not _LEGAL.fullmatch(name):
        why = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None if why is None else f"Topic name is invalid: {why}"
