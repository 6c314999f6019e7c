"""LeaveGroup (key 13). Served v0-5.

v0-2 leave by member id; v3+ batch members by id or group.instance.id.
"""

from __future__ import annotations

from ...protocol.apis.leave_group import SPEC, LeaveGroupRequest, LeaveGroupResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    return await ctx.groups.leave_group(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
