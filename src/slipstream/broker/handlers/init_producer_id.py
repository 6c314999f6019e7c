"""InitProducerId (key 22). Served v0-5.

Without a transactional id Kafka always hands out a fresh producer id with epoch 0,
also to a producer that sends its old id and epoch (v3+) to reset its sequences.
Transactional ids are refused: transactions are not supported yet.
"""

from __future__ import annotations

from ...protocol.apis.init_producer_id import SPEC, InitProducerIdRequest, InitProducerIdResponse
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1
        )
    return InitProducerIdResponse(error_code=0, producer_id=ctx.state.producer_ids.allocate(), producer_epoch=0)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
