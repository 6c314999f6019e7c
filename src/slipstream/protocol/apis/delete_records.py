"""DeleteRecords (key 21), versions 0-2; flexible from v2.

Advances each partition's log start offset to ``offset`` (-1 = the high
watermark) and answers the new low_watermark; OFFSET_OUT_OF_RANGE for an
offset past the high watermark. v1 has v0's layout (throttling after
answering); v2 is the first flexible version.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, field


class DeleteRecordsRequestPartition(Struct):
    partition_index: int = field(INT32)
    offset: int = field(INT64)


class DeleteRecordsRequestTopic(Struct):
    name: str = field(STRING)
    partitions: list[DeleteRecordsRequestPartition] = field(Array(DeleteRecordsRequestPartition))


class DeleteRecordsRequest(Struct):
    topics: list[DeleteRecordsRequestTopic] = field(Array(DeleteRecordsRequestTopic))
    timeout_ms: int = field(INT32)


class DeleteRecordsResponsePartition(Struct):
    partition_index: int = field(INT32)
    low_watermark: int = field(INT64)
    error_code: int = field(INT16)


class DeleteRecordsResponseTopic(Struct):
    name: str = field(STRING)
    partitions: list[DeleteRecordsResponsePartition] = field(Array(DeleteRecordsResponsePartition))


class DeleteRecordsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    topics: list[DeleteRecordsResponseTopic] = field(Array(DeleteRecordsResponseTopic))


SPEC = register(ApiSpec(21, "DeleteRecords", DeleteRecordsRequest, DeleteRecordsResponse, 0, 2, 2))
