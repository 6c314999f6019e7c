"""CreateTopics (key 19), versions 0-7; flexible from v5.

v1 adds validate_only and a per-topic error_message (Kafka 4 removed v0-1:
KIP-896); v2 adds throttle_time_ms; v3 throttles after answering; v4 lets
num_partitions / replication_factor be -1 (broker defaults) even without
manual assignments (KIP-464); v5 is the first flexible version and returns
the created topic's partition count, replication factor and configs
(KIP-525; the tagged topic_config_error_code reports a failure to describe
them); v6 may answer THROTTLING_QUOTA_EXCEEDED (KIP-599); v7 returns the new
topic's id.
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Struct, field


class CreateTopicsRequestAssignment(Struct):
    partition_index: int = field(INT32)
    broker_ids: list[int] = field(Array(INT32))


class CreateTopicsRequestConfig(Struct):
    name: str = field(STRING)
    value: str | None = field(STRING, nullable="0+")


class CreateTopicsRequestTopic(Struct):
    name: str = field(STRING)
    num_partitions: int = field(INT32)
    replication_factor: int = field(INT16)
    assignments: list[CreateTopicsRequestAssignment] = field(Array(CreateTopicsRequestAssignment))
    configs: list[CreateTopicsRequestConfig] = field(Array(CreateTopicsRequestConfig))


class CreateTopicsRequest(Struct):
    topics: list[CreateTopicsRequestTopic] = field(Array(CreateTopicsRequestTopic))
    timeout_ms: int = field(INT32, default=60000)
    validate_only: bool = field(BOOL, v="1+", default=False)


class CreateTopicsResponseConfig(Struct):
    name: str = field(STRING, v="5+")
    value: str | None = field(STRING, v="5+", nullable="5+")
    read_only: bool = field(BOOL, v="5+")
    config_source: int = field(INT8, v="5+", default=-1)
    is_sensitive: bool = field(BOOL, v="5+")


class CreateTopicsResponseTopic(Struct):
    name: str = field(STRING)
    topic_id: uuid.UUID = field(UUID, v="7+")
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, v="1+", nullable="1+")
    topic_config_error_code: int = field(INT16, v="5+", tag=0)
    num_partitions: int = field(INT32, v="5+", default=-1)
    replication_factor: int = field(INT16, v="5+", default=-1)
    configs: list[CreateTopicsResponseConfig] | None = field(
        Array(CreateTopicsResponseConfig), v="5+", nullable="5+"
    )


class CreateTopicsResponse(Struct):
    throttle_time_ms: int = field(INT32, v="2+")
    topics: list[CreateTopicsResponseTopic] = field(Array(CreateTopicsResponseTopic))


SPEC = register(ApiSpec(19, "CreateTopics", CreateTopicsRequest, CreateTopicsResponse, 0, 7, 5))
