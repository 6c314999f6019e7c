"""OffsetDelete (key 47). Served v0.

GROUP_SUBSCRIBED_TO_TOPIC for a topic the live consumer group subscribes to.
"""

from __future__ import annotations

from ...protocol.apis.offset_delete import SPEC, OffsetDeleteRequest, OffsetDeleteResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    return await ctx.groups.offset_delete(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
