"""SyncGroup (key 14). Served v0-5.

Followers park until the leader's assignment is written to __consumer_offsets;
v5 checks protocol type and name.
"""

from __future__ import annotations

from ...protocol.apis.sync_group import SPEC, SyncGroupRequest, SyncGroupResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    return await ctx.groups.sync_group(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
