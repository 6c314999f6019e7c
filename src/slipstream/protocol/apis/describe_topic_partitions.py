"""DescribeTopicPartitions (key 75), version 0 only; flexible from v0.

A paginated, topic-name-based alternative to Metadata added with KIP-966
(eligible leader replicas, Kafka 3.8) and preferred by newer admin clients'
describeTopics: at most response_partition_limit partitions are answered;
``cursor`` (null = start) says where to resume, and a non-null next_cursor
in the response says there is more. An unknown topic is answered with
UNKNOWN_TOPIC_OR_PARTITION and the zero topic id; eligible_leader_replicas
and last_known_elr are null when ELR is not in use.
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Struct, field

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


class DescribeTopicPartitionsRequestTopic(Struct):
    name: str = field(STRING)


class DescribeTopicPartitionsRequestCursor(Struct):
    topic_name: str = field(STRING)
    partition_index: int = field(INT32)


class DescribeTopicPartitionsRequest(Struct):
    topics: list[DescribeTopicPartitionsRequestTopic] = field(
        Array(DescribeTopicPartitionsRequestTopic)
    )
    response_partition_limit: int = field(INT32, default=2000)
    cursor: DescribeTopicPartitionsRequestCursor | None = field(
        DescribeTopicPartitionsRequestCursor, nullable="0+", default=None
    )


class DescribeTopicPartitionsResponsePartition(Struct):
    error_code: int = field(INT16)
    partition_index: int = field(INT32)
    leader_id: int = field(INT32)
    leader_epoch: int = field(INT32, default=-1)
    replica_nodes: list[int] = field(Array(INT32))
    isr_nodes: list[int] = field(Array(INT32))
    eligible_leader_replicas: list[int] | None = field(Array(INT32), nullable="0+", default=None)
    last_known_elr: list[int] | None = field(Array(INT32), nullable="0+", default=None)
    offline_replicas: list[int] = field(Array(INT32))


class DescribeTopicPartitionsResponseTopic(Struct):
    error_code: int = field(INT16)
    name: str | None = field(STRING, nullable="0+")
    topic_id: uuid.UUID = field(UUID)
    is_internal: bool = field(BOOL, default=False)
    partitions: list[DescribeTopicPartitionsResponsePartition] = field(
        Array(DescribeTopicPartitionsResponsePartition)
    )
    topic_authorized_operations: int = field(INT32, default=AUTHORIZED_OPERATIONS_OMITTED)


class DescribeTopicPartitionsResponseCursor(Struct):
    topic_name: str = field(STRING)
    partition_index: int = field(INT32)


class DescribeTopicPartitionsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    topics: list[DescribeTopicPartitionsResponseTopic] = field(
        Array(DescribeTopicPartitionsResponseTopic)
    )
    next_cursor: DescribeTopicPartitionsResponseCursor | None = field(
        DescribeTopicPartitionsResponseCursor, nullable="0+", default=None
    )


SPEC = register(
    ApiSpec(
        75,
        "DescribeTopicPartitions",
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
        0,
        0,
        0,
    )
)
