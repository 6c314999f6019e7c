"""AddOffsetsToTxn (key 25). Served v0-4.

The group's ``__consumer_offsets`` partition joins the producer's transaction,
so the transaction's marker reaches the offsets it commits with TxnOffsetCommit.
"""

from __future__ import annotations

from typing import cast

from ...protocol.apis.add_offsets_to_txn import (
    SPEC,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not request.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    txns = ctx.transactions
    txns.ensure_topic()
    coordinator_ctx = ctx.coordinator_context()
    response = await txns.call(lambda now: txns.coordinator.add_offsets(coordinator_ctx, request, now))
    return cast(AddOffsetsToTxnResponse, response)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
