"""EndTxn (key 26), versions 0-4 (Kafka 3.9); flexible from v3.

Commits (``committed`` true) or aborts the producer's ongoing transaction. The
coordinator answers once the PrepareCommit/PrepareAbort state is durable and
writes the markers afterwards. v2 may answer PRODUCER_FENCED; v4 may answer
TRANSACTION_ABORTABLE. (v5, Kafka 4.0's KIP-890 epoch bump per transaction,
is not served.)
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, INT64, STRING, Struct, field


class EndTxnRequest(Struct):
    transactional_id: str = field(STRING)
    producer_id: int = field(INT64)
    producer_epoch: int = field(INT16)
    committed: bool = field(BOOL)


class EndTxnResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)


SPEC = register(ApiSpec(26, "EndTxn", EndTxnRequest, EndTxnResponse, 0, 4, 3))
