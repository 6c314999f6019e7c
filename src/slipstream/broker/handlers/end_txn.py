"""EndTxn (key 26). Served v0-4 (Kafka 3.9).

Commits or aborts the producer's transaction. Answered once PrepareCommit /
PrepareAbort is durable in ``__transaction_state``; the markers are written
afterwards (a crash in between finishes them after the restart). A retried
EndTxn of a completed transaction answers NONE; while the markers are being
written it answers CONCURRENT_TRANSACTIONS.
Needs Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import cast

from ...protocol.apis.end_txn import SPEC, EndTxnRequest, EndTxnResponse
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    txns = ctx.transactions
    coordinator_ctx = ctx.coordinator_context()
    response = await txns.call(lambda now: txns.coordinator.end_txn(coordinator_ctx, request, now))
    return cast(EndTxnResponse, response)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
