"""ListTransactions (key 66). Served v0-1.

Every transactional id the coordinator knows, filtered by state names and producer
ids; v1 adds the duration filter (transactions running at least that long).
With an authorizer only the ids the principal may Describe are listed.
"""

from __future__ import annotations

from ...protocol.apis.list_transactions import (
    SPEC,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    response = ctx.transactions.coordinator.list_transactions(ctx.coordinator_context(), request, ctx.state.clock())
    if ctx.authorizing:
        response.transaction_states = [
            s for s in response.transaction_states
            if ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id)
        ]
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
