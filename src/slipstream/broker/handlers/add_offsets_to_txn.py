"""AddOffsetsToTxn (key 25). Served v0-4.

The group's ``__consumer_offsets`` partition joins the producer's transaction,
so the transaction's marker reaches the offsets it commits with TxnOffsetCommit.
Needs Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Read
on the group (else GROUP_AUTHORIZATION_FAILED).
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
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not request.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    txns = ctx.transactions
    txns.ensure_topic()
    coordinator_ctx = ctx.coordinator_context()
    response = await txns.call(lambda now: txns.coordinator.add_offsets(coordinator_ctx, request, now))
    return cast(AddOffsetsToTxnResponse, response)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
