"""InitProducerId (key 22). Served v0-6.

Without a transactional id Kafka always hands out a fresh producer id with epoch 0,
also to a producer that sends its old id and epoch (v3+) to reset its sequences.
With one, the transaction coordinator answers: a new producer id, or the id's
producer id with its epoch bumped (fencing the previous producer; an ongoing
transaction of that producer is aborted first and this request answered
CONCURRENT_TRANSACTIONS, to be retried). v3+ may name the producer id and epoch
the client holds (KIP-360); v4+ may answer PRODUCER_FENCED (older versions get
INVALID_PRODUCER_EPOCH). v6 (KIP-939): two-phase commit is not offered, so a request
with enable2_pc gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (as a Kafka broker with
transaction.two.phase.commit.enable=false, its default); the ongoing-transaction
fields of the answer are -1/-1.
With an authorizer (Kafka 3.x): a transactional id needs Write on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IdempotentWrite on
the cluster or Write on at least one topic (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import cast

from ...protocol.apis.init_producer_id import SPEC, InitProducerIdRequest, InitProducerIdResponse
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 6


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.enable2_pc:
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_epoch=-1)
    if request.transactional_id is None:
        if not (
            ctx.authorized_cluster(Operation.IDEMPOTENT_WRITE) or ctx.authorized_any(Operation.WRITE, ResourceType.TOPIC)
        ):
            return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
        return InitProducerIdResponse(error_code=0, producer_id=ctx.state.producer_ids.allocate(), producer_epoch=0)
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return InitProducerIdResponse(
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1
        )
    txns = ctx.transactions
    txns.ensure_topic()
    coordinator_ctx = ctx.coordinator_context()
    response = await txns.call(lambda now: txns.coordinator.init_producer_id(coordinator_ctx, request, now))
    return cast(InitProducerIdResponse, response)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
