"""DescribeTransactions (key 65). Served v0.

State, timeout, start time, producer id/epoch and partitions of each named
transactional id (TRANSACTIONAL_ID_NOT_FOUND for ids the coordinator does not know).
With an authorizer each id needs Describe (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for
it), and the partitions of topics the principal may not Describe are left out.
"""

from __future__ import annotations

from ...protocol.apis.describe_transactions import (
    SPEC,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeTransactionsTransactionState,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    if not ctx.authorizing:
        return ctx.transactions.coordinator.describe_transactions(request)
    wanted = request.transactional_ids
    request.transactional_ids = [
        t for t in wanted if ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t)
    ]
    described = {s.transactional_id: s for s in ctx.transactions.coordinator.describe_transactions(request).transaction_states}
    states: list[DescribeTransactionsTransactionState] = []
    for tid in wanted:
        found = described.get(tid)
        if found is None:
            states.append(
                DescribeTransactionsTransactionState(
                    error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=tid,
                    transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                    producer_id=-1, producer_epoch=-1, topics=[],
                )
            )
            continue
        found.topics = [t for t in found.topics if ctx.topic_allowed(Operation.DESCRIBE, t.topic)]
        states.append(found)
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
