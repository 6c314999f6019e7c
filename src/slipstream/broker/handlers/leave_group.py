"""LeaveGroup (key 13). Served v0-5.

v0-2 leave by member id; v3+ batch members by id or group.instance.id.
Needs Read on the group (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from ...protocol.apis.leave_group import SPEC, LeaveGroupRequest, LeaveGroupResponse
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await ctx.groups.leave_group(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
