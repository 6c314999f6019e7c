"""DescribeAcls (key 29). Served v0-3.

Needs Describe on the cluster (else CLUSTER_AUTHORIZATION_FAILED); without an authorizer
configured the answer is SECURITY_DISABLED, as Kafka's. A filter with an UNKNOWN code is
INVALID_REQUEST. The matching ACLs are grouped by resource pattern, sorted.
"""

from __future__ import annotations

from ...protocol.apis.describe_acls import (
    SPEC,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeAclsResponseAcl,
    DescribeAclsResponseResource,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import InvalidAcl, Operation, make_filter
from .acl_access import AclApiRefusal, acl_api_authorizer

MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    access = acl_api_authorizer(ctx, Operation.DESCRIBE, "Describe on the cluster is needed to list ACLs.")
    if isinstance(access, AclApiRefusal):
        return _error(access.code, access.message)
    authorizer = access
    try:
        acl_filter = make_filter(
            request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
            request.principal_filter, request.host_filter, request.operation, request.permission_type,
        )
    except InvalidAcl as exc:
        return _error(ErrorCode.INVALID_REQUEST, str(exc))
    grouped: dict[tuple[int, str, int], list[DescribeAclsResponseAcl]] = {}
    for b in authorizer.matching(acl_filter):
        grouped.setdefault((int(b.resource_type), b.resource_name, int(b.pattern_type)), []).append(
            DescribeAclsResponseAcl(
                principal=b.principal, host=b.host, operation=int(b.operation), permission_type=int(b.permission)
            )
        )
    resources = [
        DescribeAclsResponseResource(resource_type=rtype, resource_name=name, pattern_type=ptype, acls=acls)
        for (rtype, name, ptype), acls in grouped.items()
    ]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


def _error(code: int, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
