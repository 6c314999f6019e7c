"""AddOffsetsToTxn (key 25), versions 0-4; flexible from v3.

A transactional producer about to commit a consumer group's offsets inside its
transaction (``sendOffsetsToTransaction``): the coordinator adds the group's
``__consumer_offsets`` partition to the transaction, so the transaction's
marker reaches the group coordinator. v2 may answer PRODUCER_FENCED; v4 may
answer TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, INT64, STRING, Struct, field


class AddOffsetsToTxnRequest(Struct):
    transactional_id: str = field(STRING)
    producer_id: int = field(INT64)
    producer_epoch: int = field(INT16)
    group_id: str = field(STRING)


class AddOffsetsToTxnResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)


SPEC = register(ApiSpec(25, "AddOffsetsToTxn", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4, 3))
