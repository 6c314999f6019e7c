"""ListTransactions (key 66), versions 0-1; flexible.

Every transactional id the coordinator knows, filtered by state names and
producer ids (empty filters match everything); v1 adds ``duration_filter``
(KIP-994): only transactions running longer than that many milliseconds.
State names the coordinator does not know come back in
``unknown_state_filters``.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, field


class ListTransactionsRequest(Struct):
    state_filters: list[str] = field(Array(STRING))
    producer_id_filters: list[int] = field(Array(INT64))
    duration_filter: int = field(INT64, v="1+", default=-1)


class ListTransactionsTransactionState(Struct):
    transactional_id: str = field(STRING)
    producer_id: int = field(INT64)
    transaction_state: str = field(STRING)


class ListTransactionsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)
    unknown_state_filters: list[str] = field(Array(STRING))
    transaction_states: list[ListTransactionsTransactionState] = field(Array(ListTransactionsTransactionState))


SPEC = register(ApiSpec(66, "ListTransactions", ListTransactionsRequest, ListTransactionsResponse, 0, 1, 0))
