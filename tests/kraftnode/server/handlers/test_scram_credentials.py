"""DescribeUserScramCredentials answered as Kafka 3.9's ScramImage.describe."""

from __future__ import annotations

from types import SimpleNamespace

from kraftnode.metadata.state import MetadataState
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import UserScramCredentialRecord
from kraftnode.server.handlers import scram_credentials as scram_admin


def _duties() -> SimpleNamespace:
    state = MetadataState()
    for name, mech, it in (("alice", 2, 8192), ("alice", 1, 4096), ("bob", 1, 4096)):
        state._apply(UserScramCredentialRecord(name=name, mechanism=mech, salt=b"s", stored_key=b"k",
                                               server_key=b"k", iterations=it), 0)
    return SimpleNamespace(state=state)


def test_every_user_when_none_is_named() -> None:
    got = scram_admin.describe(_duties(), w.DescribeUserScramCredentialsRequest(users=None))
    rows = {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos] for r in got.results}
    assert rows == {"alice": [(1, 4096), (2, 8192)], "bob": [(1, 4096)]}
    assert all(r.error_code == 0 for r in got.results)


def test_unknown_and_duplicate_users_get_kafkas_errors() -> None:
    U = w.DescribeUserScramCredentialsRequest.UserName
    got = scram_admin.describe(_duties(), w.DescribeUserScramCredentialsRequest(
        users=[U(name="bob"), U(name="nobody"), U(name="bob")]))
    by = {r.user: (r.error_code, r.error_message) for r in got.results}
    assert by == {
        "bob": (Errors.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single request: bob"),
        "nobody": (Errors.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody")}
