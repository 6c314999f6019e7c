"""FindCoordinator (key 10). Served v0-6.

This node coordinates every group. v4+ batches keys (coordinator_keys).
Transaction coordinators (key_type 1) are refused: transactions are not
supported, and a clear error beats a client retrying forever.
"""

from __future__ import annotations

from ...protocol.apis.find_coordinator import (
    SPEC,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 6

KEY_TYPE_GROUP = 0
_TXN_REFUSAL = "transactions are not supported by this broker"


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    state = ctx.state
    node = state.config.node_id
    host, port = ctx.advertised_endpoint()
    is_group = request.key_type == KEY_TYPE_GROUP
    if is_group:
        # Lookups hint that members are on their way (group.initial.rebalance.delay.ms).
        ctx.groups.note_coordinator_lookup(
            request.coordinator_keys if ctx.api_version >= 4 else [request.key], ctx.client_host
        )
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[
                FindCoordinatorResponseCoordinator(
                    key=key, node_id=node if is_group else -1, host=host if is_group else "",
                    port=port if is_group else -1,
                    error_code=0 if is_group else ErrorCode.INVALID_REQUEST,
                    error_message=None if is_group else _TXN_REFUSAL,
                )
                for key in request.coordinator_keys
            ]
        )
    if not is_group:
        return FindCoordinatorResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message=_TXN_REFUSAL, node_id=-1, host="", port=-1
        )
    return FindCoordinatorResponse(error_code=0, error_message=None, node_id=node, host=host, port=port)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
