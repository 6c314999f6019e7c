"""ListOffsets (key 2), versions 0-11; flexible from v6.

v0 may return several offsets per partition (max_num_offsets, answered in
old_style_offsets; Kafka 4 removed it: KIP-896); from v1 exactly one offset
and its timestamp are returned; v2 adds isolation_level (READ_COMMITTED
answers the last stable offset for -1) and throttle_time_ms; v4 adds
current_leader_epoch / leader_epoch for fencing; v5 may answer
OFFSET_NOT_AVAILABLE; v6 is the first flexible version. Special timestamps:
-1 latest, -2 earliest, -3 max timestamp (v7+, KIP-734), -4 earliest local
(v8+, KIP-405), -5 latest tiered (v9+, KIP-1005), -6 earliest pending upload
(v11+, KIP-1023). v10 adds timeout_ms (for offsets read from tiered storage); v11
has v10's layout.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT8, INT16, INT32, INT64, STRING, Array, Struct, field


class ListOffsetsRequestPartition(Struct):
    partition_index: int = field(INT32)
    current_leader_epoch: int = field(INT32, v="4+", default=-1)
    timestamp: int = field(INT64)
    max_num_offsets: int = field(INT32, v="0", default=1)


class ListOffsetsRequestTopic(Struct):
    name: str = field(STRING)
    partitions: list[ListOffsetsRequestPartition] = field(Array(ListOffsetsRequestPartition))


class ListOffsetsRequest(Struct):
    replica_id: int = field(INT32)
    isolation_level: int = field(INT8, v="2+")
    topics: list[ListOffsetsRequestTopic] = field(Array(ListOffsetsRequestTopic))
    # v10: how long to wait for offsets read from tiered storage (not used here).
    timeout_ms: int = field(INT32, v="10+", default=0)


class ListOffsetsResponsePartition(Struct):
    partition_index: int = field(INT32)
    error_code: int = field(INT16)
    old_style_offsets: list[int] = field(Array(INT64), v="0")
    timestamp: int = field(INT64, v="1+", default=-1)
    offset: int = field(INT64, v="1+", default=-1)
    leader_epoch: int = field(INT32, v="4+", default=-1)


class ListOffsetsResponseTopic(Struct):
    name: str = field(STRING)
    partitions: list[ListOffsetsResponsePartition] = field(Array(ListOffsetsResponsePartition))


class ListOffsetsResponse(Struct):
    throttle_time_ms: int = field(INT32, v="2+")
    topics: list[ListOffsetsResponseTopic] = field(Array(ListOffsetsResponseTopic))


SPEC = register(ApiSpec(2, "ListOffsets", ListOffsetsRequest, ListOffsetsResponse, 0, 11, 6))
