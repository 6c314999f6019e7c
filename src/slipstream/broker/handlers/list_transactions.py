"""ListTransactions (key 66). Served v0-1.

Every transactional id the coordinator knows, filtered by state names and producer
ids; v1 adds the duration filter (transactions running at least that long).
"""

from __future__ import annotations

from ...protocol.apis.list_transactions import (
    SPEC,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    return ctx.transactions.coordinator.list_transactions(
        ctx.coordinator_context(), request, ctx.state.clock()
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
