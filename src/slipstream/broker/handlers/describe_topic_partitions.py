"""DescribeTopicPartitions (key 75). Served v0 (flexible).

The paginated, name-based topic description of KIP-966, used by the Java admin
client (3.9+) for describeTopics. Paging follows Kafka: the topics asked for
(an empty list means every topic) are answered in name order, starting at the
cursor (its topic and partition index) when one is given. At most
max(min(response_partition_limit, 2000), 1) partitions are answered; when the
limit cuts a topic short, or topics remain once it is used up, next_cursor says
where the next request should start (partition 0 of the next topic when the
limit ended exactly at a topic boundary), as Kafka does.

Every partition is led by this node: leader_epoch 0, replicas and ISR [node],
eligible_leader_replicas, last_known_elr and offline_replicas empty. In a cluster
(storage postgres) the leader is the live broker holding the partition's lease, as in
Metadata: LEADER_NOT_AVAILABLE while none does, LISTENER_NOT_FOUND when it has no
listener of the request's listener's name (no leader, no replicas then). A topic
asked for by name that does not exist is UNKNOWN_TOPIC_OR_PARTITION (an illegal
name INVALID_TOPIC_EXCEPTION) with a zero topic id; it uses none of the limit.
A cursor naming a topic outside the requested list, or a negative cursor
partition, is INVALID_REQUEST on every requested topic (the response has no
top-level error). topic_authorized_operations is -2147483648 (not provided).
"""

from __future__ import annotations

import logging

from ...protocol.acl_types import TOPIC_OPERATIONS
from ...protocol.apis.describe_topic_partitions import (
    AUTHORIZED_OPERATIONS_OMITTED,
    SPEC,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponseCursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.primitives import ZERO_UUID
from ..cluster.view import ClusterView
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType
from ..topics import Topic, check_topic_name

MIN_VERSION = 0
MAX_VERSION = 0

# Kafka's max.request.partition.size.limit default.
MAX_PARTITION_LIMIT = 2000

log = logging.getLogger(__name__)


async def handle(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    state = ctx.state
    node = state.config.node_id
    fetch_all = not request.topics
    cursor = request.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    if fetch_all:
        names = sorted(n for n in state.topics.topics if n >= start_name)
    else:
        names = sorted({t.name for t in request.topics if t.name >= start_name})
        if cursor is not None and cursor.topic_name not in names:
            return _invalid(
                request,
                f"the cursor topic {cursor.topic_name!r} must be one of the requested topics",
            )
    if cursor is not None and cursor.partition_index < 0:
        return _invalid(
            request, f"the cursor partition index must be >= 0, got {cursor.partition_index}"
        )

    remaining = max(min(request.response_partition_limit, MAX_PARTITION_LIMIT), 1)
    response = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None)
    for name in names:
        if remaining == 0:
            response.next_cursor = DescribeTopicPartitionsResponseCursor(
                topic_name=name, partition_index=0
            )
            break
        if not ctx.topic_allowed(Operation.DESCRIBE, name):
            # Kafka's rule: left out of the all-topics form, refused when named.
            if not fetch_all:
                response.topics.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        topic = state.topics.get(name)
        if topic is None:
            if not fetch_all:
                response.topics.append(_missing(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        total = len(topic.partitions)
        end = min(total, start + remaining)
        response.topics.append(_describe(topic, range(start, end), node, state.cluster, ctx.listener))
        if end < total:
            response.next_cursor = DescribeTopicPartitionsResponseCursor(
                topic_name=name, partition_index=end
            )
            break
        remaining -= max(end - start, 0)
    if ctx.authorizing:
        # Kafka fills each described topic's operations; without an authorizer: "omitted".
        for described in response.topics:
            if not described.error_code and described.name is not None:
                described.topic_authorized_operations = ctx.authorized_operations(
                    ResourceType.TOPIC, described.name, TOPIC_OPERATIONS
                )
    return response


def _describe(
    topic: Topic, indexes: range, node: int, cluster: ClusterView | None, listener: str
) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=[_partition(topic.name, index, node, cluster, listener) for index in indexes],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _partition(
    topic: str, index: int, node: int, cluster: ClusterView | None, listener: str
) -> DescribeTopicPartitionsResponsePartition:
    code, leader, epoch = (ErrorCode.NONE, node, 0) if cluster is None else cluster.told_leader(topic, index, listener)
    replicas = [leader] if leader >= 0 else []
    return DescribeTopicPartitionsResponsePartition(
        error_code=code,
        partition_index=index,
        leader_id=leader,
        leader_epoch=epoch,
        replica_nodes=replicas,
        isr_nodes=list(replicas),
        eligible_leader_replicas=[],
        last_known_elr=[],
        offline_replicas=[],
    )


def _missing(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        check_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError as exc:
        code = exc.code
    return _error_topic(name, code)


def _error_topic(name: str, code: int) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=code,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name.startswith("__"),
        partitions=[],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _invalid(request: DescribeTopicPartitionsRequest, reason: str) -> DescribeTopicPartitionsResponse:
    # The response has no message field; the reason goes to the broker log.
    log.info("DescribeTopicPartitions refused: %s", reason)
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0,
        topics=[_error_topic(t.name, ErrorCode.INVALID_REQUEST) for t in request.topics],
        next_cursor=None,
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
