"""The one exception a sub-command raises for a user mistake.

It lives here, not in ``kraftnode.cli``, so that the dispatcher imports the commands and
the commands never import the dispatcher. It has no ``NAME``/``run``, so ``kraftnode.cli``
does not take it for a sub-command.
"""

from __future__ import annotations

from kraftnode.errors import LocalError


class UsageError(LocalError):
    """A user mistake: printed as one line, exit code 2."""
