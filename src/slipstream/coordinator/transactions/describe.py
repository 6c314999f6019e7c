"""DescribeTransactions and ListTransactions: read-only views of the transactions."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ...protocol.apis.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeTransactionsTopicData,
    DescribeTransactionsTransactionState,
)
from ...protocol.apis.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
    ListTransactionsTransactionState,
)
from ...protocol.errors import ErrorCode
from .metadata import TransactionMetadata
from .state import TxnState


def describe_transactions(
    transactions: Mapping[str, TransactionMetadata],
    req: DescribeTransactionsRequest,
    *,
    unavailable: Callable[[str], int],
) -> DescribeTransactionsResponse:
    """``unavailable(tid)``: COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR for an id
    this coordinator cannot describe now, else 0."""
    out = DescribeTransactionsResponse()
    for tid in req.transactional_ids:
        state = DescribeTransactionsTransactionState(transactional_id=tid)
        txn = transactions.get(tid)
        if code := unavailable(tid):
            state.error_code = code
        elif not tid:
            state.error_code = ErrorCode.INVALID_REQUEST
        elif txn is None or txn.state is TxnState.DEAD:
            state.error_code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        else:
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(index)
            state.transaction_state = txn.state.display_name
            state.transaction_timeout_ms = txn.timeout_ms
            state.transaction_start_time_ms = txn.start_ms
            state.producer_id = txn.producer_id
            state.producer_epoch = txn.producer_epoch
            state.topics = [DescribeTransactionsTopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
        out.transaction_states.append(state)
    return out


def list_transactions(
    transactions: Mapping[str, TransactionMetadata],
    req: ListTransactionsRequest,
    version: int,
    now_ms: int,
    *,
    loading: bool,
) -> ListTransactionsResponse:
    if loading:
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    out = ListTransactionsResponse()
    states: set[TxnState] = set()
    for name in req.state_filters:
        state = TxnState.from_name(name)
        if state is None:
            out.unknown_state_filters.append(name)
        else:
            states.add(state)
    producer_ids = set(req.producer_id_filters)
    min_duration = req.duration_filter if version >= 1 else -1
    for tid, txn in sorted(transactions.items()):
        if txn.state is TxnState.DEAD:
            continue
        if req.state_filters and txn.state not in states:
            continue
        if producer_ids and txn.producer_id not in producer_ids:
            continue
        # Kafka's test, kept as is: an id without a transaction (start -1) always passes.
        if min_duration >= 0 and now_ms - txn.start_ms <= min_duration:
            continue
        out.transaction_states.append(
            ListTransactionsTransactionState(
                transactional_id=tid, producer_id=txn.producer_id, transaction_state=txn.state.display_name
            )
        )
    return out
