"""DescribeGroups (key 15). Served v0-6 (v6: GROUP_ID_NOT_FOUND for an unknown group).
"""

from __future__ import annotations

from ...protocol.apis.describe_groups import SPEC, DescribeGroupsRequest, DescribeGroupsResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 6


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    return await ctx.groups.describe_groups(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
