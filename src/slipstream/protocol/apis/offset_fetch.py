"""OffsetFetch (key 9), versions 0-10; flexible from v6.

v0 read offsets from ZooKeeper in Kafka (here it reads the coordinator like
v1); v1 reads ``__consumer_offsets``; v2 allows a null ``topics`` (= every
partition the group has offsets for) and adds a top-level error_code; v3 adds
throttle_time_ms; v4 is the same as v3; v5 adds committed_leader_epoch; v6 is
the first flexible version; v7 adds require_stable (UNSTABLE_OFFSET_COMMIT
while a commit for the partition is pending); v8 fetches several groups at
once (``groups`` replaces group_id/topics, and the response answers per
group); v9 adds member_id/member_epoch for the KIP-848 protocol; v10 names
topics by id instead of by name (both ways).
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..primitives import ZERO_UUID
from ..schema import BOOL, INT16, INT32, INT64, STRING, UUID, Array, Struct, field


class OffsetFetchRequestTopic(Struct):
    name: str = field(STRING, v="0-7")
    partition_indexes: list[int] = field(Array(INT32), v="0-7")


class OffsetFetchRequestTopics(Struct):
    name: str = field(STRING, v="8-9", default="")
    topic_id: uuid.UUID = field(UUID, v="10+", default=ZERO_UUID)
    partition_indexes: list[int] = field(Array(INT32), v="8+")


class OffsetFetchRequestGroup(Struct):
    group_id: str = field(STRING, v="8+")
    member_id: str | None = field(STRING, v="9+", nullable="9+", default=None)
    member_epoch: int = field(INT32, v="9+", default=-1)
    topics: list[OffsetFetchRequestTopics] | None = field(
        Array(OffsetFetchRequestTopics), v="8+", nullable="8+"
    )


class OffsetFetchRequest(Struct):
    group_id: str = field(STRING, v="0-7")
    topics: list[OffsetFetchRequestTopic] | None = field(
        Array(OffsetFetchRequestTopic), v="0-7", nullable="2-7"
    )
    groups: list[OffsetFetchRequestGroup] = field(Array(OffsetFetchRequestGroup), v="8+")
    require_stable: bool = field(BOOL, v="7+")


class OffsetFetchResponsePartition(Struct):
    partition_index: int = field(INT32, v="0-7")
    committed_offset: int = field(INT64, v="0-7")
    committed_leader_epoch: int = field(INT32, v="5-7", default=-1)
    metadata: str | None = field(STRING, v="0-7", nullable="0-7")
    error_code: int = field(INT16, v="0-7")


class OffsetFetchResponseTopic(Struct):
    name: str = field(STRING, v="0-7")
    partitions: list[OffsetFetchResponsePartition] = field(Array(OffsetFetchResponsePartition), v="0-7")


class OffsetFetchResponsePartitions(Struct):
    partition_index: int = field(INT32, v="8+")
    committed_offset: int = field(INT64, v="8+")
    committed_leader_epoch: int = field(INT32, v="8+", default=-1)
    metadata: str | None = field(STRING, v="8+", nullable="8+")
    error_code: int = field(INT16, v="8+")


class OffsetFetchResponseTopics(Struct):
    name: str = field(STRING, v="8-9", default="")
    topic_id: uuid.UUID = field(UUID, v="10+", default=ZERO_UUID)
    partitions: list[OffsetFetchResponsePartitions] = field(Array(OffsetFetchResponsePartitions), v="8+")


class OffsetFetchResponseGroup(Struct):
    group_id: str = field(STRING, v="8+")
    topics: list[OffsetFetchResponseTopics] = field(Array(OffsetFetchResponseTopics), v="8+")
    error_code: int = field(INT16, v="8+")


class OffsetFetchResponse(Struct):
    throttle_time_ms: int = field(INT32, v="3+")
    topics: list[OffsetFetchResponseTopic] = field(Array(OffsetFetchResponseTopic), v="0-7")
    error_code: int = field(INT16, v="2-7")
    groups: list[OffsetFetchResponseGroup] = field(Array(OffsetFetchResponseGroup), v="8+")


SPEC = register(ApiSpec(9, "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, 0, 10, 6))
