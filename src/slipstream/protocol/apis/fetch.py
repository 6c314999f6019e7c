"""Fetch (key 1), versions 0-18; flexible from v12.

v0-3 read message format v0/v1 (v1 adds throttle_time_ms, v3 the request-wide
max_bytes and makes partition order significant); v4 adds isolation_level
and, in the response, last_stable_offset and aborted_transactions (magic 2;
Kafka 4 removed v0-3: KIP-896); v5 adds log_start_offset both ways; v7 adds
fetch sessions (KIP-227: session_id/session_epoch, forgotten_topics_data, a
top-level error_code) -- session_id 0 in a response means "no session"; v9
adds current_leader_epoch (KIP-320); v10 allows zstd; v11 adds rack_id and
preferred_read_replica (KIP-392); v12 is the first flexible version, adds
last_fetched_epoch and the tagged cluster_id, diverging_epoch, current_leader
and snapshot_id; v13 names topics by topic_id instead of name (KIP-516:
UNKNOWN_TOPIC_ID); v14 may answer OFFSET_MOVED_TO_TIERED_STORAGE; v15
replaces replica_id with the tagged replica_state (KIP-903); v16 adds the
tagged node_endpoints (KIP-951). Kafka 3.9 also defines v17 (tagged
replica_directory_id, KIP-853), which only replicas send; it is not declared.
Response records are written as given: bytes, a memoryview, or a list of
buffers (log chunks, which may be file regions the connection sends in the kernel),
never re-encoded.
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..file_region import FileRegion
from ..schema import INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Struct, field


class FetchRequestReplicaState(Struct):
    replica_id: int = field(INT32, v="15+", default=-1)
    replica_epoch: int = field(INT64, v="15+", default=-1)


class FetchRequestPartition(Struct):
    partition: int = field(INT32)
    current_leader_epoch: int = field(INT32, v="9+", default=-1)
    fetch_offset: int = field(INT64)
    last_fetched_epoch: int = field(INT32, v="12+", default=-1)
    log_start_offset: int = field(INT64, v="5+", default=-1)
    partition_max_bytes: int = field(INT32)
    # Followers' fields (v17 KIP-853 directory id, v18 known high watermark): consumers
    # leave them at their defaults.
    replica_directory_id: uuid.UUID = field(UUID, v="17+", tag=0, default=uuid.UUID(int=0))
    high_watermark: int = field(INT64, v="18+", tag=1, default=2**63 - 1)


class FetchRequestTopic(Struct):
    topic: str = field(STRING, v="0-12")
    topic_id: uuid.UUID = field(UUID, v="13+")
    partitions: list[FetchRequestPartition] = field(Array(FetchRequestPartition))


class FetchRequestForgottenTopic(Struct):
    topic: str = field(STRING, v="7-12")
    topic_id: uuid.UUID = field(UUID, v="13+")
    partitions: list[int] = field(Array(INT32), v="7+")


class FetchRequest(Struct):
    cluster_id: str | None = field(STRING, v="12+", nullable="12+", tag=0, default=None)
    replica_id: int = field(INT32, v="0-14", default=-1)
    replica_state: FetchRequestReplicaState = field(FetchRequestReplicaState, v="15+", tag=1)
    max_wait_ms: int = field(INT32)
    min_bytes: int = field(INT32)
    max_bytes: int = field(INT32, v="3+", default=0x7FFFFFFF)
    isolation_level: int = field(INT8, v="4+", default=0)
    session_id: int = field(INT32, v="7+", default=0)
    session_epoch: int = field(INT32, v="7+", default=-1)
    topics: list[FetchRequestTopic] = field(Array(FetchRequestTopic))
    forgotten_topics_data: list[FetchRequestForgottenTopic] = field(
        Array(FetchRequestForgottenTopic), v="7+"
    )
    rack_id: str = field(STRING, v="11+", default="")


class FetchResponseEpochEndOffset(Struct):
    epoch: int = field(INT32, v="12+", default=-1)
    end_offset: int = field(INT64, v="12+", default=-1)


class FetchResponseLeaderIdAndEpoch(Struct):
    leader_id: int = field(INT32, v="12+", default=-1)
    leader_epoch: int = field(INT32, v="12+", default=-1)


class FetchResponseSnapshotId(Struct):
    end_offset: int = field(INT64, default=-1)
    epoch: int = field(INT32, default=-1)


class FetchResponseAbortedTransaction(Struct):
    producer_id: int = field(INT64, v="4+")
    first_offset: int = field(INT64, v="4+")


class FetchResponsePartition(Struct):
    partition_index: int = field(INT32)
    error_code: int = field(INT16)
    high_watermark: int = field(INT64)
    last_stable_offset: int = field(INT64, v="4+", default=-1)
    log_start_offset: int = field(INT64, v="5+", default=-1)
    diverging_epoch: FetchResponseEpochEndOffset = field(
        FetchResponseEpochEndOffset, v="12+", tag=0
    )
    current_leader: FetchResponseLeaderIdAndEpoch = field(
        FetchResponseLeaderIdAndEpoch, v="12+", tag=1
    )
    snapshot_id: FetchResponseSnapshotId = field(FetchResponseSnapshotId, v="12+", tag=2)
    aborted_transactions: list[FetchResponseAbortedTransaction] | None = field(
        Array(FetchResponseAbortedTransaction), v="4+", nullable="4+"
    )
    preferred_read_replica: int = field(INT32, v="11+", default=-1)
    records: bytes | memoryview | list[bytes | memoryview | FileRegion] | None = field(RECORDS, nullable="0+")


class FetchResponseTopic(Struct):
    topic: str = field(STRING, v="0-12")
    topic_id: uuid.UUID = field(UUID, v="13+")
    partitions: list[FetchResponsePartition] = field(Array(FetchResponsePartition))


class FetchResponseNodeEndpoint(Struct):
    node_id: int = field(INT32, v="16+")
    host: str = field(STRING, v="16+")
    port: int = field(INT32, v="16+")
    rack: str | None = field(STRING, v="16+", nullable="16+", default=None)


class FetchResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    error_code: int = field(INT16, v="7+")
    session_id: int = field(INT32, v="7+", default=0)
    responses: list[FetchResponseTopic] = field(Array(FetchResponseTopic))
    node_endpoints: list[FetchResponseNodeEndpoint] = field(
        Array(FetchResponseNodeEndpoint), v="16+", tag=0
    )


SPEC = register(ApiSpec(1, "Fetch", FetchRequest, FetchResponse, 0, 18, 12))
