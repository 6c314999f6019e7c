"""DeleteGroups (key 42). Served v0-2: NON_EMPTY_GROUP unless the group is Empty.
"""

from __future__ import annotations

from ...protocol.apis.delete_groups import SPEC, DeleteGroupsRequest, DeleteGroupsResponse
from ..state import RequestContext
from ._group import call_coordinator

MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    response: DeleteGroupsResponse = await call_coordinator(ctx, SPEC.key, request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
