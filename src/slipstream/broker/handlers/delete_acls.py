"""DeleteAcls (key 31). Served v0-3.

Needs Alter on the cluster (else every filter result is CLUSTER_AUTHORIZATION_FAILED);
without an authorizer configured, SECURITY_DISABLED, as Kafka's. Each filter removes the
ACLs it matches and lists them (an ACL matched by several filters under the first); a
filter with an UNKNOWN code is INVALID_REQUEST. The filters are applied to the stored ACL
set too (in a cluster it may hold ACLs created through another broker that this one has
not seen yet: those are deleted and listed as well), written (atomically, durably)
before the answer.
"""

from __future__ import annotations

from ...protocol.apis.delete_acls import (
    SPEC,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteAclsResponseFilterResult,
    DeleteAclsResponseMatchingAcl,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import AclBinding, AclFilter, InvalidAcl, Operation, make_filter
from ..security.acl_changes import save_or_undo
from .acl_access import AclApiRefusal, acl_api_authorizer

MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    access = acl_api_authorizer(ctx, Operation.ALTER, "Alter on the cluster is needed to delete ACLs.")
    if isinstance(access, AclApiRefusal):
        return _all(request, access.code, access.message)
    authorizer = access
    removed: list[AclBinding] = []
    filters: list[AclFilter | InvalidAcl] = []  # per request filter, in order
    for f in request.filters:
        try:
            acl_filter = make_filter(
                f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                f.principal_filter, f.host_filter, f.operation, f.permission_type,
            )
        except InvalidAcl as exc:
            filters.append(exc)
            continue
        filters.append(acl_filter)
        matched = authorizer.matching(acl_filter)
        for binding in matched:
            authorizer.remove(binding)
        removed.extend(matched)
    valid = [f for f in filters if isinstance(f, AclFilter)]
    saved = save_or_undo(ctx.state, removed=removed, removed_by=valid)
    unlisted = set(saved.deleted)
    results: list[DeleteAclsResponseFilterResult] = []
    for entry in filters:
        if isinstance(entry, InvalidAcl):
            results.append(
                DeleteAclsResponseFilterResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=str(entry), matching_acls=[]
                )
            )
        elif saved.failure is not None:
            results.append(
                DeleteAclsResponseFilterResult(
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=saved.failure, matching_acls=[]
                )
            )
        else:
            matched = sorted(b for b in unlisted if entry.matches(b))
            unlisted.difference_update(matched)
            results.append(
                DeleteAclsResponseFilterResult(
                    error_code=0, error_message=None, matching_acls=[_described(b) for b in matched]
                )
            )
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)


def _described(b: AclBinding) -> DeleteAclsResponseMatchingAcl:
    return DeleteAclsResponseMatchingAcl(
        error_code=0, error_message=None, resource_type=int(b.resource_type), resource_name=b.resource_name,
        pattern_type=int(b.pattern_type), principal=b.principal, host=b.host, operation=int(b.operation),
        permission_type=int(b.permission),
    )


def _all(request: DeleteAclsRequest, code: int, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteAclsResponseFilterResult(error_code=code, error_message=message, matching_acls=[])
            for _ in request.filters
        ],
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
