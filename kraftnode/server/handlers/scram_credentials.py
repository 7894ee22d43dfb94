"""AlterUserScramCredentials as Kafka 3.9's active controller serves it (ScramControlManager):
the Admin sends salt + salted password; the controller derives the stored and server keys
and writes UserScramCredentialRecord / RemoveUserScramCredentialRecord atomically."""

from __future__ import annotations

import hashlib
import hmac

import anyio

from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol import generated as w
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated import AlterUserScramCredentialsResponse as Resp
from kraftnode.protocol.generated.alter_user_scram_credentials_request import (
    _AlterUserScramCredentialsRequest_ScramCredentialDeletion as _Deletion,
)
from kraftnode.protocol.generated.alter_user_scram_credentials_request import (
    _AlterUserScramCredentialsRequest_ScramCredentialUpsertion as _Upsertion,
)
from kraftnode.protocol.generated.alter_user_scram_credentials_response import (
    _AlterUserScramCredentialsResponse_AlterUserScramCredentialsResult as _Result,
)
from kraftnode.protocol.generated.metadata import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from kraftnode.security.scram import MECHANISM_BY_TYPE, MECHANISMS, MIN_ITERATIONS
from kraftnode.server.controller_io.controller_duties import ControllerDuties
from kraftnode.server.raft_io.driver import RaftDriver

MAX_ITERATIONS = 16384          # ScramControlManager.MAX_ITERATIONS
SCRAM_MIN_MV = 11               # metadata.version 3.5-IV2 (MetadataVersion.isScramSupported)


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def _hash_order(names: list[str]) -> list[str]:
    from kraftnode.java_order import java_hashmap_order  # a HashMap<String, ...> iterates so
    return java_hashmap_order(names, _java_string_hash)


def _validate_name_mech(name: str, mech: int) -> tuple[int, str] | None:
    if not name:
        return Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mech not in MECHANISM_BY_TYPE:
        return Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


async def alter(driver: RaftDriver, duties: ControllerDuties | None,
                q: w.AlterUserScramCredentialsRequest) -> Resp:
    users = [d.name for d in q.deletions] + [u.name for u in q.upsertions]
    if duties is None or not driver.is_leader:
        return Resp(throttle_time_ms=0, results=[
            Resp.AlterUserScramCredentialsResult(user=u, error_code=Errors.NOT_CONTROLLER, error_message=None)
            for u in dict.fromkeys(users)])
    state = duties.state
    supported = (state.metadata_version or 0) >= SCRAM_MIN_MV
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, _Deletion] = {}
    upserts: dict[str, _Upsertion] = {}
    dup = (Errors.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    unsupported = (Errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")
    for d in q.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = dup
        elif not supported:
            errors[d.name] = unsupported
        elif (e := _validate_name_mech(d.name, d.mechanism)) is not None:
            errors[d.name] = e
        elif (d.name, d.mechanism) not in state.scram:
            errors[d.name] = (Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        else:
            deletions[d.name] = d
    for u in q.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = dup
        elif not supported:
            errors[u.name] = unsupported
        elif (e := _validate_name_mech(u.name, u.mechanism)) is not None:
            errors[u.name] = e
        elif u.iterations < MIN_ITERATIONS:
            errors[u.name] = (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            errors[u.name] = (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        else:
            upserts[u.name] = u
    records: list[bytes] = []
    results: list[_Result] = []
    for name in _hash_order(list(deletions)):
        d = deletions[name]
        records.append(encode_metadata_record(RemoveUserScramCredentialRecord(name=name, mechanism=d.mechanism), 0))
        results.append(Resp.AlterUserScramCredentialsResult(user=name, error_code=0, error_message=None))
    for name in _hash_order(list(upserts)):
        u = upserts[name]
        h = MECHANISMS[MECHANISM_BY_TYPE[u.mechanism]][1]
        salted = bytes(u.salted_password)
        client_key = hmac.new(salted, b"Client Key", h).digest()
        records.append(encode_metadata_record(UserScramCredentialRecord(
            name=name, mechanism=u.mechanism, salt=bytes(u.salt),
            stored_key=hashlib.new(h, client_key).digest(),
            server_key=hmac.new(salted, b"Server Key", h).digest(), iterations=u.iterations), 0))
        results.append(Resp.AlterUserScramCredentialsResult(user=name, error_code=0, error_message=None))
    for name in _hash_order(list(errors)):
        code, msg = errors[name]
        results.append(Resp.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=msg))
    if records:
        _, waiter = driver.append_nowait(records)
        with anyio.move_on_after(driver.request_timeout_s):
            await waiter.done.wait()
        done = waiter.value
        failed: int | None = None
        if done is None:
            failed = Errors.REQUEST_TIMED_OUT
        elif done.error_code:
            failed = Errors.NOT_CONTROLLER if done.error_code == Errors.NOT_LEADER_OR_FOLLOWER \
                else done.error_code
        if failed is not None:
            results = [Resp.AlterUserScramCredentialsResult(
                user=r.user, error_code=failed if r.error_code == 0 else r.error_code,
                error_message=None if r.error_code == 0 else r.error_message) for r in results]
    return Resp(throttle_time_ms=0, results=results)


_DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "


def describe(duties: ControllerDuties | None,
             q: w.DescribeUserScramCredentialsRequest) -> w.DescribeUserScramCredentialsResponse:
    """DescribeUserScramCredentials as a Kafka 3.9 broker answers it from its metadata image
    (ScramImage.describe): every user when none is named; a user named twice gets
    DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND; mechanisms and iterations only."""
    D = w.DescribeUserScramCredentialsResponse
    creds: dict[tuple[str, int], UserScramCredentialRecord] = duties.state.scram if duties is not None else {}
    unique: dict[str, bool] = {}   # user -> named twice
    if not q.users:
        for name, _mech in creds:
            unique.setdefault(name, False)
    else:
        for u in q.users:
            unique[u.name] = u.name in unique
    results = []
    for name in _hash_order(list(unique)):   # a HashMap<String, Boolean> iterates so
        r = D.DescribeUserScramCredentialsResult(user=name, error_code=0, error_message=None,
                                                 credential_infos=[])
        if unique[name]:
            r.error_code, r.error_message = Errors.DUPLICATE_RESOURCE, _DESCRIBE_DUPLICATE_USER + name
        else:
            infos = [D.CredentialInfo(mechanism=mech, iterations=creds[(name, mech)].iterations)
                     for mech in sorted(MECHANISM_BY_TYPE) if (name, mech) in creds]
            if infos:
                r.credential_infos = infos
            else:
                r.error_code = Errors.RESOURCE_NOT_FOUND
                r.error_message = _DESCRIBE_USER_THAT_DOES_NOT_EXIST + name
        results.append(r)
    return D(throttle_time_ms=0, error_code=0, error_message=None, results=results)
