"""OffsetFetch (key 9). Served v0-9.

Listed partitions or all of a group's; v8+ several groups at once; v7+
require_stable.
"""

from __future__ import annotations

from ...protocol.apis.offset_fetch import SPEC, OffsetFetchRequest, OffsetFetchResponse
from ..state import RequestContext
from ._group import call_coordinator

MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    response: OffsetFetchResponse = await call_coordinator(ctx, SPEC.key, request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
