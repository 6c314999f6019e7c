"""SyncGroup (key 14). Served v0-5.

Followers park until the leader's assignment is written to __consumer_offsets;
v5 checks protocol type and name. Needs Read on the group (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from ...protocol.apis.sync_group import SPEC, SyncGroupRequest, SyncGroupResponse
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    return await ctx.groups.sync_group(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
