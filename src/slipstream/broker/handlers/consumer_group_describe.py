"""ConsumerGroupDescribe (key 69). Served v0-1.

Describes consumer (KIP-848) groups: group and target assignment epochs, the
assignor, and per member its epoch, subscription, current and target assignment.
Each group needs Describe (else GROUP_AUTHORIZATION_FAILED for it, nothing else said).
"""

from __future__ import annotations

from ...protocol.apis.consumer_group_describe import (
    SPEC,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeResponseGroup,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation
from .describe_groups import authorized_group_operations

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    response = await _describe(ctx, request)
    if ctx.authorizing:
        for group in response.groups:
            group.authorized_operations = authorized_group_operations(ctx, group.group_id, group.authorized_operations)
    return response


async def _describe(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    wanted = request.group_ids
    allowed = [g for g in wanted if ctx.group_allowed(Operation.DESCRIBE, g)]
    if len(allowed) == len(wanted):
        return await ctx.groups.consumer_group_describe(ctx.coordinator_context(), request)
    request.group_ids = allowed
    described = (
        (await ctx.groups.consumer_group_describe(ctx.coordinator_context(), request)).groups if allowed else []
    )
    by_id = {g.group_id: g for g in described}
    groups = [
        by_id[g] if g in by_id else ConsumerGroupDescribeResponseGroup(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=g, group_state="",
            group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
        )
        for g in wanted
    ]
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
