"""ListGroups (key 16). Served v0-5: v4 filters by state, v5 by type.
With an authorizer: all groups with Describe on the cluster, else only those the
principal may Describe.
"""

from __future__ import annotations

from ...protocol.apis.list_groups import SPEC, ListGroupsRequest, ListGroupsResponse
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    response = await ctx.groups.list_groups(ctx.coordinator_context(), request)
    if ctx.authorizing and not ctx.authorized_cluster(Operation.DESCRIBE):
        response.groups = [g for g in response.groups if ctx.group_allowed(Operation.DESCRIBE, g.group_id)]
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
