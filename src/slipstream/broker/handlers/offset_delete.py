"""OffsetDelete (key 47). Served v0.

GROUP_SUBSCRIBED_TO_TOPIC for a topic the live consumer group subscribes to.
Needs Delete on the group (else GROUP_AUTHORIZATION_FAILED) and Read on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from ...protocol.apis.offset_delete import (
    SPEC,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not ctx.group_allowed(Operation.DELETE, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    denied = [t for t in request.topics if not ctx.topic_allowed(Operation.READ, t.name)]
    if not denied:
        return await ctx.groups.offset_delete(ctx.coordinator_context(), request)
    request.topics = [t for t in request.topics if t not in denied]
    response = await ctx.groups.offset_delete(ctx.coordinator_context(), request)
    response.topics.extend(
        OffsetDeleteResponseTopic(
            name=t.name,
            partitions=[
                OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions
            ],
        )
        for t in denied
    )
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
