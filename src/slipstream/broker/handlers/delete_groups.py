"""DeleteGroups (key 42). Served v0-2: NON_EMPTY_GROUP unless the group is Empty.
"""

from __future__ import annotations

from ...protocol.apis.delete_groups import SPEC, DeleteGroupsRequest, DeleteGroupsResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    return await ctx.groups.delete_groups(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
