"""AddPartitionsToTxn (key 24). Served v0-5.

v0-3 (producers): the partitions the producer is about to write join its
transaction. Partitions of topics this broker does not have answer
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, without
touching the transaction (as Kafka). v0-1 get INVALID_PRODUCER_EPOCH where
newer versions get PRODUCER_FENCED.
v4+ (brokers, KIP-890): several transactions in one request; ``verify_only``
asks whether the partitions are in the transaction (TRANSACTION_ABORTABLE for
those that are not) without adding them.
With an authorizer: v0-3 need Write on the transactional id (else every partition is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Write on each topic (else
TOPIC_AUTHORIZATION_FAILED there, OPERATION_NOT_ATTEMPTED for the others); v4+ come from
brokers and need ClusterAction (else CLUSTER_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

from typing import cast

from ...coordinator.transactions.responses import partition_results
from ...protocol.apis.add_partitions_to_txn import (
    SPEC,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 5


def _partitions(topics: list[AddPartitionsToTxnTopic]) -> list[tuple[str, int]]:
    return [(t.name, p) for t in topics for p in t.partitions]


async def _add(
    ctx: RequestContext, tid: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
) -> AddPartitionsToTxnResult:
    topics = ctx.state.topics
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return partition_results(tid, dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    denied = {tp for tp in partitions if not ctx.topic_allowed(Operation.WRITE, tp[0])}
    if denied:
        return partition_results(
            tid,
            {
                tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in partitions
            },
        )
    unknown = {tp for tp in partitions if topics.partition(*tp) is None}
    if unknown:
        return partition_results(
            tid,
            {
                tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in partitions
            },
        )
    txns = ctx.transactions
    txns.ensure_topic()
    result = await txns.call(
        lambda now: txns.coordinator.add_partitions(tid, producer_id, producer_epoch, partitions, now)
    )
    return cast(AddPartitionsToTxnResult, result)


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    version = ctx.api_version
    if version <= 3:
        result = await _add(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            _partitions(request.v3_and_below_topics),
        )
        if version < 2:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    if p.partition_error_code == ErrorCode.PRODUCER_FENCED:
                        p.partition_error_code = ErrorCode.INVALID_PRODUCER_EPOCH
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=result.topic_results)
    if not ctx.authorized_cluster(Operation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    response = AddPartitionsToTxnResponse(error_code=ErrorCode.NONE)
    coordinator = ctx.transactions.coordinator
    for txn in request.transactions:
        partitions = _partitions(txn.topics)
        if txn.verify_only:
            result = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
        else:
            result = await _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
        if version < 5:
            # TRANSACTION_ABORTABLE is v5's; Kafka answers older versions INVALID_TXN_STATE.
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    if p.partition_error_code == ErrorCode.TRANSACTION_ABORTABLE:
                        p.partition_error_code = ErrorCode.INVALID_TXN_STATE
        response.results_by_transaction.append(result)
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
