"""CreateAcls (key 30). Served v0-3.

Needs Alter on the cluster (else every result is CLUSTER_AUTHORIZATION_FAILED); without
an authorizer configured every result is SECURITY_DISABLED, as Kafka answers. A creation
that is not a usable ACL (unknown or ANY codes, a MATCH/ANY pattern, a CLUSTER resource
other than "kafka-cluster", a principal not of the form Type:name) is INVALID_REQUEST;
the others are added. Creating an ACL that exists already succeeds. The ACL set is
written (atomically, durably) before the answer.
"""

from __future__ import annotations

from ...protocol.apis.create_acls import (
    SPEC,
    CreateAclsRequest,
    CreateAclsResponse,
    CreateAclsResponseResult,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import AclBinding, InvalidAcl, Operation, make_binding
from ..security.acl_changes import save_or_undo
from .acl_access import AclApiRefusal, acl_api_authorizer

MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    access = acl_api_authorizer(ctx, Operation.ALTER, "Alter on the cluster is needed to create ACLs.")
    if isinstance(access, AclApiRefusal):
        return _all(request, access.code, access.message)
    authorizer = access
    results: list[CreateAclsResponseResult] = []
    added: list[AclBinding] = []
    for c in request.creations:
        try:
            binding = make_binding(
                c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                c.operation, c.permission_type,
            )
        except InvalidAcl as exc:
            results.append(CreateAclsResponseResult(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc)))
            continue
        if authorizer.add(binding):
            added.append(binding)
        results.append(CreateAclsResponseResult(error_code=0, error_message=None))
    failure = save_or_undo(ctx.state, added=added).failure
    if failure is not None:
        results = [
            r if r.error_code else CreateAclsResponseResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=failure)
            for r in results
        ]
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def _all(request: CreateAclsRequest, code: int, message: str) -> CreateAclsResponse:
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[CreateAclsResponseResult(error_code=code, error_message=message) for _ in request.creations],
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
