"""ListGroups (key 16). Served v0-5: v4 filters by state, v5 by type.
"""

from __future__ import annotations

from ...protocol.apis.list_groups import SPEC, ListGroupsRequest, ListGroupsResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    return await ctx.groups.list_groups(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
