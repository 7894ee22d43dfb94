"""The root of kraftnode's exceptions, split by where the fault lies.

Every exception kraftnode defines derives from :class:`KraftnodeError`, through one of two
branches that say *whose* fault it is, as h11 splits ``LocalProtocolError`` (we were asked
to do something wrong) from ``RemoteProtocolError`` (the other side did something wrong):

* :class:`LocalError` -- the fault is on this side: the operator's configuration or command
  line, this machine's files and disks (a missing, unreadable, corrupt or locked file, a
  failed fsync), or a call that breaks one of this node's own invariants (an append the log
  refuses, whoever built the batches).  The answer is to refuse: a command prints one line
  and exits 2, the node does not start or stops.
* :class:`RemoteError` -- the fault is on the other side of a connection: a peer or client
  sent bytes that break the protocol, failed to authenticate, or went away.  The answer is
  an error code or a closed connection; the node goes on serving everyone else.

The branch is the origin of the fault, not the layer that noticed it: the log's errors are
local even when a request triggered them, because the log cannot tell who asked.

Each family also keeps the builtin base it had before this hierarchy existed
(:class:`ConfigError` is still a ``ValueError``), so ``except ValueError`` around a parser
keeps working.  ``recordbatch`` and ``codegen`` are standalone and keep their own roots.

:class:`ConfigError` lives here rather than in :mod:`kraftnode.config` so that layers below
the configuration package (the Java properties reader used for ``meta.properties``, the log's
own settings) can raise it without importing the configuration package.
"""

from __future__ import annotations

__all__ = ["ConfigError", "KraftnodeError", "LocalError", "RemoteError", "UsageError"]


class KraftnodeError(Exception):
    """Every exception kraftnode defines (``recordbatch`` and ``codegen`` excepted)."""


class LocalError(KraftnodeError):
    """The fault is on this side: configuration, command line, local files, own invariants."""


class RemoteError(KraftnodeError):
    """The fault is on the other side of a connection: a peer's or client's bytes or behaviour."""


class ConfigError(LocalError, ValueError):
    """A configuration value is missing or invalid; the message names the key."""


class UsageError(LocalError):
    """A user mistake on the command line: ``kraftnode`` prints it as one line and exits with
    code 2 (``cli.py``). Here, at the root, so that the CLI's client (``quorum_client.py``)
    and the sub-commands raise it without importing one another or the dispatcher."""
