"""DescribeProducers (key 61). Served v0.

The idempotent producers each requested partition remembers (rebuilt from the
log's batch headers after a restart): id, epoch, last sequence, last batch
timestamp, the coordinator epoch of its last marker and the first offset of its
open transaction (-1 when none).
An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION for that partition; with an
authorizer, a topic without Read is TOPIC_AUTHORIZATION_FAILED (Kafka's check).
"""

from __future__ import annotations

from ...protocol.apis.describe_producers import (
    SPEC,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeProducersResponsePartition,
    DescribeProducersResponseProducer,
    DescribeProducersResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    state = ctx.state
    topics = []
    for wanted in request.topics:
        partitions = []
        readable = ctx.topic_allowed(Operation.READ, wanted.name)
        for index in wanted.partition_indexes:
            if not readable:
                partitions.append(
                    DescribeProducersResponsePartition(
                        partition_index=index,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        error_message=f"Read on topic {wanted.name!r} is not allowed",
                        active_producers=[],
                    )
                )
                continue
            if state.topics.partition(wanted.name, index) is None:
                partitions.append(
                    DescribeProducersResponsePartition(
                        partition_index=index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"partition {wanted.name}-{index} does not exist",
                        active_producers=[],
                    )
                )
                continue
            producers = state.producer_state(wanted.name, index).active_producers()
            partitions.append(
                DescribeProducersResponsePartition(
                    partition_index=index,
                    error_code=ErrorCode.NONE,
                    active_producers=[
                        DescribeProducersResponseProducer(
                            producer_id=p.producer_id,
                            producer_epoch=p.epoch,
                            last_sequence=p.last_sequence,
                            last_timestamp=p.last_timestamp,
                            coordinator_epoch=p.coordinator_epoch,
                            current_txn_start_offset=p.current_txn_start_offset,
                        )
                        for p in producers
                    ],
                )
            )
        topics.append(DescribeProducersResponseTopic(name=wanted.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
