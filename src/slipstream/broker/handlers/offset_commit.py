"""OffsetCommit (key 8). Served v0-9.

Answered once the commit is appended to __consumer_offsets. Generation -1 with
no member id is a standalone commit, accepted for groups with no members.
"""

from __future__ import annotations

from ...protocol.apis.offset_commit import SPEC, OffsetCommitRequest, OffsetCommitResponse
from ..state import RequestContext
from ._group import coordinator_context

MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    # The adapter directly, not via call_coordinator: one coroutine frame less per commit.
    response: OffsetCommitResponse = await ctx.state.groups.handle(SPEC.key, coordinator_context(ctx), request)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
