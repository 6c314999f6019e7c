"""JoinGroup (key 11). Served v0-9.

Parks until the join phase completes (all known members rejoined, or the
rebalance timeout). v4+ members without an id get MEMBER_ID_REQUIRED first
(KIP-394); v5+ static members (KIP-345); v9 SkipAssignment for a static leader
rejoining a stable group. The behaviour lives in coordinator/.
With an authorizer, Read on the group is needed (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from ...coordinator.classic_responses import join_response
from ...protocol.apis.join_group import SPEC, JoinGroupRequest, JoinGroupResponse
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return join_response(ctx.api_version, error=ErrorCode.GROUP_AUTHORIZATION_FAILED, member_id=request.member_id)
    return await ctx.groups.join_group(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
