"""EndTxn (key 26). Served v0-4 (Kafka 3.9).

Commits or aborts the producer's transaction. Answered once PrepareCommit /
PrepareAbort is durable in ``__transaction_state``; the markers are written
afterwards (a crash in between finishes them after the restart). A retried
EndTxn of a completed transaction answers NONE; while the markers are being
written it answers CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

from typing import cast

from ...protocol.apis.end_txn import SPEC, EndTxnRequest, EndTxnResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    txns = ctx.transactions
    coordinator_ctx = ctx.coordinator_context()
    response = await txns.call(lambda now: txns.coordinator.end_txn(coordinator_ctx, request, now))
    return cast(EndTxnResponse, response)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
