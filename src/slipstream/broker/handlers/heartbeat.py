"""Heartbeat (key 12). Served v0-4.

Keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.
"""

from __future__ import annotations

from ...protocol.apis.heartbeat import SPEC, HeartbeatRequest, HeartbeatResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    return await ctx.groups.heartbeat(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
