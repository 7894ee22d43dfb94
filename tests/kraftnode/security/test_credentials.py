"""Where a SCRAM login is verified (kraftnode.security.credentials): the committed metadata
image, the local log above it after a restart, and ``bootstrap.checkpoint`` only while the
metadata log is empty -- each case with a real SCRAM exchange (kraftnode's client and
server) against credentials written by ``kraftnode format --add-scram``'s code into a real
bootstrap.checkpoint and by a leader into a real metadata log.  Plus the start-up check of
a controller's own SCRAM login."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kraftnode.errors import ConfigError
from kraftnode.log.bootstrap import write_bootstrap_checkpoint
from kraftnode.log.metadata_log import MetadataLog
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.metadata.state import MetadataState
from kraftnode.protocol.generated.metadata import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)
from kraftnode.security import scram
from kraftnode.security.credentials import (
    ScramCredentials,
    bootstrap_scram,
    check_controller_login,
    scan_log_tail,
)
from recordbatch import Record, build_batch

MECH = "SCRAM-SHA-512"
SHA512 = scram.MECHANISMS[MECH][0]


def user(name: str, password: str, mechanism: str = MECH) -> UserScramCredentialRecord:
    """A credential as ``format --add-scram`` and AlterUserScramCredentials make it."""
    rec: UserScramCredentialRecord = scram.parse_add_scram(f"{mechanism}=[name={name},password={password}]")
    return rec


def logs_in(creds: ScramCredentials, name: str, password: str, mechanism: str = MECH) -> bool:
    """A full SCRAM exchange of a client logging in as ``name`` against ``creds``."""
    server = scram.ScramServer(mechanism, creds.lookup)
    client = scram.ScramClient(mechanism, name, password)
    try:
        final = server.evaluate(client.final(server.evaluate(client.first())))
        client.verify(final)
    except scram.ScramError:
        return False
    return server.complete


def framed(*messages: Any) -> bytes:
    return build_batch([Record(None, encode_metadata_record(m, 0)) for m in messages])


def bootstrap_tx(*users: UserScramCredentialRecord) -> bytes:
    """What a first active controller appends: its bootstrap records in a transaction."""
    return framed(BeginTransactionRecord(name="Bootstrap records"),
                  FeatureLevelRecord(name="metadata.version", feature_level=21), *users,
                  ZkMigrationStateRecord(zk_migration_state=0), EndTransactionRecord())


@pytest.fixture
def mlog(tmp_path: Path) -> Iterator[MetadataLog]:
    log = MetadataLog(tmp_path / "meta")
    try:
        yield log
    finally:
        log.close()


def append(mlog: MetadataLog, *batches: bytes) -> None:
    mlog.append_as_leader(list(batches), epoch=1)


def formatted(tmp_path: Path, *users: UserScramCredentialRecord) -> Path:
    d = tmp_path / "meta"
    d.mkdir(exist_ok=True)
    write_bootstrap_checkpoint(d, 21, 0, [encode_metadata_record(u, 0) for u in users])
    return d


def replay(state: MetadataState, mlog: MetadataLog, up_to: int | None = None) -> None:
    """Commit (replay) the log up to ``up_to`` (default: its end), as the node's replay does."""
    end = mlog.end_offset if up_to is None else up_to
    state.replay_batches(mlog.batches(state.next_offset, end), end)


def store(meta: Path, state: MetadataState, mlog: MetadataLog) -> ScramCredentials:
    """The node's store as start-up builds it: the image as loaded, the log above it read once."""
    start, end = state.next_offset, mlog.end_offset
    return ScramCredentials(bootstrap_scram(meta), lambda: state,
                            scan_log_tail(mlog.batches(start, end), start, end))


# ------------------------------------------------------------------ lookup order
def test_an_empty_log_verifies_logins_against_bootstrap_checkpoint(tmp_path: Path, mlog: MetadataLog) -> None:
    meta = formatted(tmp_path, user("controller", "c-secret"), user("alice", "a-secret"))
    creds = store(meta, MetadataState(), mlog)
    assert creds.log_is_empty()
    assert logs_in(creds, "controller", "c-secret") and logs_in(creds, "alice", "a-secret")
    assert not logs_in(creds, "alice", "wrong") and not logs_in(creds, "mallory", "a-secret")
    # the file holds SCRAM-SHA-512 credentials only
    assert not logs_in(creds, "alice", "a-secret", "SCRAM-SHA-256")
    assert "2 user(s) (alice, controller) from bootstrap.checkpoint" in creds.describe()


def test_once_the_log_has_committed_records_it_alone_decides(tmp_path: Path, mlog: MetadataLog) -> None:
    # this node's file names bob and an old alice; the first leader's (committed) bootstrap
    # names alice with another password and no bob
    meta = formatted(tmp_path, user("alice", "old-secret"), user("bob", "b-secret"))
    state = MetadataState()
    creds = store(meta, state, mlog)
    assert logs_in(creds, "alice", "old-secret") and logs_in(creds, "bob", "b-secret")
    append(mlog, bootstrap_tx(user("alice", "new-secret")))
    # appended but not committed: still the file
    assert logs_in(creds, "alice", "old-secret") and not logs_in(creds, "alice", "new-secret")
    replay(state, mlog)
    assert not creds.log_is_empty()
    assert logs_in(creds, "alice", "new-secret") and not logs_in(creds, "alice", "old-secret")
    # a user the log never named is one the cluster does not have (describeUserScramCredentials agrees)
    assert not logs_in(creds, "bob", "b-secret")
    assert creds.describe() == "SCRAM credentials come from the metadata log"


def test_a_user_altered_or_deleted_through_the_log_follows_the_log(tmp_path: Path, mlog: MetadataLog) -> None:
    meta = formatted(tmp_path, user("alice", "a-secret"), user("carol", "c-secret"))
    state = MetadataState()
    creds = store(meta, state, mlog)
    append(mlog, bootstrap_tx(user("alice", "a-secret"), user("carol", "c-secret")))
    replay(state, mlog)
    assert logs_in(creds, "alice", "a-secret") and logs_in(creds, "carol", "c-secret")
    # AlterUserScramCredentials: alice's password changed, carol deleted
    append(mlog, framed(user("alice", "rotated")), framed(RemoveUserScramCredentialRecord(name="carol",
                                                                                          mechanism=SHA512)))
    replay(state, mlog)
    assert logs_in(creds, "alice", "rotated") and not logs_in(creds, "alice", "a-secret")
    assert not logs_in(creds, "carol", "c-secret")  # still in bootstrap.checkpoint: irrelevant


def test_a_restarted_node_verifies_against_its_own_log_before_it_knows_the_high_watermark(
        tmp_path: Path, mlog: MetadataLog) -> None:
    """After a restart (the whole quorum, say) nothing is known to be committed until a
    leader exists, and electing one needs logins: the local log above the loaded image
    answers, not the bootstrap file -- a rotated or deleted user stays so."""
    meta = formatted(tmp_path, user("controller", "c-secret"), user("carol", "c-secret"))
    append(mlog, bootstrap_tx(user("controller", "c-secret"), user("carol", "c-secret")),
           framed(user("controller", "rotated")),
           framed(RemoveUserScramCredentialRecord(name="carol", mechanism=SHA512)))
    state = MetadataState()          # restarted: no snapshot, high watermark unknown
    creds = store(meta, state, mlog)
    assert not creds.log_is_empty()
    assert logs_in(creds, "controller", "rotated") and not logs_in(creds, "controller", "c-secret")
    assert not logs_in(creds, "carol", "c-secret")
    # the replay catches up in steps: the tail keeps answering for what it read until the
    # image has passed it, then the image alone decides
    replay(state, mlog, up_to=1)
    assert logs_in(creds, "controller", "rotated")
    replay(state, mlog)
    assert logs_in(creds, "controller", "rotated") and not logs_in(creds, "carol", "c-secret")
    # past it, the tail no longer answers: carol added again is carol again
    append(mlog, framed(user("carol", "back")))
    replay(state, mlog)
    assert logs_in(creds, "carol", "back")


def test_the_tail_leaves_out_aborted_and_unfinished_transactions(tmp_path: Path, mlog: MetadataLog) -> None:
    meta = formatted(tmp_path, user("alice", "a-secret"))
    # a leader died inside its bootstrap transaction; its successor aborted it and wrote its own
    append(mlog, framed(BeginTransactionRecord(name="Bootstrap records"), user("alice", "aborted"),
                        user("eve", "e-secret")),
           framed(AbortTransactionRecord(reason="Controller failover")),
           bootstrap_tx(user("alice", "committed")))
    creds = store(meta, MetadataState(), mlog)
    assert logs_in(creds, "alice", "committed") and not logs_in(creds, "alice", "aborted")
    assert not logs_in(creds, "eve", "e-secret")


def test_an_unfinished_bootstrap_transaction_leaves_the_log_empty(tmp_path: Path, mlog: MetadataLog) -> None:
    """The next leader aborts it and writes its own bootstrap records: until then the file.
    Application data (Produce, kraftnode's extension) is no metadata record either."""
    meta = formatted(tmp_path, user("alice", "a-secret"))
    append(mlog, build_batch([Record(b"key", b"application data")]),
           framed(BeginTransactionRecord(name="Bootstrap records"), user("alice", "other")))
    creds = store(meta, MetadataState(), mlog)
    assert creds.log_is_empty()
    assert logs_in(creds, "alice", "a-secret") and not logs_in(creds, "alice", "other")


def test_a_node_formatted_without_users_learns_them_from_the_log(tmp_path: Path, mlog: MetadataLog) -> None:
    """``--no-initial-controllers`` without --add-scram: nothing verifies until it catches up."""
    meta = formatted(tmp_path)
    state = MetadataState()
    creds = store(meta, state, mlog)
    assert creds.log_is_empty() and not logs_in(creds, "alice", "a-secret")
    mlog.append_as_follower(bootstrap_tx(user("alice", "a-secret")))
    replay(state, mlog)
    assert logs_in(creds, "alice", "a-secret")


def test_without_a_metadata_image_the_bootstrap_file_is_all_there_is(tmp_path: Path) -> None:
    """A node whose state machine is an application's: its log never speaks about users."""
    creds = ScramCredentials(bootstrap_scram(formatted(tmp_path, user("alice", "a-secret"))))
    assert logs_in(creds, "alice", "a-secret") and creds.log_is_empty()


def test_a_missing_bootstrap_file_holds_no_user(tmp_path: Path) -> None:
    assert bootstrap_scram(tmp_path) == {}
    (tmp_path / "bootstrap.checkpoint").write_bytes(b"\0" * 40)
    with pytest.raises(ValueError, match="bootstrap.checkpoint is unreadable"):
        bootstrap_scram(tmp_path)


# ------------------------------------------------------------------ the start-up check
LOGIN = ("SCRAM-SHA-512", "controller", "c-secret")
JAAS_KEY = "listener.name.controller.scram-sha-512.sasl.jaas.config"


def check(tmp_path: Path, mlog: MetadataLog, users: Sequence[UserScramCredentialRecord], *,
          voters: int = 3, is_voter: bool = True, log_records: bool = False) -> str | None:
    meta = formatted(tmp_path, *users)
    state = MetadataState()
    if log_records:
        append(mlog, bootstrap_tx(user("controller", "c-secret")))
        replay(state, mlog)
    return check_controller_login(store(meta, state, mlog), LOGIN, JAAS_KEY, meta, voters, is_voter)


def test_an_initial_voter_whose_bootstrap_lacks_its_login_user_is_refused(tmp_path: Path,
                                                                          mlog: MetadataLog) -> None:
    with pytest.raises(ConfigError) as e:
        check(tmp_path, mlog, [user("alice", "a-secret")])
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("sasl.mechanism.controller.protocol=SCRAM-SHA-512: the controller login user "
                          f"'controller' ({JAAS_KEY}) has no SCRAM-SHA-512 credential in ")
    assert "bootstrap.checkpoint, and the metadata log is empty" in msg
    assert msg.endswith("format with --add-scram 'SCRAM-SHA-512=[name=controller,password=...]'")


def test_an_initial_voter_whose_bootstrap_has_another_password_is_refused(tmp_path: Path,
                                                                          mlog: MetadataLog) -> None:
    with pytest.raises(ConfigError, match=r"the password of the controller login user 'controller' "
                                          rf"\({JAAS_KEY}\) does not match its SCRAM-SHA-512 credential"):
        check(tmp_path, mlog, [user("controller", "other-secret")])
    # a SCRAM-SHA-256 credential is not one for SCRAM-SHA-512
    with pytest.raises(ConfigError, match="has no SCRAM-SHA-512 credential"):
        check(tmp_path, mlog, [user("controller", "c-secret", "SCRAM-SHA-256")])


def test_what_can_work_is_not_refused(tmp_path: Path, mlog: MetadataLog) -> None:
    assert check(tmp_path, mlog, [user("controller", "c-secret")]) is None
    # not a voter yet (--no-initial-controllers): it learns the users from the log first
    assert check(tmp_path, mlog, [], is_voter=False) is None
    # a single voter needs no login until a second voter exists: a warning
    warning = check(tmp_path, mlog, [], voters=1)
    assert warning is not None and "a voter added later cannot verify this node's login" in warning


def test_a_node_whose_log_holds_records_follows_the_log(tmp_path: Path, mlog: MetadataLog) -> None:
    """It may be behind a password change its peers have committed: not refused."""
    assert check(tmp_path, mlog, [], log_records=True) is None
