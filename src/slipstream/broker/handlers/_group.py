"""Shared plumbing for the group API handlers: hand the request to the coordinator adapter."""

from __future__ import annotations

from typing import Any

from ...coordinator.result import RequestContext as CoordinatorContext
from ...protocol.schema import Struct
from ..state import RequestContext

# The same few (version, client id, peer) triples arrive over and over: reuse their contexts.
_CONTEXTS: dict[tuple[int, str | None, str], CoordinatorContext] = {}
_MAX_CONTEXTS = 4096


def coordinator_context(ctx: RequestContext) -> CoordinatorContext:
    key = (ctx.api_version, ctx.header.client_id, ctx.client_host)
    found = _CONTEXTS.get(key)
    if found is not None:
        return found
    host = ctx.client_host.rsplit(":", 1)[0]
    # Kafka shows client hosts as InetAddress.toString(): "/127.0.0.1".
    made = CoordinatorContext(
        api_version=ctx.api_version, client_id=ctx.header.client_id or "", client_host=f"/{host}"
    )
    if len(_CONTEXTS) >= _MAX_CONTEXTS:
        _CONTEXTS.clear()
    _CONTEXTS[key] = made
    return made


async def call_coordinator(ctx: RequestContext, api_key: int, request: Struct) -> Any:
    return await ctx.state.groups.handle(api_key, coordinator_context(ctx), request)
