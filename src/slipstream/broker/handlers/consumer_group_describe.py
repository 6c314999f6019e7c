"""ConsumerGroupDescribe (key 69). Served v0-1.

Describes consumer (KIP-848) groups: group and target assignment epochs, the
assignor, and per member its epoch, subscription, current and target assignment.
"""

from __future__ import annotations

from ...protocol.apis.consumer_group_describe import (
    SPEC,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    return await ctx.groups.consumer_group_describe(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
