"""KIP-848 regex subscriptions: which topics a ``SubscribedTopicRegex`` names, and the
error a pattern that does not compile gets.

Kafka's group coordinator compiles the pattern with RE2/J (``com.google.re2j.Pattern``)
and a topic is subscribed when the pattern matches its whole name
(``Matcher.matches()``).  Python's ``re`` is a backtracking engine with another dialect
(lookaround and backreferences compile there and not in RE2/J; ``\\Z``, ``(?P=name)``
...), so a pattern would be accepted or refused differently; RE2/J is a port of RE2, so
we use RE2 itself (the ``google-re2`` package, C++ RE2's Python binding).

A pattern RE2 refuses gets Kafka's INVALID_REGULAR_EXPRESSION with the message
``Utils.throwIfRegularExpressionIsInvalid`` builds from RE2/J's
``PatternSyntaxException.getDescription()``; RE2 names the same syntax errors with its
own words (``missing )`` vs ``missing closing )``), so :data:`RE2J_DESCRIPTIONS`
translates them.  Where the two engines' grammars themselves differ (RE2 >= 2023 also
reads ``(?<name>...)``, RE2/J before 1.8 does not), RE2's answer stands.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kraftnode.errors import RemoteError

__all__ = ["InvalidRegex", "compile_regex", "matching_topics", "RE2J_DESCRIPTIONS"]

#: RE2's error code text (``RegexpStatus::CodeText``) -> RE2/J's ``Parser.ERR_*`` text.
#: An unmatched ``)`` is RE2/J's "regexp/syntax: internal error" (its parser's stack
#: underflows before it can say "missing closing )"; Go's newer "unexpected )" is not
#: in RE2/J).
RE2J_DESCRIPTIONS: dict[str, str] = {
    "missing )": "missing closing )",
    "unexpected )": "regexp/syntax: internal error",
    "missing ]": "missing closing ]",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "trailing \\": "trailing backslash at end of expression",
    "invalid escape sequence": "invalid escape sequence",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
    "invalid character class range": "invalid character class range",
    "invalid character class": "invalid character class",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "duplicate capture group name": "duplicate capture group name",
}


class InvalidRegex(RemoteError, ValueError):
    """A pattern RE2/J would refuse (a client's input); ``description`` is RE2/J's text for why."""

    def __init__(self, pattern: str, description: str) -> None:
        super().__init__(description)
        self.pattern = pattern
        self.description = description

    @property
    def kafka_message(self) -> str:
        """The ErrorMessage Kafka answers (GroupMetadataManager/Utils, Kafka 4.x)."""
        return (f"SubscribedTopicRegex `{self.pattern}` is not a valid regular expression: "
                f"{self.description}.")


def _description(error: Any) -> str:
    text = error.args[0] if error.args else ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = str(text)
    # RE2 says "<code text>: <offending part>" (or just the code text)
    for code in sorted(RE2J_DESCRIPTIONS, key=len, reverse=True):
        if text == code or text.startswith(code + ":"):
            return RE2J_DESCRIPTIONS[code]
    return text.split(":", 1)[0] or "invalid regular expression"


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """The compiled pattern, or :class:`InvalidRegex`.  Cached: every heartbeat of every
    member subscribed with a regex resolves it again (patterns are few; topics change)."""
    # imported here, not at module level: every node imports the coordinator, and only a
    # regex subscription needs RE2 (a node whose environment predates the google-re2
    # dependency still starts and serves everything else)
    import re2  # type: ignore[import-untyped, unused-ignore]

    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        raise InvalidRegex(pattern, _description(e)) from None


def matching_topics(pattern: str, topics: Any) -> set[str]:
    """The names among ``topics`` that ``pattern`` matches as a whole (RE2/J's
    ``matcher(name).matches()``); an invalid pattern matches nothing (Kafka checks it
    when a member subscribes, see :func:`compile_regex`)."""
    if not pattern:
        return set()
    try:
        compiled = compile_regex(pattern)
    except InvalidRegex:
        return set()
    return {t for t in topics if compiled.fullmatch(t) is not None}
