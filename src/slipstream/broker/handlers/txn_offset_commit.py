"""TxnOffsetCommit (key 28). Served v0-4.

A transactional producer's offsets for a consumer group, sent to the group
coordinator: written to ``__consumer_offsets`` in the producer's transactional
batch and pending until the transaction's marker (see offset_manager.py). v3+
carry the member id, instance id and generation, checked as Kafka checks them.
With an authorizer: Write on the transactional id (else every partition is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group (else GROUP_AUTHORIZATION_FAILED)
and Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from ...protocol.apis.txn_offset_commit import (
    SPEC,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _all_failed(request.topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return _all_failed(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [t for t in request.topics if not ctx.topic_allowed(Operation.READ, t.name)]
    if not denied:
        return await ctx.groups.txn_offset_commit(ctx.coordinator_context(), request)
    request.topics = [t for t in request.topics if t not in denied]
    response = (
        await ctx.groups.txn_offset_commit(ctx.coordinator_context(), request)
        if request.topics
        else TxnOffsetCommitResponse(throttle_time_ms=0, topics=[])
    )
    response.topics.extend(_all_failed(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED).topics)
    return response


def _all_failed(topics: list[TxnOffsetCommitRequestTopic], code: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in topics
        ],
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
