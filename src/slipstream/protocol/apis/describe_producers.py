"""DescribeProducers (key 61), version 0; flexible.

The idempotent (and transactional) producers a partition knows: id, epoch, last
sequence and the timestamp of their last batch (KIP-664, used by
kafka-transactions.sh and UIs).
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, field


class DescribeProducersRequestTopic(Struct):
    name: str = field(STRING)
    partition_indexes: list[int] = field(Array(INT32))


class DescribeProducersRequest(Struct):
    topics: list[DescribeProducersRequestTopic] = field(Array(DescribeProducersRequestTopic))


class DescribeProducersResponseProducer(Struct):
    producer_id: int = field(INT64)
    producer_epoch: int = field(INT32)
    last_sequence: int = field(INT32, default=-1)
    last_timestamp: int = field(INT64, default=-1)
    coordinator_epoch: int = field(INT32, default=0)
    current_txn_start_offset: int = field(INT64, default=-1)


class DescribeProducersResponsePartition(Struct):
    partition_index: int = field(INT32)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+", default=None)
    active_producers: list[DescribeProducersResponseProducer] = field(Array(DescribeProducersResponseProducer))


class DescribeProducersResponseTopic(Struct):
    name: str = field(STRING)
    partitions: list[DescribeProducersResponsePartition] = field(Array(DescribeProducersResponsePartition))


class DescribeProducersResponse(Struct):
    throttle_time_ms: int = field(INT32)
    topics: list[DescribeProducersResponseTopic] = field(Array(DescribeProducersResponseTopic))


SPEC = register(ApiSpec(61, "DescribeProducers", DescribeProducersRequest, DescribeProducersResponse, 0, 0, 0))
