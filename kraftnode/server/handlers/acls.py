"""CreateAcls, DescribeAcls and DeleteAcls as a Kafka 3.9 controller serves them (AclApis with
StandardAuthorizer, AclControlManager): validation, error codes and messages are theirs.

Creation and deletion write ``AccessControlEntryRecord`` / ``RemoveAccessControlEntryRecord``
through the leader's log and answer once they commit; a follower forwards them to the leader
(as a Kafka broker forwards them to the active controller), after checking ALTER on the
cluster itself (the forwarded request reaches the leader as this node's principal)."""

from __future__ import annotations

import uuid

import anyio

from kraftnode.java_order import java_hashmap_order
from kraftnode.log.metadata_records import encode_metadata_record
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.framing import FrameError
from kraftnode.protocol.generated import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kraftnode.protocol.generated.create_acls_request import (
    _CreateAclsRequest_AclCreation as _AclCreation,
)
from kraftnode.protocol.generated.create_acls_response import (
    _CreateAclsResponse_AclCreationResult as _CreationResult,
)
from kraftnode.protocol.generated.delete_acls_response import (
    _DeleteAclsResponse_DeleteAclsFilterResult as _FilterResult,
)
from kraftnode.protocol.generated.describe_acls_response import (
    _DescribeAclsResponse_AclDescription as _AclDescription,
)
from kraftnode.protocol.generated.metadata import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from kraftnode.security import authorizer as az
from kraftnode.server.controller_io.controller_duties import ControllerDuties
from kraftnode.server.raft_io.driver import RaftDriver

# AclControlManager / ControllerApis: MAX_RECORDS_PER_USER_OP (QuorumController)
MAX_RECORDS_PER_USER_OP = 10000
_NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
_NO_AUTHORIZER = "No Authorizer is configured."


def _uuid_hash(u: uuid.UUID) -> int:
    x = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return ((x >> 32) ^ x) & 0xFFFFFFFF


def _creation_refusal(c: _AclCreation) -> str | None:
    """AclApis.handleCreateAcls, then AclControlManager.validateNewAcl: the message of the
    INVALID_REQUEST a creation gets, or None."""
    if c.resource_type == az.CLUSTER and c.resource_name != az.CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {az.CLUSTER_NAME}"
    if c.resource_name == "":
        return "Invalid empty resource name"
    if c.resource_type in (az.R_UNKNOWN, az.R_ANY):
        return f"Invalid resourceType {az.RESOURCE_NAMES[c.resource_type]}"
    if c.resource_pattern_type not in (az.LITERAL, az.PREFIXED):
        return f"Invalid patternType {az.PATTERN_NAMES[c.resource_pattern_type]}"
    if c.operation in (az.O_UNKNOWN, az.O_ANY):
        return f"Invalid operation {az.OPERATION_NAMES[c.operation]}"
    if c.permission_type not in (az.DENY, az.ALLOW):
        return f"Invalid permissionType {az.PERMISSION_NAMES[c.permission_type]}"
    return None


class AclAdmin:
    """The three ACL APIs of one node (``authz`` None: no authorizer configured)."""

    def __init__(self, driver: RaftDriver, duties: ControllerDuties | None,
                 authz: az.StandardAuthorizer | None) -> None:
        self.driver = driver
        self.duties = duties
        self.authz = authz
        self._lock = anyio.Lock()  # one ACL change at a time, each answered at its commit

    # ------------------------------------------------------------------ describe
    def describe(self, q: DescribeAclsRequest, v: int) -> DescribeAclsResponse:
        if az.unknown_elements([q]):
            raise FrameError("DescribeAclsRequest contains UNKNOWN elements")
        if v == 0:
            if q.pattern_type_filter == az.P_ANY:
                q.pattern_type_filter = az.LITERAL
            elif q.pattern_type_filter != az.LITERAL:
                raise FrameError("DescribeAcls v0 only supports literal resource pattern types")
        if self.authz is None:
            return DescribeAclsResponse(throttle_time_ms=0, error_code=Errors.SECURITY_DISABLED,
                                        error_message=_NO_AUTHORIZER_DESCRIBE, resources=[])
        grouped: dict[tuple[int, str, int], list[_AclDescription]] = {}
        for a in self.authz.bindings().values():
            if az.filter_matches(q, a):
                entry = DescribeAclsResponse.AclDescription(
                    principal=a.principal, host=a.host, operation=a.operation,
                    permission_type=a.permission)
                grouped.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(entry)
        R = DescribeAclsResponse.DescribeAclsResource
        return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None, resources=[
            R(resource_type=rt, resource_name=name, pattern_type=pt, acls=acls)
            for (rt, name, pt), acls in sorted(grouped.items())])

    # ------------------------------------------------------------------ create
    async def create(self, q: CreateAclsRequest, v: int) -> CreateAclsResponse:
        if v == 0 and any(c.resource_pattern_type != az.LITERAL for c in q.creations):
            raise FrameError("CreateAcls v0 only supports literal resource pattern types")
        if az.unknown_elements(q.creations):
            raise FrameError("CreatableAcls contain unknown elements")
        Result = CreateAclsResponse.AclCreationResult
        if self.authz is None:
            return CreateAclsResponse(throttle_time_ms=0, results=[
                Result(error_code=Errors.SECURITY_DISABLED, error_message=_NO_AUTHORIZER)
                for _ in q.creations])
        if not self.driver.is_leader or self.duties is None:
            return CreateAclsResponse(throttle_time_ms=0, results=[
                Result(error_code=Errors.NOT_CONTROLLER, error_message=None) for _ in q.creations])
        async with self._lock:
            existing = set(self.authz.bindings().values())
            results: list[_CreationResult] = []
            records: list[bytes] = []
            taken = set(self.duties.state.image.acls)
            for c in q.creations:
                why = _creation_refusal(c)
                if why is not None:
                    results.append(Result(error_code=Errors.INVALID_REQUEST, error_message=why))
                    continue
                acl = az.Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                             c.host, c.operation, c.permission_type)
                if acl not in existing:
                    existing.add(acl)
                    acl_id = uuid.uuid4()
                    while acl_id in taken:
                        acl_id = uuid.uuid4()
                    taken.add(acl_id)
                    records.append(encode_metadata_record(AccessControlEntryRecord(
                        id=acl_id, resource_type=acl.resource_type, resource_name=acl.resource_name,
                        pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host,
                        operation=acl.operation, permission_type=acl.permission), 0))
                results.append(Result(error_code=0, error_message=None))
            if len(records) > MAX_RECORDS_PER_USER_OP:
                failed: tuple[int, str | None] | None = (
                    Errors.POLICY_VIOLATION, f"Cannot create more than {MAX_RECORDS_PER_USER_OP} "
                    "acls in a single operation.")
            else:
                failed = await self._commit(records)
            if failed is not None:
                results = [Result(error_code=failed[0], error_message=failed[1]) if r.error_code == 0
                           else r for r in results]
        return CreateAclsResponse(throttle_time_ms=0, results=results)

    # ------------------------------------------------------------------ delete
    async def delete(self, q: DeleteAclsRequest, v: int) -> DeleteAclsResponse:
        if v == 0:
            for f in q.filters:
                if f.pattern_type_filter == az.P_ANY:
                    f.pattern_type_filter = az.LITERAL
                elif f.pattern_type_filter != az.LITERAL:
                    raise FrameError("DeleteAcls v0 does not support pattern type "
                                     f"{az.PATTERN_NAMES.get(f.pattern_type_filter)}")
        if az.unknown_elements(q.filters):
            raise FrameError("DeleteAclsRequest contains UNKNOWN elements")
        FR = DeleteAclsResponse.DeleteAclsFilterResult
        if self.authz is None:
            return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
                FR(error_code=Errors.SECURITY_DISABLED, error_message=_NO_AUTHORIZER, matching_acls=[])
                for _ in q.filters])
        if not self.driver.is_leader or self.duties is None:
            return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
                FR(error_code=Errors.NOT_CONTROLLER, error_message=None, matching_acls=[])
                for _ in q.filters])
        M = DeleteAclsResponse.DeleteAclsMatchingAcl
        async with self._lock:
            bindings = self.authz.bindings()
            order = java_hashmap_order(list(bindings), _uuid_hash)
            removed: dict[uuid.UUID, None] = {}
            results: list[_FilterResult] = []
            for f in q.filters:
                matched = [(i, bindings[i]) for i in order if az.filter_matches(f, bindings[i])]
                removed.update((i, None) for i, _ in matched)
                if len(removed) > MAX_RECORDS_PER_USER_OP:
                    results.append(FR(error_code=Errors.UNKNOWN_SERVER_ERROR, error_message=(
                        f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single "
                        "delete operation."), matching_acls=[]))
                    continue
                results.append(FR(error_code=0, error_message=None, matching_acls=[
                    M(error_code=0, error_message=None, resource_type=a.resource_type,
                      resource_name=a.resource_name, pattern_type=a.pattern_type,
                      principal=a.principal, host=a.host, operation=a.operation,
                      permission_type=a.permission) for _, a in matched]))
            records = [encode_metadata_record(RemoveAccessControlEntryRecord(id=i), 0) for i in removed]
            failed = await self._commit(records)
            if failed is not None:
                results = [FR(error_code=failed[0], error_message=failed[1], matching_acls=[])
                           if r.error_code == 0 else r for r in results]
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)

    async def _commit(self, records: list[bytes]) -> tuple[int, str | None] | None:
        """Append ``records`` atomically (one batch) and wait for the commit; the error if not."""
        if not records:
            return None
        _, waiter = self.driver.append_nowait(records)
        with anyio.move_on_after(self.driver.request_timeout_s):
            await waiter.done.wait()
        done = waiter.value
        if done is None:
            return Errors.REQUEST_TIMED_OUT, None
        if done.error_code:
            code = Errors.NOT_CONTROLLER if done.error_code == Errors.NOT_LEADER_OR_FOLLOWER \
                else done.error_code
            return code, None
        # answered once the records are applied, so the creator's next request sees them
        target = done.last_offset + 1
        # (never None here: create and delete answer NOT_CONTROLLER without duties)
        state = self.duties.state if self.duties is not None else None
        with anyio.move_on_after(self.driver.request_timeout_s):
            while state is not None and state.next_offset < target:
                await anyio.sleep(0.005)
        return None
