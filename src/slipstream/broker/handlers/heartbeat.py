"""Heartbeat (key 12). Served v0-4.

Keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.
"""

from __future__ import annotations

from ...protocol.apis.heartbeat import SPEC, HeartbeatRequest, HeartbeatResponse
from ..state import RequestContext
from ._group import call_coordinator

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    response: HeartbeatResponse = await call_coordinator(ctx, SPEC.key, request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
