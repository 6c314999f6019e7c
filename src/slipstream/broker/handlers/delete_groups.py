"""DeleteGroups (key 42). Served v0-2: NON_EMPTY_GROUP unless the group is Empty.
Each group needs Delete (else GROUP_AUTHORIZATION_FAILED for it).
"""

from __future__ import annotations

from ...protocol.apis.delete_groups import (
    SPEC,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteGroupsResponseDeletableGroupResult,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    denied = [g for g in request.groups_names if not ctx.group_allowed(Operation.DELETE, g)]
    if not denied:
        return await ctx.groups.delete_groups(ctx.coordinator_context(), request)
    request.groups_names = [g for g in request.groups_names if g not in denied]
    response = (
        await ctx.groups.delete_groups(ctx.coordinator_context(), request)
        if request.groups_names
        else DeleteGroupsResponse(throttle_time_ms=0, results=[])
    )
    response.results.extend(
        DeleteGroupsResponseDeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        for g in dict.fromkeys(denied)
    )
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
