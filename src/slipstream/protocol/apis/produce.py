"""Produce (key 0), versions 0-13; flexible from v9.

v0-2 carry message format v0/v1 message sets (v1 adds throttle_time_ms to the
response, v2 log_append_time_ms); v3 adds transactional_id and is the first
version whose records are magic-2 record batches (Kafka 4 removed v0-2:
KIP-896); v4 may answer KAFKA_STORAGE_ERROR; v5 adds log_start_offset to the
response; v6 and v7 (zstd) keep the layout; v8 adds per-batch record_errors
and error_message; v9 is the first flexible version; v10 adds the tagged
current_leader (per partition) and node_endpoints (KIP-951), sent only with
NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH; v11 allows
TRANSACTION_ABORTABLE; v12 has v11's layout (KIP-890: the broker verifies
transactions itself); v13 names topics by id instead of by name, both ways
(KIP-516). acks=0 requests get no response at all. Records stay
a memoryview into the request buffer.
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..primitives import ZERO_UUID
from ..schema import INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Struct, field


class ProduceRequestPartitionData(Struct):
    index: int = field(INT32)
    records: memoryview | None = field(RECORDS, nullable="0+")


class ProduceRequestTopicData(Struct):
    name: str = field(STRING, v="0-12", default="")
    topic_id: uuid.UUID = field(UUID, v="13+", default=ZERO_UUID)
    partition_data: list[ProduceRequestPartitionData] = field(Array(ProduceRequestPartitionData))


class ProduceRequest(Struct):
    transactional_id: str | None = field(STRING, v="3+", nullable="3+", default=None)
    acks: int = field(INT16)
    timeout_ms: int = field(INT32)
    topic_data: list[ProduceRequestTopicData] = field(Array(ProduceRequestTopicData))


class ProduceResponseBatchIndexAndErrorMessage(Struct):
    batch_index: int = field(INT32, v="8+")
    batch_index_error_message: str | None = field(STRING, v="8+", nullable="8+", default=None)


class ProduceResponseLeaderIdAndEpoch(Struct):
    leader_id: int = field(INT32, v="10+", default=-1)
    leader_epoch: int = field(INT32, v="10+", default=-1)


class ProduceResponsePartition(Struct):
    index: int = field(INT32)
    error_code: int = field(INT16)
    base_offset: int = field(INT64)
    log_append_time_ms: int = field(INT64, v="2+", default=-1)
    log_start_offset: int = field(INT64, v="5+", default=-1)
    record_errors: list[ProduceResponseBatchIndexAndErrorMessage] = field(
        Array(ProduceResponseBatchIndexAndErrorMessage), v="8+"
    )
    error_message: str | None = field(STRING, v="8+", nullable="8+", default=None)
    current_leader: ProduceResponseLeaderIdAndEpoch = field(
        ProduceResponseLeaderIdAndEpoch, v="10+", tag=0
    )


class ProduceResponseTopic(Struct):
    name: str = field(STRING, v="0-12", default="")
    topic_id: uuid.UUID = field(UUID, v="13+", default=ZERO_UUID)
    partition_responses: list[ProduceResponsePartition] = field(Array(ProduceResponsePartition))


class ProduceResponseNodeEndpoint(Struct):
    node_id: int = field(INT32, v="10+")
    host: str = field(STRING, v="10+")
    port: int = field(INT32, v="10+")
    rack: str | None = field(STRING, v="10+", nullable="10+", default=None)


class ProduceResponse(Struct):
    responses: list[ProduceResponseTopic] = field(Array(ProduceResponseTopic))
    throttle_time_ms: int = field(INT32, v="1+")
    node_endpoints: list[ProduceResponseNodeEndpoint] = field(
        Array(ProduceResponseNodeEndpoint), v="10+", tag=0
    )


SPEC = register(ApiSpec(0, "Produce", ProduceRequest, ProduceResponse, 0, 13, 9))
