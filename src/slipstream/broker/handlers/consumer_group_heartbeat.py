"""ConsumerGroupHeartbeat (key 68). Served v0-1.

The one request of the consumer (KIP-848) group protocol: join with epoch 0,
heartbeat at the current epoch (reporting owned partitions when they changed),
leave with -1 (-2: a static member that will be back). The coordinator answers
with the member's epoch and, when it changed, its assignment.
Needs Read on the group (else GROUP_AUTHORIZATION_FAILED) and Describe on every topic it
subscribes to by name (else TOPIC_AUTHORIZATION_FAILED), as Kafka 3.9 checks.
"""

from __future__ import annotations

from ...protocol.apis.consumer_group_heartbeat import (
    SPEC,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    error = _authorization_error(ctx, request)
    if error is not None:
        code, message = error
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=code, error_message=message, member_epoch=-1, heartbeat_interval_ms=0
        )
    return await ctx.groups.consumer_group_heartbeat(ctx.coordinator_context(), request)


def _authorization_error(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> tuple[int, str] | None:
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, f"Read on group {request.group_id!r} is not allowed"
    denied = [t for t in request.subscribed_topic_names or () if not ctx.topic_allowed(Operation.DESCRIBE, t)]
    if denied:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Describe is not allowed on topics {', '.join(sorted(set(denied)))}"
    return None


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
