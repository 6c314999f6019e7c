"""JoinGroup (key 11). Served v0-9.

Parks until the join phase completes (all known members rejoined, or the
rebalance timeout). v4+ members without an id get MEMBER_ID_REQUIRED first
(KIP-394); v5+ static members (KIP-345); v9 SkipAssignment for a static leader
rejoining a stable group. The behaviour lives in coordinator/.
"""

from __future__ import annotations

from ...protocol.apis.join_group import SPEC, JoinGroupRequest, JoinGroupResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    return await ctx.groups.join_group(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
