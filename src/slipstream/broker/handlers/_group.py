"""Shared plumbing for the group API handlers: hand the request to the coordinator adapter."""

from __future__ import annotations

from typing import Any

from ...coordinator.result import RequestContext as CoordinatorContext
from ...protocol.schema import Struct
from ..state import RequestContext


def coordinator_context(ctx: RequestContext) -> CoordinatorContext:
    host = ctx.client_host.rsplit(":", 1)[0]
    # Kafka shows client hosts as InetAddress.toString(): "/127.0.0.1".
    return CoordinatorContext(
        api_version=ctx.api_version, client_id=ctx.header.client_id or "", client_host=f"/{host}"
    )


async def call_coordinator(ctx: RequestContext, api_key: int, request: Struct) -> Any:
    return await ctx.state.groups.handle(api_key, coordinator_context(ctx), request)
