"""DescribeGroups (key 15). Served v0-5.
"""

from __future__ import annotations

from ...protocol.apis.describe_groups import SPEC, DescribeGroupsRequest, DescribeGroupsResponse
from ..state import RequestContext
from ._group import call_coordinator

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    response: DescribeGroupsResponse = await call_coordinator(ctx, SPEC.key, request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
