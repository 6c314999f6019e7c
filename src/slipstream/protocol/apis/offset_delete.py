"""OffsetDelete (key 47), version 0 only; never flexible.

Deletes a group's committed offsets for the listed partitions (KIP-496). A
partition of a topic the live consumer group still subscribes to answers
GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group that does not use the consumer
protocol answers NON_EMPTY_GROUP at the top level.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, STRING, Array, Struct, field


class OffsetDeleteRequestPartition(Struct):
    partition_index: int = field(INT32)


class OffsetDeleteRequestTopic(Struct):
    name: str = field(STRING)
    partitions: list[OffsetDeleteRequestPartition] = field(Array(OffsetDeleteRequestPartition))


class OffsetDeleteRequest(Struct):
    group_id: str = field(STRING)
    topics: list[OffsetDeleteRequestTopic] = field(Array(OffsetDeleteRequestTopic))


class OffsetDeleteResponsePartition(Struct):
    partition_index: int = field(INT32)
    error_code: int = field(INT16)


class OffsetDeleteResponseTopic(Struct):
    name: str = field(STRING)
    partitions: list[OffsetDeleteResponsePartition] = field(Array(OffsetDeleteResponsePartition))


class OffsetDeleteResponse(Struct):
    error_code: int = field(INT16)
    throttle_time_ms: int = field(INT32)
    topics: list[OffsetDeleteResponseTopic] = field(Array(OffsetDeleteResponseTopic))


SPEC = register(ApiSpec(47, "OffsetDelete", OffsetDeleteRequest, OffsetDeleteResponse, 0, 0, None))
