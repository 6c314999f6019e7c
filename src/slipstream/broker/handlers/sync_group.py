"""SyncGroup (key 14). Served v0-5.

Followers park until the leader's assignment is written to __consumer_offsets;
v5 checks protocol type and name.
"""

from __future__ import annotations

from ...protocol.apis.sync_group import SPEC, SyncGroupRequest, SyncGroupResponse
from ..state import RequestContext
from ._group import call_coordinator

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    response: SyncGroupResponse = await call_coordinator(ctx, SPEC.key, request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
