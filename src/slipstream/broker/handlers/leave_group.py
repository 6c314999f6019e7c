"""LeaveGroup (key 13). Served v0-5.

v0-2 leave by member id; v3+ batch members by id or group.instance.id.
"""

from __future__ import annotations

from ...protocol.apis.leave_group import SPEC, LeaveGroupRequest, LeaveGroupResponse
from ..state import RequestContext
from ._group import call_coordinator

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    response: LeaveGroupResponse = await call_coordinator(ctx, SPEC.key, request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
