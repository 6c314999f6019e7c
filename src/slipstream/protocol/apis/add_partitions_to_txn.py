"""AddPartitionsToTxn (key 24), versions 0-5; flexible from v3.

v0-3 are the client's form: one transaction (transactional id, producer id and
epoch) and the partitions it is about to write. v4+ are the broker-side,
batched form (KIP-890): several transactions, each with ``verify_only`` to ask
whether the partitions are already part of the transaction without adding
them; v4 adds a top-level error code. v2 may answer PRODUCER_FENCED (older
versions get INVALID_PRODUCER_EPOCH instead); v5 may answer
TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Struct, field


class AddPartitionsToTxnTopic(Struct):
    name: str = field(STRING)
    partitions: list[int] = field(Array(INT32))


class AddPartitionsToTxnTransaction(Struct):
    transactional_id: str = field(STRING, v="4+")
    producer_id: int = field(INT64, v="4+")
    producer_epoch: int = field(INT16, v="4+")
    verify_only: bool = field(BOOL, v="4+", default=False)
    topics: list[AddPartitionsToTxnTopic] = field(Array(AddPartitionsToTxnTopic), v="4+")


class AddPartitionsToTxnRequest(Struct):
    transactions: list[AddPartitionsToTxnTransaction] = field(Array(AddPartitionsToTxnTransaction), v="4+")
    v3_and_below_transactional_id: str = field(STRING, v="0-3")
    v3_and_below_producer_id: int = field(INT64, v="0-3")
    v3_and_below_producer_epoch: int = field(INT16, v="0-3")
    v3_and_below_topics: list[AddPartitionsToTxnTopic] = field(Array(AddPartitionsToTxnTopic), v="0-3")


class AddPartitionsToTxnPartitionResult(Struct):
    partition_index: int = field(INT32)
    partition_error_code: int = field(INT16)


class AddPartitionsToTxnTopicResult(Struct):
    name: str = field(STRING)
    results_by_partition: list[AddPartitionsToTxnPartitionResult] = field(Array(AddPartitionsToTxnPartitionResult))


class AddPartitionsToTxnResult(Struct):
    transactional_id: str = field(STRING, v="4+")
    topic_results: list[AddPartitionsToTxnTopicResult] = field(Array(AddPartitionsToTxnTopicResult), v="4+")


class AddPartitionsToTxnResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16, v="4+")
    results_by_transaction: list[AddPartitionsToTxnResult] = field(Array(AddPartitionsToTxnResult), v="4+")
    results_by_topic_v3_and_below: list[AddPartitionsToTxnTopicResult] = field(
        Array(AddPartitionsToTxnTopicResult), v="0-3"
    )


SPEC = register(
    ApiSpec(24, "AddPartitionsToTxn", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5, 3)
)
