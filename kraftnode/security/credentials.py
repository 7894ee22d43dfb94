"""Where a SCRAM listener finds a user's credential: the metadata log, and -- until the log
has said anything at all -- the node's ``bootstrap.checkpoint``.

Kafka 3.9 verifies SCRAM logins only against its committed metadata image, so controllers
that log in to each other with SCRAM can never elect a first leader: the credentials
arrive with the bootstrap records, which only a leader can commit (KAFKA-15513).  The
records ``kraftnode format --add-scram`` wrote into ``bootstrap.checkpoint`` are exactly
what the first active controller will commit, and they are on disk before the first
election.  So the lookup here is, for (user, mechanism):

1. the committed metadata image (what this node has replayed up to the high watermark);
   after a restart, also the records of its own log above that image, read once at
   start-up (:class:`LogTail`), until the replay has passed them -- a restarted node
   does not know the high watermark before a leader exists, and its peers must still be
   able to log in to elect one;
2. only while neither holds any metadata record -- the metadata log is empty -- the
   ``bootstrap.checkpoint`` records.

Once the log holds anything it is the only authority, as in Kafka: the first active
controller writes *all* of its bootstrap users in one transaction, so from then on a user
the log does not name is a user the cluster does not have, and a user altered or deleted
through AlterUserScramCredentials follows the log, never the file.  No node keeps a
credential that ``describeUserScramCredentials`` does not show.  docs/security.md
("SCRAM between controllers") discusses the cases and the start-up refusal
(:func:`check_controller_login`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kraftnode.errors import ConfigError
from kraftnode.log.bootstrap import BOOTSTRAP_FILE, read_bootstrap_records
from kraftnode.log.metadata_records import decode_metadata_record
from kraftnode.metadata.state import MetadataState, holds_metadata_records
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from kraftnode.security.scram import MECHANISMS, ScramCredential
from recordbatch import BatchView, CorruptBatchError
from recordbatch.wire import DecodeError

__all__ = ["LogTail", "ScramCredentials", "bootstrap_scram", "check_controller_login", "scan_log_tail"]

log = logging.getLogger("kraftnode.security")

#: (user name, Kafka's ScramMechanism type id)
Key = tuple[str, int]


def bootstrap_scram(metadata_dir: str | Path) -> dict[Key, UserScramCredentialRecord]:
    """The SCRAM credentials of the node's ``bootstrap.checkpoint`` (none without the file);
    ValueError when the file cannot be read."""
    values, _source = read_bootstrap_records(metadata_dir)
    out: dict[Key, UserScramCredentialRecord] = {}
    for v in values:
        m, _ = decode_metadata_record(v)
        if isinstance(m, UserScramCredentialRecord):   # the last one of a user wins, as on replay
            out[(m.name, m.mechanism)] = m
    return out


@dataclass
class LogTail:
    """What the records of the local log in ``[start_offset, end_offset)`` -- above the
    committed image at start-up -- say about SCRAM users: the last change per user (None:
    removed) and how many metadata records they hold, both leaving out aborted and
    unfinished metadata transactions (Kafka's loader publishes neither)."""

    start_offset: int
    end_offset: int
    changes: dict[Key, UserScramCredentialRecord | None] = field(default_factory=dict)
    metadata_records: int = 0


def scan_log_tail(batches: Iterable[BatchView], start_offset: int, end_offset: int) -> LogTail:
    """Read the metadata records of ``batches`` in ``[start_offset, end_offset)``."""
    tail = LogTail(start_offset, end_offset)
    open_tx: tuple[dict[Key, UserScramCredentialRecord | None], list[int]] | None = None
    for b in batches:
        if b.base_offset >= end_offset:
            break
        if b.last_offset < start_offset or b.is_control or not holds_metadata_records(b):
            continue   # control records, application data
        try:
            records = list(b.records())
        except (CorruptBatchError, DecodeError, ValueError):
            continue   # the replay will meet (and report) it; it holds no credential we can use
        for r in records:
            if not start_offset <= r.offset < end_offset or r.value is None:
                continue
            try:
                m, _ = decode_metadata_record(r.value)
            except (DecodeError, ValueError, IndexError):
                continue
            if isinstance(m, BeginTransactionRecord):
                open_tx = ({}, [0])
                continue
            if isinstance(m, EndTransactionRecord):
                if open_tx is not None:
                    tail.changes.update(open_tx[0])
                    tail.metadata_records += open_tx[1][0]
                open_tx = None
                continue
            if isinstance(m, AbortTransactionRecord):
                open_tx = None
                continue
            changes, counted = (open_tx if open_tx is not None else (tail.changes, None))
            if counted is None:
                tail.metadata_records += 1
            else:
                counted[0] += 1
            if isinstance(m, UserScramCredentialRecord):
                changes[(m.name, m.mechanism)] = m
            elif isinstance(m, RemoveUserScramCredentialRecord):
                changes[(m.name, m.mechanism)] = None
    return tail


def _credential(rec: UserScramCredentialRecord | None) -> ScramCredential | None:
    if rec is None:
        return None
    return ScramCredential(bytes(rec.salt), bytes(rec.stored_key), bytes(rec.server_key), rec.iterations)


class ScramCredentials:
    """The SCRAM credential store of one node, shared by its SASL listeners (see the module
    doc for the order).  ``committed``: the node's metadata image (None: the node's state
    machine is not the metadata image, so its log never speaks about users and the
    bootstrap file is all there is); ``tail``: :func:`scan_log_tail` of the local log above
    that image at start-up."""

    def __init__(self, bootstrap: Mapping[Key, UserScramCredentialRecord],
                 committed: Callable[[], MetadataState] | None = None,
                 tail: LogTail | None = None) -> None:
        self.bootstrap = dict(bootstrap)
        self._committed = committed
        self._tail = tail if tail is not None and tail.end_offset > tail.start_offset else None

    def _current_tail(self, state: MetadataState) -> LogTail | None:
        tail = self._tail
        if tail is not None and state.next_offset >= tail.end_offset:
            # the replay has passed everything the tail read: from now on the image says it
            # all (and a tail truncated meanwhile cannot come back)
            self._tail = tail = None
        return tail

    def log_is_empty(self) -> bool:
        """True while this node knows no metadata record: the bootstrap file is consulted."""
        if self._committed is None:
            return True
        state = self._committed()
        tail = self._current_tail(state)
        return state.empty and (tail is None or tail.metadata_records == 0)

    def record(self, name: str, mechanism_type: int) -> UserScramCredentialRecord | None:
        """The credential record of (``name``, mechanism), where the lookup order finds it."""
        key = (name, mechanism_type)
        if self._committed is None:
            return self.bootstrap.get(key)
        state = self._committed()
        tail = self._current_tail(state)
        if tail is not None and key in tail.changes:
            return tail.changes[key]
        rec = state.scram.get(key)
        if rec is not None or not state.empty or (tail is not None and tail.metadata_records):
            return rec   # the log has spoken: it alone decides
        return self.bootstrap.get(key)

    def lookup(self, mechanism: str, name: str) -> ScramCredential | None:
        """The listeners' lookup (security.sasl.ScramLookup)."""
        return _credential(self.record(name, MECHANISMS[mechanism][0]))

    def describe(self) -> str:
        """Where credentials come from right now, for the start-up log line."""
        if self._committed is not None and not self.log_is_empty():
            return "SCRAM credentials come from the metadata log"
        users = sorted({n for n, _ in self.bootstrap})
        what = (f"{len(users)} user(s) ({', '.join(users)})" if users else "no user")
        if self._committed is None:
            return f"SCRAM credentials: {what} from {BOOTSTRAP_FILE} (this node's log holds no metadata)"
        return (f"SCRAM credentials: {what} from {BOOTSTRAP_FILE} until the metadata log holds "
                "records of its own (it is empty)")


def _verifies(rec: UserScramCredentialRecord, mechanism: str, password: str) -> bool:
    """Whether ``password`` is the one ``rec`` was derived from (as the server checks a proof)."""
    h = MECHANISMS[mechanism][1]
    salted = hashlib.pbkdf2_hmac(h, password.encode(), bytes(rec.salt), rec.iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    return hmac.compare_digest(hashlib.new(h, client_key).digest(), bytes(rec.stored_key))


def check_controller_login(creds: ScramCredentials, login: tuple[str, str, str], jaas_key: str,
                           metadata_dir: str | Path, voters: int, is_voter: bool) -> str | None:
    """The start-up check of a controller that logs in to its peers with SCRAM.

    While the metadata log is empty, the first leader will commit *its own*
    ``bootstrap.checkpoint`` users, and from then on those are the cluster's only
    credentials.  So an initial voter of a quorum with other voters whose bootstrap file
    does not verify its own login (no credential for the user, or one made from another
    password) cannot work: if its peers were formatted alike, none can verify it now; if
    they were not and it wins the first election, it writes credentials that refuse its
    login everywhere.  ConfigError naming the keys then.  A node that is not a voter yet
    (``--no-initial-controllers``) learns the users from the log while its peers verify it
    against theirs, and a node whose log holds records follows the log (it may be behind a password
    change its peers have seen): neither is refused.  Returns a warning for a single voter
    (nothing needs its login until a second voter exists, and AlterUserScramCredentials
    can add the user by then), else None.
    """
    mechanism, user, password = login
    if mechanism not in MECHANISMS or not is_voter or not creds.log_is_empty():
        return None
    path = Path(metadata_dir) / BOOTSTRAP_FILE
    rec = creds.bootstrap.get((user, MECHANISMS[mechanism][0]))
    if rec is None:
        problem = (f"the controller login user '{user}' ({jaas_key}) has no {mechanism} credential in "
                   f"{path}")
        fix = f"format with --add-scram '{mechanism}=[name={user},password=...]'"
    elif not _verifies(rec, mechanism, password):
        problem = (f"the password of the controller login user '{user}' ({jaas_key}) does not match its "
                   f"{mechanism} credential in {path}")
        fix = "format with the login's password in --add-scram"
    else:
        return None
    if voters <= 1:
        return (f"sasl.mechanism.controller.protocol={mechanism}: {problem}; a voter added later cannot "
                "verify this node's login unless AlterUserScramCredentials sets it first")
    raise ConfigError(f"sasl.mechanism.controller.protocol={mechanism}: {problem}, and the metadata log "
                      "is empty: voters formatted alike cannot verify this login, and were this node "
                      f"elected first its bootstrap users would become everyone's; {fix}")
