"""ConsumerGroupHeartbeat (key 68). Served v0-1.

The one request of the consumer (KIP-848) group protocol: join with epoch 0,
heartbeat at the current epoch (reporting owned partitions when they changed),
leave with -1 (-2: a static member that will be back). The coordinator answers
with the member's epoch and, when it changed, its assignment.
"""

from __future__ import annotations

from ...protocol.apis.consumer_group_heartbeat import (
    SPEC,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    return await ctx.groups.consumer_group_heartbeat(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
