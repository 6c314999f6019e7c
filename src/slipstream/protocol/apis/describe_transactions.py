"""DescribeTransactions (key 65), version 0; flexible.

The coordinator's view of each named transactional id (KIP-664,
kafka-transactions.sh describe): state, timeout, start time, producer id and
epoch, and the partitions of the ongoing transaction. Unknown ids answer
TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, field


class DescribeTransactionsRequest(Struct):
    transactional_ids: list[str] = field(Array(STRING))


class DescribeTransactionsTopicData(Struct):
    topic: str = field(STRING)
    partitions: list[int] = field(Array(INT32))


class DescribeTransactionsTransactionState(Struct):
    error_code: int = field(INT16)
    transactional_id: str = field(STRING)
    transaction_state: str = field(STRING)
    transaction_timeout_ms: int = field(INT32)
    transaction_start_time_ms: int = field(INT64)
    producer_id: int = field(INT64)
    producer_epoch: int = field(INT16)
    topics: list[DescribeTransactionsTopicData] = field(Array(DescribeTransactionsTopicData))


class DescribeTransactionsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    transaction_states: list[DescribeTransactionsTransactionState] = field(
        Array(DescribeTransactionsTransactionState)
    )


SPEC = register(
    ApiSpec(65, "DescribeTransactions", DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0, 0)
)
