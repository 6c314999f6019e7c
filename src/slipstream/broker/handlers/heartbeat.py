"""Heartbeat (key 12). Served v0-4.

Keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.
Needs Read on the group (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from ...protocol.apis.heartbeat import SPEC, HeartbeatRequest, HeartbeatResponse
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await ctx.groups.heartbeat(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
