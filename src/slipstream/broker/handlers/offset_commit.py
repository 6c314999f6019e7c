"""OffsetCommit (key 8). Served v0-9.

Answered once the commit is appended to __consumer_offsets. Generation -1 with
no member id is a standalone commit, accepted for groups with no members.
"""

from __future__ import annotations

from ...protocol.apis.offset_commit import SPEC, OffsetCommitRequest, OffsetCommitResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    return await ctx.groups.offset_commit(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
