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
from .describe_groups import describe_permitted

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    async def describe(group_ids: list[str]) -> list[ConsumerGroupDescribeResponseGroup]:
        request.group_ids = group_ids
        return (await ctx.groups.consumer_group_describe(ctx.coordinator_context(), request)).groups

    groups = await describe_permitted(ctx, request.group_ids, describe, _refused)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _refused(group_id: str) -> ConsumerGroupDescribeResponseGroup:
    return ConsumerGroupDescribeResponseGroup(
        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=group_id, group_state="",
        group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
