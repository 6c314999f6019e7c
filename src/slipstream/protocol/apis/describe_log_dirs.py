"""DescribeLogDirs (key 35), versions 1-5; flexible from v2.

Which log directories the broker has and, per partition in each, its size on
disk. A null ``topics`` asks for every partition. v1 has v0's layout (v0 was
removed in Kafka 4); v3 adds the top-level error code, v4 each directory's
total and usable bytes, v5 whether it is cordoned (never, here).
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Struct, field


class DescribeLogDirsRequestTopic(Struct):
    topic: str = field(STRING)
    partitions: list[int] = field(Array(INT32))


class DescribeLogDirsRequest(Struct):
    topics: list[DescribeLogDirsRequestTopic] | None = field(
        Array(DescribeLogDirsRequestTopic), nullable="0+", default=None
    )


class DescribeLogDirsResponsePartition(Struct):
    partition_index: int = field(INT32)
    partition_size: int = field(INT64)
    offset_lag: int = field(INT64, default=0)
    is_future_key: bool = field(BOOL, default=False)


class DescribeLogDirsResponseTopic(Struct):
    name: str = field(STRING)
    partitions: list[DescribeLogDirsResponsePartition] = field(Array(DescribeLogDirsResponsePartition))


class DescribeLogDirsResponseResult(Struct):
    error_code: int = field(INT16)
    log_dir: str = field(STRING)
    topics: list[DescribeLogDirsResponseTopic] = field(Array(DescribeLogDirsResponseTopic))
    total_bytes: int = field(INT64, v="4+", default=-1)
    usable_bytes: int = field(INT64, v="4+", default=-1)
    is_cordoned: bool = field(BOOL, v="5+", default=False)


class DescribeLogDirsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16, v="3+", default=0)
    results: list[DescribeLogDirsResponseResult] = field(Array(DescribeLogDirsResponseResult))


SPEC = register(ApiSpec(35, "DescribeLogDirs", DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 5, 2))
