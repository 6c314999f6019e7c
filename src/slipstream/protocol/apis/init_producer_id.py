"""InitProducerId (key 22), versions 0-6; flexible from v2.

Hands out a producer id and epoch for idempotent (transactional_id null) or
transactional production; librdkafka and the Java client call it before
producing because idempotence is on by default. v1 throttles after
answering; v2 is the first flexible version; v3 adds producer_id /
producer_epoch so a producer can bump its epoch after INVALID_PRODUCER_EPOCH
(KIP-360; -1/-1 for a fresh id); v4 may answer PRODUCER_FENCED; v5 may
answer TRANSACTION_ABORTABLE (KIP-890); v6 (KIP-939) lets a client ask for two-phase
commit (enable2_pc, keep_prepared_txn) and answers the ongoing transaction's producer
id and epoch (-1/-1 when none is kept). Note that Kafka's default for the
nullable transactional_id is "" rather than null: an idempotent producer
must set it to None explicitly.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, INT64, STRING, Struct, field


class InitProducerIdRequest(Struct):
    transactional_id: str | None = field(STRING, nullable="0+")
    transaction_timeout_ms: int = field(INT32)
    producer_id: int = field(INT64, v="3+", default=-1)
    producer_epoch: int = field(INT16, v="3+", default=-1)
    enable2_pc: bool = field(BOOL, v="6+", default=False)  # Kafka: Enable2Pc
    keep_prepared_txn: bool = field(BOOL, v="6+", default=False)


class InitProducerIdResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)
    producer_id: int = field(INT64, default=-1)
    producer_epoch: int = field(INT16)
    ongoing_txn_producer_id: int = field(INT64, v="6+", default=-1)
    ongoing_txn_producer_epoch: int = field(INT16, v="6+", default=-1)


SPEC = register(
    ApiSpec(22, "InitProducerId", InitProducerIdRequest, InitProducerIdResponse, 0, 6, 2)
)
