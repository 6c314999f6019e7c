"""DescribeGroups (key 15). Served v0-6 (v6: GROUP_ID_NOT_FOUND for an unknown group).
Each group needs Describe (else GROUP_AUTHORIZATION_FAILED for it, nothing else said).
"""

from __future__ import annotations

from ...protocol.acl_types import GROUP_OPERATIONS
from ...protocol.apis.describe_groups import (
    AUTHORIZED_OPERATIONS_OMITTED,
    SPEC,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseDescribedGroup,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 6


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    response = await _describe(ctx, request)
    if ctx.authorizing:
        for group in response.groups:
            group.authorized_operations = authorized_group_operations(ctx, group.group_id, group.authorized_operations)
    return response


def authorized_group_operations(ctx: RequestContext, group_id: str, offered: int) -> int:
    """The coordinator's operations field (the group's operations, or "not requested")
    narrowed to what the principal may do."""
    if offered == AUTHORIZED_OPERATIONS_OMITTED:
        return offered
    return ctx.authorized_operations(ResourceType.GROUP, group_id, [op for op in GROUP_OPERATIONS if offered >> op & 1])


async def _describe(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    wanted = request.groups
    allowed = [g for g in wanted if ctx.group_allowed(Operation.DESCRIBE, g)]
    if len(allowed) == len(wanted):
        return await ctx.groups.describe_groups(ctx.coordinator_context(), request)
    request.groups = allowed
    described = (
        (await ctx.groups.describe_groups(ctx.coordinator_context(), request)).groups if allowed else []
    )
    by_id = {g.group_id: g for g in described}
    groups = [
        by_id[g] if g in by_id else DescribeGroupsResponseDescribedGroup(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=g, group_state="", protocol_type="",
            protocol_data="", members=[],
        )
        for g in wanted
    ]
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
