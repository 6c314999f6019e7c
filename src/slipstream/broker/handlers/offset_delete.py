"""OffsetDelete (key 47). Served v0.

GROUP_SUBSCRIBED_TO_TOPIC for a topic the live consumer group subscribes to.
"""

from __future__ import annotations

from ...protocol.apis.offset_delete import SPEC, OffsetDeleteRequest, OffsetDeleteResponse
from ..state import RequestContext
from ._group import call_coordinator

MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    response: OffsetDeleteResponse = await call_coordinator(ctx, SPEC.key, request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
