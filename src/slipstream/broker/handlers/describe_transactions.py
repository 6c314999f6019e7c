"""DescribeTransactions (key 65). Served v0.

State, timeout, start time, producer id/epoch and partitions of each named
transactional id (TRANSACTIONAL_ID_NOT_FOUND for ids the coordinator does not know).
"""

from __future__ import annotations

from ...protocol.apis.describe_transactions import (
    SPEC,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    return ctx.transactions.coordinator.describe_transactions(request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
