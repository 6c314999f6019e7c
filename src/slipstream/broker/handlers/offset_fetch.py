"""OffsetFetch (key 9). Served v0-9.

Listed partitions or all of a group's; v8+ several groups at once; v7+
require_stable.
"""

from __future__ import annotations

from ...protocol.apis.offset_fetch import SPEC, OffsetFetchRequest, OffsetFetchResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    return await ctx.groups.offset_fetch(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
