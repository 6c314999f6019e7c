"""OffsetCommit (key 8), versions 0-10; flexible from v8.

v0 commits without group membership; v1 adds the generation and member id
(``generation_id_or_member_epoch``, -1 for a standalone commit) and a
per-partition commit_timestamp (v1 only); v2 replaces the timestamp with a
request-wide retention_time_ms (v2-4, -1 = broker default); v3 adds
throttle_time_ms to the response; v4 is the same as v3; v5 removes the
retention time; v6 adds committed_leader_epoch; v7 adds group_instance_id
(static membership); v8 is the first flexible version; v9 is the first usable
with the KIP-848 consumer protocol and answers GROUP_ID_NOT_FOUND for a
missing group where older versions answer ILLEGAL_GENERATION; v10 names
topics by id instead of by name (both ways).
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..primitives import ZERO_UUID
from ..schema import INT16, INT32, INT64, STRING, UUID, Array, Struct, field


class OffsetCommitRequestPartition(Struct):
    partition_index: int = field(INT32)
    committed_offset: int = field(INT64)
    committed_leader_epoch: int = field(INT32, v="6+", default=-1)
    commit_timestamp: int = field(INT64, v="1", default=-1)
    committed_metadata: str | None = field(STRING, nullable="0+")


class OffsetCommitRequestTopic(Struct):
    name: str = field(STRING, v="0-9", default="")
    topic_id: uuid.UUID = field(UUID, v="10+", default=ZERO_UUID)
    partitions: list[OffsetCommitRequestPartition] = field(Array(OffsetCommitRequestPartition))


class OffsetCommitRequest(Struct):
    group_id: str = field(STRING)
    generation_id_or_member_epoch: int = field(INT32, v="1+", default=-1)
    member_id: str = field(STRING, v="1+")
    group_instance_id: str | None = field(STRING, v="7+", nullable="7+", default=None)
    retention_time_ms: int = field(INT64, v="2-4", default=-1)
    topics: list[OffsetCommitRequestTopic] = field(Array(OffsetCommitRequestTopic))


class OffsetCommitResponsePartition(Struct):
    partition_index: int = field(INT32)
    error_code: int = field(INT16)


class OffsetCommitResponseTopic(Struct):
    name: str = field(STRING, v="0-9", default="")
    topic_id: uuid.UUID = field(UUID, v="10+", default=ZERO_UUID)
    partitions: list[OffsetCommitResponsePartition] = field(Array(OffsetCommitResponsePartition))


class OffsetCommitResponse(Struct):
    throttle_time_ms: int = field(INT32, v="3+")
    topics: list[OffsetCommitResponseTopic] = field(Array(OffsetCommitResponseTopic))


SPEC = register(ApiSpec(8, "OffsetCommit", OffsetCommitRequest, OffsetCommitResponse, 0, 10, 8))
